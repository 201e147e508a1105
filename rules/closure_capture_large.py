"""RAY031 closure-capture-large: a remote function or actor class reads a large object from an enclosing scope,
so cloudpickle copies the object into the definition that Ray exports."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.analyses.captures import captured_by_remotes, captured_size, large_outside_reads, runs_as_main
from ray_lint.diagnostics import Severity
from ray_lint.libraries import TRAINER_CALL_TOKENS
from ray_lint.libraries.train import TrainFacts
from ray_lint.experiment import (
    OUT_OF_BAND_ARRAY,
    Experiment,
    Plan,
    Subject,
    Variant,
    script,
    timed,
)
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.ray_api import remote_kind
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid
from ray_lint.sizes import ALLOCATION_TOKENS, LARGE_OBJECT_OPTION, Size, size_of, threshold_bytes

# Ray's limits on a pickled remote function or actor class (`ray/_private/ray_constants.py`).
RAY_WARN_BYTES = 10**7
RAY_ERROR_BYTES = 10**8


# A buffer that pickles out of band, as a numpy array does: a task reads it from the object store without a copy.
class ClosureCaptureLargeExperiment(Experiment[None]):
    """A remote function that reads a 20 MB module-level array (cloudpickle copies it into the function
    Ray exports; an actor class is exported the same way) against the same function handed the array as
    a `ray.put` ref, each called 4 times; Ray's own "is very large" warning, when A prints it, is quoted.
    It needs nothing of the finding."""

    facts_type = type(None)
    shares_driver = True
    # By wall time alone: both variants run the same tasks, so Ray's timeline shows no more running at once in
    # B; what B saves is pickling the object into the function, exporting it through the GCS and importing it
    # in each worker.
    more_parallelism = False
    MB = 20
    CALLS = 4

    def plan(self, subject: Subject) -> Plan:
        data = OUT_OF_BAND_ARRAY + f"DATA = Array(bytearray({self.MB} * 10**6))\n\n"
        captured = "@ray.remote\ndef lookup(i):\n    return memoryview(DATA.buffer)[i]\n\n"
        passed = "@ray.remote\ndef lookup(data, i):\n    return memoryview(data.buffer)[i]\n\n"
        calls = f"range({self.CALLS})"
        return Plan(
            Variant("captured", script(data + captured + timed(f"return ray.get([lookup.remote(i) for i in {calls}])"))),
            Variant(
                "passed as a ref",
                script(data + passed + timed(f"data_ref = ray.put(DATA)\nreturn ray.get([lookup.remote(data_ref, i) for i in {calls}])")),
            ),
            "modelled",
            f"a remote function reading a {self.MB} MB global array, called {self.CALLS} times",
        )



class ClosureCaptureLarge(Rule):
    code = "RAY031"
    name = "closure-capture-large"
    message = "A remote function or actor class captures a large object, which Ray pickles into its definition"
    severity = Severity.WARNING
    category = "perf"
    tokens = (*REMOTE_MADE, *TRAINER_CALL_TOKENS)  # remote definitions, and Ray Train's loops
    also_tokens = ALLOCATION_TOKENS
    experiment = ClosureCaptureLargeExperiment()
    options = (LARGE_OBJECT_OPTION,)
    docs = """
## What it does
Finds a remote function or actor class whose body reads a name from the module or from an
enclosing function (a *free variable*) that is bound to an object that is certainly large: an
allocation with a literal shape (`np.zeros((5000, 5000))`, `torch.randn(4096, 4096)`,
`bytes(200 * 10**6)`, `[0.0] * 10**7`, ...) of at least `large-object-mb` megabytes (10 by
default), or a value whose line says `# ray-lint: large`. Reads in nested functions, lambdas and
comprehensions of the body count, and so do every method of an actor class. It also reports a
large default value of a remote function's (or an actor method's) parameter, and a large class
attribute of an actor class: both are pickled with the definition in the same way.

## Why is this bad?
Ray pickles a remote function or actor class with cloudpickle when it is first used and exports
it through the GCS to every worker that runs it. cloudpickle stores the *values* of the globals
and closure variables the code reads, so a captured 200 MB array travels inside the definition,
outside the object store, once per job and worker, and the export itself is slow. Ray checks the
pickled size (`check_oversized_function` in `ray/_private/utils.py`): above 10**7 bytes it pushes
the warning "The remote function f is very large (N MiB). Check that its definition is not
implicitly capturing a large array or other object in scope", and from 10**8 bytes
(`FUNCTION_SIZE_ERROR_THRESHOLD`) it raises `ValueError: ... is too large`, so the first `.remote()`
call fails. The default threshold of 10 MB is Ray's warning threshold; the message of a capture of
100 MB or more says that Ray will refuse it. Measured on a 2-core machine with Ray 2.60: a task
capturing a 20 MB array took 0.398 s (with Ray's "very large (19 MiB)" warning), against 0.022 s
with `ray.put` once and the ref passed as an argument (18×).

It also reports a Ray Train loop (`train_loop_per_worker`, or the function Ray 1.x's
`Trainer(...).run(train_func)` takes) of a script or notebook that reads such an object from the
module, once, at the loop's name: the trainer pickles the loop by value, with the object, for every
worker. Besides allocations, the torchvision datasets that load a whole split into memory have a
known size: `MNIST`, `FashionMNIST` and `KMNIST` (about 48 MB for the training split, 8 MB for the
test split), `CIFAR10` and `CIFAR100` (about 154 MB and 31 MB).

ray-lint is silent for:
- objects whose size is not in the code (a file or model load, a function's result, a parameter
  of the enclosing function, a factory such as `make_table = lambda: np.zeros(...)`, which is
  what Ray's docs recommend), or below the threshold: a linter that guesses sizes cries wolf;
- imported names and modules (`np`, `config.TABLE`: a module is pickled by reference and the
  worker imports it), functions and classes;
- names the body binds itself (parameters, locals), and names it declares `global` (a cache
  filled lazily in the worker);
- a name bound more than once in its scope unless every binding is large (the value at export
  time is not certain);
- `g = ray.remote(f)` of a module-level `f` kept under its own name: cloudpickle pickles `f` by
  reference when its module is importable, so nothing is captured (in a script run as `__main__`
  it would be, which the file does not tell).

## Example
```python
weights = np.zeros((5000, 5000))  # 200 MB


@ray.remote
def score(batch):
    return batch @ weights
```

## Use instead
Put the object in the object store once and pass the ref; Ray resolves it to the value (a
zero-copy read for numpy arrays):
```python
weights_ref = ray.put(np.zeros((5000, 5000)))


@ray.remote
def score(batch, weights):
    return batch @ weights


refs = [score.remote(batch, weights_ref) for batch in batches]
```
or create the object in the worker, from a factory the task calls:
```python
make_weights = lambda: np.zeros((5000, 5000))


@ray.remote
def score(batch):
    return batch @ make_weights()
```

## Fix safety
There is no automatic fix: passing the object as an argument changes the function's signature
and every call site, possibly in other files.

## Options
- `large-object-mb`: the size, in megabytes, from which an object counts as large.

## References
- [Anti-pattern: Closure capturing large objects harms performance](https://docs.ray.io/en/latest/ray-core/patterns/closure-capture-large-objects.html)
- [Objects: closure capture of objects](https://docs.ray.io/en/latest/ray-core/objects.html#closure-capture-of-objects)
- [Tips for first-time users](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
"""

    VALID = [
        Valid(
            "import numpy as np\nimport ray\n\nlarge_object_ref = ray.put(np.zeros(10 * 1024 * 1024))\n\n@ray.remote\n"
            "def f(large_object):\n    return len(large_object)\n\nray.get(f.remote(large_object_ref))\n",
            "Ray's good pattern 1: ray.put and an argument",
        ),
        Valid(
            "import numpy as np\nimport ray\n\nlarge_object_creator = lambda: np.zeros(10 * 1024 * 1024)\n\n@ray.remote\n"
            "def f():\n    large_object = large_object_creator()\n    return len(large_object)\n",
            "Ray's good pattern 2: a factory is captured, the array is made in the worker",
        ),
        Valid(
            "import numpy as np\nimport ray\n\nOFFSETS = np.zeros(1000)\n\n@ray.remote\ndef shift(x):\n    return x + OFFSETS\n",
            "8 KB: a small constant",
        ),
        Valid(
            "import numpy as np\nimport ray\n\ntable = np.load('table.npy')\n\n@ray.remote\ndef lookup(i):\n    return table[i]\n",
            "size not in the code",
        ),
        Valid(
            "import numpy as np\nimport ray\n\ndata = np.zeros((5000, 5000))\n\n@ray.remote\ndef total(data):\n    return data.sum()\n\n"
            "ray.get(total.remote(ray.put(data)))\n",
            "the parameter shadows the global",
        ),
        Valid(
            "import numpy as np\nimport ray\n\n_cache = None\n\n@ray.remote\ndef lookup(i):\n    global _cache\n"
            "    if _cache is None:\n        _cache = np.zeros((5000, 5000))\n    return _cache[i]\n",
            "a cache the worker fills itself",
        ),
        Valid(
            "import numpy as np\nimport ray\n\ndata = np.zeros((5000, 5000))\ndata = summarize(data)\n\n@ray.remote\n"
            "def total():\n    return data.sum()\n",
            "rebound to a value of unknown size",
        ),
        Valid(
            "import numpy as np\nimport ray\nimport tables\n\n@ray.remote\ndef lookup(i):\n    return tables.EMBEDDINGS[i] + np.ones(3)\n",
            "a module attribute and a module: pickled by reference",
        ),
        Valid(
            "import numpy as np\nimport ray\n\nweights = np.zeros((5000, 5000))\n\ndef score(batch):\n    return batch @ weights\n\n"
            "remote_score = ray.remote(score)\n",
            "a module-level function kept under its own name is pickled by reference",
        ),
        Valid(
            "import numpy as np\nimport ray\n\nweights = np.zeros((5000, 5000))\n\ndef report():\n    return weights.mean()\n\n"
            "@ray.remote\ndef work(x):\n    return x\n",
            "read by a plain function, not by the remote one",
        ),
        Valid(
            "import numpy as np\n\nweights = np.zeros((5000, 5000))\n\n@ray.remote\ndef score(batch):\n    return batch @ weights\n",
            "no `import ray`: not Ray's remote",
        ),
        Valid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef make(n):\n    buffer = np.zeros((5000, 5000))\n"
            "    return [buffer[i].sum() for i in range(n)]\n",
            "allocated in the worker",
        ),
        Valid(
            "from ray import train\nfrom ray.train.torch import TorchTrainer\nfrom torchvision import datasets\n\n"
            "test_data = datasets.FashionMNIST('data', train=False, download=True)\n\ndef train_func(config):\n"
            "    for image, label in test_data:\n        pass\n\nTorchTrainer(train_func).fit()\n",
            "the FashionMNIST test split: 10,000 images, about 8 MB",
        ),
        Valid(
            "from ray import train\nfrom ray.train.torch import TorchTrainer\nfrom torchvision import datasets\n\n"
            "def train_func(config):\n    data = datasets.FashionMNIST('data', train=True, download=True)\n"
            "    for image, label in data:\n        pass\n\nTorchTrainer(train_func).fit()\n",
            "the dataset is loaded by each worker, inside the loop",
        ),
        Valid(
            "import numpy as np\nfrom ray.train.torch import TorchTrainer\n\nWEIGHTS = np.zeros((5000, 5000))\n\n"
            "def train_func(config):\n    return WEIGHTS.sum()\n\ndef launch():\n    return TorchTrainer(train_func).fit()\n",
            "a module others import (its top-level code starts no trainer): the loop is pickled by reference",
        ),
    ]
    INVALID = [
        Invalid(
            "import numpy as np\nimport ray\n\nlarge_object = np.zeros(10 * 1024 * 1024)\n\n@ray.remote\ndef f():\n"
            "    return len(large_object)\n\nray.get(f.remote())\n",
            8,
            note="Ray's docs example: 80 MB",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\ndef main():\n    weights = np.random.rand(4000, 4000)\n\n    @ray.remote(num_cpus=1)\n"
            "    def score(batch):\n        return batch @ weights\n\n    return ray.get([score.remote(b) for b in range(8)])\n",
            9,
            note="a local of the enclosing function",
        ),
        Invalid(
            "import torch\nimport ray\n\nEMBEDDINGS = torch.zeros(50_000, 512)\n\n@ray.remote\nclass Encoder:\n"
            "    def __init__(self):\n        self.scale = 2\n\n    def encode(self, ids):\n        return EMBEDDINGS[ids] * self.scale\n",
            12,
            note="an actor method",
        ),
        Invalid(
            "import ray\n\nPAYLOAD = bytes(200 * 10**6)\n\n@ray.remote\ndef send(i):\n    return PAYLOAD[i]\n",
            7,
            note="200 MB: Ray raises ValueError",
        ),
        Invalid(
            "import ray\n\nvocab = load_vocabulary()  # ray-lint: large\n\n@ray.remote\ndef tokenize(text):\n"
            "    return [vocab[w] for w in text.split()]\n",
            7,
            note="marked large; read in a comprehension",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\ngrid = np.ones((4096, 4096), dtype=np.float32)\n\ndef step(i):\n"
            "    return grid[i].sum()\n\nstep = ray.remote(step)\n",
            7,
            note="`f = ray.remote(f)` leaves no plain function to pickle by reference",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\ndef run(n):\n    table = np.zeros((2000, 2000))\n\n    def lookup(i):\n"
            "        return table[i]\n\n    remote_lookup = ray.remote(lookup)\n    return [remote_lookup.remote(i) for i in range(n)]\n",
            8,
            note="applied to a nested function",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\nclass Cache:\n    table = np.zeros((5000, 5000))\n\n"
            "    def get(self, i):\n        return self.table[i]\n",
            6,
            note="a large class attribute of an actor class",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\nBIAS = np.zeros((3000, 3000))\n\n@ray.remote\ndef add(x, bias=BIAS):\n    return x + bias\n",
            7,
            note="a large default value",
        ),
        Invalid(
            "from ray import train\nfrom ray.train.torch import TorchTrainer\nfrom torchvision import datasets\n\n"
            "training_data = datasets.FashionMNIST('data', train=True, download=True)\n\ndef train_func(config):\n"
            "    for image, label in training_data:\n        pass\n\nTorchTrainer(train_func).fit()\n",
            7,
            note="a Train loop of a script reads the FashionMNIST training set (about 48 MB): reported at the loop",
        ),
        Invalid(
            "import ray.train as train\nfrom ray.train.trainer import Trainer\nfrom torchvision import datasets\n\n"
            "data = datasets.CIFAR10(root='data', download=True)\n\ndef train_func(config):\n    return len(data)\n\n"
            "trainer = Trainer(backend='torch', num_workers=4)\ntrainer.start()\ntrainer.run(train_func, config={})\n",
            7,
            note="Ray 1.x's Trainer(...).run(train_func); CIFAR-10's training split, about 154 MB",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        threshold = threshold_bytes(self.settings)
        for remote, captured in captured_by_remotes(model):
            for capture in captured:
                size = captured_size(model, capture, threshold)
                if size is not None:
                    ctx.report(
                        capture.use,
                        f"The {remote_kind(remote)} `{remote.name}` captures `{capture.name}`, {size.describe()}"
                        f"{_consequence(size, remote)}",
                    )
            for node, what, size in self._pickled_values(model, remote, threshold):
                ctx.report(
                    node,
                    f"{what}`{remote.name}` is {size.describe()}{_consequence(size, remote)}",
                )
        for loop in model.analysis(TrainFacts).loops:
            function = loop.function
            if function.parent_scope.function is None and not runs_as_main(model, loop.trainer.scope):
                continue  # a module-level loop of a module others import: pickled by reference, nothing captured
            captured = list(large_outside_reads(model, function.node.body, function.scope, threshold, frozenset()))
            if captured:
                (first, size), more = captured[0], f" and {len(captured) - 1} more" if len(captured) > 1 else ""
                ctx.report(
                    function.node.name,
                    f"The Train loop `{function.node.name.value}` captures `{first.value}`{more}, {size.describe()}",
                )

    def _pickled_values(
        self, model: SemanticModel, remote: RemoteDef, threshold: int
    ) -> Iterator[tuple[cst.CSTNode, str, Size]]:
        """Large parameter defaults of the remote's functions, and large class attributes of an actor class:
        values stored in the definition itself."""
        for function, param, default, at in model.parameter_defaults(remote):
            size = size_of(model, default, function.parent_scope, at)
            if size is not None and size.at_least(threshold):
                method = f"method `{function.node.name.value}` of " if remote.cls is not None else ""
                yield default, f"The default of parameter `{param.name.value}` of {method}", size
        if remote.cls is None:
            return
        for name, bindings in remote.cls.scope.bindings.items():
            values = [b for b in bindings if b.kind == "assign"]
            if not values or len(values) != len(bindings):
                continue
            sizes = [size_of(model, b.node, b.scope, b.index + 1) for b in values if isinstance(b.node, cst.Name)]
            large = [size for size in sizes if size is not None and size.at_least(threshold)]
            if len(large) == len(values):
                yield values[0].node, f"The class attribute `{name}` of ", large[0]


def _consequence(size: Size, remote: RemoteDef) -> str:
    """What Ray does with a definition of this size (the size of the capture is a lower bound of it)."""
    if size.bytes is not None and size.bytes >= RAY_ERROR_BYTES:
        return ", too large for Ray to export"
    if size.bytes is not None and size.bytes >= RAY_WARN_BYTES:
        return ", past Ray's size warning"
    return ""
