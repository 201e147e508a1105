"""RAY112 filter-fn-instead-of-expr: `ds.filter(lambda row: row["col"] > 3)`, a Python predicate that a
vectorized expression (`ds.filter(expr=col("col") > 3)`) could replace."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import DATA_TOKENS
from ray_lint.libraries.data import DatasetFacts, udf_of
from ray_lint.python_model import literal_number, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

# Comparisons an expression has (`ray.data.expressions.Expr`): `in` / `not in` become `is_in` / `not_in`.
COMPARISONS = (
    cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.In, cst.NotIn,
)
DATA_SETUP = "import ray.data\nray.data.DataContext.get_current().enable_progress_bars = False\n"


class FilterExprExperiment(Experiment[None]):
    """`filter` of a million rows by a Python lambda against the same predicate as an expression; Ray's own
    "Use 'expr' instead of 'fn'" warning, when A logs it, is quoted. It needs nothing of the finding."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # the same tasks run in both: B saves the per-row Python calls
    ROWS = 600_000

    def plan(self, subject: Subject) -> Plan:
        # A small pipeline first, untimed: Ray Data's first run in a process starts its executor and the read
        # workers, seconds that would otherwise fall on one variant and drown the predicate's cost.
        imports = DATA_SETUP + "from ray.data.expressions import col\n\nray.data.range(1000).filter(expr=col('id') > 0).count()\n\n"
        by_fn = f"return ray.data.range({self.ROWS}).filter(lambda row: row['id'] % 3 == 0).count()"
        by_expr = f"return ray.data.range({self.ROWS}).filter(expr=col('id') % 3 == 0).count()"
        return Plan(
            Variant("lambda predicate", script(imports + timed(by_fn))),
            Variant("expression", script(imports + timed(by_expr))),
            "modelled",
            f"filtering {self.ROWS:,} rows by `row['id'] % 3 == 0`",
        )


class FilterFnInsteadOfExpr(Rule):
    code = "RAY112"
    name = "filter-fn-instead-of-expr"
    message = "A row-by-row Python predicate in `Dataset.filter` that a vectorized expression could replace"
    severity = Severity.INFO
    category = "perf"
    tokens = (".filter(",)
    also_tokens = DATA_TOKENS
    anchor_tokens = ("lambda",)  # only lambda predicates are judged
    experiment = FilterExprExperiment()
    docs = """
## What it does
Finds `ds.filter(lambda row: ...)` (or `fn=lambda row: ...`) on a Ray Data dataset where the
lambda only compares columns of the row with each other or with literals: `row["col"] > 3`,
`row["kind"] == "click"`, `row["lang"] in ("en", "de")`, joined by `and`, `or` and `not`.
Each of those has an expression form: `col("col") > 3`, `col("lang").is_in(["en", "de"])`,
`&`, `|`, `~`.

## Why is this bad?
A `fn` predicate runs in Python once per row: Ray Data turns each block into row dicts, calls the
lambda, and rebuilds the block. An `expr` predicate is evaluated by Arrow on whole columns, and
Ray Data can push it down into the read (Parquet row-group pruning). Ray 2.60 itself warns on
every `filter(fn=...)`: "Use 'expr' instead of 'fn' when possible for performant filters"
(`ray/data/dataset.py`), but not where or how. Measured on a 2-core machine with Ray 2.60,
filtering a million rows by `row["id"] % 3 == 0`: 3.2 s with the lambda, 0.2 s with
`expr=col("id") % 3 == 0` (16×).

ray-lint is silent for predicates an expression cannot state or might state differently:
calls (`row["text"].startswith("a")`, `len(...)`), arithmetic (Arrow's integer division and
null handling differ from Python's), reads of other variables, named functions and callable
classes, and `filter(expr=...)` itself.

## Example
```python
ds = ds.filter(lambda row: row["score"] >= 0.5 and row["lang"] in ("en", "de"))
```

## Use instead
```python
from ray.data.expressions import col

ds = ds.filter(expr=(col("score") >= 0.5) & col("lang").is_in(["en", "de"]))
```

## Fix safety
There is no automatic fix: expressions use `&`, `|` and `~`, whose precedence differs from
`and`, `or` and `not`, and a column holding nulls is filtered out by an expression where the
lambda would raise.

## References
- [Ray Data: Transforming data (filtering rows)](https://docs.ray.io/en/latest/data/transforming-data.html)
- [Ray Data API: Expressions](https://docs.ray.io/en/latest/data/api/expressions.html)
"""

    VALID = [
        Valid(
            "import ray\nfrom ray.data.expressions import col\n\nds = ray.data.range(10).filter(expr=col('id') > 3)\n",
            "already an expression",
        ),
        Valid(
            "import ray\n\nds = ray.data.read_json('x.jsonl').filter(lambda row: row['text'].startswith('a'))\n",
            "a method call: no expression",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).filter(lambda row: len(row['tokens']) > 3)\n",
            "a function call",
        ),
        Valid(
            "import ray\n\ndef keep(row):\n    return row['id'] > 3\n\nds = ray.data.range(10).filter(keep)\n",
            "a named function may grow beyond a comparison",
        ),
        Valid(
            "import ray\n\nlimit = 3\nds = ray.data.range(10).filter(lambda row: row['id'] > limit)\n",
            "reads a variable",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).filter(lambda row: row['id'] / 2 > 3)\n",
            "arithmetic: Arrow's division differs",
        ),
        Valid(
            "import pandas as pd\n\nframe = pd.DataFrame({'a': [1]})\nrows = filter(lambda row: row['a'] > 3, frame.to_dict('records'))\n",
            "the builtin filter",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\nds = ray.data.range(1000).filter(lambda row: row['id'] > 3)\n", 3),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/events')\n"
            "clicks = ds.filter(lambda r: r['kind'] == 'click' and r['score'] >= 0.5)\n",
            4,
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_csv('x.csv')\nds = ds.filter(fn=lambda row: row['lang'] in ('en', 'de'))\n",
            4,
            note="membership in a literal tuple: is_in",
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_csv('x.csv').filter(lambda row: not row['deleted'] == 1)\n",
            3,
        ),
        Invalid(
            "from ray import data\n\nds = data.read_parquet('x').filter(lambda row: row['end'] > row['start'])\n",
            3,
            note="two columns",
        ),
        Invalid(
            "import ray\n\nds = ray.data.range(100).map(lambda r: r).filter(lambda row: -1 < row['id'] <= 50)\n",
            3,
            note="a chained comparison",
        ),
    ]

    def check(self, ctx: Context) -> None:
        for site, _ in ctx.model.analysis(DatasetFacts).calls(frozenset({"filter"})):
            udf = udf_of(site.node)
            if not isinstance(udf, cst.Lambda) or not _expressible(udf):
                continue
            ctx.report(udf, "This `filter` lambda only compares columns: `filter(expr=...)` is vectorized")


def _expressible(udf: cst.Lambda) -> bool:
    """Whether the lambda's one parameter is only read as `row["col"]` in comparisons, with literals, joined
    by `and`, `or` and `not`."""
    params = udf.params
    if len(params.params) != 1 or params.posonly_params or params.kwonly_params or params.star_kwarg is not None:
        return False
    if isinstance(params.star_arg, cst.Param):
        return False
    return _predicate(udf.body, params.params[0].name.value)


def _predicate(expr: cst.BaseExpression, row: str) -> bool:
    if isinstance(expr, cst.BooleanOperation):
        return _predicate(expr.left, row) and _predicate(expr.right, row)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _predicate(expr.expression, row)
    if not isinstance(expr, cst.Comparison) or not all(isinstance(target.operator, COMPARISONS) for target in expr.comparisons):
        return False
    operands = [expr.left, *(target.comparator for target in expr.comparisons)]
    columns = [operand for operand in operands if _column(operand, row)]
    if not columns:
        return False
    for target, left in zip(expr.comparisons, operands):
        right = target.comparator
        if isinstance(target.operator, (cst.In, cst.NotIn)):
            if not (_column(left, row) and _literal_collection(right)):
                return False
        elif not all(_column(side, row) or _literal(side) for side in (left, right)):
            return False
    return True


def _column(expr: cst.BaseExpression, row: str) -> bool:
    """`row["col"]`: one string subscript of the lambda's parameter."""
    if not isinstance(expr, cst.Subscript) or not isinstance(expr.value, cst.Name) or expr.value.value != row:
        return False
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return False
    return literal_string(expr.slice[0].slice.value) is not None


def _literal(expr: cst.BaseExpression) -> bool:
    if literal_number(expr) is not None or literal_string(expr) is not None:
        return True
    return isinstance(expr, cst.Name) and expr.value in ("True", "False")


def _literal_collection(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Tuple, cst.List, cst.Set)) and all(
        isinstance(element, cst.Element) and _literal(element.value) for element in expr.elements
    )
