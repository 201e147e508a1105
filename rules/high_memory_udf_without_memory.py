"""RAY106 high-memory-udf-without-memory: a Ray Data callable class that loads a model or whole files
into each of its actors, in an actor pool that Ray Data may grow to one actor per CPU, with no `memory=`."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.libraries import DATA_TOKENS, defined_function_or_class, keyword_value
from ray_lint.libraries.data import UDF_METHODS, DatasetFacts, udf_of
from ray_lint.loaders import FILE_LOADERS, MODEL_LOADER_METHODS, MODEL_LOADERS
from ray_lint.model import SemanticModel
from ray_lint.python_model import ClassInfo, literal_number, scope_within
from ray_lint.rule import Context, Invalid, Rule, Valid

# The methods of a callable class that run on its actor: once when it starts, and for every batch.
UDF_CLASS_METHODS = ("__init__", "__call__")
# Options that bound how many actors run at once, or what each is given, other than one CPU each:
# with one of them the user has sized the pool (`concurrency=2`, `num_gpus=1`, `memory=...`).
SIZING_OPTIONS = frozenset({
    "memory", "concurrency", "compute", "num_gpus", "resources", "accelerator_type", "ray_remote_args",
    "ray_remote_args_fn",
})
LOAD_TOKENS = ("load", "from_pretrained", "read_", "pipeline", "InferenceSession", "SentenceTransformer", "LLM", "YOLO", "WhisperModel")


def _load_in(model: SemanticModel, udf: ClassInfo) -> str | None:
    """The first model or whole-file load in the class's `__init__` or `__call__` (`torch.load`,
`InferenceSession` as `onnxruntime.InferenceSession`), as shown in a message."""
    for method_name in UDF_CLASS_METHODS:
        method = model.method(udf, method_name)
        if method is None:
            continue
        for site in model.calls:
            if not scope_within(site.scope, method.scope):
                continue
            name = model.call_name(site)
            if name is not None and (name in MODEL_LOADERS or name in FILE_LOADERS):
                return f"`{'.'.join(name.split('.')[-2:])}`"
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in MODEL_LOADER_METHODS:
                return f"`{func.attr.value}`"
    return None


def _sized(call: cst.Call) -> bool:
    """Whether the call bounds its pool or gives each actor more than one CPU (or may: `**kwargs`,
    `num_cpus` the code does not show)."""
    if any(arg.star == "**" or (arg.keyword is not None and arg.keyword.value in SIZING_OPTIONS) for arg in call.args):
        return True
    cpus = keyword_value(call, "num_cpus")
    if cpus is None:
        return False
    number = literal_number(cpus)
    return number is None or number > 1


class HighMemoryUdfWithoutMemory(Rule):
    code = "RAY106"
    name = "high-memory-udf-without-memory"
    message = "A callable class that loads a model into each actor of an unbounded pool has no `memory=`"
    severity = Severity.INFO
    category = "resource"
    preview = True
    tokens = LOAD_TOKENS
    also_tokens = DATA_TOKENS
    no_experiment = (
        "its cost is actors killed for memory on a loaded node, which a model cannot cause without putting "
        "the machine it runs on at risk"
    )
    docs = """
## What it does
Finds `ds.map_batches(Cls)` (or `map`, `flat_map`, `filter`) where `Cls` is a callable class of
the module whose `__init__` or `__call__` loads a model (`from_pretrained`, `transformers.pipeline`,
`torch.load`, `onnxruntime.InferenceSession`, `vllm.LLM`...) or reads a whole file into memory
(`pd.read_parquet`, `np.load`, `joblib.load`...), and the call gives Ray Data nothing to size the
actor pool by: no `memory=`, no `concurrency=` or `compute=`, no `num_gpus`, no custom resources,
and at most one CPU per actor.

## Why is this bad?
Without `concurrency` or `compute`, Ray Data 2.60 runs a callable class in an autoscaling actor
pool of one actor up to as many as the CPUs allow (`ActorPoolStrategy(min_size=1,
max_size=None)`), and each actor holds its own copy of the model. Ray schedules the actors by
CPU alone, so on a 32-CPU node up to 32 copies of a multi-GiB model compete for the node's
memory: the OOM killer kills actors and Ray Data retries them, or the job fails. `memory=` tells
Ray how much heap an actor needs, so it starts only as many as fit; Ray Data's guide to avoiding
OOMs recommends it (about 1.25× the observed peak), and Ray Data's own issue detector logs
"consider setting `memory=`" when an operator's tasks use more heap than they requested.

This is a heuristic (info, preview): the size of the model is unknown to a static check, and a
small scikit-learn model in a pool of CPU actors is fine. ray-lint is silent when the call
sets `memory`, `concurrency`, `compute`, `num_gpus`, `resources`, `accelerator_type`,
`ray_remote_args(_fn)`, more than one CPU per actor, or passes `**kwargs`. Function UDFs that
load a model are RAY102's (load it once, in a class); this rule is about the class that does.

## Example
```python
class Embed:
    def __init__(self):
        self.model = SentenceTransformer("all-mpnet-base-v2")

ds.map_batches(Embed)
```

## Use instead
```python
ds.map_batches(Embed, compute=ray.data.ActorPoolStrategy(size=4), memory=3 * 1024**3)
```

## Fix safety
There is no automatic fix: the memory an actor needs is measured, not read from the code.

## References
- [Ray Data: how to avoid out-of-memory errors](https://docs.ray.io/en/latest/data/how-to-avoid-ooms.html)
- [Ray Data: stateful transforms](https://docs.ray.io/en/latest/data/transforming-data.html)
"""

    VALID = [
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert')\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, memory=4 * 1024**3)\n",
            "memory= given",
        ),
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert')\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, concurrency=2)\n",
            "a fixed pool of two actors",
        ),
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert').cuda()\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, num_gpus=1, batch_size=64)\n",
            "one actor per GPU",
        ),
        Valid(
            "import ray\n\nclass Tokenize:\n    def __init__(self):\n        self.sep = ' '\n"
            "    def __call__(self, batch):\n        return batch\n\nds = ray.data.read_parquet('p').map_batches(Tokenize)\n",
            "a class that loads nothing",
        ),
        Valid(
            "import ray\nimport torch\n\ndef predict(batch):\n    model = torch.load('m.pt')\n    return model(batch)\n\n"
            "ds = ray.data.read_parquet('p').map_batches(predict)\n",
            "a function UDF: RAY102's finding",
        ),
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert')\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, num_cpus=4)\n",
            "four CPUs an actor: a quarter as many actors",
        ),
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert')\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, **options)\n",
            "options the code does not show",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert')\n    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_parquet('p').map_batches(Embed, batch_size=64)\n",
            10,
        ),
        Invalid(
            "import ray\nimport joblib\n\nclass Score:\n    def __init__(self, path):\n        self.model = joblib.load(path)\n"
            "    def __call__(self, batch):\n        return batch\n\n"
            "ds = ray.data.read_csv('c')\nds = ds.map_batches(Score, fn_constructor_args=('m.pkl',))\n",
            11,
        ),
        Invalid(
            "import ray\nimport pandas as pd\n\nclass Join:\n    def __init__(self):\n        self.table = pd.read_parquet('dim.parquet')\n"
            "    def __call__(self, row):\n        return row\n\nds = ray.data.read_json('j').map(Join, num_cpus=1)\n",
            10,
            note="one CPU an actor, a whole table each",
        ),
        Invalid(
            "import ray\nfrom transformers import pipeline\n\nclass Classify:\n    def __init__(self):\n        self.pipe = None\n"
            "    def __call__(self, batch):\n        if self.pipe is None:\n            self.pipe = pipeline('text-classification')\n"
            "        return batch\n\nds = ray.data.read_text('t').map_batches(Classify)\n",
            12,
            note="loaded lazily on the first batch: still one copy per actor",
        ),
        Invalid(
            "import ray\nfrom ray.data import Dataset\nimport onnxruntime as ort\n\nclass Detect:\n    def __init__(self):\n"
            "        self.session = ort.InferenceSession('yolo.onnx')\n    def __call__(self, batch):\n        return batch\n\n"
            "def run(ds: Dataset) -> Dataset:\n    return ds.map_batches(Detect, batch_format='numpy')\n",
            12,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for site, method in model.analysis(DatasetFacts).calls(UDF_METHODS):
            call = site.node
            target = udf_of(call)
            udf = defined_function_or_class(model, target, site.scope, site.index) if target is not None else None
            if not isinstance(udf, ClassInfo) or _sized(call):
                continue
            load = _load_in(model, udf)
            if load is not None:
                ctx.report(call, f"`{udf.node.name.value}` calls {load} in each actor; `{method}` sets no `memory=`")
