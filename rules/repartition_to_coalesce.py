"""RAY110 repartition-to-coalesce: `ds.repartition(n)` to a few blocks on a dataset that is then only
mapped or iterated, where streaming coalescing would do."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.dataset_uses import DatasetUses
from ray_lint.diagnostics import Severity
from ray_lint.libraries import DATA_TOKENS, keyword_value
from ray_lint.libraries.data import DatasetFacts
from ray_lint.python_model import CallSite, literal_number
from ray_lint.rule import Context, Invalid, Rule, Valid

# At most this many blocks: a repartition that merges blocks rather than splitting them for parallelism.
COALESCE_MAX_BLOCKS = 8
# What a coalesced dataset may feed without depending on its block boundaries: row-wise transforms, and
# batch consumers given a row count. `batch_size=None` (the default of `map_batches` in Ray 2.60) hands
# the UDF whole blocks, so `repartition(1)` there means "the whole dataset in one call".
ROW_CONSUMERS = frozenset({"map", "flat_map", "filter", "iter_rows"})
BATCH_CONSUMERS = {"map_batches": False, "iter_batches": True, "iter_torch_batches": True, "iter_tf_batches": True}
# Keywords that make the repartition do something a streaming coalesce does not.
EXACT_KEYWORDS = ("shuffle", "keys", "sort", "target_num_rows_per_block")


class RepartitionToCoalesce(Rule):
    code = "RAY110"
    name = "repartition-to-coalesce"
    message = "A `repartition(n)` to a few blocks that are then only mapped or iterated: it blocks streaming"
    severity = Severity.INFO
    category = "perf"
    preview = True
    tokens = ("repartition",)
    also_tokens = DATA_TOKENS
    no_experiment = (
        "the lost streaming shows at scale only: on 2 CPUs, `repartition(2)` of 200 small blocks then mapped "
        "in batches ran about twice as fast as the same map without it (Ray 2.60)"
    )
    docs = f"""
## What it does
Finds `ds.repartition(n)` on a Ray Data dataset, with a literal `n` of at most
{COALESCE_MAX_BLOCKS} and neither `shuffle=`, `keys=` nor `sort=`, whose result is only mapped
row by row (`map`, `flat_map`, `filter`), mapped in batches of a given row count
(`map_batches(..., batch_size=N)`) or iterated (`iter_batches`, `iter_torch_batches`,
`iter_rows`): in the same chain, or through a name whose every use is such a call.

## Why is this bad?
Repartitioning to a few blocks is usually done to get bigger blocks out of many small ones. But
`repartition(n)` is an all-to-all operation: it waits for every input block, materializes them
in the object store, and splits and combines them into exactly `n` blocks, so the pipeline stops
streaming at that point, and the later map runs at most `n` tasks at once. Ray's performance
tips coalesce small blocks in a streaming way instead: a `map_batches(..., batch_size=N)` over
them bundles inputs into batches of N rows, and in Ray 2.60
`repartition(target_num_rows_per_block=N)` merges small blocks as they stream past.

ray-lint is silent when the exact count matters: before `write_*` (one file per block), `split`,
`streaming_split` or `materialize`; before `map_batches` without a row count (`batch_size=None`,
the default in Ray 2.60, hands the UDF whole blocks: `repartition(1)` then means one call over the
whole dataset); with `shuffle=True`, `keys=` or `sort=`; for counts above
{COALESCE_MAX_BLOCKS} (splitting big blocks for parallelism is what `repartition` is for); and
for counts it cannot read (a variable).

## Example
```python
ds = ray.data.read_json("s3://bucket/small-files/").repartition(4)
ds = ds.map_batches(tokenize, batch_size=512)
```

## Use instead
```python
ds = ray.data.read_json("s3://bucket/small-files/")
ds = ds.map_batches(tokenize, batch_size=512)  # bundles small blocks into 512-row batches
```
or `ds.repartition(target_num_rows_per_block=10_000)` (streaming, Ray 2.60).

## Fix safety
There is no automatic fix: the right batch or block size depends on the rows.

## References
- [Ray Data: Performance tips (handling too-small blocks)](https://docs.ray.io/en/latest/data/performance-tips.html)
- [Ray Data API: Dataset.repartition](https://docs.ray.io/en/latest/data/api/doc/ray.data.Dataset.repartition.html)
"""

    VALID = [
        Valid("import ray\n\nds = ray.data.read_csv('x.csv').repartition(1)\nds.write_csv('/tmp/out')\n", "one output file"),
        Valid(
            "import ray\n\ntotals = ray.data.read_csv('x.csv').repartition(1).map_batches(aggregate, batch_size=None)\n",
            "the whole dataset in one batch: the block count is the point",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_csv('x.csv').repartition(2).map_batches(summarize)\n",
            "default batch_size: whole blocks",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_csv('x.csv').repartition(200).map_batches(f, batch_size=64)\n",
            "splitting into more blocks for parallelism",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_csv('x.csv').repartition(4, shuffle=True).map(f)\n",
            "a shuffle",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_csv('x.csv').repartition(target_num_rows_per_block=1000).map(f)\n",
            "the streaming coalesce",
        ),
        Valid(
            "import ray\n\nshards = ray.data.range(100).repartition(4).split(4)\n",
            "an exact count for a split",
        ),
        Valid(
            "import ray\n\ndef run(n):\n    return ray.data.range(100).repartition(n).map_batches(f)\n",
            "a count not in the code",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(100).repartition(2)\nds.map_batches(f).write_parquet('/tmp/x')\nprint(ds.count())\n",
            "also counted: not only mapped",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\nds = ray.data.read_json('s3://bucket/logs').repartition(4).map_batches(parse, batch_size=256)\n", 3),
        Invalid(
            "import ray\n\nds = ray.data.read_images('s3://bucket/img').repartition(num_blocks=2)\n"
            "for batch in ds.iter_batches(batch_size=64):\n    print(batch)\n",
            3,
            note="through a name",
        ),
        Invalid(
            "import ray\n\ndef load():\n    ds = ray.data.read_parquet('x')\n    return ds.repartition(1).iter_torch_batches(batch_size=32)\n",
            5,
        ),
        Invalid(
            "from ray import data\n\nds = data.range(1000).map(f).repartition(8).filter(keep)\n",
            3,
        ),
        Invalid(
            "import ray\n\nsmall = ray.data.from_items(rows).repartition(2)\nout = small.map_batches(f, batch_size=128)\nmore = small.flat_map(g)\n",
            3,
            note="two maps",
        ),
    ]

    def check(self, ctx: Context) -> None:
        uses = ctx.model.analysis(DatasetUses)
        for site, _ in ctx.model.analysis(DatasetFacts).calls(frozenset({"repartition"})):
            blocks = _literal_blocks(site.node)
            if blocks is None or blocks > COALESCE_MAX_BLOCKS or any(keyword_value(site.node, k) is not None for k in EXACT_KEYWORDS):
                continue
            if _only_streamed(uses, site):
                ctx.report(
                    site.node.func,
                    f"`repartition({blocks})` only feeds maps or iterators: coalesce while streaming instead",
                )


def _literal_blocks(call: cst.Call) -> int | None:
    """The literal `num_blocks` (first positional argument or keyword)."""
    value = keyword_value(call, "num_blocks")
    if value is None and call.args and call.args[0].keyword is None and not call.args[0].star:
        value = call.args[0].value
    number = literal_number(value)
    return int(number) if number is not None and number == int(number) and number >= 1 else None


def _only_streamed(uses: DatasetUses, site: CallSite) -> bool:
    calls = uses.method_calls_on(site)
    return calls is not None and all(_rows_not_blocks(method, after.node) for method, after in calls)


def _rows_not_blocks(method: str, call: cst.Call) -> bool:
    """Whether the consumer works on rows or on batches of a set row count, not on whole blocks."""
    if method in ROW_CONSUMERS:
        return True
    if method not in BATCH_CONSUMERS:
        return False
    batch_size = keyword_value(call, "batch_size")
    if batch_size is None:
        return BATCH_CONSUMERS[method]  # whether the default is a row count
    return not (isinstance(batch_size, cst.Name) and batch_size.value == "None")
