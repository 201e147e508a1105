"""RAY104 gpu-udf-without-num-gpus: a Ray Data UDF that uses a GPU, run by a call that requests none."""

from __future__ import annotations

from ray_lint.analyses.gpu_use import GPU_TOKENS, gpu_uses
from ray_lint.diagnostics import Severity
from ray_lint.experiment import GpuVisibilityExperiment
from ray_lint.libraries import DATA_TOKENS, defined_function_or_class
from ray_lint.libraries.data import UDF_METHODS, DatasetFacts, udf_of
from ray_lint.model import SemanticModel
from ray_lint.python_model import ClassInfo, FunctionInfo
from ray_lint.rule import Context, Invalid, Rule, Valid

# Keywords of a Ray Data call that request GPUs, or may (`resources=`, a function that computes the options).
GPU_REQUESTS = frozenset({"num_gpus", "resources", "accelerator_type", "ray_remote_args_fn"})
# The methods of a callable class that run on its actor for every batch, or once when it starts.
UDF_CLASS_METHODS = ("__init__", "__call__")

UDF_PROBE = """
ray.data.DataContext.get_current().enable_progress_bars = False

class Probe:
    def __call__(self, batch):
        return {{"seen": [os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")], "ids": [",".join(str(g) for g in ray.get_gpu_ids())]}}

# A quarter CPU per actor: both variants run side by side, and two actors of one CPU would hold both CPUs
# of a 2-CPU cluster while the read tasks that feed them wait for one.
pool = ray.data.ActorPoolStrategy(size=1)
row = ray.data.range(1).map_batches(Probe, batch_size=1, compute=pool, num_cpus=0.25{options}).take_all()[0]
__ray_lint_evidence__ = {{"CUDA_VISIBLE_DEVICES": row["seen"], "gpu_ids": [g for g in row["ids"].split(",") if g]}}
"""


class DataGpuVisibilityExperiment(GpuVisibilityExperiment):
    """What a Ray Data UDF's actor sees of the node's GPUs without `num_gpus` and with it. The verifier's
    cluster has logical GPUs where the machine has none, which is enough to show Ray's isolation."""

    probe = UDF_PROBE
    request = ", num_gpus=1"
    shape = "a map_batches actor's CUDA_VISIBLE_DEVICES and ray.get_gpu_ids(), without and with num_gpus"
    not_shown = "this Ray gives a UDF without num_gpus a GPU of its own"

    def exposure(self, seen: str | None) -> str | None:
        if seen in ("", "<unset>"):
            return "the UDF's actor gets no GPU from Ray and sees no GPU at all (CUDA fails, or the model silently runs on the CPU)"
        return f"the UDF's actor gets no GPU from Ray and yet sees {seen!r}, GPUs that Ray may give to other work"


def _gpu_use(model: SemanticModel, udf: FunctionInfo | ClassInfo) -> tuple[str, tuple[str, ...]] | None:
    """Where the UDF uses a GPU, in words (its function, or `__init__`/`__call__` of its class), and the
    project facts that must hold for it: none when the use is in this module, else `gpu:<helper>` of the
    imported helpers it calls (their modules say whether they use a GPU)."""
    if isinstance(udf, FunctionInfo):
        places = [(f"`{udf.node.name.value}`", udf)]
    else:
        places = [(f"`{udf.node.name.value}.{name}`", method) for name in UDF_CLASS_METHODS if (method := model.method(udf, name))]
    imported: list[tuple[str, tuple[str, ...]]] = []
    for where, function in places:
        for use in gpu_uses(model, function):
            if not use.requires:
                return where, ()
            imported.append((where, use.requires))
    if not imported:
        return None
    return imported[0][0], tuple(fact for _, requires in imported for fact in requires)


class GpuUdfWithoutNumGpus(Rule):
    code = "RAY104"
    name = "gpu-udf-without-num-gpus"
    message = "A Ray Data UDF uses a GPU but its call does not request `num_gpus`"
    severity = Severity.WARNING
    category = "resource"
    tokens = GPU_TOKENS
    also_tokens = DATA_TOKENS
    experiment = DataGpuVisibilityExperiment()
    docs = """
## What it does
Finds `map_batches`, `map`, `flat_map` or `filter` on a Ray Data dataset whose UDF uses a GPU
while the call requests none (no `num_gpus`). The UDF is a callable class whose `__init__` or
`__call__` uses a GPU, or a function that does: `.cuda()`, `.to("cuda")`, `device="cuda"`,
`torch.device("cuda")`, `torch.cuda.*`, CuPy, Numba CUDA, TensorFlow or JAX GPU devices,
directly or through a helper of the module or a method of the class (the GPU markers of
RAY040, `gpu-without-num-gpus`, which is this rule's Ray Core counterpart).

## Why is this bad?
Ray Data schedules a UDF's tasks or actors by the resources its call requests, and `num_gpus`
is what tells it that the UDF needs a GPU (and what sets the actor's `CUDA_VISIBLE_DEVICES`).
Without it the actors are placed as CPU work: on a node without a GPU they fail as soon as
they touch CUDA, and on a GPU node Ray does not count the GPU as used, so several actors (and
other GPU work) share it and run it out of memory. Ray 2.60 does not hide the node's GPUs from
such an actor either: measured on a node with two GPUs, a `map_batches` actor without
`num_gpus` got `ray.get_gpu_ids() == []` yet saw `CUDA_VISIBLE_DEVICES='0,1'`, while one with
`num_gpus=1` saw only its own `'0'`. The transforming-data guide's GPU examples
always pass `num_gpus` (with a `batch_size`).

ray-lint is silent when the call passes `num_gpus` (any value, a variable too), `resources=`,
`accelerator_type=`, `ray_remote_args_fn=` or `**kwargs`; when the GPU use sits under a
condition about GPUs (`if torch.cuda.is_available():`, a device chosen by
`"cuda" if ... else "cpu"`); and for UDFs defined in other modules.

## Example
```python
class Classifier:
    def __init__(self):
        self.model = load_model().to("cuda")

    def __call__(self, batch):
        ...

ds.map_batches(Classifier, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2))
```

## Use instead
```python
ds.map_batches(Classifier, batch_size=64, num_gpus=1, compute=ray.data.ActorPoolStrategy(size=2))
```
Use a fraction (`num_gpus=0.5`) to put two actors on one GPU. `map_batches` with `num_gpus`
needs an integer `batch_size` (RAY103).

## Fix safety
There is no fix: `map_batches` with `num_gpus` also needs an integer `batch_size`, which only
the user can choose, and the number of GPUs per actor is theirs too.

## References
- [Transforming data: GPU UDFs](https://docs.ray.io/en/latest/data/transforming-data.html)
- [Accelerator support](https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html)
"""

    VALID = [
        Valid(
            "import ray\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net().cuda()\n\n    def __call__(self, batch):\n"
            "        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Classifier, num_gpus=1, batch_size=32)\n",
            "requests a GPU",
        ),
        Valid(
            "import ray\nimport torch\n\nclass Classifier:\n    def __init__(self):\n"
            "        device = 'cuda' if torch.cuda.is_available() else 'cpu'\n        self.model = Net().to(device)\n\n"
            "    def __call__(self, batch):\n        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Classifier)\n",
            "the GPU only when there is one",
        ),
        Valid(
            "import ray\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net().cuda()\n\n    def __call__(self, batch):\n"
            "        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Classifier, batch_size=32, **gpu_options)\n",
            "num_gpus may come through **kwargs",
        ),
        Valid(
            "import ray\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net().cuda()\n\n    def __call__(self, batch):\n"
            "        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Classifier, num_gpus=gpus, batch_size=32)\n",
            "num_gpus from a variable",
        ),
        Valid(
            "import ray\nimport torch\n\nclass Classifier:\n    def __init__(self, use_gpu):\n        self.model = Net()\n"
            "        if use_gpu:\n            self.model = self.model.cuda()\n\n    def __call__(self, batch):\n        return self.model(batch)\n\n"
            "ds = ray.data.range(10).map_batches(Classifier, fn_constructor_kwargs={'use_gpu': False})\n",
            "GPU use under a condition about GPUs",
        ),
        Valid(
            "import ray\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net()\n\n    def to_gpu(self):\n"
            "        self.model.cuda()\n\n    def __call__(self, batch):\n        return self.model(batch)\n\n"
            "ds = ray.data.range(10).map_batches(Classifier)\n",
            "a GPU method the UDF never calls",
        ),
        Valid(
            "import torch\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net().cuda()\n\n"
            "preds = dataset.map_batches(Classifier)\n",
            "not a Ray Data dataset (no ray.data in the file)",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\nclass Classifier:\n    def __init__(self):\n        self.model = Net().to('cuda')\n\n    def __call__(self, batch):\n"
            "        return self.model(batch)\n\nds = ray.data.read_images('s3://b/img')\n"
            "ds = ds.map_batches(Classifier, batch_size=32, compute=ray.data.ActorPoolStrategy(size=2))\n",
            11,
        ),
        Invalid(
            "import ray\nimport torch\n\nclass Embedder:\n    def __init__(self):\n        self.model = Net()\n\n    def __call__(self, batch):\n"
            "        x = torch.as_tensor(batch['x'], device='cuda')\n        return {'y': self.model(x).cpu().numpy()}\n\n"
            "ds = ray.data.range(10).map_batches(Embedder, batch_size=16)\n",
            12,
            note="in __call__",
        ),
        Invalid(
            "import ray\n\ndef load():\n    return Net().cuda()\n\nclass Scorer:\n    def __init__(self):\n        self.model = load()\n\n"
            "    def __call__(self, batch):\n        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Scorer)\n",
            13,
            note="through a helper of the module",
        ),
        Invalid(
            "import cupy as cp\nimport ray\n\ndef normalize(batch):\n    x = cp.asarray(batch['x'])\n    batch['x'] = cp.asnumpy(x / x.max())\n"
            "    return batch\n\nds = ray.data.range(10).map_batches(normalize, batch_size=128)\n",
            9,
            note="a function UDF with CuPy",
        ),
        Invalid(
            "import ray\nimport torch\n\nclass Tagger:\n    def __init__(self):\n        self.device = torch.device('cuda')\n"
            "        self.model = Net().to(self.device)\n\n    def __call__(self, row):\n        return row\n\n"
            "ds = ray.data.read_json('in.json').map(Tagger, compute=ray.data.ActorPoolStrategy(size=1))\n",
            12,
            note="a class with `map`",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for site, method in model.analysis(DatasetFacts).calls(UDF_METHODS):
            call = site.node
            if any(arg.star == "**" or (arg.keyword is not None and arg.keyword.value in GPU_REQUESTS) for arg in call.args):
                continue
            target = udf_of(call)
            udf = defined_function_or_class(model, target, site.scope, site.index) if target is not None else None
            if udf is None or (isinstance(udf, FunctionInfo) and udf.owner is not None):
                continue
            found = _gpu_use(model, udf)
            if found is not None:
                where, requires = found
                ctx.report(call, f"{where} uses a GPU but `{method}` does not request `num_gpus`", requires=requires)
