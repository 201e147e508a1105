"""RAY030 large-arg-by-value-repeated: one large object passed by value to `.remote()` on every loop iteration."""

from __future__ import annotations

import re

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity, line_offsets
from ray_lint.experiment import OUT_OF_BAND_ARRAY, Experiment, Plan, Subject, Variant, script, timed
from ray_lint.model import SemanticModel
from ray_lint.python_model import Binding, CallSite, Loop, Scope, block_statements, root_name
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid
from ray_lint.sizes import ALLOCATION_TOKENS, LARGE_OBJECT_OPTION, LOADER_TOKENS, LOADERS_OPTION, Size, size_of, threshold_bytes

# Methods that only read the object they are called on: calling one in the loop leaves it unchanged.
READING_METHODS = frozenset(
    {
        "copy", "clone", "sum", "mean", "std", "var", "min", "max", "argmin", "argmax", "astype", "tolist",
        "tobytes", "item", "any", "all", "reshape", "view", "flatten", "ravel", "numpy", "cpu", "detach",
        "to", "size", "dim", "numel", "element_size", "transpose", "count", "index", "hex", "decode",
    }
)
# Builtins that only read their argument.
READING_FUNCTIONS = frozenset({"len", "print", "str", "repr", "id", "type", "isinstance", "hash", "format", "bool"})


class LargeArgByValueRepeatedExperiment(Experiment[None]):
    """One 16 MiB array passed by value to 10 tasks against `ray.put` once and its ref passed to the
    same 10 tasks (the fix). It needs nothing of the finding: the model's size stays modest whatever
    the code's is."""

    facts_type = type(None)
    shares_driver = True
    # By wall time alone: both variants run the same tasks, so Ray's timeline shows no more running at once in
    # B; what B saves is serializing and storing the object once per call.
    more_parallelism = False
    MIB = 16
    CALLS = 10

    def plan(self, subject: Subject) -> Plan:
        setup = (
            OUT_OF_BAND_ARRAY + "@ray.remote\ndef use(payload, i):\n    return len(payload.buffer) + i\n\n"
            f"payload = Array(bytearray({self.MIB} * 2**20))\n"
        )
        by_value = f"return ray.get([use.remote(payload, i) for i in range({self.CALLS})])"
        by_ref = f"payload_ref = ray.put(payload)\nreturn ray.get([use.remote(payload_ref, i) for i in range({self.CALLS})])"
        return Plan(
            Variant("by value", script(setup + timed(by_value))),
            Variant("ray.put once", script(setup + timed(by_ref))),
            "modelled",
            f"a {self.MIB} MiB array passed to {self.CALLS} tasks: {self.CALLS} copies in the object store, or one",
        )



class LargeArgByValueRepeated(Rule):
    code = "RAY030"
    name = "large-arg-by-value-repeated"
    message = "A large object is passed by value to `.remote()` on every loop iteration"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = (".remote(",)
    also_tokens = ALLOCATION_TOKENS + LOADER_TOKENS
    experiment = LargeArgByValueRepeatedExperiment()
    options = (LARGE_OBJECT_OPTION, LOADERS_OPTION)
    docs = """
## What it does
Finds a `for` or `while` loop, comprehension or generator expression that calls
`f.remote(..., X, ...)` (a task, an actor method, or an actor's creation, also through
`.options(...)`) where `X` is a name bound outside the loop to an object that is certainly large:
an allocation with a literal shape (`np.zeros((5000, 5000))`, `torch.randn(4096, 4096)`,
`np.arange(10**7)`, `bytes(50 * 2**20)`, `[0.0] * 10**7`, a comprehension of such allocations
over `range(50)`, ...) of at least `large-object-mb` megabytes (10 by
default, the size from which Ray warns about a large remote function), or a value whose line
says `# ray-lint: large`. The result of a data loader (`np.load`, `pd.read_csv`,
`pd.read_parquet`, `torch.load`, `joblib.load`, ...: the `large-loaders` option) counts as large
too, though its size is unknown, and the message says so; set `large-loaders = []` to count only
sizes the code shows. `pickle.load` is not among them by default: a pickle holds a config or a
tuning result as often as data.

## Why is this bad?
Ray does not deduplicate arguments: every `.remote()` call serializes `X` again and, above
100 KB, puts a new copy into the object store. Ten calls with one 40 MB array write 400 MB,
and the tasks wait for those copies. Calling `ray.put(X)` once and passing the ref stores one
copy that every task reads (zero-copy for numpy arrays). Ray's "Anti-pattern: Passing the same
large argument by value repeatedly harms performance" page shows this; its tips page has 10
tasks on a 5000×5000 array take 1.08 s by value and 0.13 s after `ray.put`. Measured on a
2-core machine with Ray 2.60: 40 MB passed to 10 tasks takes 0.417 s by value and 0.028 s with
`ray.put` once (15×).

ray-lint is silent when:
- the call is made once (no loop around it), or the loop runs at most once (`range(1)`, a
  `break`, `return` or `raise` at the top of its body, a retry loop whose `try` returns);
- `X` is already a ref (`ray.put(...)`, a `.remote()` result);
- `X` is rebound in the loop, or may change in it (an item or attribute assignment, an
  in-place method such as `X.fill(0)`, or `X` handed to another function): each call then
  sends a different value, which one `ray.put` would not;
- the size of `X` is not in the code, or is below the threshold: small arguments are inlined in
  the task spec and cheap. A parameter (a batch or dataset a caller in another module hands in),
  an attribute, a raw file read (`open(path).read()`, `json.load`: configs and prompt templates
  are read so too) and the result of a function that is not a data loader are of unknown size;
  mark one `# ray-lint: large` when it is large;
- `X` is a Hugging Face dataset (`datasets.load_dataset`, `load_from_disk`): its Arrow table is
  memory-mapped and pickles as its file's path, not its rows;
- `.remote` is not Ray's (the file does not import `ray` and defines no remote function).

## Example
```python
weights = np.zeros((5000, 5000))  # 200 MB

refs = [score.remote(weights, batch) for batch in batches]
```

## Use instead
```python
weights = np.zeros((5000, 5000))

weights_ref = ray.put(weights)
refs = [score.remote(weights_ref, batch) for batch in batches]
```
Ray resolves a ref passed as a top-level argument to its value, so `score` still receives the
array.

## Fix safety
The fix puts the object once before the outermost loop in which it does not change
(`X_ref = ray.put(X)`) and passes `X_ref` to every `.remote()` call in that loop. It is unsafe:
the object stays pinned in the object store for as long as `X_ref` lives (by value, each copy
is freed when its task is done); it is stored even when the loop runs zero times; and a change
to `X` made in the loop through another name, or by code this file does not show, would no
longer reach the tasks, which all see the value of `X` before the loop. It is not offered when
`X_ref` is already a name in the function (or at module level), when `ray.put` has no name in
the file, inside a lambda or a class body, or when the loop does not start its own line.

## Options
- `large-object-mb`: the size, in megabytes, from which an object counts as large.
- `large-loaders`: the data loaders whose result counts as large of unknown size (`[]`: none).

## References
- [Anti-pattern: Passing the same large argument by value repeatedly harms performance](https://docs.ray.io/en/latest/ray-core/patterns/pass-large-arg-by-value.html)
- [Tips for first-time users: Tip 3, avoid passing the same object repeatedly to remote tasks](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
- [Objects: passing object arguments](https://docs.ray.io/en/latest/ray-core/objects.html)
"""

    VALID = [
        Valid(
            "import ray\nimport pandas as pd\n\nfor path in paths:\n    frame = pd.read_csv(path)\n    refs.append(clean.remote(frame))\n",
            "a different file loaded in each iteration: each object is passed once",
        ),
        Valid(
            "import io\nimport ray\nimport pandas as pd\n\ndef score(csv_text, models):\n"
            "    frame = pd.read_csv(io.StringIO(csv_text))\n    return [m.predict.remote(frame) for m in models]\n",
            "a frame parsed from a request's text in memory, not loaded from a file",
        ),
        Valid(
            "import pickle\nimport ray\n\nwith open(tune_path, 'rb') as handle:\n    best_config = pickle.load(handle)\n\n"
            "actors = [Predictor.remote(data_ref, params=best_config) for _ in range(400)]\n",
            "a pickle of tuning results: a pickle holds configs as often as data",
        ),
        Valid(
            "import ray\n\ndef forward(workers, batch):\n    return ray.get([w.forward.remote(batch) for w in workers])\n",
            "a parameter handed to every worker: how big it is, only the callers in other modules show",
        ),
        Valid(
            "import ray\nfrom datasets import load_dataset\n\nprompts = load_dataset('imdb', split='train')\n"
            "refs = [generate.remote(prompts, seed) for seed in range(8)]\n",
            "a Hugging Face dataset is memory-mapped: it pickles as its file's path",
        ),
        Valid(
            "import ray\n\nwith open('prompt.txt') as f:\n    template = f.read()\n"
            "refs = [generate.remote(template, q) for q in questions]\n",
            "a file read whole is of unknown size: a prompt template is read so too",
        ),
        Valid(
            "import ray\nimport numpy as np\n\nfeatures = np.load('features.npy')\nref = train.remote(features, 0)\n",
            "loaded data passed once, outside any loop",
        ),
        Valid(
            "import ray\nimport numpy as np\n\nfeatures = ray.put(np.load('features.npy'))\n"
            "refs = [train.remote(features, seed) for seed in range(8)]\n",
            "the loaded data is put in the object store once: the loop passes the ref",
        ),
        Valid(
            "import ray\nimport numpy as np\ndata = np.zeros((5000, 5000))\nref = process.remote(data)\n",
            "a single call",
        ),
        Valid(
            "import ray\nimport numpy as np\ndata_ref = ray.put(np.zeros((5000, 5000)))\n"
            "refs = [process.remote(data_ref, i) for i in range(10)]\n",
            "already a ref",
        ),
        Valid(
            "import ray\nimport numpy as np\nconfig = np.zeros(100)\nrefs = [process.remote(config, i) for i in range(10)]\n",
            "800 bytes: small arguments are inlined",
        ),
        Valid(
            "import ray\nimport numpy as np\ndata = np.frombuffer(payload)\nrefs = [process.remote(data, i) for i in range(10)]\n",
            "size not in the code, and not a data loader",
        ),
        Valid(
            "import ray\nimport numpy as np\nfor i in range(10):\n    chunk = np.zeros((2000, 2000))\n"
            "    refs.append(process.remote(chunk))\n",
            "a new object every iteration",
        ),
        Valid(
            "import ray\nimport numpy as np\nbuffer = np.zeros((2000, 2000))\nfor i in range(10):\n"
            "    buffer[:] = i\n    refs.append(process.remote(buffer))\n",
            "changed in place before each call: every task needs its own snapshot",
        ),
        Valid(
            "import ray\nimport numpy as np\nstate = np.zeros((2000, 2000))\nfor step in range(10):\n"
            "    simulate_inplace(state)\n    refs.append(snapshot.remote(state))\n",
            "handed to a function that may change it",
        ),
        Valid(
            "import ray\nimport numpy as np\ndata = np.zeros((5000, 5000))\n\ndef run():\n    for attempt in range(3):\n"
            "        try:\n            return ray.get(process.remote(data))\n        except ray.exceptions.RayTaskError:\n"
            "            continue\n",
            "a retry loop: one call when it succeeds",
        ),
        Valid(
            "import ray\nimport numpy as np\ndata = np.zeros((5000, 5000))\nfor worker in workers:\n"
            "    ref = worker.load.remote(data)\n    break\n",
            "the loop always leaves after one call",
        ),
        Valid(
            "import numpy as np\ndata = np.zeros((5000, 5000))\nfor r in remotes:\n    r.remote(data)\n",
            "no `import ray`: `.remote` is not Ray's",
        ),
        Valid(
            "import ray\nimport numpy as np\nweights = load_weights()  # ray-lint: large\nweights_ref = ray.put(weights)\n"
            "refs = [infer.remote(weights_ref, b) for b in batches]\n",
            "a marked value already put once",
        ),
        Valid(
            "import ray\nimport numpy as np\nN = 10\nN = 100000\ndata = np.zeros((N, N))\n"
            "refs = [process.remote(data, i) for i in range(10)]\n",
            "a shape rebound: its value is not certain",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport numpy as np\n\nfeatures = np.load('features.npy')\n"
            "refs = [train.remote(features, seed) for seed in range(8)]\n",
            5,
            fixed="import ray\nimport numpy as np\n\nfeatures = np.load('features.npy')\nfeatures_ref = ray.put(features)\n"
            "refs = [train.remote(features_ref, seed) for seed in range(8)]\n",
            note="data loaded from a file: large, though its size is unknown (`large-loaders`)",
        ),
        Invalid(
            "import ray\nimport pandas as pd\n\ndef run(path, folds):\n    frame = pd.read_parquet(path)\n"
            "    return [evaluate.remote(frame, k) for k in folds]\n",
            6,
            fixed="import ray\nimport pandas as pd\n\ndef run(path, folds):\n    frame = pd.read_parquet(path)\n"
            "    frame_ref = ray.put(frame)\n    return [evaluate.remote(frame_ref, k) for k in folds]\n",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\nshards = {i: np.random.rand(2**18) for i in range(50)}\n"
            "refs = [score.remote(shards, k) for k in range(8)]\n",
            5,
            fixed="import ray\nimport numpy as np\n\nshards = {i: np.random.rand(2**18) for i in range(50)}\n"
            "shards_ref = ray.put(shards)\nrefs = [score.remote(shards_ref, k) for k in range(8)]\n",
            note="a dict comprehension of 50 arrays of 2 MB",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\nids = np.arange(10**7)\nfor day in days:\n    lookup.remote(ids, day)\n",
            6,
            fixed="import ray\nimport numpy as np\n\nids = np.arange(10**7)\nids_ref = ray.put(ids)\nfor day in days:\n"
            "    lookup.remote(ids_ref, day)\n",
            note="`np.arange` of a literal length: 80 MB",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\ndata = np.zeros((5000, 5000))\nrefs = [process.remote(data, i) for i in range(10)]\n",
            5,
            fixed="import ray\nimport numpy as np\n\ndata = np.zeros((5000, 5000))\ndata_ref = ray.put(data)\n"
            "refs = [process.remote(data_ref, i) for i in range(10)]\n",
            note="the tips page's example: 200 MB to 10 tasks",
        ),
        Invalid(
            "import ray\nimport torch\n\ndef sweep(configs):\n    weights = torch.randn(4096, 4096)\n    refs = []\n"
            "    for config in configs:\n        refs.append(train.remote(config, weights=weights))\n    return ray.get(refs)\n",
            8,
            fixed="import ray\nimport torch\n\ndef sweep(configs):\n    weights = torch.randn(4096, 4096)\n    refs = []\n"
            "    weights_ref = ray.put(weights)\n    for config in configs:\n        refs.append(train.remote(config, weights=weights_ref))\n"
            "    return ray.get(refs)\n",
            note="a keyword argument in a function's loop",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\nTABLE = np.ones((2000, 2000), dtype=np.float32)\n\n@ray.remote\nclass Worker:\n"
            "    def __init__(self, table):\n        self.table = table\n\nworkers = [Worker.remote(TABLE) for _ in range(8)]\n",
            11,
            fixed="import ray\nimport numpy as np\n\nTABLE = np.ones((2000, 2000), dtype=np.float32)\n\n@ray.remote\nclass Worker:\n"
            "    def __init__(self, table):\n        self.table = table\n\nTABLE_ref = ray.put(TABLE)\n"
            "workers = [Worker.remote(TABLE_ref) for _ in range(8)]\n",
            note="actor creation: 16 MB to each of 8 actors",
        ),
        Invalid(
            "import ray as r\n\npayload = bytes(64 * 1024 * 1024)\nfor epoch in range(3):\n    for shard in shards:\n"
            "        actor.ingest.remote(shard, payload)\n",
            6,
            fixed="import ray as r\n\npayload = bytes(64 * 1024 * 1024)\npayload_ref = r.put(payload)\nfor epoch in range(3):\n"
            "    for shard in shards:\n        actor.ingest.remote(shard, payload_ref)\n",
            note="nested loops: hoisted before the outermost; an aliased `ray`",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\nembeddings = load_embeddings()  # ray-lint: large\n"
            "i = 0\nwhile i < n:\n    refs.append(search.options(num_cpus=2).remote(embeddings, queries[i]))\n    i += 1\n",
            7,
            fixed="import ray\nimport numpy as np\n\nembeddings = load_embeddings()  # ray-lint: large\n"
            "i = 0\nembeddings_ref = ray.put(embeddings)\nwhile i < n:\n"
            "    refs.append(search.options(num_cpus=2).remote(embeddings_ref, queries[i]))\n    i += 1\n",
            note="a value marked large, a while loop, .options()",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\ndata = np.zeros((5000, 5000))\nprint(data.shape)\n"
            "refs = [process.remote(data, i) for i in range(len(data))]\ndata_ref = 1\n",
            6,
            note="`data_ref` is taken: no fix",
        ),
        Invalid(
            "from ray import get\nimport numpy as np\n\nmatrix = np.random.rand(3000, 3000)\n"
            "results = get([multiply.remote(matrix, v) for v in vectors])\n",
            5,
            note="`ray.put` has no name in this file: no fix",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        threshold = threshold_bytes(self.settings)
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        ray_imported = model.imports_module("ray")
        for site in model.calls_by_tail.get("remote", ()):
            if site.loop is None:
                continue
            submission = model.submission(site.node)
            if submission is None or (submission.remote is None and not ray_imported):
                continue
            for arg in site.node.args:
                if arg.star or not isinstance(arg.value, cst.Name):
                    continue
                found = _repeated_large_object(model, site, arg.value, threshold, loaders)
                if found is None:
                    continue
                binding, size, hoist_before = found
                name = arg.value.value
                described = "marked large" if size.bytes is None and size.loader is None else size.describe()
                message = f"`{name}` ({described}) is copied into each `{ctx.snippet(site.node.func, limit=24)}()`"
                ctx.report(arg.value, message, _hoist_fix(ctx, site, binding, hoist_before))


def _repeated_large_object(
    model: SemanticModel, site: CallSite, name: cst.Name, threshold: int, loaders: frozenset[str]
) -> tuple[Binding, Size, Loop] | None:
    """For a name passed to a `.remote()` call in a loop: its binding, its size and the outermost loop in which
    it does not change, when it is large, not a ref, and the call can run more than once with the same object."""
    binding = model.reaching_binding(name.value, site.scope, site.index)
    if binding is None or binding.kind != "assign":
        return None
    if model.ref_origin(name, site.scope, site.index) is not None:
        return None
    size = size_of(model, name, site.scope, site.index, loaders)
    if size is None or not size.at_least(threshold):
        return None
    if binding.scope is not _flow_scope(site.scope) and len(binding.scope.bindings[name.value]) != 1:
        return None  # bound more than once in an enclosing scope: which value the loop sees is not certain
    invariant: list[Loop] = []
    loop = site.loop
    while loop is not None and not _changes_in(model, loop, name.value):
        invariant.append(loop)
        loop = loop.parent
    if all(_runs_once(model, loop) for loop in invariant):
        return None
    return binding, size, invariant[-1]


def _flow_scope(scope: Scope) -> Scope:
    """The scope whose statements run in order around `scope`: comprehensions run inside their function."""
    while scope.kind == "comprehension" and scope.parent is not None:
        scope = scope.parent
    return scope


def _changes_in(model: SemanticModel, loop: Loop, name: str) -> bool:
    """Whether `name` may hold a different value from one iteration of `loop` to the next: it is rebound,
    aliased, written through (`x[i] = v`, `x.a = v`), has a method called that is not known to only read it,
    or is handed to a function other than a `.remote()` submission or a reading builtin."""
    for scope in model.scopes:
        for binding in scope.bindings.get(name, ()):
            if loop.contains_index(binding.index):
                return True
    if any(loop.contains_index(store.index) and root_name(store.target) == name for store in model.stores):
        return True
    for site in model.calls:
        if not loop.contains_index(site.index):
            continue
        func = site.node.func
        if isinstance(func, cst.Attribute) and root_name(func.value) == name and func.attr.value not in READING_METHODS:
            return True
        if model.submission(site.node) is not None:
            continue
        if isinstance(func, cst.Name) and func.value in READING_FUNCTIONS:
            continue
        for arg in site.node.args:
            if isinstance(arg.value, (cst.Name, cst.Subscript)) and root_name(arg.value) == name:
                return True
    return any(
        isinstance(binding.value, cst.Name) and binding.value.value == name and loop.contains_index(binding.index)
        for scope in model.scopes
        for bindings in scope.bindings.values()
        for binding in bindings
    )


def _runs_once(model: SemanticModel, loop: Loop) -> bool:
    """Whether one run of the loop makes at most one pass over its body: a literal count of one, an exit at the
    top of its body, or a retry loop whose `try` exits when the attempt succeeds."""
    iterations = model.literal_iterations(loop)
    if iterations is not None and iterations <= 1:
        return True
    if not isinstance(loop.node, (cst.For, cst.While)):
        return False
    exits = (cst.Break, cst.Return, cst.Raise)
    for statement in block_statements(loop.node.body):
        if isinstance(statement, exits):
            return True
        if isinstance(statement, cst.Try) and any(isinstance(s, exits) for s in block_statements(statement.body)):
            return True
    return False


def _hoist_fix(ctx: Context, site: CallSite, binding: Binding, loop: Loop) -> FixPlan | None:
    """`X_ref = ray.put(X)` before the statement that holds `loop`, and `X_ref` for every `X` passed directly to a
    `.remote()` call inside the loop."""
    model = ctx.model
    name = binding.name
    ref_name = f"{name}_ref"
    source = model.module.code
    scope = _flow_scope(site.scope)
    if scope.kind not in ("module", "function"):
        return None  # a lambda runs later, and a class body's names are not seen by its comprehensions
    if _name_taken(ctx, scope, ref_name):
        return None
    put = _put_name(model, site)
    statement = loop.node if isinstance(loop.node, (cst.For, cst.While)) else site.statement
    if put is None or statement is None:
        return None
    offsets = line_offsets(source)
    span = model.position(statement)
    line_start = offsets[span.start.line - 1]
    start = line_start + span.start.column
    end = offsets[span.end.line - 1] + span.end.column
    indent = source[line_start:start]
    if indent.strip() or source.startswith("elif", start):
        return None  # the statement does not start its own line, or cannot follow another statement
    replaced: list[tuple[int, int]] = []
    for other in model.calls_by_tail.get("remote", ()):
        if not loop.encloses(other.loop) or model.submission(other.node) is None:
            continue
        for arg in other.node.args:
            value = arg.value
            if arg.star or not isinstance(value, cst.Name) or value.value != name:
                continue
            if model.reaching_binding(name, other.scope, other.index) is not binding:
                continue
            position = model.position(value)
            replaced.append((offsets[position.start.line - 1] + position.start.column, offsets[position.end.line - 1] + position.end.column))
    text = source[start:end]
    for name_start, name_end in sorted(replaced, reverse=True):
        text = text[: name_start - start] + ref_name + text[name_end - start :]
    hoisted = f"{ref_name} = {put}({name})\n{indent}{text}"
    return FixPlan(f"Put `{name}` in the object store once, before the loop", ((statement, hoisted),), Applicability.UNSAFE)


def _name_taken(ctx: Context, scope: Scope, name: str) -> bool:
    """Whether `name` is used in the outermost function around `scope` (or anywhere, at module level), or bound
    at module level: the fix would clash with it."""
    outermost: Scope | None = None
    current: Scope | None = scope
    while current is not None:
        if current.kind == "function":
            outermost = current
        current = current.parent
    text = ctx.code_for(outermost.node) if outermost is not None else ctx.model.module.code
    return bool(re.search(rf"\b{re.escape(name)}\b", text)) or name in ctx.model.module_scope.bindings


def _put_name(model: SemanticModel, site: CallSite) -> str | None:
    """How the file names `ray.put` where the call is: `ray.put`, `r.put` after `import ray as r`, or `put`."""
    candidates: list[tuple[str, str]] = []
    for scope in model.scopes:
        for local, bindings in scope.bindings.items():
            for binding in bindings:
                if binding.kind == "import" and binding.imported == "ray":
                    candidates.append((local, f"{local}.put"))
                elif binding.kind == "import" and binding.imported == "ray.put":
                    candidates.append((local, local))
    for local, text in candidates:
        if model.qualified_name(cst.Name(local), site.scope, site.index) in ("ray", "ray.put"):
            return text
    return None
