"""RAY005 nested-get-on-args: a task calls `ray.get` on ObjectRefs its caller passed nested in a list."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Experiment, Plan, Run, Subject, Variant, replayed, script, timed
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import COMPREHENSIONS, CallSite, FunctionInfo, child_nodes, iter_subtree, scope_within
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

# Ancestors that make the `ray.get` conditional or repeated: the task may need only some of the refs,
# or none, or handle their failure itself.
_CONDITIONAL = (
    cst.If, cst.IfExp, cst.BooleanOperation, cst.Try, cst.TryStar, cst.ExceptHandler, cst.For, cst.While,
    cst.Match, cst.Lambda, cst.FunctionDef, cst.ClassDef, *COMPREHENSIONS,
)  # fmt: skip
_LAZY = (cst.Return, cst.Yield)  # a task that may return before the get may not need the refs at all


def _parents(root: cst.CSTNode) -> tuple[dict[int, cst.CSTNode], dict[int, int]]:
    """Parent and walk order (evaluation order) of every node under `root`."""
    parents: dict[int, cst.CSTNode] = {}
    order: dict[int, int] = {}
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        order[id(node)] = len(order)
        children = list(child_nodes(node))
        for child in children:
            parents[id(child)] = node
        stack.extend(reversed(children))
    return parents, order


def _argument_for(call: cst.Call, param: cst.Param, position: int | None) -> cst.Arg | None:
    """The argument of `call` that binds `param` (at `position` among the positional parameters), when
    no `*args`/`**kwargs` unpacking makes that unknowable."""
    positional = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == param.name.value:
                return arg
            continue
        if positional == position:
            return arg
        positional += 1
    return None


@dataclass(frozen=True)
class NestedFacts:
    """What the experiment needs of the flagged task."""

    refs: int | None  # how many refs the caller passes in the list, when the module shows a literal list


class NestedGetExperiment(Experiment[NestedFacts]):
    """The user's script as written and fixed, timing the function that submits the task; or, when it
    cannot run as is, many small tasks that each get a list of refs to trivial tasks, against the
    same tasks given the refs as top-level arguments. On one node the cost is the worker processes
    Ray starts for tasks blocked in `ray.get`: whether a task blocks depends on whether its inputs
    finished first, so the model's ratio varies by run (from 1.2× to 2.8× on 2 CPUs).

    Judged by wall time, with the worker processes Ray's timeline shows as evidence, not by its
    parallelism: a task blocked in `ray.get` counts as running while it holds a worker and does
    nothing, so the nested form can look more parallel where it is only more idle."""

    facts_type = NestedFacts
    shares_driver = True
    TASKS = 200
    ASSUMED_REFS = 3

    def plan(self, subject: Subject) -> Plan:
        return self.on_user_code_or(subject, self.model(subject))

    def model(self, subject: Subject) -> Plan:
        refs, counted = replayed(self.facts(subject).refs, self.ASSUMED_REFS, subject.cluster_cpus, "refs")
        load = "@ray.remote\ndef load(i):\n    return i\n\n"
        inputs = f"[load.remote(i * {refs} + j) for j in range({refs})]"
        nested = "@ray.remote\ndef merge(parts):\n    return sum(ray.get(parts))\n\n" + timed(
            f"return ray.get([merge.remote({inputs}) for i in range({self.TASKS})])"
        )
        top_level = "@ray.remote\ndef merge(*parts):\n    return sum(parts)\n\n" + timed(
            f"return ray.get([merge.remote(*{inputs}) for i in range({self.TASKS})])"
        )
        shape = f"{self.TASKS} tasks, each given {counted} to trivial tasks"
        return Plan(
            Variant("refs in a list", script(load + nested)),
            Variant("top-level refs", script(load + top_level)),
            "modelled",
            shape,
        )

    def evidence(self, plan: Plan, a: list[Run], b: list[Run]) -> tuple[str, bool, str]:
        """Blocked parents make Ray start more workers: the timeline's worker count says so, wall time decides."""
        workers_a, workers_b = _workers(a), _workers(b)
        return (f"; worker processes used: {workers_a} vs {workers_b}" if workers_a and workers_b else ""), True, ""

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        return (
            f": below the {self.threshold:.1f}× threshold (the cost is the worker processes Ray starts for tasks"
            " blocked in `ray.get`, and whether a task blocks varies by run)"
        )


def _workers(runs: list[Run]) -> int:
    """Most worker processes one run's tasks ran on, from Ray's timeline."""
    return max((len({worker for _, _, worker in run.timeline}) for run in runs), default=0)


class NestedGetOnArgs(Rule):
    code = "RAY005"
    name = "nested-get-on-args"
    message = "A task calls `ray.get` on ObjectRefs passed to it in a list, not as top-level arguments"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = REMOTE_MADE
    also_tokens = ("get",)
    experiment = NestedGetExperiment()
    docs = """
## What it does
Finds a remote task (`@ray.remote def`, or a function passed to `ray.remote`) whose body calls
`ray.get(p)` on one of its own parameters `p`, as a whole, once and unconditionally: the caller
passes the ObjectRefs nested in a list (`merge.remote([a.remote(), b.remote()])`), so Ray hands
the task the refs rather than the values, and the task fetches them itself. When the module
shows the call, the message names the line that passes the list.

## Why is this bad?
Ray resolves only top-level ObjectRef arguments before a task starts. Refs nested in a list
reach the task unresolved, so the task is scheduled and started at once, then blocks a worker in
`ray.get` while its inputs are still being computed and fetched one by one. Ray lends the
blocked task's CPU to other work, but the worker process, its memory and its stack stay pinned
while it waits; with many such tasks the node fills up with idle workers (Ray's "N PYTHON worker
processes have been started" warning). Passed as top-level arguments, the refs are resolved
before the task is scheduled, next to where the data is, and the task starts with its values in
hand. Measured on a 2-core machine with Ray 2.60: 100 tasks each getting a list of 3 refs took
0.371 s, the same tasks with the refs as top-level arguments 0.213 s (1.7×). On one node the cost
is the worker processes Ray starts for tasks blocked in `ray.get`, so it varies by run: 200 such
tasks took from 1.2× to 2.8× as long as with top-level refs.

ray-lint is silent where nesting the refs is the point:
- the task gets only some of the refs, or gets them one at a time (a `ray.get` of an item, in a
  loop, or under a condition), or uses `ray.wait` anywhere in its body;
- the task may return before the `ray.get` (it may not need the refs at all), or catches errors
  around it (`try`), or passes a `timeout`: it handles a failing input itself;
- the parameter is used for anything else as well (forwarded to another task, measured,
  iterated): nested refs are how a task forwards objects without fetching them;
- the task fetches refs it created itself (the nested-task pattern);
- a call in the module passes the parameter a single top-level ref, or the function is also
  called directly as a plain function;
- actor methods, and callers whose task is defined in another module (what it does with the
  list is not visible).

## Example
```python
@ray.remote
def merge(parts):
    return sum(ray.get(parts))

total = ray.get(merge.remote([load.remote(i) for i in range(3)]))
```

## Use instead
```python
@ray.remote
def merge(*parts):
    return sum(parts)

total = ray.get(merge.remote(*[load.remote(i) for i in range(3)]))
```

## Fix safety
The fix makes the parameter `*p`, replaces `ray.get(p)` with `list(p)` and unpacks the list at
every call (`merge.remote(a, b)` for a literal list, `merge.remote(*refs)` otherwise). It is
unsafe: the task now starts only when every input is ready, a failed input fails the task before
its body runs (with the upstream error), and all the values are in the worker's memory at once.
It is offered only when it can be made correct: the function is local to another function or
private by name (`_merge`), so no other module calls it; every reference to it in the module is
a `.remote(...)` call (directly or after `.options(...)`) that passes the list positionally as
its last argument, without `*`/`**` unpacking or keywords; the parameter is the last positional
one, with no default, annotation, `*args` or keyword-only parameters; `@ray.remote` is its only
decorator; and the `ray.get` is not a statement of its own.

## References
- [Anti-pattern: Calling ray.get on task arguments harms performance](https://docs.ray.io/en/latest/ray-core/patterns/nested-ray-get.html)
- [Passing object arguments (top-level vs nested)](https://docs.ray.io/en/latest/ray-core/objects.html#passing-object-arguments)
- [Pattern: Using nested tasks to achieve nested parallelism](https://docs.ray.io/en/latest/ray-core/patterns/nested-tasks.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\ndef first_ready(refs):\n    ready, _ = ray.wait(refs, num_returns=1)\n    return ray.get(ready[0])\n",
            "the task chooses which refs to get with ray.wait",
        ),
        Valid(
            "import ray\n@ray.remote\ndef route(refs, key):\n    return ray.get(refs[key])\n",
            "the task gets only one of the refs",
        ),
        Valid(
            "import ray\n@ray.remote\ndef fanout(refs):\n    return [child.remote(r) for r in refs]\n",
            "the refs are forwarded, never fetched",
        ),
        Valid(
            "import ray\n@ray.remote\ndef parent(n):\n    refs = [child.remote(i) for i in range(n)]\n    return sum(ray.get(refs))\n",
            "the nested-task pattern: it gets refs it created",
        ),
        Valid(
            "import ray\n@ray.remote\ndef total(refs):\n    out = 0\n    for r in refs:\n        out += ray.get(r)\n    return out\n",
            "one at a time, so that only one value is in memory",
        ),
        Valid(
            "import ray\n@ray.remote\ndef maybe(refs, use_cache):\n    if use_cache:\n        return cached()\n    return ray.get(refs)\n",
            "the task may not need the refs",
        ),
        Valid(
            "import ray\n@ray.remote\ndef robust(refs):\n    try:\n        return ray.get(refs)\n    except ray.exceptions.RayTaskError:\n        return None\n",
            "the task handles a failed input itself",
        ),
        Valid(
            "import ray\n@ray.remote\ndef merge(refs):\n    log(len(refs))\n    return ray.get(refs)\n",
            "the parameter is used for something else too",
        ),
        Valid(
            "@ray.remote\ndef merge(refs):\n    return sum(ray.get(refs))\n",
            "no `import ray`: `ray` is not Ray here",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Holder:\n    def load(self, refs):\n        self.data = ray.get(refs)\n",
            "an actor method",
        ),
        Valid(
            "import ray\n\ndef merge(refs):\n    return sum(ray.get(refs))\n\nremote_merge = ray.remote(merge)\ntotal = merge([a, b])\n",
            "the function is also called directly in the driver",
        ),
        Valid(
            "import ray\n@ray.remote\ndef merge(refs):\n    return ray.get(refs, timeout=10)\n",
            "a timeout: the task handles slow inputs itself",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\ndef merge(parts):\n    return sum(ray.get(parts))\n\n"
            "total = ray.get(merge.remote([load.remote(i) for i in range(3)]))\n",
            5,
            note="a public function: other modules may call it, so no fix",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef _merge(parts):\n    return sum(ray.get(parts))\n\n"
            "total = ray.get(_merge.remote([load.remote(i) for i in range(3)]))\n",
            5,
            fixed="import ray\n\n@ray.remote\ndef _merge(*parts):\n    return sum(list(parts))\n\n"
            "total = ray.get(_merge.remote(*[load.remote(i) for i in range(3)]))\n",
        ),
        Invalid(
            "import ray\n\ndef main(paths):\n    @ray.remote\n    def concat(frames):\n        values = ray.get(frames)\n"
            "        return pd.concat(values)\n\n    a = read.remote(paths[0])\n    b = read.remote(paths[1])\n"
            "    return concat.options(num_cpus=2).remote([a, b])\n",
            6,
            fixed="import ray\n\ndef main(paths):\n    @ray.remote\n    def concat(*frames):\n        values = list(frames)\n"
            "        return pd.concat(values)\n\n    a = read.remote(paths[0])\n    b = read.remote(paths[1])\n"
            "    return concat.options(num_cpus=2).remote(a, b)\n",
            note="a local task, a literal list, `.options`",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef _score(model, batches):\n    data = ray.get(batches)\n    return model.predict(data)\n\n"
            "refs = []\nfor p in paths:\n    refs.append(load.remote(p))\nout = _score.remote(model, refs)\n",
            5,
            fixed="import ray\n\n@ray.remote\ndef _score(model, *batches):\n    data = list(batches)\n    return model.predict(data)\n\n"
            "refs = []\nfor p in paths:\n    refs.append(load.remote(p))\nout = _score.remote(model, *refs)\n",
            note="a list filled with append",
        ),
        Invalid(
            "import ray as r\n\n@r.remote(num_cpus=2)\ndef reduce(shards):\n    arrays = r.get(shards)\n    return np.concatenate(arrays)\n",
            5,
            note="no caller in this module",
        ),
        Invalid(
            "import ray\n\ndef combine(a_and_b):\n    a, b = ray.get(a_and_b)\n    return a + b\n\n"
            "remote_combine = ray.remote(combine)\nout = remote_combine.remote([x.remote(), y.remote()])\n",
            4,
            note="ray.remote applied to a plain function",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        waits = model.calls_to("ray.wait")
        for get in model.calls_to("ray.get"):
            owner = model.remote_of_scope(get.scope)
            if owner is None or owner[0].kind != "task":
                continue
            remote, info = owner
            param = self._fetched_parameter(model, get, info)
            if param is None or any(scope_within(wait.scope, info.scope) for wait in waits):
                continue
            if not self._fetches_all_at_once(get, info, param) or self._called_directly(model, remote, info):
                continue
            calls = self._calls(model, remote, info, param)
            if calls is None:
                continue
            name, fetched = info.node.name.value, param.name.value
            nested = [(call, arg) for call, arg in calls if arg is not None and _holds_ref_list(model, call, arg)]
            where = f"passed in a list on {ctx.line_of(nested[0][0])}" if nested else "its caller passes nested"
            ctx.report(
                get.node,
                f"`{name}` calls `ray.get({fetched})` on refs {where}",
                self._fix(ctx, get, remote, info, param, calls),
                facts=NestedFacts(_list_length(model, *nested[0]) if nested else None),
            )

    def _fetched_parameter(self, model: SemanticModel, get: CallSite, info: FunctionInfo) -> cst.Param | None:
        """The parameter of the task that `ray.get(p)` fetches whole (no timeout), if it is one."""
        args = get.node.args
        if len(args) != 1 or args[0].keyword is not None or args[0].star or not isinstance(args[0].value, cst.Name):
            return None
        binding = model.reaching_binding(args[0].value.value, get.scope, get.index)
        if binding is None or binding.kind != "param" or binding.scope is not info.scope:
            return None
        params = info.node.params
        named = (*params.posonly_params, *params.params, *params.kwonly_params)
        return binding.node if any(binding.node is p for p in named) else None  # type: ignore[return-value]

    def _fetches_all_at_once(self, get: CallSite, info: FunctionInfo, param: cst.Param) -> bool:
        """The get runs once on every path through the body, nothing before it can return, and the
        parameter is read nowhere else."""
        parents, order = _parents(info.node.body)
        ancestors: set[int] = set()
        node = parents.get(id(get.node))
        while node is not None:
            if isinstance(node, _CONDITIONAL):
                return False
            ancestors.add(id(node))
            node = parents.get(id(node))
        at = order.get(id(get.node))
        if at is None:
            return False
        for inner in iter_subtree(info.node.body, into_functions=False):
            if isinstance(inner, _LAZY) and order[id(inner)] < at and id(inner) not in ancestors:
                return False
        reads = [n for n in iter_subtree(info.node.body) if isinstance(n, cst.Name) and n.value == param.name.value]
        return len(reads) == 1 and reads[0] is get.node.args[0].value

    def _called_directly(self, model: SemanticModel, remote: RemoteDef, info: FunctionInfo) -> bool:
        """`ray.remote(f)` leaves `f` a plain function: a direct call `f(...)` runs the get in the caller."""
        if isinstance(remote.declared_at, cst.Decorator):
            return False
        name = info.node.name.value
        for site in model.calls_by_tail.get(name, ()):
            if isinstance(site.node.func, cst.Name):
                binding = model.reaching_binding(name, site.scope, site.index)
                if binding is not None and binding.node is info.node:
                    return True
        return False

    def _calls(
        self, model: SemanticModel, remote: RemoteDef, info: FunctionInfo, param: cst.Param
    ) -> list[tuple[cst.Call, cst.Arg | None]] | None:
        """Every `.remote(...)` call of the task in the module, with the argument it gives `param` (None when
        unknowable); None when a call passes one top-level ref there (the task then gets something else)."""
        params = info.node.params
        positional = [*params.posonly_params, *params.params]
        position = next((i for i, p in enumerate(positional) if p is param), None)
        calls: list[tuple[cst.Call, cst.Arg | None]] = []
        for site in model.calls_by_tail.get("remote", ()):
            submission = model.submission(site.node)
            if submission is None or submission.remote is not remote:
                continue
            arg = _argument_for(site.node, param, position)
            if arg is not None:
                origin = model.ref_origin(arg.value, site.scope, site.index)
                if origin is not None and origin.kind == "ref":
                    return None
            calls.append((site.node, arg))
        return calls

    def _fix(
        self,
        ctx: Context,
        get: CallSite,
        remote: RemoteDef,
        info: FunctionInfo,
        param: cst.Param,
        calls: list[tuple[cst.Call, cst.Arg | None]],
    ) -> FixPlan | None:
        """`def f(*p)`, `list(p)` for the get, and the list unpacked at every call, when that is correct."""
        model = ctx.model
        node, name = info.node, info.node.name.value
        params = node.params
        if not calls or remote.escapes or not isinstance(remote.declared_at, cst.Decorator) or len(node.decorators) != 1:
            return None
        if info.parent_scope.kind != "function" and not name.startswith("_"):
            return None  # another module may import and call it with a list
        if not params.params or params.params[-1] is not param or param.default is not None or param.annotation is not None:
            return None
        if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or params.kwonly_params:
            return None
        if isinstance(get.statement, cst.Expr) and get.statement.value is get.node:
            return None
        if model.reaching_binding("list", get.scope, get.index) is not None:
            return None
        position = len(params.posonly_params) + len(params.params) - 1
        replacements: list[tuple[cst.CSTNode, str]] = [(param.name, f"*{param.name.value}"), (get.node, f"list({param.name.value})")]
        for call, arg in calls:
            if arg is None or arg.keyword is not None or any(a.keyword is not None or a.star for a in call.args):
                return None
            if len(call.args) != position + 1 or any(n is call for n in iter_subtree(node)):
                return None
            replacements.append((arg, _unpacked(ctx, arg.value)))
        references = sum(1 for n in iter_subtree(model.module) if isinstance(n, cst.Name) and n.value == name)
        if references != 1 + len(calls) or not all(_receiver_is_name(call, name) for call, _ in calls):
            return None  # the function is used in other ways too (stored, passed, called elsewhere)
        return FixPlan("Pass the refs as top-level arguments", tuple(replacements), Applicability.UNSAFE)


def _holds_ref_list(model: SemanticModel, call: cst.Call, arg: cst.Arg) -> bool:
    site = model.call_site(call)
    if site is None:
        return False
    origin = model.ref_origin(arg.value, site.scope, site.index)
    return origin is not None and origin.kind == "ref-list"


def _list_length(model: SemanticModel, call: cst.Call, arg: cst.Arg) -> int | None:
    """How many refs the list passed at `call` holds, when the code says so: a literal list, or a
    comprehension over `range(k)` or a literal."""
    value = arg.value
    if isinstance(value, (cst.List, cst.Tuple)):
        return None if any(isinstance(e, cst.StarredElement) for e in value.elements) else len(value.elements)
    site = model.call_site(call)
    if site is None or not isinstance(value, cst.ListComp) or value.for_in.inner_for_in is not None or value.for_in.ifs:
        return None
    return model.iteration_count(value.for_in.iter, site.scope, site.index)


def _receiver_is_name(call: cst.Call, name: str) -> bool:
    """`name.remote(...)` or `name.options(...).remote(...)`."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "options":
        receiver = receiver.func.value
    return isinstance(receiver, cst.Name) and receiver.value == name


def _unpacked(ctx: Context, value: cst.BaseExpression) -> str:
    """The text of the argument (with its own parentheses, if any, gone) that passes the items of `value`
    one by one: the items of a literal list or tuple, else `*value`."""
    if isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        return ", ".join(("*" if isinstance(e, cst.StarredElement) else "") + ctx.code_for(e.value) for e in value.elements)
    text = ctx.code_for(value)
    if value.lpar or isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.List, cst.ListComp)):
        return f"*{text}"
    return f"*({text})"
