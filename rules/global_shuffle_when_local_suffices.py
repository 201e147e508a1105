"""RAY109 global-shuffle-when-local-suffices: `ds.random_shuffle()` whose only use is iterating batches,
where a local shuffle buffer (`iter_batches(local_shuffle_buffer_size=...)`) would do."""

from __future__ import annotations

from ray_lint.analyses.dataset_uses import DatasetUses
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import DATA_TOKENS
from ray_lint.libraries.data import DatasetFacts
from ray_lint.python_model import CallSite
from ray_lint.rule import Context, Invalid, Rule, Valid

# The iterators that take `local_shuffle_buffer_size`.
BATCH_ITERATORS = frozenset({"iter_batches", "iter_torch_batches", "iter_tf_batches"})
# Row-wise transforms the shuffled order can flow through on its way to an iterator: a local shuffle
# before the iterator randomizes their output as well.
ROW_WISE = frozenset({
    "map", "map_batches", "flat_map", "filter", "add_column", "with_column", "drop_columns", "select_columns",
    "rename_columns",
})
DATA_SETUP = "import ray.data\nray.data.DataContext.get_current().enable_progress_bars = False\n\n"


class LocalShuffleExperiment(Experiment[None]):
    """Iterating a 123 MB dataset in batches after `random_shuffle()`, against the same iteration with a
    local shuffle buffer. It needs nothing of the finding."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # B runs fewer tasks: it skips the shuffle's all-to-all exchange
    ROWS = 60_000
    WIDTH = 256  # int64 items: 2 KB rows
    BUFFER = 8192

    def plan(self, subject: Subject) -> Plan:
        source = f"ray.data.range_tensor({self.ROWS}, shape=({self.WIDTH},))"
        iterate = "return sum(len(batch['data']) for batch in {ds}.iter_batches(batch_size=1024{extra}))"
        shuffled = iterate.format(ds=f"{source}.random_shuffle()", extra="")
        local = iterate.format(ds=source, extra=f", local_shuffle_buffer_size={self.BUFFER}")
        return Plan(
            Variant("random_shuffle()", script(DATA_SETUP + timed(shuffled))),
            Variant("local shuffle buffer", script(DATA_SETUP + timed(local))),
            "modelled",
            f"iterating {self.ROWS:,} rows of {self.WIDTH * 8 // 1024} KB in batches of 1024, shuffled globally or locally",
        )


class GlobalShuffleWhenLocalSuffices(Rule):
    code = "RAY109"
    name = "global-shuffle-when-local-suffices"
    message = "A global `random_shuffle()` whose only use is iterating batches, where a local shuffle would do"
    severity = Severity.INFO
    category = "perf"
    preview = True
    tokens = ("random_shuffle",)
    also_tokens = DATA_TOKENS
    experiment = LocalShuffleExperiment()
    docs = """
## What it does
Finds `ds.random_shuffle()` on a Ray Data dataset whose result is only iterated in batches
(`iter_batches`, `iter_torch_batches`, `iter_tf_batches`), directly or after row-wise transforms
(`map`, `map_batches`, `filter`, ...): in the same chain, or through a name whose every use is
such a call.

## Why is this bad?
`random_shuffle()` is an all-to-all operation: every output block takes rows from every input
block, so the whole dataset is read, exchanged through the object store (spilling to disk when it
does not fit) and written again before the first batch comes out. When the shuffle is there only
to decorrelate training batches, Ray's docs recommend a local shuffle instead:
`iter_batches(local_shuffle_buffer_size=N)` (and the same argument of `iter_torch_batches`) keeps
a buffer of at least N rows and draws each batch at random from it, streaming, with no exchange.
Measured on a 2-core machine with Ray 2.60 (warm cluster), iterating 60,000 rows of 2 KB
(123 MB): 4.5-6.4 s after `random_shuffle()`, 2.1-2.4 s with a local buffer of 8,192 rows
(2.0-2.8×); 80,000 such rows: 7.6-8.5 s against 2.4-2.8 s (2.7-3.5×). On small data the two
cost the same (51 MB of 256-byte rows: 1.1 s against 1.2 s): the gap grows with the data the
shuffle moves.

ray-lint is silent when the shuffled dataset is used for anything but iterating batches
(`split`, `train_test_split`, `write_*`, `materialize`, `take`, passed to a function or a
Trainer), where a true global shuffle may be required, and for `randomize_block_order()`.
A local shuffle is weaker: rows far apart in the input stay apart. If each epoch must see a
uniformly shuffled order (small datasets, ordered inputs such as sorted files), keep the global
shuffle and suppress the finding.

## Example
```python
for epoch in range(epochs):
    for batch in ds.random_shuffle().iter_torch_batches(batch_size=256):
        train_step(batch)
```

## Use instead
```python
for epoch in range(epochs):
    for batch in ds.iter_torch_batches(batch_size=256, local_shuffle_buffer_size=10_000):
        train_step(batch)
```
`ds.randomize_block_order()` before the iterator adds a cheap shuffle of whole blocks.

## Fix safety
There is no automatic fix: a local shuffle randomizes less, and the buffer size is a trade-off of
memory against randomness.

## References
- [Ray Data: Shuffling data](https://docs.ray.io/en/latest/data/shuffling-data.html)
- [Ray Data: Iterating over data](https://docs.ray.io/en/latest/data/iterating-over-data.html)
"""

    VALID = [
        Valid(
            "import ray\n\nds = ray.data.range(1000)\nfor batch in ds.iter_batches(batch_size=32, local_shuffle_buffer_size=256):\n"
            "    print(batch)\n",
            "already a local shuffle",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(1000).random_shuffle(seed=0)\ntrain, test = ds.train_test_split(0.2)\n",
            "a global shuffle for a split",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('x').random_shuffle()\nds.write_parquet('/tmp/shuffled')\n",
            "written out shuffled",
        ),
        Valid(
            "import ray\n\nshuffled = ray.data.range(1000).random_shuffle()\nprint(shuffled.take(10))\n"
            "for batch in shuffled.iter_batches():\n    print(batch)\n",
            "also sampled with take",
        ),
        Valid(
            "import ray\nfrom ray.train.torch import TorchTrainer\n\nds = ray.data.range(1000).random_shuffle()\n"
            "trainer = TorchTrainer(loop, datasets={'train': ds})\n",
            "handed to a trainer: how it is iterated is not here",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(1000).randomize_block_order()\nfor batch in ds.iter_batches():\n    print(batch)\n",
            "a cheap block-order shuffle",
        ),
        Valid(
            "import ray\n\ndef batches(frame):\n    return frame.random_shuffle().iter_batches()\n",
            "not a dataset ray-lint can trace",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\nds = ray.data.range(1000)\nfor batch in ds.random_shuffle().iter_batches(batch_size=32):\n    print(batch)\n",
            4,
        ),
        Invalid(
            "import ray\n\ndef train(epochs):\n    ds = ray.data.read_parquet('s3://bucket/train')\n    for epoch in range(epochs):\n"
            "        for batch in ds.random_shuffle().iter_torch_batches(batch_size=256):\n            step(batch)\n",
            6,
            note="a global shuffle per epoch",
        ),
        Invalid(
            "import ray\n\nshuffled = ray.data.range(1000).random_shuffle()\nfor batch in shuffled.iter_batches(batch_size=64):\n"
            "    print(batch)\n",
            3,
            note="through a name",
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_csv('x.csv')\n"
            "batches = ds.random_shuffle().map_batches(normalize).iter_batches(batch_size=128)\n",
            4,
            note="through a row-wise transform",
        ),
        Invalid(
            "from ray import data\n\nds = data.read_json('x.jsonl').random_shuffle(seed=7)\n"
            "for epoch in range(2):\n    for batch in ds.iter_torch_batches(batch_size=8):\n        step(batch)\n",
            3,
            note="iterated once per epoch, through a name",
        ),
    ]

    def check(self, ctx: Context) -> None:
        uses = ctx.model.analysis(DatasetUses)
        for site, _ in ctx.model.analysis(DatasetFacts).calls(frozenset({"random_shuffle"})):
            if _only_iterated(uses, site):
                ctx.report(
                    site.node.func,
                    "`random_shuffle()` only feeds batches: `local_shuffle_buffer_size=` streams instead",
                )


def _only_iterated(uses: DatasetUses, site: CallSite, depth: int = 0) -> bool:
    """Whether every use of the call's result, followed through row-wise transforms, iterates batches."""
    calls = uses.method_calls_on(site)
    if calls is None or depth > 8:
        return False
    return all(
        method in BATCH_ITERATORS or (method in ROW_WISE and _only_iterated(uses, after, depth + 1))
        for method, after in calls
    )
