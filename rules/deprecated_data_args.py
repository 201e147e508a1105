"""RAY115 deprecated-data-args: a Ray Data argument, method or setting that Ray 2.60 deprecates."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import DATA_TOKENS, keyword_value
from ray_lint.libraries.data import (
    DATA_LOG_CAPTURE,
    DATASET_SOURCE_PREFIXES,
    UDF_METHODS,
    DatasetFacts,
)
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, Scope, Store, literal_number
from ray_lint.rule import Context, Invalid, Rule, Valid

# Dataset methods Ray 2.60 deprecates, with what to use instead (`ray/data/dataset.py`).
DEPRECATED_METHODS: dict[str, str] = {
    "iter_tf_batches": "`to_tf()`",
    "get_internal_block_refs": "`iter_internal_ref_bundles()`",
    "zip": "`join()` on a shared key",
    "to_random_access_dataset": "another store",
}
# Keywords of the UDF methods (`map`, `map_batches`, `flat_map`, `filter`) that Ray 2.60 deprecates.
UDF_KEYWORDS: dict[str, str] = {
    "concurrency": "`compute=`",
    "ray_remote_args_fn": "the named remote parameters",
}
# Options of `ray.remote` that these methods take only through `**ray_remote_args`, deprecated in 2.60
# (to be removed in 2.64): the named ones (`num_cpus`, `memory`, `resources`, `max_calls`, ...) are current.
REMOTE_ARGS_ONLY = frozenset({
    "scheduling_strategy", "max_retries", "retry_exceptions", "max_restarts", "max_task_retries",
    "placement_group", "placement_group_bundle_index", "placement_group_capture_child_tasks",
    "object_store_memory", "num_returns", "lifetime", "namespace", "enable_task_events",
})  # (`name=` too, left out: every module has a `name=`, and a task name on a Data transform is rare)
# Keywords of other dataset methods, by method.
METHOD_KEYWORDS: dict[str, dict[str, str]] = {
    "random_shuffle": {"num_blocks": "`repartition()` after the shuffle"},
    "join": {"partition_size_hint": "nothing (it is ignored)"},
}
WRITE_KEYWORDS: dict[str, str] = {"num_rows_per_file": "`min_rows_per_file`"}
# Keywords of `ray.data.read_*` / `from_*` / `range*`.
SOURCE_KEYWORDS: dict[str, str] = {
    "parallelism": "`override_num_blocks`",
    "ray_remote_args": "the named remote parameters",
}
READ_PARQUET_KEYWORDS: dict[str, str] = {
    "columns": "`.select_columns([...])`",
    "dataset_kwargs": "top-level keyword arguments",
}
# The release that deprecated a name, where ray-lint knows it (Ray's own warning, its release notes); the
# replacement exists from then on. The others count from 2.60, the release ray-lint checks against.
DEPRECATED_SINCE: dict[str, str] = {
    "num_blocks": "2.9",  # "`num_blocks` parameter is deprecated in Ray 2.9"
    "parallelism": "2.10",  # `override_num_blocks` arrived in 2.10
    "get_internal_block_refs": "2.33",  # `iter_internal_ref_bundles` arrived in 2.33
    "concurrency": "2.51",
}
CHECKED_RELEASE = "2.60"
DATA_CONTEXT_GET_CURRENT = ("ray.data.DataContext.get_current", "ray.data.context.DataContext.get_current")


@dataclass(frozen=True)
class DeprecatedName:
    """What the finding names: the keyword, method or setting Ray deprecates."""

    name: str


# The names the experiment replays: (set-up, the deprecated use, its replacement), each an expression that
# makes a dataset. `concurrency=` stands for every UDF method, `parallelism=` for every read: Ray checks
# them in one place each (`get_compute_strategy`, `_get_num_output_blocks`).
MODELLED: dict[str, tuple[str, str, str]] = {
    "concurrency": (
        "",
        "ray.data.range(100).map_batches(double, concurrency=2)",
        "ray.data.range(100).map_batches(double, compute=ray.data.TaskPoolStrategy(size=2))",
    ),
    "parallelism": ("", "ray.data.range(100, parallelism=4)", "ray.data.range(100, override_num_blocks=4)"),
    "columns": (
        "ray.data.range(100).write_parquet(PATH)",
        "ray.data.read_parquet(PATH, columns=['id'])",
        "ray.data.read_parquet(PATH).select_columns(['id'])",
    ),
}
# Ray logs some deprecations (the `ray.data` logger) and raises others as Python warnings: both are caught
# while the dataset is built and run, and those that name `{name}` as deprecated are Ray's word on it.
DEPRECATION_MODEL = """\
import tempfile
import warnings

PATH = tempfile.mkdtemp()
{setup}

def double(batch):
    return {{"id": batch["id"] * 2}}

""" + DATA_LOG_CAPTURE + """\
with warnings.catch_warnings(record=True) as raised:
    warnings.simplefilter("always")
    rows = {use}.take_all()
said = [text for text in logged + [str(w.message) for w in raised] if "deprecated" in text and "{name}" in text]
if said:
    __ray_lint_evidence__ = {{"wrong": f"Ray 2.60 warns: {{said[0]}}"}}
else:
    __ray_lint_evidence__ = {{"right": f"no deprecation warning; {{len(rows)}} rows"}}
"""


class DeprecationWarningExperiment(ReproductionExperiment[DeprecatedName]):
    """The deprecated use and its replacement on a 100-row dataset: Ray 2.60 warns about the first only."""

    facts_type = DeprecatedName

    def model(self, subject: Subject) -> Plan | str:
        name = self.facts(subject).name
        if name not in MODELLED:
            return f"no model for `{name}`: the experiment replays {', '.join(f'`{n}`' for n in MODELLED)}"
        setup, flagged, fixed = MODELLED[name]

        def variant(use: str) -> str:
            return script(DEPRECATION_MODEL.format(setup=setup, use=use, name=name), ("data",))

        return Plan(
            Variant(f"`{name}`", variant(flagged)),
            Variant("the replacement", variant(fixed)),
            "modelled",
            f"`{flagged}` against `{fixed}`, reading Ray's warnings",
        )


class DeprecatedDataArgs(Rule):
    code = "RAY115"
    name = "deprecated-data-args"
    message = "A Ray Data argument, method or setting that Ray 2.60 deprecates"
    severity = Severity.INFO
    category = "deprecation"
    # The keywords as written in a call (`zip` or `parallelism` alone is in most modules of Ray Data's own
    # source, which would then all be parsed for this rule); `read_parquet` stands for its `columns=`.
    tokens = (
        *(f".{method}(" for method in DEPRECATED_METHODS),
        *(f"{keyword}=" for keyword in (*UDF_KEYWORDS, *REMOTE_ARGS_ONLY, *WRITE_KEYWORDS, *SOURCE_KEYWORDS)),
        "read_parquet", "num_blocks=", "partition_size_hint=", "min_parallelism", "expr=",
    )
    also_tokens = DATA_TOKENS
    experiment = DeprecationWarningExperiment()
    docs = """
## What it does
Finds the Ray Data names that Ray 2.60 (the version ray-lint checks against) deprecates:
- on `map`, `map_batches`, `flat_map` and `filter`: `concurrency=` (use `compute=`),
  `ray_remote_args_fn=`, and Ray remote options these methods take only through
  `**ray_remote_args` (`scheduling_strategy=`, `max_retries=`, `retry_exceptions=`, ...);
- on `ray.data.read_*`, `from_*` and `range`: `parallelism=` (use `override_num_blocks=`) and
  `ray_remote_args=`; on `read_parquet`: `columns=` (use `.select_columns([...])`) and
  `dataset_kwargs=`;
- `filter(expr="...")` with a string expression (use `ray.data.expressions.col`);
- `random_shuffle(num_blocks=...)`, `join(partition_size_hint=...)`,
  `write_*(num_rows_per_file=...)`;
- the methods `iter_tf_batches`, `get_internal_block_refs`, `zip`, `to_random_access_dataset`;
- `DataContext.get_current().min_parallelism = ...` (use `read_op_min_num_blocks`).

Calls count on a dataset ray-lint can trace to `ray.data.read_*`, `from_*`, `range*` or to a
chain of transforms on one.

## Why is this bad?
Each of these logs a deprecation warning in Ray 2.60 (`ray/data/dataset.py`,
`ray/data/read_api.py`, `ray/data/_internal/util.py`), and several are removed in Ray 2.64.
Some already behave differently from what they say: `random_shuffle(num_blocks=...)` raises,
`join(partition_size_hint=...)` is ignored, and `read_parquet(columns=...)` is now applied as a
`select_columns` after the read. Ray logs most of these warnings once, among many lines of
output; the linter names the line.

ray-lint is silent for the same keywords where they are current: `concurrency=` on the read
functions and on `select_columns`/`drop_columns`/`rename_columns`/`add_column`; the named remote
parameters (`num_cpus=`, `num_gpus=`, `memory=`, `resources=`, `max_calls=`, ...);
`parallelism=-1` (the default); `filter(expr=col(...) ...)`; `zip` and friends on objects that are
not datasets.

Whether a name is deprecated depends on the Ray a project runs, so ray-lint reads the Ray a
project declares (`pyproject.toml`, `requirements*.txt`, `setup.py`, a `Dockerfile`'s
`FROM rayproject/ray:...`, a notebook's `!pip install "ray==..."`, or `ray-version` in the
config) and reports a name only where every Ray the project allows has deprecated it, so that
the replacement exists: `parallelism=` from 2.10, `random_shuffle(num_blocks=)` from 2.9,
`get_internal_block_refs` from 2.33, `concurrency=` from 2.51, the rest from 2.60. A project
that declares no Ray is taken to run a recent one. Code in a branch of a version test
(`if RAY_VERSION >= (2, 33, 0): ... else: ...`) is kept for other versions and is not reported.

## Example
```python
ds = ray.data.read_parquet(path, columns=["id", "text"], parallelism=200)
ds = ds.map_batches(Embed, concurrency=4, batch_size=64)
```

## Use instead
```python
ds = ray.data.read_parquet(path, override_num_blocks=200).select_columns(["id", "text"])
ds = ds.map_batches(Embed, compute=ray.data.ActorPoolStrategy(size=4), batch_size=64)
```

## Fix safety
There is no automatic fix: most replacements are not one-for-one (`concurrency=(2, 8)` becomes
`ActorPoolStrategy(min_size=2, max_size=8)`, a task pool a `TaskPoolStrategy`).

## References
- [Ray Data: Transforming data (compute strategies)](https://docs.ray.io/en/latest/data/transforming-data.html)
- [Ray Data API: Dataset](https://docs.ray.io/en/latest/data/api/dataset.html)
"""

    VALID = [
        Valid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x', concurrency=4)\nds = ds.select_columns(['a'], concurrency=2)\n",
            "`concurrency=` is current on reads and on select_columns",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(100)\nds = ds.map_batches(f, num_cpus=2, memory=2 * 1024**3, max_calls=10)\n",
            "named remote parameters",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_csv('x.csv', parallelism=-1)\n",
            "parallelism=-1 is the default",
        ),
        Valid(
            "import ray\nfrom ray.data.expressions import col\n\nds = ray.data.range(10).filter(expr=col('id') > 3)\n",
            "an expression, not a string",
        ),
        Valid(
            "import ray\n\nnames = ['a', 'b']\nfor pair in zip(names, names):\n    print(pair)\nds = ray.data.range(3)\n",
            "the builtin zip",
        ),
        Valid(
            "import ray\n\ndef run(frame, other):\n    return frame.zip(other).map_batches(f, concurrency=4)\n",
            "not a dataset ray-lint can trace",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_parquet('x', override_num_blocks=100).select_columns(['a'])\n"
            "ds = ds.map(f, compute=ray.data.ActorPoolStrategy(size=4))\n",
            "the replacements",
        ),
        Valid(
            "import ray\n\nctx = ray.data.DataContext.get_current()\nctx.read_op_min_num_blocks = 400\n",
            "the current setting",
        ),
        Valid(
            "import ray\nfrom packaging.version import Version\n\nRAY_VERSION = Version(ray.__version__)\n\n"
            "def block_refs(ds):\n"
            "    if RAY_VERSION >= Version('2.33'):\n"
            "        return [ref for bundle in ds.iter_internal_ref_bundles() for ref in bundle.block_refs]\n"
            "    return ds.get_internal_block_refs()\n",
            "code kept for Ray before 2.33 sits after a version test (Daft's runner)",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(100)\n"
            "ds = ds.map_batches(f, concurrency=4) if ray.__version__ < '2.51' else ds.map_batches(f, compute=pool)\n",
            "a conditional expression on the version",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\nds = ray.data.range(1000)\nds = ds.map_batches(Embed, concurrency=4, batch_size=64)\n",
            4,
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x', columns=['a', 'b'])\n",
            3,
            note="Ray 2.60 applies it as a select_columns after the read",
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_images('s3://bucket/img', parallelism=400)\n",
            3,
        ),
        Invalid(
            "import ray.data\n\nds = ray.data.range(10)\nfor batch in ds.iter_tf_batches(batch_size=32):\n    print(batch)\n",
            4,
        ),
        Invalid(
            "import ray\nfrom ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy\n\n"
            "ds = ray.data.range(100).map(f, scheduling_strategy='SPREAD')\n",
            4,
            note="only through **ray_remote_args",
        ),
        Invalid(
            "import ray\n\nds = ray.data.range(100).filter(expr='id > 3')\n",
            3,
            note="a string expression",
        ),
        Invalid(
            "import ray\n\nctx = ray.data.DataContext.get_current()\nctx.min_parallelism = 400\n",
            4,
        ),
        Invalid(
            "import ray\n\nds = ray.data.range(100).random_shuffle(num_blocks=10)\n",
            3,
            note="raises in 2.60",
        ),
        Invalid(
            "import ray\n\nds = ray.data.range(100)\nds.write_parquet('/tmp/out', num_rows_per_file=1000)\n",
            4,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        datasets = model.analysis(DatasetFacts)
        for site, method in datasets.calls(frozenset(DEPRECATED_METHODS)):
            self._report(ctx, site.node.func, site.scope, method, f"`Dataset.{method}` is {{}}: use {DEPRECATED_METHODS[method]}")
        for site, method in datasets.calls(UDF_METHODS):
            self._udf_keywords(ctx, site, method)
        for site, method in datasets.calls(frozenset(METHOD_KEYWORDS)):
            self._keywords(ctx, site, method, METHOD_KEYWORDS[method])
        writes = frozenset(tail for tail in model.calls_by_tail if tail.startswith("write_"))
        for site, method in datasets.calls(writes):
            self._keywords(ctx, site, method, WRITE_KEYWORDS)
        for site in model.calls:
            name = model.call_name(site)
            if name is None or not name.startswith(DATASET_SOURCE_PREFIXES):
                continue
            method = name.rsplit(".", 1)[-1]
            keywords = {**SOURCE_KEYWORDS, **(READ_PARQUET_KEYWORDS if method == "read_parquet" else {})}
            self._keywords(ctx, site, method, keywords)
        self._min_parallelism(ctx, model)

    def _udf_keywords(self, ctx: Context, site: CallSite, method: str) -> None:
        for arg in site.node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword in UDF_KEYWORDS:
                self._report(ctx, arg, site.scope, keyword, f"`{method}({keyword}=...)` is {{}}: use {UDF_KEYWORDS[keyword]}")
            elif keyword in REMOTE_ARGS_ONLY:
                self._report(ctx, arg, site.scope, keyword, f"`{keyword}=` goes through `**ray_remote_args`, {{}}")
            elif keyword == "expr" and method == "filter" and isinstance(arg.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                self._report(ctx, arg, site.scope, keyword, "String expressions in `filter(expr=...)` are {}: use `col(...)`")

    def _keywords(self, ctx: Context, site: CallSite, method: str, keywords: dict[str, str]) -> None:
        for name, instead in keywords.items():
            value = keyword_value(site.node, name)
            if value is None or (name == "parallelism" and literal_number(value) == -1):
                continue
            self._report(ctx, value, site.scope, name, f"`{method}({name}=...)` is {{}}: use {instead}")

    def _min_parallelism(self, ctx: Context, model: SemanticModel) -> None:
        """`<DataContext>.min_parallelism = ...`, on `DataContext.get_current()` or a name bound only to it."""
        for store in model.stores:
            target = store.target
            if store.kind != "assign" or not isinstance(target, cst.Attribute) or target.attr.value != "min_parallelism":
                continue
            if _is_data_context(model, target.value, store):
                self._report(
                    ctx, target, store.scope, "min_parallelism", "`DataContext.min_parallelism` is {}: use `read_op_min_num_blocks`"
                )

    def _report(self, ctx: Context, node: cst.CSTNode, scope: Scope, name: str, message: str) -> None:
        """Report `name` where the project runs a Ray that deprecates it, and every Ray it allows has the
        replacement; not in code kept for other versions (`if RAY_VERSION >= ...:`). `message` has a `{}`
        for "deprecated since Ray 2.51"."""
        since = DEPRECATED_SINCE.get(name, CHECKED_RELEASE)
        if not (self.ray_versions.may_run(since) and self.ray_versions.always_runs(since)):
            return
        if ctx.model.version_gated(node, scope):
            return
        when = f"deprecated since Ray {since}" if name in DEPRECATED_SINCE else f"deprecated in Ray {CHECKED_RELEASE}"
        ctx.report(node, message.format(when), facts=DeprecatedName(name))


def _is_data_context(model: SemanticModel, expr: cst.BaseExpression, store: Store) -> bool:
    scope, at = store.scope, store.index
    if isinstance(expr, cst.Name):
        binding = model.sole_assignment(expr.value, scope, at)
        if binding is None or binding.value is None:
            return False
        expr, scope, at = binding.value, binding.scope, binding.index
    return isinstance(expr, cst.Call) and model.qualified_name(expr.func, scope, at) in DATA_CONTEXT_GET_CURRENT
