"""RAY113 excessive-read-parallelism: a Ray Data read asked for thousands of read tasks."""

from __future__ import annotations

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import DATA_TOKENS, keyword_value
from ray_lint.libraries.data import DATA_LOG_CAPTURE
from ray_lint.python_model import constant_int
from ray_lint.rule import Context, Invalid, Rule, Valid

# Ray Data warns from this many read tasks, when they are also more than 4x the CPU slots
# (`_warn_on_high_parallelism` in `ray/data/_internal/util.py`).
RAY_WARN_READ_TASKS = 5000
# The functions whose reads go through `plan_read_op`, where Ray checks the count.
READ_PREFIXES = ("ray.data.read_", "ray.data.range")
BLOCK_KEYWORDS = ("override_num_blocks", "parallelism")


# A read of `{blocks}` blocks, planned (`explain()`) but not run: Ray Data's optimizer checks the count when it
# sets the read's parallelism (`SetReadParallelismRule`, `logical/rules/set_read_parallelism.py`), before any
# read task exists. Its logged warning is caught from the `ray.data` logger.
PLANNED_READ_MODEL = """\
""" + DATA_LOG_CAPTURE + """\
ray.data.range({rows}{blocks}).explain()
said = [text for text in logged if "more than 4x the number of available CPU slots" in text]
if said:
    __ray_lint_evidence__ = {{"wrong": f"Ray 2.60 warns: {{said[0].lstrip('⚠️ ')}}"}}
else:
    __ray_lint_evidence__ = {{"right": "no warning on the read's task count"}}
"""


class PlannedReadExperiment(ReproductionExperiment[None]):
    """A read of as many blocks as Ray warns from, planned without running it, against the same read with the
    count left to Ray Data: Ray 2.60 warns about the first on a 2-CPU cluster."""

    facts_type = type(None)

    def model(self, subject: Subject) -> Plan:
        rows = RAY_WARN_READ_TASKS
        flagged = PLANNED_READ_MODEL.format(rows=rows, blocks=f", override_num_blocks={rows}")
        return Plan(
            Variant(f"override_num_blocks={rows}", script(flagged, ("data",))),
            Variant("count left to Ray Data", script(PLANNED_READ_MODEL.format(rows=rows, blocks=""), ("data",))),
            "modelled",
            f"`ray.data.range({rows}, override_num_blocks={rows})` planned (not run) against `ray.data.range({rows})`",
        )


class ExcessiveReadParallelism(Rule):
    code = "RAY113"
    name = "excessive-read-parallelism"
    message = "A Ray Data read asks for thousands of read tasks, far more than a cluster has CPUs"
    severity = Severity.INFO
    category = "perf"
    tokens = tuple(f"{keyword}=" for keyword in BLOCK_KEYWORDS)
    also_tokens = DATA_TOKENS
    experiment = PlannedReadExperiment()
    docs = f"""
## What it does
Finds a `ray.data.read_*(...)` or `ray.data.range*(...)` call whose `override_num_blocks=` (or
the deprecated `parallelism=`) is a constant of at least {RAY_WARN_READ_TASKS}: a literal, or a
name bound once to one.

## Why is this bad?
Each output block of a read is one read task. Thousands of tiny tasks cost more to schedule,
start and track than they do work, and produce tiny blocks that every later operator pays for
too. Ray Data checks the same thing when it plans the read (`_warn_on_high_parallelism` in
`ray/data/_internal/util.py`): from {RAY_WARN_READ_TASKS} read tasks, when they are also more than
4 times the cluster's CPU slots, it logs "The requested parallelism of N is more than 4x the
number of available CPU slots in the cluster ... This can lead to slowdowns during the data
reading phase due to excessive task creation". It only warns at run time, on the cluster at
hand; the linter shows the constant where it is written. Leaving the count out lets Ray Data
pick it from the data size and the CPUs.

ray-lint is silent for counts below {RAY_WARN_READ_TASKS}, for counts it cannot fold (a variable,
a config value), for `parallelism=-1` (automatic), and for `repartition(...)` and `from_*`
calls, which do not read. On an autoscaling cluster that will really have a thousand CPUs or
more, the count may be right: suppress the finding there, as Ray's message says.

## Example
```python
ds = ray.data.read_parquet("s3://bucket/events/", override_num_blocks=20_000)
```

## Use instead
```python
ds = ray.data.read_parquet("s3://bucket/events/")  # Ray Data sizes the read from data and CPUs
```

## Fix safety
There is no automatic fix: the right count depends on the cluster the job runs on.

## References
- [Ray Data: Performance tips (tuning read parallelism)](https://docs.ray.io/en/latest/data/performance-tips.html)
- [Ray Data: Loading data](https://docs.ray.io/en/latest/data/loading-data.html)
"""

    VALID = [
        Valid("import ray\n\nds = ray.data.read_parquet('s3://bucket/x', override_num_blocks=200)\n", "a modest count"),
        Valid("import ray\n\nds = ray.data.read_parquet('s3://bucket/x', parallelism=-1)\n", "automatic"),
        Valid(
            "import ray\n\ndef load(blocks):\n    return ray.data.read_csv('x.csv', override_num_blocks=blocks)\n",
            "a parameter: the count is not in the code",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_json('x.jsonl').repartition(10_000)\n",
            "repartition does not read",
        ),
        Valid(
            "import ray\n\nds = ray.data.from_items(list(range(100)), override_num_blocks=10_000)\n",
            "from_items makes its blocks without read tasks",
        ),
        Valid(
            "import ray\nimport dask\n\nframe = dask.read_parquet('x', override_num_blocks=10_000)\n",
            "not Ray Data",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\nds = ray.data.read_parquet('s3://bucket/events/', override_num_blocks=20_000)\n", 3),
        Invalid("import ray\n\nds = ray.data.read_images('s3://bucket/img', parallelism=10000)\n", 3, note="the deprecated spelling"),
        Invalid(
            "import ray\n\nNUM_BLOCKS = 8 * 1000\n\ndef load():\n    return ray.data.read_csv('x.csv', override_num_blocks=NUM_BLOCKS)\n",
            6,
            note="a module constant",
        ),
        Invalid("from ray import data\n\nds = data.range(10**7, override_num_blocks=5000)\n", 3, note="range reads too"),
        Invalid(
            "import ray.data as rd\n\nds = rd.read_binary_files('s3://bucket/raw', override_num_blocks=50_000)\n",
            3,
            note="an aliased import",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for site in model.calls:
            name = model.call_name(site)
            if name is None or not name.startswith(READ_PREFIXES):
                continue
            for keyword in BLOCK_KEYWORDS:
                value = keyword_value(site.node, keyword)
                blocks = constant_int(model, value, site.scope, site.index)
                if value is not None and blocks is not None and blocks >= RAY_WARN_READ_TASKS:
                    ctx.report(
                        value,
                        f"`{name.rsplit('.', 1)[-1]}` asks for {blocks} read tasks; Ray warns from {RAY_WARN_READ_TASKS}",
                    )
