"""RAY020 too-fine-grained-tasks: a task that does almost no work, submitted once per element of a big loop."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.actor_state import mutates_state
from ray_lint.analyses.loops import SLEEPS, enclosing_iterations, exits_in_first_iteration, sleeps_in
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Run, Subject, Variant, Verdict, script, timed
from ray_lint.model import RemoteDef, SemanticModel, Submission
from ray_lint.python_model import CallSite, FunctionInfo, Loop, block_statements, is_true, literal_number, names_read
from ray_lint.rule import Context, Invalid, Option, Rule, Valid

# Builtins that cost about as much as an arithmetic operation on the scalars a tiny task gets.
CHEAP_BUILTINS = frozenset(
    {"abs", "bool", "int", "float", "complex", "str", "round", "len", "isinstance", "issubclass", "hash", "divmod", "chr", "ord", "pow"}
)
# `min(a, b)` and `max(a, b)` compare scalars; with one argument they scan a collection.
PAIRWISE_BUILTINS = frozenset({"min", "max"})
CHEAP_MATH = frozenset(
    {
        "math.sqrt", "math.exp", "math.log", "math.log2", "math.log10", "math.log1p", "math.sin", "math.cos",
        "math.tan", "math.atan", "math.atan2", "math.floor", "math.ceil", "math.fabs", "math.pow", "math.hypot",
        "math.isclose", "math.isnan", "math.isinf", "math.isfinite", "math.trunc", "math.copysign", "math.radians",
        "math.degrees", "math.tanh",
    }
)
# Parameter names that say the task gets a batch or an array, whose arithmetic is real work.
BATCH_WORDS = frozenset(
    {
        "batch", "batches", "chunk", "chunks", "shard", "shards", "block", "blocks", "partition", "partitions",
        "split", "splits", "part", "parts", "array", "arrays", "arr", "matrix", "mat", "tensor", "tensors", "df",
        "frame", "dataframe", "data", "dataset", "image", "images", "img", "imgs", "rows", "records", "items",
        "values", "elements", "lst", "list", "vec", "vector", "vectors", "buffer", "buf", "texts", "docs",
        "documents", "samples", "points", "xs", "ys", "nums", "numbers", "window", "segment", "page", "tile",
        "tiles", "pixels", "grid", "sequence", "seq", "series", "subset", "group", "groups",
    }
)
_CHEAP_OPERATORS = (
    cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.BitAnd, cst.BitOr,
    cst.BitXor, cst.RightShift,
)
_BOUNDED_OPERATORS = (cst.Power, cst.LeftShift)  # cheap with a small literal right-hand side
# Methods of a list, dict or set that touch one item (not `pop(0)`, `insert`, `remove`: they shift or scan).
CHEAP_CONTAINER_METHODS = frozenset({"append", "add", "get", "setdefault"})
_LEAVES = (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)
_CONTAINERS = (cst.Tuple, cst.List, cst.Set)


def _varies_per_iteration(model: SemanticModel, site: CallSite) -> bool:
    """Whether the call's arguments read a name the loops around it rebind: work per element. The same
    call repeated (`[f.remote() for _ in range(n)]`) is a benchmark, a stress test or a warm-up."""
    inputs = set().union(set(), *(names_read(arg.value) for arg in site.node.args))
    loop: Loop | None = site.loop
    while loop is not None:
        if inputs & model.names_bound_in(loop):
            return True
        loop = loop.parent
    return False


def _passes_slice(site: CallSite) -> bool:
    """Whether an argument is a slice (`data[start:start + 1000]`): each call carries a chunk, the batched fix."""
    return any(
        isinstance(arg.value, cst.Subscript) and any(isinstance(e.slice, cst.Slice) for e in arg.value.slice)
        for arg in site.node.args
    )


def _words(name: str) -> list[str]:
    return [word.lower() for word in re.split(r"_|(?<=[a-z])(?=[A-Z])|\d+", name) if word]


def _literal_collection(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, _CONTAINERS) and all(isinstance(e.value, _LEAVES) for e in expr.elements)


class _TinyBody:
    """Decides whether a function body is provably tiny: a few simple statements of scalar arithmetic,
    comparisons and cheap builtins, with no loops, no I/O and no call that may do real work."""

    HELPER_DEPTH = 1  # how many levels of plain helper functions of the module to look into

    def __init__(self, model: SemanticModel, max_statements: int) -> None:
        self.model = model
        self.max_statements = max_statements

    def function(self, info: FunctionInfo, depth: int = 0) -> bool:
        node = info.node
        if node.asynchronous is not None:
            return False
        params = node.params
        if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
            return False
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None and not isinstance(param.default, _LEAVES):
                return False
            if any(word in BATCH_WORDS for word in _words(param.name.value)):
                return False
        statements = block_statements(node.body)
        if statements and _is_docstring(statements[0]):
            statements = statements[1:]
        count = self._statements(statements, info, depth)
        return count is not None and 0 < count <= self.max_statements

    def _statements(self, statements: list[cst.CSTNode], info: FunctionInfo, depth: int) -> int | None:
        """How many simple statements, or None if one of them is not cheap."""
        total = 0
        for statement in statements:
            if isinstance(statement, cst.If):
                if not self._expression(statement.test, info, depth):
                    return None
                orelse = statement.orelse
                branches = [block_statements(statement.body)]
                if isinstance(orelse, cst.If):
                    branches.append([orelse])
                elif orelse is not None:
                    branches.append(block_statements(orelse.body))
                for branch in branches:
                    count = self._statements(branch, info, depth)
                    if count is None:
                        return None
                    total += count
                continue
            if isinstance(statement, cst.Pass):
                continue
            if isinstance(statement, cst.Return):
                expressions = [statement.value] if statement.value is not None else []
            elif isinstance(statement, cst.Assign):
                if not all(self._cheap_target(t.target, info, depth) for t in statement.targets):
                    return None
                expressions = [statement.value]
            elif isinstance(statement, (cst.AugAssign, cst.AnnAssign)):
                if not self._cheap_target(statement.target, info, depth) or statement.value is None:
                    return None
                expressions = [statement.value]
            elif isinstance(statement, cst.Assert):
                expressions = [statement.test]
            elif isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
                expressions = [statement.value]  # a cheap call as a statement: a sleep under a millisecond
            else:
                return None
            if not all(self._expression(e, info, depth) for e in expressions):
                return None
            total += 1
        return total

    def _cheap_target(self, target: cst.BaseExpression, info: FunctionInfo, depth: int) -> bool:
        """A local name; in an actor method also `self.x`, or `self.x[k]` when `self.x` is a literal container."""
        if isinstance(target, cst.Name):
            return True
        if _self_attribute(target, info) is not None:
            return True
        return (
            isinstance(target, cst.Subscript)
            and self._literal_container(target.value, info)
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
            and self._expression(target.slice[0].slice.value, info, depth)
        )

    def _literal_container(self, expr: cst.BaseExpression, info: FunctionInfo) -> bool:
        """`self.x` of an actor whose class only ever sets `x` to a literal list, dict or set (or an empty
        `list()`, `dict()`, `set()`): adding or reading one item of it is a cheap operation."""
        attribute = _self_attribute(expr, info)
        if attribute is None or info.owner is None:
            return False
        stores = [s for s in self.model.self_stores(info.owner).get(attribute, ()) if isinstance(s.target, cst.Attribute)]
        return bool(stores) and all(s.kind == "assign" and s.value is not None and _empty_or_literal(s.value) for s in stores)

    def _expression(self, expr: cst.BaseExpression, info: FunctionInfo, depth: int) -> bool:
        stack: list[cst.BaseExpression] = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, _LEAVES):
                continue
            if isinstance(node, cst.BinaryOperation):
                if isinstance(node.operator, _BOUNDED_OPERATORS):
                    exponent = literal_number(node.right)
                    if exponent is None or abs(exponent) > 64:
                        return False
                elif not isinstance(node.operator, _CHEAP_OPERATORS):
                    return False  # `@`: a matrix product
                stack += [node.left, node.right]
            elif isinstance(node, cst.UnaryOperation):
                stack.append(node.expression)
            elif isinstance(node, cst.BooleanOperation):
                stack += [node.left, node.right]
            elif isinstance(node, cst.Comparison):
                for target in node.comparisons:
                    if isinstance(target.operator, (cst.In, cst.NotIn)) and not _literal_collection(target.comparator):
                        return False  # a membership test scans a collection of unknown size
                    stack.append(target.comparator)
                stack.append(node.left)
            elif isinstance(node, cst.IfExp):
                stack += [node.test, node.body, node.orelse]
            elif isinstance(node, _CONTAINERS):
                for element in node.elements:
                    if isinstance(element, cst.StarredElement):
                        return False
                    stack.append(element.value)
            elif isinstance(node, cst.Dict):
                for item in node.elements:
                    if not isinstance(item, cst.DictElement):
                        return False
                    stack += [item.key, item.value]
            elif isinstance(node, cst.Attribute):
                stack.append(node.value)
            elif isinstance(node, cst.Subscript):
                if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                    return False  # a slice copies
                stack += [node.value, node.slice[0].slice.value]
            elif isinstance(node, cst.FormattedString):
                stack += [part.expression for part in node.parts if isinstance(part, cst.FormattedStringExpression)]
            elif isinstance(node, cst.ConcatenatedString):
                stack += [node.left, node.right]
            elif isinstance(node, cst.Call):
                if not self._cheap_call(node, info, depth):
                    return False
                stack += [arg.value for arg in node.args]
            else:
                return False  # comprehensions, lambdas, await, yield, named expressions, ...
        return True

    def _cheap_call(self, call: cst.Call, info: FunctionInfo, depth: int) -> bool:
        if any(arg.star for arg in call.args):
            return False
        site = self.model.call_site(call)
        if site is None:
            return False
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in CHEAP_CONTAINER_METHODS:
            return self._literal_container(func.value, info)
        if isinstance(func, cst.Name):
            binding = self.model.reaching_binding(func.value, site.scope, site.index)
            if binding is None:  # a builtin, not shadowed
                if func.value in CHEAP_BUILTINS:
                    return True
                return func.value in PAIRWISE_BUILTINS and len(call.args) >= 2
            if binding.kind == "def" and depth < self.HELPER_DEPTH and isinstance(binding.node, cst.FunctionDef):
                helper = self.model.function_info(binding.node)
                return (
                    helper is not None
                    and helper is not info
                    and not binding.node.decorators
                    and self.function(helper, depth + 1)
                )
            return False
        name = self.model.call_name(site)
        if name in CHEAP_MATH:
            return True
        if name in SLEEPS:
            seconds = literal_number(call.args[0].value) if call.args else None
            return seconds is not None and seconds < 0.001
        return False


def _self_attribute(expr: cst.BaseExpression, info: FunctionInfo) -> str | None:
    """The attribute name of `self.x` in a method (its first parameter named `self`), else None."""
    params = info.node.params.params
    if (
        info.owner is None
        or not params
        or params[0].name.value != "self"
        or not isinstance(expr, cst.Attribute)
        or not isinstance(expr.value, cst.Name)
        or expr.value.value != "self"
    ):
        return None
    return expr.attr.value


def _empty_or_literal(expr: cst.BaseExpression) -> bool:
    """A literal list, dict or set, or an empty `list()`, `dict()`, `set()`: a container whose items are cheap to touch."""
    if isinstance(expr, (cst.List, cst.Dict, cst.Set)):
        return True
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in {"list", "dict", "set"} and not expr.args


def _is_docstring(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.Expr) and isinstance(statement.value, (cst.SimpleString, cst.ConcatenatedString))


@dataclass(frozen=True)
class TinyLoopFacts:
    """What the experiment needs of the flagged loop."""

    iterations: int | None  # when the code says how many tasks the loop submits
    actor_method: bool = False  # calls of a tiny actor method, not tasks


class TooFineGrainedTasksExperiment(Experiment[TinyLoopFacts]):
    """The loop's count of tiny tasks or actor calls (at most 2,000) against the same work in 4 batched
    ones: RAY020 has no fix to apply, so this is the comparison its docs recommend."""

    facts_type = TinyLoopFacts
    shares_driver = True
    more_parallelism = False  # the fix saves overhead: fewer tasks or processes, not more at once
    MAX_TASKS = 2000
    BATCHES = 4
    TASKS = (
        "@ray.remote\ndef inc(x):\n    return x + 1\n\n"
        "@ray.remote\ndef inc_batch(xs):\n    return [x + 1 for x in xs]\n\n"
    )
    ACTOR = (
        "@ray.remote\nclass Store:\n    def __init__(self):\n        self.items = []\n\n"
        "    def push(self, x):\n        self.items.append(x + 1)\n\n"
        "    def push_batch(self, xs):\n        self.items.extend(x + 1 for x in xs)\n\n"
        "store = Store.remote()\nray.get(store.push_batch.remote([]))  # the actor up before the clock starts\n\n"
    )

    def plan(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        known = facts.iterations
        count = min(known, self.MAX_TASKS) if known is not None else self.MAX_TASKS
        size = -(-count // self.BATCHES)
        batches = f"batches = [range(s, min(s + {size}, {count})) for s in range(0, {count}, {size})]\n"
        if facts.actor_method:
            code, unit, each_name, work = self.ACTOR, "actor calls", "a call", "`items.append(x + 1)`"
            each, batched = "store.push.remote(i)", "return ray.get([store.push_batch.remote(b) for b in batches])"
        else:
            code, unit, each_name, work = self.TASKS, "tasks", "a task", "`x + 1`"
            each, batched = "inc.remote(i)", "return [y for batch in ray.get([inc_batch.remote(b) for b in batches]) for y in batch]"
        if known is None:
            counted = f"{count:,} {unit} (count not in the code: {self.MAX_TASKS:,} assumed)"
        else:
            counted = f"{count:,} {unit}{'' if count == known else f' (of the {known:,} in the code)'}"
        return Plan(
            Variant(f"{each_name} per element", script(code + timed(f"return ray.get([{each} for i in range({count})])"))),
            Variant(f"{self.BATCHES} batched {unit}", script(code + timed(batches + batched))),
            "modelled",
            f"{counted} of {work}, against the same work in {self.BATCHES} batches",
        )

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """By wall time alone: batching runs fewer tasks, not more at once, so Ray's timeline has no extra
        parallelism to show in B; the task counts it recorded say what changed."""
        verdict = super().judge_runs(verdict, subject, plan, a, b)
        tasks_a, tasks_b = max(r.tasks for r in a), max(r.tasks for r in b)
        if tasks_a:
            verdict.summary += f"; Ray's timeline has {tasks_a:,} vs {tasks_b:,} tasks per run"
        return verdict


def _callee(model: SemanticModel, submission: Submission, remote: RemoteDef) -> FunctionInfo | None:
    """The function a looped submission runs: the task's, or the actor's method when it is a plain one (a
    decorator may change what the call does) that writes the actor's state, such as a buffer's `push`. A
    method that keeps no state is left to RAY010 when the calls go to one actor."""
    if submission.kind == "task":
        return model.function_info(remote.target) if isinstance(remote.target, cst.FunctionDef) else None
    method = model.method(remote.cls, submission.method) if remote.cls is not None and submission.method else None
    if method is None or method.node.decorators or not mutates_state(model, method):
        return None
    return method


class TooFineGrainedTasks(Rule):
    code = "RAY020"
    name = "too-fine-grained-tasks"
    message = "A task that does almost no work is submitted once per element of a large loop"
    severity = Severity.WARNING
    category = "perf"
    tokens = (".remote(",)
    also_tokens = ("for ", "while ")
    experiment = TooFineGrainedTasksExperiment()
    options = (
        Option(
            "min-iterations",
            100,
            "Report a loop whose literal iteration count (`range(k)`, a literal list, nested loops multiplied) "
            "is at least this. A `while True` loop always counts.",
        ),
        Option(
            "unknown-size-loops",
            False,
            "Also report loops whose count the code does not show (`for x in items`): many are small.",
        ),
        Option("max-statements", 4, "The most simple statements a task body may have and still count as tiny."),
    )
    docs = """
## What it does
Finds a `.remote(...)` call of a remote function defined in the same file, made inside a loop or
comprehension that runs many times (a count of at least `min-iterations`, 100 by default, that
the code shows: `range(k)` with `k` a number or a name assigned one once, a literal list, either
through `list(...)`, `enumerate(...)` and the like or through a name assigned once; or a
`while True` loop; with `unknown-size-loops`, also a loop whose count the code does not show), when the function's body is provably tiny: at most
`max-statements` simple statements (4 by default) of scalar arithmetic, comparisons,
assignments, `if`s, sleeps under a millisecond and cheap builtins (`int`, `len`, `abs`, `round`, `min(a, b)`, `math.sqrt`,
...), or calls to a plain helper of the same file that is itself tiny.

It also finds, in such a loop, a call of a tiny method of an actor class of the same file that
writes the actor's state: one transition pushed into a replay buffer, one count added to a tally.
Besides the statements above, the method may set `self.x`, and set, `append`, `add` or `get` one
item of `self.x` when the class only ever sets `self.x` to a literal list, dict or set.

## Why is this bad?
Every task costs Ray about half a millisecond to a millisecond of scheduling, serialization and
inter-process communication, whatever it does. When the work is a few arithmetic operations, the
overhead is the whole cost, and the Ray version is slower than a plain Python loop. Measured on a
2-core machine with Ray 2.60: 5,000 trivial tasks take 3.56 s, the same work in 10 tasks of 500
elements 0.015 s (237×; about 0.7 ms per task), and a plain serial loop 0.001 s. Ray's tips page
shows 100,000 tasks of 0.1 ms taking 27.5 s as tasks, 13.4 s serially and 3.25 s in batches of
1,000.

ray-lint is deliberately conservative about what counts as tiny, because the cost of a body is not
known statically. It is silent when the task:
- calls anything that may do real work: I/O, NumPy or PyTorch, a method of an object, a function
  imported from elsewhere (`requests.get` is cheap for the CPU but gains from concurrency), a
  sleep of a millisecond or more;
- has a loop, a comprehension, a slice, or a membership test against a collection;
- takes a parameter whose name says it is a batch or an array (`batch`, `chunk`, `shard`, `rows`,
  `df`, `image`, `values`, ...), or `*args` / `**kwargs`: its arithmetic may be vectorized work;
- requests a GPU (RAY022 reports short GPU tasks);
- is passed a slice (`data[start:start + 1000]`): each call carries a chunk, which is the fix;
and when the loop is small (a literal count below `min-iterations`), always leaves in its first
iteration, sleeps (a polling loop, paced by the sleep), or makes the same call each time (no
argument reads a name the loop rebinds: a benchmark, a warm-up or a Monte Carlo trial). An actor method call is not reported when
the method keeps no state (on one actor, RAY010 reports it), is `async` or decorated, or adds to
`self.x` when `self.x` may be something other than a literal container (a file, a queue, an object
handed to the constructor).

Actor calls cost the same kind of overhead: measured on a loaded 2-core machine with Ray 2.60,
5,000 calls of a one-line `push` took 5.1 s, the same items in 4 batched calls 0.027 s.

## Example
```python
@ray.remote
def double(x):
    return x * 2

refs = [double.remote(i) for i in range(10_000)]
results = ray.get(refs)
```

## Use instead
Give each task a batch of elements, so the overhead is paid once per batch:
```python
@ray.remote
def double_batch(xs):
    return [x * 2 for x in xs]

batches = [range(start, min(start + 1_000, 10_000)) for start in range(0, 10_000, 1_000)]
results = [y for batch in ray.get([double_batch.remote(b) for b in batches]) for y in batch]
```
or, for work this small, no Ray at all; for large datasets, Ray Data's `map_batches`. For an actor,
give the method a list of items (`buffer.push_batch.remote(transitions)`).

## Fix safety
There is no automatic fix: the batch size, and whether the work should run in Ray at all, depend
on the workload.

## Options
- `min-iterations` (100): the smallest literal loop count reported.
- `max-statements` (4): the largest body that counts as tiny.
- `unknown-size-loops` (false): also report loops over iterables of unknown size. Off by default:
  `for x in items: f.remote(x)` is as often ten items as ten thousand.

## References
- [Anti-pattern: Over-parallelizing with too fine-grained tasks harms speedup](https://docs.ray.io/en/latest/ray-core/patterns/too-fine-grained-tasks.html)
- [Tips for first-time users: tip 2, aim for tasks of at least a few milliseconds](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
- [Optimizing performance](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/optimize-performance.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\ndef double(x):\n    return x * 2\n\nrefs = [double.remote(i) for i in range(10)]\n",
            "a small literal loop",
        ),
        Valid(
            "import ray\n@ray.remote\ndef double_batch(batch):\n    return [x * 2 for x in batch]\n\n"
            "refs = [double_batch.remote(b) for b in batches]\n",
            "the task takes a batch",
        ),
        Valid(
            "import ray\nimport numpy as np\n@ray.remote\ndef norm(x):\n    return np.linalg.norm(x)\n\n"
            "refs = [norm.remote(x) for x in vectors]\n",
            "a call that may be heavy",
        ),
        Valid(
            "import ray\nimport requests\n@ray.remote\ndef fetch(url):\n    return requests.get(url).status_code\n\n"
            "refs = [fetch.remote(u) for u in urls]\n",
            "I/O: cheap for the CPU but gains from concurrency",
        ),
        Valid(
            "import ray\n@ray.remote\ndef score(x):\n    return model_score(x)\n\nrefs = [score.remote(x) for x in xs]\n",
            "an opaque helper",
        ),
        Valid(
            "import ray\n@ray.remote\ndef scale(chunk, factor):\n    return chunk * factor\n\n"
            "refs = [scale.remote(c, 2) for c in np.array_split(data, 8)]\n",
            "arithmetic on an array chunk is real work",
        ),
        Valid(
            "import ray\n@ray.remote\ndef total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n\n"
            "refs = [total.remote(n) for n in sizes]\n",
            "the body loops",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Acc:\n    def add(self, x):\n        return x + 1\n\na = Acc.remote()\n"
            "refs = [a.add.remote(i) for i in range(10000)]\n",
            "a method that keeps no state, on one actor: RAY010's concern",
        ),
        Valid(
            "import ray\nimport time\n@ray.remote\ndef check(i):\n    return i > 0\n\nwhile True:\n"
            "    ray.get(check.remote(1))\n    time.sleep(10)\n",
            "a polling loop paced by a sleep",
        ),
        Valid(
            "@ray.remote\ndef double(x):\n    return x * 2\n\nrefs = [double.remote(i) for i in range(10000)]\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef double(x):\n    return x * 2\n\nrefs = [double.remote(i) for i in range(10000)]\n",
            "a GPU task: RAY022 reports it",
        ),
        Valid(
            "import ray\n@ray.remote\ndef double(x):\n    return x * 2\n\nfor i in range(10000):\n"
            "    ref = double.remote(i)\n    break\n",
            "the loop leaves in its first iteration",
        ),
        Valid(
            "import ray\n@ray.remote\ndef ping():\n    return b'ok'\n\nray.get([ping.remote() for _ in range(1000)])\n",
            "the same call repeated: a benchmark of Ray's overhead, not work split per element",
        ),
        Valid(
            "import ray\n@ray.remote\ndef first(x):\n    return x[1:]\n\nrefs = [first.remote(x) for x in xs]\n",
            "a slice copies its input",
        ),
        Valid(
            "import ray\nimport time\n\n@ray.remote\ndef pace(x):\n    time.sleep(0.01)\n    return 2 * x\n\n"
            "refs = [pace.remote(x) for x in range(100000)]\n",
            "a sleep of 10 ms is the task's work, not overhead",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef square(n):\n    return n * n\n\n"
            "numbers = list(range(10))\nrefs = [square.remote(n) for n in numbers]\n",
            "ten tasks, through a name: a small loop",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef square(n):\n    return n * n\n\n"
            "numbers = list(range(10000))\nnumbers = numbers[:5]\nrefs = [square.remote(n) for n in numbers]\n",
            "the name is assigned twice: its size is not known",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef log(x):\n    print(x)\n    return x\n\nrefs = [log.remote(i) for i in range(10000)]\n",
            "a call that is not cheap, as a statement (I/O)",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Sink:\n    def __init__(self, out):\n        self.out = out\n\n"
            "    def push(self, x):\n        self.out.append(x)\n\n"
            "sink = Sink.remote(make_writer())\nfor i in range(10000):\n    sink.push.remote(i)\n",
            "`self.out` is handed to the constructor: its `append` may write to a file or a network",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Log:\n    def __init__(self):\n        self.lines = []\n\n"
            "    def push(self, x):\n        self.lines.insert(0, x)\n\n"
            "log = Log.remote()\nfor i in range(10000):\n    log.push.remote(i)\n",
            "`insert(0, x)` shifts the whole list: not a one-item operation",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def __init__(self):\n        self.n = 0\n\n"
            "    def increment(self):\n        self.n += 1\n\n"
            "counter = Counter.remote()\nray.get([counter.increment.remote() for _ in range(1000)])\n",
            "the same call repeated: a demonstration of an actor's state, not work split per element",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Buffer:\n    def __init__(self):\n        self.batches = []\n\n"
            "    def push(self, item):\n        self.batches.append(item)\n\n"
            "buffer = Buffer.remote()\nfor start in range(0, 100000, 1000):\n"
            "    buffer.push.remote(data[start:start + 1000])\n",
            "each call stores a batch of a thousand items: the batched fix itself",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass ReplayBuffer:\n    def __init__(self, capacity):\n"
            "        self.capacity = capacity\n        self.memory = []\n        self.position = 0\n\n"
            "    def push(self, transition):\n        if len(self.memory) < self.capacity:\n"
            "            self.memory.append(None)\n        self.memory[self.position] = transition\n"
            "        self.position = (self.position + 1) % self.capacity\n\n"
            "buffer = ReplayBuffer.remote(10000)\nfor step in range(5000):\n    buffer.push.remote(step)\n",
            18,
            note="an actor method that only stores one item: one call per element",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Tally:\n    def __init__(self):\n        self.total = 0\n"
            "        self.seen = {}\n\n    def add(self, key, n):\n        self.total += n\n        self.seen[key] = n\n\n"
            "tallies = [Tally.remote() for _ in range(4)]\nrefs = [tallies[i % 4].add.remote(i, 1) for i in range(1000)]\n",
            14,
            note="a counter spread over a pool of actors: the calls are still one per element",
        ),
        Invalid(
            "import ray\n@ray.remote\ndef double(x):\n    return x * 2\n\nrefs = [double.remote(i) for i in range(10000)]\n",
            6,
        ),
        Invalid(
            "import ray\nimport time\n\n@ray.remote\ndef tiny(x):\n    time.sleep(1e-5)\n    return 2 * x\n\n"
            "refs = [tiny.remote(x) for x in range(100000)]\n",
            9,
            note="a sleep under a millisecond is cheap, also as a statement of its own",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef square(n):\n    return n * n\n\n"
            "numbers = list(range(10000))\nrefs = []\nfor n in numbers:\n    refs.append(square.remote(n))\n",
            10,
            note="the loop's size through a name assigned once: `list(range(10000))`",
        ),
        Invalid(
            "import ray\n@ray.remote\ndef double(number):\n    return number * 2\n\n"
            "doubled = []\ni = 0\nwhile True:\n    doubled.append(double.remote(i))\n    i += 1\n",
            9,
            note="a `while True` loop",
        ),
        Invalid(
            "import ray\nimport math\n@ray.remote\ndef dist(x, y):\n    d = math.sqrt(x * x + y * y)\n"
            "    return d if d > 0 else 0.0\n\nrefs = [dist.remote(x, y) for x in range(200) for y in range(3)]\n",
            8,
        ),
        Invalid(
            "import ray\n\ndef clamp(v):\n    return max(0, min(v, 255))\n\n@ray.remote\ndef brighten(v):\n"
            "    return clamp(v + 10)\n\nout = []\nfor row in range(100):\n    for col in range(100):\n"
            "        out.append(brighten.remote(row * col))\n",
            13,
            note="a tiny helper; nested loops of 100 × 100",
        ),
        Invalid(
            "import ray\nfrom ray import remote\n@remote\ndef is_even(n):\n    \"\"\"Whether n is even.\"\"\"\n"
            "    if n % 2 == 0:\n        return True\n    return False\n\ni = 0\npending = []\nwhile 1:\n"
            "    pending.append(is_even.options(num_cpus=0.5).remote(i))\n    i += 1\n",
            13,
            note="a `while 1` loop, `.options(...)`",
        ),
        Invalid(
            "import ray\n\ndef inc(x):\n    return x + 1\n\nremote_inc = ray.remote(inc)\n"
            "results = ray.get([remote_inc.remote(i) for i in range(1000)])\n",
            7,
            note="ray.remote(f)",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.remote_defs:
            return
        tiny = _TinyBody(model, self.settings["max-statements"])
        verdicts: dict[int, bool] = {}
        for site, submission, remote in model.looped_submissions("task", "actor-method"):
            info = _callee(model, submission, remote)
            if info is None or model.gpu_request(remote) == "requested":
                continue
            if id(info.node) not in verdicts:
                verdicts[id(info.node)] = tiny.function(info)
            if not verdicts[id(info.node)]:
                continue
            if not _varies_per_iteration(model, site) or _passes_slice(site):
                continue
            iterations = self._iterations(model, site)
            if iterations == -1:
                continue
            self._report(ctx, site, info, iterations)

    def _iterations(self, model: SemanticModel, site: CallSite) -> int | None:
        """The loop's count (None if unknown), or -1 when the loop is not one to report."""
        assert site.loop is not None
        iterations = enclosing_iterations(model, site.loop)
        if iterations is not None and iterations < self.settings["min-iterations"]:
            return -1
        loop: Loop | None = site.loop
        unbounded = False
        while loop is not None:
            if exits_in_first_iteration(loop) or sleeps_in(model, loop):
                return -1
            unbounded = unbounded or (isinstance(loop.node, cst.While) and is_true(loop.node.test))
            loop = loop.parent
        if iterations is None and not unbounded and not self.settings["unknown-size-loops"]:
            return -1
        return iterations

    def _report(self, ctx: Context, site: CallSite, info: FunctionInfo, iterations: int | None) -> None:
        if iterations is not None:
            loop = f"{iterations:,} times"
        elif isinstance(site.loop.node if site.loop else None, cst.While):
            loop = "in a `while True` loop"
        else:
            loop = "in a loop of unknown size"
        if info.owner is not None:
            message = f"Tiny actor method `{info.owner.node.name.value}.{info.node.name.value}` is called {loop}"
        else:
            overhead = "" if iterations is None else f" (about {math.ceil(iterations * 0.7 / 1000 * 10) / 10:g} s of overhead)"
            message = f"Tiny task `{info.node.name.value}` is submitted {loop}{overhead}"
        ctx.report(site.node, message, facts=TinyLoopFacts(iterations, actor_method=info.owner is not None))
