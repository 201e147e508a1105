"""RAY107 batch-size-mismatch: a CPU `map_batches` asked for batches of a hundred thousand rows or more."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.libraries import DATA_TOKENS, keyword_value
from ray_lint.libraries.data import DatasetFacts
from ray_lint.python_model import constant_int, literal_number
from ray_lint.rule import Context, Invalid, Option, Rule, Valid

# Ray Data's OOM guide sizes a CPU batch at about 16 MiB; rows are of unknown size, so the threshold is set
# where a row of only ~170 bytes (a few numeric columns) already passes it: 10**5 rows.
LARGE_CPU_BATCH_OPTION = Option(
    "large-batch-rows",
    100_000,
    "Rows per batch from which a CPU `map_batches` batch counts as too large (Ray's guide: about 16 MiB a batch).",
)
# Options that put the UDF on an accelerator, where batches are sized to the device instead.
ACCELERATOR_OPTIONS = ("num_gpus", "accelerator_type", "resources")


def _on_accelerator(call: cst.Call) -> bool:
    """Whether the call may run on a GPU (or another accelerator): any accelerator option but `num_gpus=0`,
    or options the code does not show (`**kwargs`)."""
    if any(arg.star == "**" for arg in call.args):
        return True
    for option in ACCELERATOR_OPTIONS:
        value = keyword_value(call, option)
        if value is not None and not (option == "num_gpus" and literal_number(value) == 0):
            return True
    return False


class BatchSizeMismatch(Rule):
    code = "RAY107"
    name = "batch-size-mismatch"
    message = "A CPU `map_batches` batch this large risks running the worker out of heap"
    severity = Severity.INFO
    category = "resource"
    preview = True
    tokens = ("batch_size",)
    also_tokens = DATA_TOKENS
    options = (LARGE_CPU_BATCH_OPTION,)
    no_experiment = (
        "its cost is a worker out of heap, which depends on the rows' size and the node's memory, and a model"
        " cannot cause it without putting the machine at risk"
    )
    docs = """
## What it does
Finds `ds.map_batches(fn, batch_size=N)` on a Ray Data dataset with a literal `N` of 100,000
rows or more (option `large-batch-rows`) and no `num_gpus`, `accelerator_type` or `resources`:
a CPU UDF handed very large batches.

## Why is this bad?
Each CPU task or actor holds its whole input batch, the UDF's copies of it and its output batch
in its heap at once. Ray Data's guide to avoiding OOMs tells CPU users to keep batches small
(`batch_size="auto"`, or about 16 MiB a batch) and keeps large batches for GPU stages, where the
device, not the worker's heap, sets the size. With one task per CPU, a node holds that many
batches at a time: 100,000 rows of a few hundred bytes each are tens of MiB per batch before
the UDF copies them, and image or text rows are far larger. The OOM killer then kills workers
and Ray Data retries them, or the job fails.

The size of a row is unknown to a static check, so this is a heuristic (info, preview): a
dataset of one integer column is small at 100,000 rows. ray-lint is silent on GPU (or other
accelerator) stages, on `num_gpus` given through a variable or `**kwargs`, on `batch_size`
given through a variable or configuration, on `None` (whole blocks, which Ray Data already
sizes to `target_max_block_size`) and `"auto"`, and on `map_batches` of objects not known to
be Ray datasets.

## Example
```python
ds.map_batches(normalize, batch_size=500_000)
```

## Use instead
```python
ds.map_batches(normalize, batch_size=4096)
```

## Fix safety
There is no automatic fix: the right size depends on the rows and the UDF.

## References
- [Ray Data: how to avoid out-of-memory errors](https://docs.ray.io/en/latest/data/how-to-avoid-ooms.html)
- [Ray Data: configuring batch size](https://docs.ray.io/en/latest/data/transforming-data.html)
"""

    VALID = [
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(Embed, batch_size=200_000, num_gpus=1)\n",
            "a GPU stage: its batches are sized to the device",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=BATCH)\n",
            "batch size from a constant the rule does not read",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=4096)\n",
            "a moderate batch",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=None)\n",
            "whole blocks, which Ray Data sizes itself",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=500_000, **gpu_options)\n",
            "options the code does not show may request a GPU",
        ),
        Valid(
            "import datasets\n\nhf = datasets.load_dataset('imdb')['train']\nhf = hf.map_batches(prep, batch_size=500_000)\n",
            "not a Ray dataset",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(Embed, batch_size=200_000, accelerator_type='A10G', num_gpus=gpus)\n",
            "accelerator requested through a variable",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=500_000)\n", 4),
        Invalid(
            "import ray\n\nds = ray.data.read_csv('c').map_batches(\n    tokenize,\n    batch_size=100000,\n    batch_format='pandas',\n)\n",
            3,
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('p')\nds = ds.map_batches(prep, batch_size=1_000_000, num_gpus=0)\n",
            4,
            note="`num_gpus=0`: a CPU stage",
        ),
        Invalid(
            "import ray\nfrom ray.data import Dataset\n\ndef featurize(ds: Dataset) -> Dataset:\n"
            "    return ds.map_batches(add_features, batch_size=250_000, num_cpus=2)\n",
            5,
        ),
        Invalid(
            "from ray import data\n\nfor path in paths:\n    data.read_json(path).map_batches(score, batch_size=10**6).write_parquet('out')\n",
            4,
        ),
    ]

    def check(self, ctx: Context) -> None:
        threshold = int(self.settings[LARGE_CPU_BATCH_OPTION.name])
        for site, _ in ctx.model.analysis(DatasetFacts).calls(frozenset({"map_batches"})):
            call = site.node
            rows = constant_int(ctx.model, keyword_value(call, "batch_size"), site.scope, site.index)
            if rows is None or rows < threshold or _on_accelerator(call):
                continue
            ctx.report(
                call,
                f"CPU `map_batches` with `batch_size={rows:,}` rows: Ray's OOM guide keeps CPU batches near 16 MiB",
            )
