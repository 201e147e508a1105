"""RAY103 gpu-map-batches-without-batch-size: `map_batches(..., num_gpus=...)` without an integer `batch_size`."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import DATA_TOKENS, keyword_value
from ray_lint.python_model import literal_number, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

# Ray Data refuses GPU `map_batches` without a batch size since Ray 2.5 ("strict mode"; ray-project/ray#34588).
REFUSED_SINCE = "2.5"


class MissingBatchSizeExperiment(ReproductionExperiment[None]):
    """`map_batches` asked for a GPU with no `batch_size`, and with one. Ray 2.60 checks the call itself,
    before anything runs, so no GPU is needed to see its error (nor is the dataset executed)."""

    facts_type = type(None)
    shares_driver = True
    expected = r"You must provide `batch_size` to `map_batches` when requesting GPUs"

    def model(self, subject: Subject) -> Plan:
        source = (
            "def predict(batch):\n    return batch\n\n"
            "ds = ray.data.range(64).map_batches(predict, num_gpus=1{batch_size})  # lazy: only the call's checks run\n"
        )
        return Plan(
            Variant("no batch_size", script(source.format(batch_size=""))),
            Variant("batch_size=16", script(source.format(batch_size=", batch_size=16"))),
            "modelled",
            "`map_batches(fn, num_gpus=1)` built (not run) without and with `batch_size`",
        )


class GpuMapBatchesWithoutBatchSize(Rule):
    code = "RAY103"
    name = "gpu-map-batches-without-batch-size"
    message = "`map_batches` requests GPUs without an integer `batch_size`, which Ray Data refuses"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("map_batches",)
    also_tokens = DATA_TOKENS
    anchor_tokens = ("num_gpus",)  # the call requests GPUs with a literal `num_gpus`
    experiment = MissingBatchSizeExperiment()
    docs = """
## What it does
Finds a `map_batches(...)` call that requests GPUs with a literal `num_gpus` above zero and
gives no `batch_size`, or `batch_size=None` or `batch_size="auto"`.

## Why is this bad?
The right batch size for a GPU depends on the model, the data and the card, so Ray Data does
not guess it: in Ray 2.60 `Dataset.map_batches` raises `ValueError: You must provide
`batch_size` to `map_batches` when requesting GPUs` as soon as it is called (`"auto"` and
`None` are refused too; `"auto"` is for CPU work). The docs add that GPU batches should fill
about a quarter of the GPU's memory: a whole block per batch (`None`) easily runs the GPU, or
the actor's heap, out of memory. Older Ray versions ran such a call with whole blocks as
batches.

ray-lint is silent when `num_gpus` or `batch_size` is a variable or comes through `**kwargs`
(a config may set them), for `num_gpus=0`, and for `map`, `flat_map` and `filter`, which take
no batch size.

Ray Data refuses the call since Ray 2.5 (older versions defaulted GPU batches to 4,096 rows), so
ray-lint is silent where the project runs only older Ray: it reads the Ray a project declares
(`pyproject.toml`, `requirements*.txt`, a notebook's `!pip install "ray==2.2.0"`, or
`ray-version` in the config; see the configuration docs), and skips branches of a version test
(`if ray.__version__ < "2.5":`). On 43 public projects its only two findings were in a notebook
that installs Ray 2.2, where the code runs; reading that pin silenced both.

## Example
```python
ds.map_batches(Predictor, num_gpus=1, compute=ray.data.ActorPoolStrategy(size=2))
```

## Use instead
```python
ds.map_batches(Predictor, num_gpus=1, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2))
```
Pick the largest batch that fits the GPU's memory (the Ray dashboard shows its use).

## Fix safety
There is no fix: the batch size depends on the model and the GPU.

## References
- [Transforming data: configuring batch size](https://docs.ray.io/en/latest/data/transforming-data.html)
- [How to avoid OOMs](https://docs.ray.io/en/latest/data/how-to-avoid-ooms.html)
"""

    VALID = [
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=1, batch_size=64)\n",
            "an integer batch size",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=1, batch_size=cfg.batch_size)\n",
            "a batch size from the config",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=gpus_per_worker)\n",
            "num_gpus from a variable: it may be 0",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=1, **batch_options)\n",
            "batch_size may come through **kwargs",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=0, batch_size='auto')\n",
            "no GPU requested: 'auto' is fine for CPU work",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map(predict, num_gpus=1)\n",
            "`map` takes no batch size",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(Predictor, batch_size='auto')\n",
            "a CPU batch transform",
        ),
        Valid(
            "import ray\nfrom packaging.version import Version\n\n"
            "if Version(ray.__version__) < Version('2.5'):\n"
            "    ds = ds.map_batches(Predictor, num_gpus=1)\n"
            "else:\n    ds = ds.map_batches(Predictor, num_gpus=1, batch_size=64)\n",
            "a branch kept for Ray before 2.5, where GPU batches defaulted to 4,096 rows",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\nds = ray.data.range(10).map_batches(Predictor, num_gpus=1)\n", 3),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://b/t')\nds = ds.map_batches(Predictor, num_gpus=0.5, batch_size='auto')\n",
            4,
            note="'auto' is for CPU work only",
        ),
        Invalid(
            "import ray\n\ndef infer(ds):\n    return ds.map_batches(\n        Predictor,\n        num_gpus=1,\n        batch_size=None,\n"
            "        compute=ray.data.ActorPoolStrategy(size=2),\n    )\n",
            4,
            note="an explicit None: whole blocks, refused with GPUs",
        ),
        Invalid(
            "from ray import data\n\npreds = data.read_images('s3://b/img').map_batches(Classifier, num_gpus=1.0, zero_copy_batch=True)\n",
            3,
        ),
        Invalid(
            "import ray.data\n\nds = ray.data.from_items([{'x': 1}])\nfor batch in ds.map_batches(Embed, num_gpus=1).iter_batches():\n    print(batch)\n",
            4,
        ),
    ]

    def check(self, ctx: Context) -> None:
        for site in ctx.model.calls_by_tail.get("map_batches", ()):
            call = site.node
            if not isinstance(call.func, cst.Attribute) or any(arg.star == "**" for arg in call.args):
                continue
            gpus = literal_number(keyword_value(call, "num_gpus"))
            if gpus is None or gpus <= 0:
                continue
            batch_size = keyword_value(call, "batch_size")
            if batch_size is None or (isinstance(batch_size, cst.Name) and batch_size.value == "None"):
                shown = "no `batch_size`" if batch_size is None else "`batch_size=None`"
            elif literal_string(batch_size) == "auto":
                shown = '`batch_size="auto"`'
            else:
                continue
            if self.ray_versions.may_run(REFUSED_SINCE) and not ctx.model.version_gated(call, site.scope):
                ctx.report(call, f"`map_batches` requests `num_gpus={gpus:g}` with {shown}: Ray Data raises ValueError")
