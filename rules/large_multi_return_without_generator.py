"""RAY037 large-multi-return-without-generator: a multi-return task builds several large values and returns them together."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Run, Subject, Variant, Verdict, confirmed, script, timed
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, LARGE_MARKER, FunctionInfo, Scope, iter_subtree, literal_number
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import LARGE_OBJECT_OPTION, Size, size_of, threshold_bytes

# Text a file needs for `size_of` to fold anything in it: the allocators `ray_lint.sizes` knows, the
# repetitions `b"x" * n` / `[0] * n`, and the `# ray-lint: large` marker (as in RAY030).
ALLOCATION_TOKENS = (
    "zeros", "ones(", "ones_like", "empty(", "empty_like", "full(", "full_like", "rand(", "randn(", "randint(",
    "random(", "random_sample(", "uniform(", "normal(", "bytes(", "bytearray(", "' *", '" *', "] *", "* [",
    "*[", "* b'", '* b"', "* '", '* "', LARGE_MARKER,
)


@dataclass(frozen=True)
class _Returned:
    """Large values one `return` hands back together."""

    node: cst.Return
    sizes: tuple[Size, ...]  # of each large value; a comprehension or a filled list gives one for all its elements
    count: int | None  # how many values the `return` gives, when the code says
    per_element: bool = False  # `sizes` holds one size that every element has


@dataclass(frozen=True)
class LargeReturnFacts:
    """What the experiment needs of the flagged `return`."""

    large_values: int | None  # how many large values it hands back together, when the code says


# The worker's Python heap, traced from the actor's start: numpy, `bytes` and pickle buffers all count.
_MAKER = """
import tracemalloc

@ray.remote
class Maker:
    def __init__(self):
        tracemalloc.start()

    def reset(self):
        tracemalloc.reset_peak()
        return tracemalloc.get_traced_memory()[0]

    def peak(self):
        return tracemalloc.get_traced_memory()[1]

    @ray.method(num_returns={count})
    def make(self):
{body}

maker = Maker.remote()
base = ray.get(maker.reset.remote())  # the actor up, and its heap measured, before the clock starts
"""
_MADE = """
refs = maker.make.remote()
ready, _ = ray.wait(refs, num_returns=len(refs), timeout=30, fetch_local=False)
return len(ready)
"""
_PEAK = '__ray_lint_evidence__ = {"peak_mb": (ray.get(maker.peak.remote()) - base) / 1e6}\n'


class LargeMultiReturnExperiment(Experiment[LargeReturnFacts]):
    """An actor method with `num_returns=N` that returns N values of 20 MB at once against the same method
    yielding them (the fix), judged on the peak of the worker's Python heap (`tracemalloc`) during the
    call. N is the code's count of large values (at most 6), or 4 when the code does not say."""

    facts_type = LargeReturnFacts
    shares_driver = True
    rounds = 1  # the heap's peak does not vary by run
    MB = 20
    ASSUMED = 4
    MAX_VALUES = 6  # 120 MB in the worker's heap at most

    def plan(self, subject: Subject) -> Plan:
        known = self.facts(subject).large_values
        count = min(known, self.MAX_VALUES) if known is not None else self.ASSUMED
        value = f"bytes({self.MB} * 10**6)"
        at_once = f"        return [{value} for _ in range({count})]"
        one_by_one = f"        for _ in range({count}):\n            yield {value}"
        if known is None:
            shape = f"{count} values of {self.MB} MB (count not in the code: {self.ASSUMED} assumed)"
        else:
            shape = f"{count} values of {self.MB} MB{'' if count == known else f' (of the {known} in the code)'}"
        return Plan(
            Variant("returned at once", script(_MAKER.format(count=count, body=at_once) + timed(_MADE) + _PEAK)),
            Variant("yielded", script(_MAKER.format(count=count, body=one_by_one) + timed(_MADE) + _PEAK)),
            "modelled",
            shape,
        )

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """On the worker's peak heap, not on time: a generator makes the same values one after another, so
        it saves memory (the OOM risk the rule is about), not seconds; the wall times are shown beside."""
        peaks = [_median_peak(runs) for runs in (a, b)]
        if None in peaks or not peaks[1]:
            verdict.summary = "the variants did not report their worker's heap"
            return verdict
        peak_a, peak_b = peaks
        verdict.ratio = peak_a / peak_b
        verdict.same_results = a[0].returned == b[0].returned
        numbers = (
            f"the worker's heap peaked at {peak_a:.0f} MB ({plan.a.label}) vs {peak_b:.0f} MB ({plan.b.label}) "
            f"({verdict.ratio:.2f}×); wall {statistics.median(r.wall_s for r in a):.2f} s vs {statistics.median(r.wall_s for r in b):.2f} s"
        )
        if verdict.ratio >= self.threshold:
            verdict.status, verdict.summary = confirmed(plan), numbers
        else:
            verdict.status = "not reproduced"
            verdict.summary = numbers + self.why_not(subject, plan, a, b)
        return verdict

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        if self.facts(subject).large_values == 2:
            return (
                ": Ray 2.60 keeps the value a generator yielded last alive until the next one is made, "
                "so two values at once are what the generator holds too"
            )
        return f": below the {self.threshold:.1f}× threshold"


def _median_peak(runs: list[Run]) -> float | None:
    peaks = [r.evidence["peak_mb"] for r in runs if isinstance(r.evidence, dict) and "peak_mb" in r.evidence]
    return statistics.median(peaks) if peaks else None


class LargeMultiReturnWithoutGenerator(Rule):
    code = "RAY037"
    name = "large-multi-return-without-generator"
    message = "A task with `num_returns` builds several large values and returns them all at once"
    severity = Severity.WARNING
    category = "resource"
    experiment = LargeMultiReturnExperiment()
    tokens = ("num_returns",)
    also_tokens = ALLOCATION_TOKENS
    options = (LARGE_OBJECT_OPTION,)
    docs = """
## What it does
Finds a remote function with `num_returns` set (in `@ray.remote(...)` or `.options(...)`, or an
actor method with `@ray.method(num_returns=...)`) whose body is not a generator and returns, in
one `return`:
- a tuple or list of two or more values that are certainly large (allocations with literal
  shapes of at least `large-object-mb` megabytes, 10 by default, or values marked
  `# ray-lint: large`), each made after the previous one is finished;
- a list comprehension whose element is such an allocation;
- a list filled in a loop with one such allocation per iteration, used for nothing else.

## Why is this bad?
A task's return values are stored in the object store only when the function returns, so a task
that returns `N` values keeps all `N` in its worker's heap at the same time. With large values
this is `N` times the memory that one value needs, and the worker can be killed by the OOM
killer. A generator (`yield` each value) works with the same `num_returns=N` and the same caller
code: Ray stores each value as it is yielded, and the worker can free it before it makes the
next. Ray's "Pattern: Using generators to reduce heap memory usage" shows a task returning 100
arrays of 100 MB failing with `WorkerCrashedError` and the generator version finishing; with
5 values of 50 MB the heap peaks near 250 MB for the list and 50 MB for the generator.

ray-lint is silent when:
- the values are small or their size is not in the code (a function's result, a file load);
- `num_returns` is not set, is 1, or is `"dynamic"` / `"streaming"` (then the task must be a
  generator already), or the function already yields;
- the values are made together: one is read after the next one is made (filled side by side,
  or one computed from another), so a generator could not free the first before the second;
- the same object is returned twice, or the list is used for anything but the appends and the
  `return`.

A `num_returns` given as a variable (`.options(num_returns=n)`) counts as more than one.

## Example
```python
@ray.remote(num_returns=3)
def make_shards():
    return [np.random.rand(2000, 2000) for _ in range(3)]  # 3 × 32 MB at once
```

## Use instead
```python
@ray.remote(num_returns=3)
def make_shards():
    for _ in range(3):
        yield np.random.rand(2000, 2000)  # stored and freed one at a time
```
The caller is unchanged: `a, b, c = make_shards.remote()`.

## Fix safety
There is no automatic fix: turning the body into a generator changes when each value is made and
when an exception in the task is raised relative to the values already stored.

## Options
- `large-object-mb`: the size, in megabytes, from which a value counts as large.

## References
- [Pattern: Using generators to reduce heap memory usage](https://docs.ray.io/en/latest/ray-core/patterns/generators.html)
- [Ray generators](https://docs.ray.io/en/latest/ray-core/ray-generator.html)
- [Multiple returns](https://docs.ray.io/en/latest/ray-core/tasks.html#multiple-returns)
"""

    VALID = [
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=3)\ndef make_shards():\n"
            "    for _ in range(3):\n        yield np.random.rand(2000, 2000)\n",
            "already a generator",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef stats():\n"
            "    return np.zeros(100), np.zeros(100)\n",
            "small values",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote\ndef pair():\n"
            "    return np.zeros((2000, 2000)), np.zeros((2000, 2000))\n",
            "no num_returns: one return value",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef split(path):\n"
            "    data = np.load(path)\n    return data[:1000], data[1000:]\n",
            "sizes not in the code",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef simulate(steps):\n"
            "    pos = np.zeros((2000, 2000))\n    vel = np.zeros((2000, 2000))\n    for _ in range(steps):\n"
            "        pos[:, 0] = vel[:, 1]\n        vel[:, 1] = pos[:, 0] * 0.5\n    return pos, vel\n",
            "made together: both are updated side by side",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef scaled():\n"
            "    base = np.random.rand(2000, 2000)\n    other = base.copy()\n    return base, other\n",
            "the second is computed from the first",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns='streaming')\ndef shards():\n"
            "    return [np.zeros((2000, 2000)) for _ in range(3)]\n",
            "a streaming num_returns: not a multi-return",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef twice():\n"
            "    block = np.zeros((2000, 2000))\n    return block, block\n",
            "the same object twice",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=4)\ndef shards():\n    out = []\n"
            "    for i in range(4):\n        out.append(np.zeros((2000, 2000)))\n    normalize(out)\n    return out\n",
            "the list is used as a whole before it is returned",
        ),
        Valid(
            "import numpy as np\n\n@remote(num_returns=2)\ndef pair():\n"
            "    return np.zeros((2000, 2000)), np.zeros((2000, 2000))\n",
            "no `import ray`: `remote` is not Ray's",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=3)\ndef make_shards():\n"
            "    return [np.random.rand(2000, 2000) for _ in range(3)]\n",
            6,
            note="a comprehension of 32 MB arrays",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote(max_retries=0)\ndef large_values(num_returns):\n    return [\n"
            "        np.random.randint(np.iinfo(np.int8).max, size=(100_000_000, 1), dtype=np.int8)\n"
            "        for _ in range(num_returns)\n    ]\n\n"
            "refs = large_values.options(num_returns=num_returns, max_retries=0).remote(num_returns)\n",
            6,
            note="the docs' example: num_returns given at the call",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_returns=2)\ndef init_tables():\n"
            "    keys = torch.randn(4096, 1024)\n    keys[:, 0] = 0\n    values = torch.zeros(4096, 1024)\n    return keys, values\n",
            9,
            note="named values, each finished before the next is made",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=4)\ndef partition(seed):\n    parts = []\n"
            "    for i in range(4):\n        part = np.empty((1000, 2000))\n        part.fill(seed + i)\n"
            "        parts.append(part)\n    return parts\n",
            11,
            note="a list filled in a loop",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote\nclass Loader:\n    @ray.method(num_returns=2)\n"
            "    def load(self):\n        return bytes(20 * 10**6), bytes(20 * 10**6)\n",
            8,
            note="an actor method",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=2)\ndef restore(path):\n"
            "    weights = read_weights(path)  # ray-lint: large\n    optimizer = read_optimizer(path)  # ray-lint: large\n"
            "    return weights, optimizer\n",
            8,
            note="values marked large",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote(num_returns=3)\ndef load_split():\n    meta = {'rows': 2000}\n"
            "    return np.zeros((2000, 1000)), np.ones((2000, 1000)), meta\n",
            7,
            note="two large values beside a small one",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        threshold = threshold_bytes(self.settings)
        for function, values in _multi_return_functions(model):
            if function.is_generator:
                continue
            for returned in _large_returns(model, function, threshold):
                count = returned.count
                if count is None and len(values) == 1 and isinstance(values[0], int):
                    count = values[0]
                if isinstance(count, int) and not (count >= 2 and all(v == count for v in values if isinstance(v, int))):
                    continue
                large = count if returned.per_element else len(returned.sizes)
                ctx.report(
                    returned.node,
                    f"`{function.node.name.value}` returns {_describe(returned, count)} at once",
                    facts=LargeReturnFacts(large),
                )


def _describe(returned: _Returned, count: int | None) -> str:
    """"3 values of about 32 MB each", "2 large values (about 17 MB, about 4.2 MB)"."""
    descriptions = [size.describe() for size in returned.sizes]
    if returned.per_element:
        values = f"{count} values" if count is not None else "several values"
    else:
        values = f"{len(descriptions)} large values"
    if len(set(descriptions)) > 1:
        return f"{values} ({', '.join(descriptions)})"
    if descriptions[0].startswith("about"):
        return f"{values} of {descriptions[0]} each"
    return f"{values} ({descriptions[0]})"


def _multi_return_functions(model: SemanticModel) -> Iterator[tuple[FunctionInfo, list[int | str]]]:
    """Remote functions and actor methods with `num_returns` set to more than one: each with its values (a
    literal count, or "variable" for an expression)."""
    for remote in model.remote_defs:
        if remote.kind == "task":
            function = model.function_info(remote.target)  # type: ignore[arg-type]
            values = _counts(list(remote.option_values("num_returns")))
            if function is not None and values:
                yield function, values
            continue
        if remote.cls is None:
            continue
        for method in remote.cls.methods:
            given = [
                arg.value
                for decorator in method.node.decorators
                if isinstance(decorator.decorator, cst.Call)
                and model.qualified_name(decorator.decorator.func, method.parent_scope, AFTER_ALL) == "ray.method"
                for arg in decorator.decorator.args
                if arg.keyword is not None and arg.keyword.value == "num_returns"
            ]
            values = _counts(given)
            if values:
                yield method, values


def _counts(given: list[cst.BaseExpression]) -> list[int | str]:
    """The `num_returns` values of a function when they all ask for several values: literal counts above one,
    or "variable" for an expression; empty when none is given, or when one is 1, `"dynamic"` or `"streaming"`."""
    values: list[int | str] = []
    for expr in given:
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return []
        number = literal_number(expr)
        if number is None:
            values.append("variable")
        elif number >= 2 and number == int(number):
            values.append(int(number))
        else:
            return []
    return values


def _large_returns(model: SemanticModel, function: FunctionInfo, threshold: int) -> Iterator[_Returned]:
    for node in iter_subtree(function.node.body, into_functions=False):
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        value = node.value
        found: _Returned | None = None
        if isinstance(value, (cst.Tuple, cst.List)):
            found = _large_elements(model, function, node, value, threshold)
        elif isinstance(value, cst.ListComp):
            found = _large_comprehension(model, node, value, threshold)
        elif isinstance(value, cst.Name):
            found = _large_filled_list(model, function, node, value, threshold)
        if found is not None:
            yield found


def _large_elements(
    model: SemanticModel, function: FunctionInfo, node: cst.Return, value: cst.Tuple | cst.List, threshold: int
) -> _Returned | None:
    """`return a, b, c`: two or more distinct large values, each finished before the next is made."""
    if any(not isinstance(element, cst.Element) for element in value.elements):
        return None  # a starred element: the count is not in the code
    sizes: list[Size] = []
    named: dict[str, cst.CSTNode] = {}  # name -> the statement that makes it
    for element in value.elements:
        expr = element.value
        if isinstance(expr, cst.Name):
            if expr.value in named:
                return None  # the same object twice
            bindings = function.scope.bindings.get(expr.value, [])
            if len(bindings) != 1 or bindings[0].statement is None:
                continue
            size = size_of(model, expr, function.scope, AFTER_ALL)
            if size is not None and size.at_least(threshold):
                named[expr.value] = bindings[0].statement
                sizes.append(size)
        elif isinstance(expr, (cst.Call, cst.BinaryOperation)):
            site = model.call_site(expr) if isinstance(expr, cst.Call) else None
            size = size_of(model, expr, function.scope, site.index if site is not None else AFTER_ALL)
            if size is not None and size.at_least(threshold):
                sizes.append(size)
    if len(sizes) < 2 or not _made_apart(function, node, named):
        return None
    return _Returned(node, tuple(sizes), len(value.elements))


def _made_apart(function: FunctionInfo, returned: cst.Return, named: dict[str, cst.CSTNode]) -> bool:
    """Whether no named value is read after a later one starts to be made (outside the `return`): then a
    generator could make, yield and free each in turn."""
    maker = {id(statement): name for name, statement in named.items()}
    in_return = {id(node) for node in iter_subtree(returned)}
    made: list[str] = []
    for node in iter_subtree(function.node.body):
        if id(node) in in_return:
            continue
        name = maker.get(id(node))
        if name is not None:
            made.append(name)
        elif isinstance(node, cst.Name) and node.value in named and node.value in made and made[-1] != node.value:
            return False
    return True


def _large_comprehension(model: SemanticModel, node: cst.Return, value: cst.ListComp, threshold: int) -> _Returned | None:
    """`return [np.zeros(...) for _ in range(n)]`: a new large allocation per element."""
    if not isinstance(value.elt, (cst.Call, cst.BinaryOperation)):
        return None  # a name would be the same object every time
    scope = _scope_of(model, value)
    if scope is None:
        return None
    size = size_of(model, value.elt, scope, AFTER_ALL)
    if size is None or not size.at_least(threshold):
        return None
    loop = next((loop for loop in model.loops if loop.node is value), None)
    count = None
    if loop is not None and value.for_in.inner_for_in is None and not value.for_in.ifs:
        count = model.literal_iterations(loop)
    return _Returned(node, (size,), count, per_element=True)


def _large_filled_list(
    model: SemanticModel, function: FunctionInfo, node: cst.Return, value: cst.Name, threshold: int
) -> _Returned | None:
    """`out = []`, one `out.append(alloc)` per iteration of a loop, `return out`, and `out` used for nothing else."""
    name = value.value
    bindings = function.scope.bindings.get(name, [])
    if len(bindings) != 1 or not isinstance(bindings[0].value, cst.List) or bindings[0].value.elements:
        return None
    uses = sum(1 for n in iter_subtree(function.node.body) if isinstance(n, cst.Name) and n.value == name)
    if uses != 3:  # the binding, the append and the return
        return None
    appends = [
        site
        for site in model.calls_by_tail.get("append", ())
        if isinstance(site.node.func, cst.Attribute)
        and isinstance(site.node.func.value, cst.Name)
        and site.node.func.value.value == name
        and site.scope is function.scope
    ]
    if len(appends) != 1 or appends[0].loop is None or len(appends[0].node.args) != 1:
        return None
    site = appends[0]
    appended = site.node.args[0].value
    if isinstance(appended, cst.Name):
        made = model.reaching_binding(appended.value, site.scope, site.index)
        if made is None or not site.loop.contains_index(made.index):  # type: ignore[union-attr]
            return None  # bound before the loop: the same object every time
    elif not isinstance(appended, (cst.Call, cst.BinaryOperation)):
        return None
    size = size_of(model, appended, site.scope, site.index)
    if size is None or not size.at_least(threshold):
        return None
    return _Returned(node, (size,), model.literal_iterations(site.loop), per_element=True)  # type: ignore[arg-type]


def _scope_of(model: SemanticModel, node: cst.CSTNode) -> Scope | None:
    return next((scope for scope in model.scopes if scope.node is node), None)

