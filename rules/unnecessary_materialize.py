"""RAY108 unnecessary-materialize: `ds.materialize()` whose result is read once, by one streaming pass."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import DATA_TOKENS
from ray_lint.libraries.data import ALL_TO_ALL_TRANSFORMS, DATASET_TRANSFORMS, DatasetFacts
from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    Binding,
    Loop,
    Scope,
    comments_in,
    scope_within,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Dataset methods that read the whole dataset once, as a stream: what a materialized dataset is for is
# reading it more than once, so one of these alone gains nothing from it.
SINGLE_PASS = frozenset({"iter_batches", "iter_rows", "iter_torch_batches", "to_pandas", "take_all", "write_datasink"})
SINGLE_PASS_PREFIXES = ("write_",)
# Transforms a materialized dataset can go through on its way to that one pass (all but `materialize`).
STREAMING_TRANSFORMS = DATASET_TRANSFORMS - {"materialize"}


def _single_pass(method: str) -> bool:
    return method in SINGLE_PASS or method.startswith(SINGLE_PASS_PREFIXES)


class _Chain:
    """The `.materialize()` calls whose dataset reaches one single-pass read and nothing else."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.facts = model.analysis(DatasetFacts)

    def materializations(self) -> Iterator[tuple[cst.Call, str]]:
        """Each `.materialize()` call (on a dataset) that only one streaming read consumes, with that read's method."""
        for site in self.model.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and _single_pass(func.attr.value):
                found = self._back_to_materialize(func.value, site.scope, site.index, site.loop)
                if found is not None:
                    yield found, func.attr.value

    def _back_to_materialize(
        self, expr: cst.BaseExpression, scope: Scope, at: int, loop: Loop | None, hops: int = 0
    ) -> cst.Call | None:
        """Follow a read's receiver back through transforms, and through names read nowhere else, to a
        `.materialize()` call; None where the dataset may be read again (a second read of a name, a read
        in a loop the name is bound outside of, a read in a nested function)."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in STREAMING_TRANSFORMS:
            expr = expr.func.value
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "materialize":
            if expr.args or not self.facts.is_dataset(expr.func.value, scope, at) or self._after_barrier(expr.func.value, scope, at):
                return None
            return expr
        if not isinstance(expr, cst.Name) or hops > 4:
            return None
        binding = self.model.reaching_binding(expr.value, scope, at)
        if binding is None or binding.kind != "assign" or binding.value is None or (binding.source is not None and binding.source is not binding.value):
            return None
        if binding.scope is not scope or binding.loop is not loop or not self._read_once(binding):
            return None
        return self._back_to_materialize(binding.value, scope, binding.index, binding.loop, hops + 1)

    def _after_barrier(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """Whether the dataset comes straight out of an all-to-all transform (`ds.repartition(8)`, or a
        name bound to one), which makes every block before it hands on the first: a `materialize()`
        after it adds no wait, and the object store holds every block at that barrier either way."""
        if isinstance(expr, cst.Name):
            binding = self.model.reaching_binding(expr.value, scope, at)
            expr = binding.value if binding is not None and binding.kind == "assign" and binding.value is not None else expr
        return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ALL_TO_ALL_TRANSFORMS

    def _read_once(self, binding: Binding) -> bool:
        """Whether the value a binding gives its name is read once: one read of the name before the next
        binding of it in its scope, and none from a function, lambda or comprehension nested there."""
        name, scope = binding.name, binding.scope
        later = [b.index for b in scope.bindings[name] if b.index > binding.index]
        end = min(later, default=AFTER_ALL)
        reads = [index for index in scope.reads.get(name, ()) if binding.index < index < end]
        nested = any(
            name in inner.reads and name not in inner.bindings
            for inner in self.model.scopes
            if inner is not scope and scope_within(inner, scope)
        )
        return len(reads) == 1 and not nested


class StreamingExperiment(Experiment[None]):
    """How long the consumer of a pipeline waits for its first batch, with `materialize()` before the
    read and without: a materialized dataset hands out nothing until its last block is made; a streaming
    one hands out the first block as soon as it is mapped. (The total time of a whole pass is not the
    measure: on 2 CPUs Ray Data's back-pressure keeps the streaming pass from overlapping much with a slow
    consumer, so the two totals came out alike. The wait, and the blocks pinned meanwhile, are the cost.)"""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # the same tasks run; what the fix gains is not waiting for all of them
    BLOCKS = 20
    MAP_SECONDS = 0.2

    model_only = "its cost is the wait for the first batch, which timing the whole function would not show"

    def plan(self, subject: Subject) -> Plan:
        setup = (
            "ray.data.DataContext.get_current().enable_progress_bars = False\n\n"
            f"def preprocess(batch):\n    time.sleep({self.MAP_SECONDS})  # stands for decoding and resizing\n    return batch\n\n"
            "ray.data.range(10).map_batches(preprocess).materialize()  # the workers up before the clock starts\n"
        )
        body = (
            f"ds = ray.data.range({self.BLOCKS * 100}, override_num_blocks={self.BLOCKS}).map_batches(preprocess){{materialize}}\n"
            "for batch in ds.iter_batches(batch_size=None):\n"
            "    return len(batch['id'])  # the consumer's first batch\n"
        )
        return Plan(
            Variant("materialize()", script(setup + timed(body.format(materialize=".materialize()")))),
            Variant("streaming", script(setup + timed(body.format(materialize="")))),
            "modelled",
            f"time to the consumer's first batch, {self.BLOCKS} blocks mapped at {self.MAP_SECONDS:g} s each",
        )


class UnnecessaryMaterialize(Rule):
    code = "RAY108"
    name = "unnecessary-materialize"
    message = "`materialize()` before a single streaming pass holds the whole dataset and stalls streaming"
    severity = Severity.WARNING
    category = "resource"
    fixable = True
    tokens = ("materialize()",)
    also_tokens = DATA_TOKENS
    experiment = StreamingExperiment()
    docs = """
## What it does
Finds `ds.materialize()` on a Ray Data dataset whose result is read exactly once, by one
streaming pass: `iter_batches`, `iter_rows`, `iter_torch_batches`, `write_*`, `to_pandas` or
`take_all`, directly or after more lazy transforms (`.materialize().map_batches(f).write_parquet(p)`),
through names that are read nowhere else.

## Why is this bad?
Ray Data streams: blocks flow through the pipeline while the consumer reads the first ones,
and only a window of blocks is in the object store at a time. `materialize()` runs the whole
pipeline first and pins every block in the object store until the result is dropped: a dataset
larger than the store spills to disk (Ray Data's performance tips name `materialize()` as a
cause of spilling), and the consumer's first batch waits for the last block. A materialized
dataset pays off only when it is read more than once (several epochs, a count then a write);
read once, it is only the cost. Measured with Ray 2.60 on a 2-core machine, 20 blocks mapped at
0.2 s each: the consumer got its first batch after 4.3 s behind `materialize()` and after 0.6 s
streaming (7.4×). (The whole pass, with a consumer taking 0.1 s a batch, took about as long either way
there, 6.3 s vs 6.1 s: the cost is the wait and the memory, not the throughput.)

ray-lint is silent when the materialized dataset is read twice or more (`count()` and then
`iter_batches()`), read in a loop that it was made outside of (epochs), returned, passed to
another function (a trainer may iterate it per epoch), stored in a container or an attribute,
or when `materialize()` is a statement of its own (run for its side effects, or to time the
pipeline). It is also silent for a `materialize()` straight after an all-to-all transform
(`repartition`, `random_shuffle`, `sort`, `randomize_block_order`): that barrier makes every block
before it hands on the first, so the wait and the full object store are there either way.

## Example
```python
ds = ray.data.read_parquet(path).map_batches(preprocess).materialize()
for batch in ds.iter_batches(batch_size=256):
    train_step(batch)
```

## Use instead
```python
ds = ray.data.read_parquet(path).map_batches(preprocess)
for batch in ds.iter_batches(batch_size=256):
    train_step(batch)
```

## Fix safety
The fix removes the `.materialize()` call (not offered when comments sit inside it). It is
unsafe: the pipeline now runs while it is read, so an error in a UDF surfaces during the
iteration rather than at the `materialize()` line, and the UDFs run as the consumer pulls.

## References
- [Ray Data performance tips: avoid object spilling](https://docs.ray.io/en/latest/data/performance-tips.html)
- [Ray Data key concepts: streaming execution](https://docs.ray.io/en/latest/data/key-concepts.html)
"""

    VALID = [
        Valid(
            "import ray\n\nds = ray.data.read_json('clips.jsonl')\n"
            "ds.repartition(8).materialize().write_parquet('out')\n",
            "straight after an all-to-all transform, which makes every block before it hands one on",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_json('clips.jsonl').repartition(8)\n"
            "ds.materialize().write_parquet('out')\n",
            "a name bound to an all-to-all transform",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p').map_batches(prep).materialize()\nfor epoch in range(3):\n"
            "    for batch in ds.iter_batches():\n        step(batch)\n",
            "read once per epoch: the cache is the point",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p').map_batches(prep).materialize()\nprint(ds.count())\nds.write_parquet('out')\n",
            "read twice",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('p').map_batches(prep)\nds.materialize()\n",
            "a statement of its own: run for side effects or to time it",
        ),
        Valid(
            "import ray\n\ndef prepare(path):\n    return ray.data.read_parquet(path).map_batches(prep).materialize()\n",
            "returned: the caller may read it many times",
        ),
        Valid(
            "import ray\n\ntrain = ray.data.read_parquet('p').map_batches(prep).materialize()\ntrainer = TorchTrainer(loop, datasets={'train': train})\n",
            "handed to a trainer, which iterates per epoch",
        ),
        Valid(
            "import ray\n\ncached = ray.data.read_parquet('p').materialize()\nfor epoch in range(3):\n"
            "    shuffled = cached.random_shuffle()\n    for batch in shuffled.iter_batches():\n        step(batch)\n",
            "a per-epoch shuffle of a cached dataset",
        ),
        Valid(
            "import ray\n\nresult = frame.materialize()\nfor row in result.iter_rows():\n    print(row)\n",
            "not known to be a Ray dataset",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('p').map_batches(prep).materialize()\nfor batch in ds.iter_batches(batch_size=256):\n"
            "    step(batch)\n",
            3,
            fixed="import ray\n\nds = ray.data.read_parquet('p').map_batches(prep)\nfor batch in ds.iter_batches(batch_size=256):\n"
            "    step(batch)\n",
        ),
        Invalid(
            "import ray\n\nray.data.read_csv('in.csv').map(parse).materialize().map_batches(score).write_parquet('out')\n",
            3,
            fixed="import ray\n\nray.data.read_csv('in.csv').map(parse).map_batches(score).write_parquet('out')\n",
            note="chained into more transforms and a write",
        ),
        Invalid(
            "import ray\n\ndef export(path):\n    ds = ray.data.read_json(path)\n    ds = ds.filter(keep).materialize()\n"
            "    scored = ds.map_batches(score)\n    return scored.to_pandas()\n",
            5,
            fixed="import ray\n\ndef export(path):\n    ds = ray.data.read_json(path)\n    ds = ds.filter(keep)\n"
            "    scored = ds.map_batches(score)\n    return scored.to_pandas()\n",
            note="through two names, each read once",
        ),
        Invalid(
            "import ray\n\nfor shard in shards:\n    ds = ray.data.read_parquet(shard).materialize()\n    ds.write_parquet('out/' + shard)\n",
            4,
            fixed="import ray\n\nfor shard in shards:\n    ds = ray.data.read_parquet(shard)\n    ds.write_parquet('out/' + shard)\n",
            note="made and read in the same loop iteration",
        ),
        Invalid(
            "import ray\nfrom ray.data import Dataset\n\ndef dump(ds: Dataset):\n    for row in ds.materialize().iter_rows():\n        print(row)\n",
            5,
            fixed="import ray\nfrom ray.data import Dataset\n\ndef dump(ds: Dataset):\n    for row in ds.iter_rows():\n        print(row)\n",
        ),
    ]

    def check(self, ctx: Context) -> None:
        for call, reader in ctx.model.analysis(_Chain).materializations():
            assert isinstance(call.func, cst.Attribute)
            receiver = call.func.value
            fix = None
            if comments_in(call) == comments_in(receiver):
                fix = FixPlan("Remove `.materialize()`", ((call, ctx.code_for(receiver)),), Applicability.UNSAFE)
            ctx.report(call, f"`materialize()` before a single `{reader}` pass pins every block: stream it instead", fix=fix)
