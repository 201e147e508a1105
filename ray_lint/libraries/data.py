"""Ray Data: which expressions are datasets, and the calls that run user functions on them."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, Scope

DATASET_SOURCE_PREFIXES = ("ray.data.read_", "ray.data.from_", "ray.data.range")
# Dataset methods that return a Dataset (lazy transforms and all-to-all operations).
DATASET_TRANSFORMS = frozenset({
    "map", "map_batches", "flat_map", "filter", "add_column", "drop_columns", "select_columns",
    "rename_columns", "with_column", "random_shuffle", "randomize_block_order", "repartition",
    "materialize", "limit", "union", "zip", "sort", "random_sample", "unique_rows",
})
# Transforms that are barriers: each hands on its blocks only once it has made all of them.
ALL_TO_ALL_TRANSFORMS = frozenset({"random_shuffle", "randomize_block_order", "repartition", "sort"})
UDF_METHODS = frozenset({"map", "map_batches", "flat_map", "filter"})
# Keywords of `Dataset.map_batches` that no other library's `map_batches` (Polars, ...) takes.
RAY_DATA_MAP_BATCHES_KEYWORDS = frozenset({
    "fn_constructor_kwargs", "fn_constructor_args", "num_gpus", "accelerator_type", "compute", "concurrency",
    "batch_format", "zero_copy_batch",
})
# The dataset classes a parameter's annotation may name.
DATASET_CLASSES = frozenset({
    "ray.data.Dataset", "ray.data.dataset.Dataset", "ray.data.MaterializedDataset", "ray.data.dataset.MaterializedDataset",
})


class DatasetFacts:
    """Which expressions hold a `ray.data.Dataset`: a call of `ray.data.read_*`, `from_*` or `range*`,
    a chain of transforms on one, a parameter annotated `ray.data.Dataset`, or a name every binding of
    which is one of those."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._named: dict[int, bool] = {}

    def is_dataset(self, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> bool:
        if depth > 12:
            return False
        if isinstance(expr, cst.Call):
            name = self.model.qualified_name(expr.func, scope, at)
            if name is not None:
                return name.startswith(DATASET_SOURCE_PREFIXES)
            func = expr.func
            return (
                isinstance(func, cst.Attribute)
                and func.attr.value in DATASET_TRANSFORMS
                and self.is_dataset(func.value, scope, at, depth + 1)
            )
        if isinstance(expr, cst.Name):
            binding = self.model.reaching_binding(expr.value, scope, at)
            if binding is not None and binding.kind == "param" and isinstance(binding.node, cst.Param):
                return self._annotated_dataset(binding.node, binding.scope)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return False
            known = self._named.get(id(binding))
            if known is None:
                self._named[id(binding)] = False  # a cycle through names is not a dataset
                value = binding.value if binding.source is None else binding.source
                known = self._named[id(binding)] = binding.value is value and self.is_dataset(
                    value, binding.scope, binding.index, depth + 1
                )
            return known
        return False

    def _annotated_dataset(self, param: cst.Param, scope: Scope) -> bool:
        """`ds: Dataset` (or `"ray.data.Dataset"`): functions that take a dataset say so in their signature.
        The annotation is read in the scope that holds the function (where Python evaluates it)."""
        if param.annotation is None or scope.parent is None:
            return False
        annotation = param.annotation.annotation
        if isinstance(annotation, cst.SimpleString):  # a forward reference
            text = annotation.evaluated_value
            if not isinstance(text, str):
                return False
            try:
                annotation = cst.parse_expression(text)
            except cst.ParserSyntaxError:
                return False
        name = self.model.qualified_name(annotation, scope.parent, scope.start)
        return name in DATASET_CLASSES

    def calls(self, methods: frozenset[str]) -> Iterator[tuple[CallSite, str]]:
        """Calls `ds.<method>(...)` of one of `methods` on a dataset, with the method's name; a `map_batches`
        call with a keyword only Ray Data's takes counts in a module that imports Ray, even where `ds` cannot
        be traced (a parameter, an attribute)."""
        for method in sorted(methods):
            for site in self.model.calls_by_tail.get(method, ()):
                func = site.node.func
                if isinstance(func, cst.Attribute) and (
                    self.is_dataset(func.value, site.scope, site.index) or (method == "map_batches" and self._ray_data_call(site.node))
                ):
                    yield site, method

    def _ray_data_call(self, call: cst.Call) -> bool:
        return self.model.imports_module("ray") and any(
            arg.keyword is not None and arg.keyword.value in RAY_DATA_MAP_BATCHES_KEYWORDS for arg in call.args
        )


def udf_of(call: cst.Call) -> cst.BaseExpression | None:
    """The function or class a `map`/`map_batches`/`flat_map`/`filter` call runs: its first positional
    argument, or `fn=`."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "fn":
            return arg.value
    return None


# Model text (for experiments; nothing here runs) that collects what Ray Data logs at WARNING into `logged`:
# Ray Data says most of what it warns about through its logger, not through Python's warnings.
DATA_LOG_CAPTURE = """\
import logging

logged = []
handler = logging.Handler(logging.WARNING)
handler.emit = lambda record: logged.append(record.getMessage())
logging.getLogger("ray.data").addHandler(handler)
"""
