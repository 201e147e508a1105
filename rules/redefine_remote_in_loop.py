"""RAY021 redefine-remote-in-loop: `ray.remote` applied again and again to the same function or class."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.loops import enclosing_iterations, exits_in_first_iteration, runs_in_one_iteration
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    COMPREHENSIONS,
    CallSite,
    FunctionInfo,
    Loop,
    Scope,
    child_nodes,
    dotted_name,
    iter_subtree,
    path_to,
)
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

# Decorators that make a function run its body once per distinct argument (or once at all).
CACHE_WORDS = ("cache", "memo", "once", "singleton")
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)


@dataclass(frozen=True)
class _Application:
    """One place where `ray.remote` is applied: a decorator, or a `ray.remote(f)` / `ray.remote(...)(f)` call."""

    report: cst.CSTNode  # the decorator, or the `ray.remote(...)` call
    statement: cst.CSTNode  # the decorated definition, or the small statement holding the call
    scope: Scope  # where the application runs
    loop: Loop | None  # the innermost loop around it, in its function
    definition: cst.FunctionDef | cst.ClassDef | None  # what is made remote, when the module shows it
    given: cst.BaseExpression | None  # the expression handed to `ray.remote(...)`, for the call forms
    options: cst.Call | None  # the `ray.remote(...)` call that carries options

    @property
    def kind(self) -> str:
        """"actor class" or "function"; for a definition the module does not show, by its name's case (PEP 8)."""
        if self.definition is not None:
            return "actor class" if isinstance(self.definition, cst.ClassDef) else "function"
        name = self.given.attr.value if isinstance(self.given, cst.Attribute) else getattr(self.given, "value", "")
        return "actor class" if isinstance(name, str) and name[:1].isupper() else "function"

    @property
    def what(self) -> str:
        if isinstance(self.report, cst.Decorator) and self.definition is not None:
            return f"`@ray.remote` on `{self.definition.name.value}`"
        if self.given is not None and isinstance(self.given, cst.Name):
            return f"`ray.remote({self.given.value})`"
        return "`ray.remote(...)`"


def _applications(model: SemanticModel) -> Iterator[_Application]:
    decorators: set[int] = set()
    for remote in model.remote_defs:
        declared = remote.declared_at
        if not isinstance(declared, cst.Decorator):
            continue
        decorators.add(id(declared.decorator))
        found = _definition_binding(model, remote.target)
        if found is None:
            continue
        scope, loop = found
        options = declared.decorator if isinstance(declared.decorator, cst.Call) else None
        yield _Application(declared, remote.target, scope, loop, remote.target, None, options)
    applying = {id(site.node.func): site.node for site in model.calls if isinstance(site.node.func, cst.Call)}
    for site in model.calls_to("ray.remote"):
        if id(site.node) in decorators:
            continue
        call = applying.get(id(site.node), site.node)
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) != 1 or (call is site.node and any(arg.keyword is not None for arg in call.args)):
            continue  # `ray.remote(num_cpus=2)` kept as a decorator for later, or a malformed call
        given = positional[0]
        definition = None
        if isinstance(given, cst.Name):
            binding = model.reaching_binding(given.value, site.scope, site.index)
            if binding is not None and binding.kind in ("def", "class") and isinstance(binding.node, _DEFINITIONS):
                definition = binding.node
        assert site.statement is not None
        yield _Application(site.node, site.statement, site.scope, site.loop, definition, given, site.node)


def _definition_binding(model: SemanticModel, node: cst.FunctionDef | cst.ClassDef) -> tuple[Scope, Loop | None] | None:
    """The scope a definition binds its name in, and the loop its definition runs in."""
    binding = model.definition_binding(node)
    return (binding.scope, binding.loop) if binding is not None else None


def _free_names(model: SemanticModel, node: cst.CSTNode) -> set[str] | None:
    """Names that code reads from the scopes around it (not bound in a function, lambda, class or
    comprehension inside it); None when it declares `global` or `nonlocal`, which this does not follow."""
    scopes = {id(scope.node): scope for scope in model.scopes}
    free: set[str] = set()
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(node, frozenset())]
    while stack:
        current, bound = stack.pop()
        if isinstance(current, (cst.Global, cst.Nonlocal)):
            return None
        if isinstance(current, cst.Name):
            if current.value not in bound:
                free.add(current.value)
            continue
        scope = scopes.get(id(current))
        inner = bound | frozenset(scope.bindings) if scope is not None else bound
        if isinstance(current, (cst.FunctionDef, cst.Lambda)):
            params = current.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params, params.star_arg, params.star_kwarg):
                if isinstance(param, cst.Param):
                    stack += [(part, bound) for part in (param.default, param.annotation) if part is not None]
            if isinstance(current, cst.FunctionDef):
                stack += [(d.decorator, bound) for d in current.decorators]
                if current.returns is not None:
                    stack.append((current.returns, bound))
            stack.append((current.body, inner))
        elif isinstance(current, cst.ClassDef):  # its own names are not seen by its methods: not counted as bound
            stack += [(d.decorator, bound) for d in current.decorators]
            stack += [(arg.value, bound) for arg in (*current.bases, *current.keywords)]
            stack.append((current.body, bound))
        elif isinstance(current, COMPREHENSIONS):
            stack.append((current.for_in.iter, bound))  # the first iterable is evaluated outside
            stack += [(child, inner) for child in child_nodes(current) if child is not current.for_in]
            for_in = current.for_in
            stack += [(for_in.target, inner), *((c.test, inner) for c in for_in.ifs)]
            if for_in.inner_for_in is not None:
                stack.append((for_in.inner_for_in, inner))
        else:
            stack += [(child, bound) for child in child_nodes(current)]
    return free


def _assigned_names(statement: cst.CSTNode) -> set[str] | None:
    """What the statement stores the remote function under: names and dotted attributes; None when it
    stores into a subscript (a dict of remote functions, filled once per key: a cache)."""
    if isinstance(statement, _DEFINITIONS):
        return {statement.name.value}
    targets: list[cst.BaseExpression] = []
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
    elif isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        targets = [statement.target]
    names: set[str] = set()
    for target in targets:
        if isinstance(target, cst.Subscript):
            return None
        name = dotted_name(target)
        if name is not None:
            names.add(name)
    return names


def _guarded(root: cst.CSTNode, application: _Application) -> bool:
    """Whether the application sits under a test that makes it run once (a lazy initialisation or a
    cache): `if f is None`, `if key not in cache`, `if not self._f`, `f = f or ray.remote(g)`,
    `if i == 0`; or stores into a subscript (a cache keyed by something)."""
    assigned = _assigned_names(application.statement)
    if assigned is None:
        return True
    path = path_to(root, application.report) or []
    for node in path:
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
            return True
        test = node.test if isinstance(node, (cst.If, cst.IfExp, cst.While)) and node is not root else None
        if test is not None and _once_test(test, assigned):
            return True
    return False


def _used_in_one_iteration(model: SemanticModel, application: _Application, loop: Loop) -> bool:
    """Whether the loop uses the new remote function in one iteration only (`if rank == 0:
    ray.get(probe.remote())`): it is exported at its first call, once per loop, as if made before it."""
    names = _assigned_names(application.statement)
    if not names or not isinstance(loop.node, cst.For):
        return False
    own = {id(node) for node in iter_subtree(application.statement)}
    uses = [
        node
        for node in iter_subtree(loop.node.body)
        if isinstance(node, (cst.Name, cst.Attribute)) and id(node) not in own and dotted_name(node) in names
    ]
    return bool(uses) and all(runs_in_one_iteration(model, loop, use) for use in uses)


def _conditional(model: SemanticModel, scope: Scope, path: list[cst.CSTNode], assigned: set[str]) -> bool:
    """Whether the end of `path` (in `scope`) runs only under a condition (a flag, a lazy initialisation,
    a cache): in a function that is called in a loop, such a definition may well run once. An `if` on a
    fixed setting (`if is_npu_available:`) is no such condition: every call takes the same branch."""
    for step in path:
        if isinstance(step, (cst.ExceptHandler, cst.BooleanOperation)):
            return True
        if isinstance(step, (cst.If, cst.IfExp)) and (
            _once_test(step.test, assigned) or not _fixed_setting(model, scope, step.test)
        ):
            return True
    return False


def _fixed_setting(model: SemanticModel, scope: Scope, test: cst.BaseExpression) -> bool:
    """Whether `test` (in `scope`) reads only module-level names that nothing rebinds (an imported flag or
    a constant, maybe through attributes, `not`, `and`, `or` and comparisons): the same on every call."""
    attributes = {id(node.attr) for node in iter_subtree(test) if isinstance(node, cst.Attribute)}
    for node in iter_subtree(test):
        if isinstance(node, (cst.Call, cst.Subscript, cst.Lambda, cst.NamedExpr, *COMPREHENSIONS)):
            return False
        if not isinstance(node, cst.Name) or id(node) in attributes or node.value in ("True", "False", "None"):
            continue
        enclosing: Scope | None = scope
        while enclosing is not None and enclosing is not model.module_scope:
            if node.value in enclosing.bindings:
                return False  # a parameter or local: it may differ from call to call
            enclosing = enclosing.parent
        bindings = model.module_scope.bindings.get(node.value, ())
        if not bindings or any(node.value in other.globals for other in model.scopes):
            return False
        if any(b.kind != "import" for b in bindings) and len(bindings) != 1:
            return False
    return True


def _submitted_here(function: cst.FunctionDef, path: list[cst.CSTNode], application: _Application) -> bool:
    """Whether the remote function made stays in `function` and is only submitted there: `ray.remote(...)(f)
    .remote(...)`, or a local name used only as `name.remote(...)` / `name.options(...)`. Options read
    from the parameters are then per-call options of one function, not a factory's different functions."""
    made = path[-1]
    if len(path) > 1 and isinstance(path[-2], cst.Call) and path[-2].func is made:
        path, made = path[:-1], path[-2]  # `ray.remote(...)(f)`
    while len(path) > 2 and _method_call(path, "options"):
        path = path[:-2]
    if len(path) > 2 and _method_call(path, "remote"):
        return True
    statement = application.statement
    if isinstance(statement, _DEFINITIONS):
        name = statement.name.value
    elif isinstance(statement, cst.Assign) and statement.value is made and len(statement.targets) == 1:
        target = statement.targets[0].target
        if not isinstance(target, cst.Name):
            return False
        name = target.value
    else:
        return False
    binders = _binders(application.scope, name)
    return bool(binders) and _only_submitted(function.body, name, binders)


def _method_call(path: list[cst.CSTNode], method: str) -> bool:
    """Whether the end of `path` is the receiver of a `.method(...)` call, as in `x.remote(...)`."""
    attribute, call = path[-2], path[-3]
    return isinstance(attribute, cst.Attribute) and attribute.attr.value == method and isinstance(call, cst.Call) and (
        call.func is attribute
    )


def _once_test(test: cst.BaseExpression, assigned: set[str]) -> bool:
    for node in iter_subtree(test):
        if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in assigned:
            return True
        if isinstance(node, cst.Comparison):
            operands = [node.left, *(c.comparator for c in node.comparisons)]
            if any(isinstance(c.operator, (cst.In, cst.NotIn)) for c in node.comparisons):
                return True
            if any(isinstance(o, cst.Name) and o.value == "None" for o in operands):
                return True
            if any(isinstance(c.operator, cst.Equal) for c in node.comparisons) and any(isinstance(o, cst.Integer) for o in operands):
                return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("hasattr", "getattr"):
            return True
    return False


def _loops(loop: Loop | None) -> list[Loop]:
    chain = []
    while loop is not None:
        chain.append(loop)
        loop = loop.parent
    return chain


def _repeats(model: SemanticModel, loop: Loop) -> bool:
    """Whether code in the loop runs more than once, as far as the code shows: not a loop of one
    literal iteration, one that always leaves in its first, or a `while` loop with a `break` or
    `return` (a retry or claim loop, which usually runs once or twice)."""
    iterations = enclosing_iterations(model, loop)
    if iterations is not None and iterations < 2:
        return False
    for outer in _loops(loop):
        if exits_in_first_iteration(outer):
            return False
        if isinstance(outer.node, cst.While) and any(
            isinstance(node, (cst.Break, cst.Return)) for node in iter_subtree(outer.node.body, into_functions=False)
        ):
            return False
    return True


def _varying(model: SemanticModel, loop: Loop) -> set[str]:
    """Names the loops around (and including) `loop` rebind from one iteration to the next, except
    functions and classes defined in them (defining them again is the problem, not a variation)."""
    names: set[str] = set()
    for outer in _loops(loop):
        for name in model.names_bound_in(outer):
            bindings = [b for b in outer.scope.bindings.get(name, ()) if outer.contains_index(b.index)]
            if not bindings or any(b.kind not in ("def", "class") for b in bindings):
                names.add(name)
    return names


def _is_cached(info: FunctionInfo) -> bool:
    for decorator in info.node.decorators:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        name = dotted_name(expr) or ""
        last = name.rsplit(".", 1)[-1].lower()
        if any(word in last for word in CACHE_WORDS):
            return True
    return False


def _repeated_call(model: SemanticModel, info: FunctionInfo) -> CallSite | None:
    """A call of the function in a loop of this module that runs more than once: `f(...)`,
    `self.f(...)` from another method of its class, or `f.remote(...)` for a remote task."""
    name = info.node.name.value
    for site in model.calls_by_tail.get(name, ()):
        if site.loop is None or not _repeats(model, site.loop):
            continue
        func = site.node.func
        if isinstance(func, cst.Name):
            binding = model.reaching_binding(name, site.scope, site.index)
            if binding is not None and binding.node is info.node:
                return site
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and info.owner is not None:
            caller = site.scope.function
            caller_info = model.function_info(caller.node) if caller is not None and isinstance(caller.node, cst.FunctionDef) else None
            if caller_info is None or caller_info.owner is not info.owner:
                continue
            params = [*caller_info.node.params.posonly_params, *caller_info.node.params.params]
            if params and params[0].name.value == func.value.value:
                return site
    for site in model.calls_by_tail.get("remote", ()):
        if site.loop is None or not _repeats(model, site.loop):
            continue
        submission = model.submission(site.node)
        if submission is not None and submission.kind == "task" and submission.remote is not None and submission.remote.target is info.node:
            return site
    return None


class RedefineRemoteInLoopExperiment(Experiment[None]):
    """The user's code as written and fixed, timing the function that holds the loop (its entry point, else
    its tests); else the model: 100 tasks, each from a remote function made again in its loop iteration,
    against the same 100 tasks of one remote function made before the loop (the fix)."""

    facts_type = type(None)
    shares_driver = True
    # By wall time alone: both variants run the same tasks, so Ray's timeline shows no more running at once in
    # B; what B saves is the export of a new function (pickled, sent to the GCS, imported by a worker) per
    # iteration.
    more_parallelism = False
    DEFINITIONS = 100

    def plan(self, subject: Subject) -> Plan:
        return self.on_user_code_or(subject, self.model())

    def model(self) -> Plan:
        work = "def work(x):\n    return x + 1\n\n"
        again = f"refs = []\nfor i in range({self.DEFINITIONS}):\n    task = ray.remote(work)\n    refs.append(task.remote(i))\nreturn ray.get(refs)"
        once = f"task = ray.remote(work)\nrefs = []\nfor i in range({self.DEFINITIONS}):\n    refs.append(task.remote(i))\nreturn ray.get(refs)"
        return Plan(
            Variant("ray.remote in the loop", script(work + timed(again))),
            Variant("ray.remote once", script(work + timed(once))),
            "modelled",
            f"{self.DEFINITIONS} iterations, each submitting one task of a small function",
        )



class RedefineRemoteInLoop(Rule):
    code = "RAY021"
    name = "redefine-remote-in-loop"
    message = "`ray.remote` is applied to the same function or class again and again, as in a loop"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = REMOTE_MADE
    also_tokens = ("for ", "while ")
    experiment = RedefineRemoteInLoopExperiment()
    docs = """
## What it does
Finds `ray.remote` applied repeatedly to the same code:
- a `@ray.remote` (or `@ray.remote(...)`) function or class defined inside a `for` or `while`
  loop;
- `ray.remote(f)` or `ray.remote(...)(f)` called inside a loop or comprehension, when `f` is the
  same in every iteration;
- either of those inside a function (not in a loop of its own) that this module calls in a loop,
  as `f(...)`, `self.f(...)` or, for a remote task, `f.remote(...)`.

## Why is this bad?
Each application of `ray.remote` makes a new remote function (or actor class) with its own ID.
The first `.remote()` call of each one pickles the function with everything it captures, exports
it to the GCS, and every worker that runs it imports it again. Ray's "Anti-pattern: Redefining the
same remote function or class harms performance" describes this; measured on a 2-core machine
with Ray 2.60, 30 re-definitions of a small function took 0.128 s against 0.036 s for one
(3.5×), and the cost grows with the function and what it captures. Ray used to warn once a
function had been exported 100 times ("has been exported 100 times ... define it on the driver
instead"); Ray 2.60 no longer does, so nothing at run time says it is happening.

ray-lint is silent for:
- actor classes: each new class is made to start an actor, which takes about a second, so its
  export (milliseconds) is lost in that (`ray.remote(Worker).options(...).remote()` per worker);
- `ray.remote(g)` in a loop where `g` changes per iteration (`for fn in fns: ray.remote(fn)`):
  a factory that makes different remote functions once each;
- a function that defines a remote function once and is not called in a loop of this module
  (`main()`, a set-up function);
- a factory function whose remote function captures its parameters or locals, or is a parameter
  (`def make(fn): return ray.remote(fn)`), or whose options come from them and which returns or
  stores what it makes: each call makes a different remote function (options from parameters are
  reported when the function only submits it, `ray.remote(num_cpus=cpus)(f).remote(x)`: one
  definition with `.options(num_cpus=cpus)` does the same);
- a cache: under `if f is None`, `if key not in cache`, `if not self._task`, `f = f or ...`,
  `if i == 0`, stored into a dict (`cache[key] = ray.remote(fn)`), or in a function decorated
  with `functools.cache` / `lru_cache`;
- in a function called in a loop, a definition under any condition (`if`, `or`, `except`): a
  flag or a lazy initialisation may make it run once; except an `if` that reads only module-level
  names nothing rebinds (`if is_npu_available:`), which every call takes the same way;
- a remote function made in every iteration but used in one only, under `if i == 0:` where `i`
  counts the loop (`for rank, pg in enumerate(groups):`): its first call exports it, once per loop;
- a loop that may well run once: a literal single iteration, a `break` / `return` at the end of
  its body, or a `while` loop with a `break` or `return` anywhere (a retry or claim loop).

## Example
```python
for x in inputs:
    @ray.remote
    def double(v):
        return v * 2
    refs.append(double.remote(x))
```

## Use instead
```python
@ray.remote
def double(v):
    return v * 2

for x in inputs:
    refs.append(double.remote(x))
```
Pass values that change per iteration as arguments, and per-iteration options through
`double.options(num_cpus=...).remote(x)` on one definition.

## Fix safety
For a definition (or a `name = ray.remote(f)` line) written directly in the body of its loops,
the fix moves it before the outermost loop. It is offered only when that keeps the behaviour:
the definition reads no name the loops rebind (its closure and options are the same in every
iteration), its name is bound nowhere else and is used in the loop only as `name.remote(...)` or
`name.options(...)`, and neither the loop nor the definition holds a multi-line string. It is
still unsafe: the definition now runs even when the loop runs zero times (so a `ray.remote` that
raises, or a later use of the name, behaves differently), and `ray.remote` runs once instead of
once per iteration. There is no fix when the definition captures loop variables (pass them as
arguments) or is in a function called in a loop.

## References
- [Anti-pattern: Redefining the same remote function or class harms performance](https://docs.ray.io/en/latest/ray-core/patterns/redefine-task-actor-loop.html)
"""

    VALID = [
        Valid(
            "import ray\nfor rank, pg in enumerate(groups):\n    @ray.remote\n    def address():\n        return find_ip()\n\n"
            "    if rank == 0:\n        ip = ray.get(address.options(placement_group=pg).remote())\n    start(rank, ip)\n",
            "made in every iteration, called in the first only: exported once",
        ),
        Valid(
            "import ray\nfor i in range(10):\n    RemoteWorker = ray.remote(Worker)\n    actors.append(RemoteWorker.remote(i))\n",
            "an actor class per actor: the export is lost in the actor's start",
        ),
        Valid(
            "from ray import remote\n\nclass Runner:\n    def _submit(self, x):\n        @remote\n        class Worker:\n"
            "            def run(self, v):\n                return v\n        return Worker.remote().run.remote(x)\n\n"
            "    def run_all(self, xs):\n        return [self._submit(x) for x in xs]\n",
            "an actor class defined in a method called in a loop: one export per actor start",
        ),
        Valid(
            "import ray\n@ray.remote\ndef double(v):\n    return v * 2\n\nrefs = [double.remote(x) for x in xs]\n",
            "defined once at module level",
        ),
        Valid(
            "import ray\n\ndef main():\n    @ray.remote\n    def double(v):\n        return v * 2\n"
            "    return ray.get([double.remote(x) for x in range(10)])\n\nif __name__ == '__main__':\n    main()\n",
            "defined in main(), which runs once",
        ),
        Valid(
            "import ray\nremotes = []\nfor fn in (load, parse, store):\n    remotes.append(ray.remote(fn))\n",
            "a factory: a different function in each iteration",
        ),
        Valid(
            "import ray\n_task = None\n\ndef submit(x):\n    global _task\n    if _task is None:\n        _task = ray.remote(work)\n"
            "    return _task.remote(x)\n\nrefs = [submit(x) for x in xs]\n",
            "a lazily initialised module-level cache",
        ),
        Valid(
            "import ray\n\ndef make_task(scale):\n    @ray.remote\n    def task(x):\n        return x * scale\n    return task\n\n"
            "tasks = [make_task(s) for s in scales]\n",
            "a factory whose remote function captures its parameter",
        ),
        Valid(
            "import ray\n\ndef as_remote(fn, cpus):\n    return ray.remote(num_cpus=cpus)(fn)\n\n"
            "remote_fns = [as_remote(f, 1) for f in fns]\n",
            "the function is a parameter",
        ),
        Valid(
            "import functools\nimport ray\n\n@functools.lru_cache(maxsize=None)\ndef remote_of(name):\n"
            "    return ray.remote(WORKERS[name])\n\nfor job in jobs:\n    remote_of(job.kind).remote(job)\n",
            "a memoized factory",
        ),
        Valid(
            "import ray\ncache = {}\nfor job in jobs:\n    if job.kind not in cache:\n        cache[job.kind] = ray.remote(work)\n"
            "    cache[job.kind].remote(job)\n",
            "filled once per key",
        ),
        Valid(
            "for x in xs:\n    @ray.remote\n    def double(v):\n        return v * 2\n    double.remote(x)\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\nfor attempt in range(1):\n    @ray.remote\n    def double(v):\n        return v * 2\n",
            "the loop runs once",
        ),
        Valid(
            "import ray\nfor cls in [Reader, Writer]:\n    handles.append(ray.remote(cls).remote())\n",
            "a different class per iteration",
        ),
        Valid(
            "import ray\n\ndef run(job):\n    return job()\n\nclass Launcher:\n    def make(self, cpus):\n"
            "        self.task = ray.remote(num_cpus=cpus)(run)\n        return self.task\n\n"
            "    def make_all(self, sizes):\n        for cpus in sizes:\n            self.make(cpus)\n",
            "options from a parameter, kept for later: each call makes a different remote function",
        ),
        Valid(
            "import ray\n_started = False\n\ndef run(job):\n    return job()\n\ndef submit(job):\n    global _started\n"
            "    if not _started:\n        _started = True\n        return ray.remote(num_cpus=1)(run).remote(job)\n\n"
            "for job in jobs:\n    submit(job)\n",
            "a module flag that the function itself sets: it runs once",
        ),
        Valid(
            "import ray\nfrom platforms import USE_NPU\n\ndef run(job):\n    return job()\n\ndef submit(job, USE_NPU):\n"
            "    if USE_NPU:\n        return ray.remote(num_cpus=1)(run).remote(job)\n\nfor job in jobs:\n    submit(job, job.npu)\n",
            "the flag is a parameter that shadows the module's: it may differ per call",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfor rank in range(n):\n    @ray.remote\n    def address():\n        return find_ip()\n\n"
            "    if rank == 0:\n        first = ray.get(address.remote())\n    refs.append(address.remote())\n",
            3,
            fixed="import ray\n@ray.remote\ndef address():\n    return find_ip()\nfor rank in range(n):\n"
            "    if rank == 0:\n        first = ray.get(address.remote())\n    refs.append(address.remote())\n",
            note="called under `if rank == 0` and in every iteration too",
        ),
        Invalid(
            "import ray\nrefs = []\nfor x in xs:\n    @ray.remote\n    def double(v):\n        return v * 2\n"
            "    refs.append(double.remote(x))\n",
            4,
            fixed="import ray\nrefs = []\n@ray.remote\ndef double(v):\n    return v * 2\nfor x in xs:\n"
            "    refs.append(double.remote(x))\n",
        ),
        Invalid(
            "import ray\n\ndef run(items):\n    out = []\n    for i in items:\n        # one task per item\n"
            "        @ray.remote(num_cpus=1)\n        def double(i):\n            return i * 2\n"
            "        out.append(double.remote(i))\n    return ray.get(out)\n",
            7,
            fixed="import ray\n\ndef run(items):\n    out = []\n    # one task per item\n    @ray.remote(num_cpus=1)\n"
            "    def double(i):\n        return i * 2\n    for i in items:\n        out.append(double.remote(i))\n"
            "    return ray.get(out)\n",
            note="the parameter shadows the loop variable: hoisting is still correct",
        ),
        Invalid(
            "import ray\nfor scale in scales:\n    @ray.remote\n    def scaled(v):\n        return v * scale\n"
            "    refs.append(scaled.remote(1))\n",
            3,
            note="captures the loop variable: no fix",
        ),
        Invalid(
            "import ray\n\ndef work(x):\n    return x + 1\n\nrefs = [ray.remote(work).remote(x) for x in xs]\n",
            6,
            note="in a comprehension",
        ),
        Invalid(
            "import ray\n\ndef work(x):\n    return x + 1\n\ndef submit(x):\n    task = ray.remote(work)\n"
            "    return task.remote(x)\n\nrefs = []\nfor x in xs:\n    refs.append(submit(x))\n",
            7,
            note="in a function called in a loop",
        ),
        Invalid(
            "import ray\ni = 0\nwhile i < n:\n    task = ray.remote(num_gpus=gpus[i])(work)\n    refs.append(task.remote(i))\n    i += 1\n",
            4,
            note="options that vary: use .options on one definition; no fix",
        ),
        Invalid(
            "import ray\n\ndef run(job):\n    return job()\n\nclass Launcher:\n    def submit(self, job, cpus):\n"
            "        return ray.remote(num_cpus=cpus)(run).remote(job)\n\n    def submit_all(self, jobs):\n"
            "        futures = []\n        for job in jobs:\n            futures.append(self.submit(job, 2))\n        return futures\n",
            8,
            note="options from parameters, submitted at once: per-call options of one function",
        ),
        Invalid(
            "import ray\nfrom platforms import USE_NPU\n\ndef run(job):\n    return job()\n\ndef submit(job, cpus):\n"
            "    if not USE_NPU:\n        task = ray.remote(num_cpus=cpus, num_gpus=1)(run)\n        return task.remote(job)\n"
            "    return run_on_npu(job)\n\nfor job in jobs:\n    submit(job, 2)\n",
            9,
            note="under an imported setting, which every call reads the same",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for application in _applications(model):
            if application.kind == "actor class":
                continue  # each new class starts an actor (about 1 s); its export (about 3 ms) is lost in that
            if application.loop is not None:
                self._check_in_loop(ctx, application, application.loop)
            else:
                self._check_in_function(ctx, application)

    def _check_in_loop(self, ctx: Context, application: _Application, loop: Loop) -> None:
        model = ctx.model
        if not _repeats(model, loop) or _guarded(loop.node, application) or _used_in_one_iteration(model, application, loop):
            return
        varying = _varying(model, loop)
        if application.given is not None:
            given = _free_names(model, application.given)
            if given is None or given & varying:
                return  # a different function (or closure) each time: a factory
        captured = self._captured(model, application, varying)
        if captured is None:
            return
        ctx.report(
            application.report,
            f"{application.what} makes a new remote {application.kind} in every iteration of this loop",
            None if captured else self._hoist(ctx, application, loop),
        )

    def _captured(self, model: SemanticModel, application: _Application, varying: set[str]) -> set[str] | None:
        """The loop-varying names the definition and its options read (None: cannot tell)."""
        parts: list[cst.CSTNode] = []
        if application.definition is not None and (application.given is None or _in_loop_body(model, application)):
            parts.append(application.definition)
        if application.options is not None:
            parts += [arg.value for arg in application.options.args if arg.keyword is not None]
        captured: set[str] = set()
        for part in parts:
            free = _free_names(model, part)
            if free is None:
                return None
            captured |= free & varying
        if application.definition is not None:
            captured.discard(application.definition.name.value)
        return captured

    def _check_in_function(self, ctx: Context, application: _Application) -> None:
        model = ctx.model
        function = application.scope.function
        if function is None or function is not application.scope or not isinstance(function.node, cst.FunctionDef):
            return
        info = model.function_info(function.node)
        assigned = _assigned_names(application.statement)
        if info is None or _is_cached(info) or assigned is None:
            return
        target = application.statement if isinstance(application.statement, _DEFINITIONS) else application.report
        path = model.path_within(info.node.body, target) or []
        if _conditional(model, function, path, assigned):
            return
        local = {name for name, bindings in function.bindings.items() if any(b.kind != "import" for b in bindings)}
        parts: list[cst.CSTNode] = []
        if application.options is not None and not _submitted_here(info.node, path, application):
            parts += [arg.value for arg in application.options.args if arg.keyword is not None]
        if application.given is not None:
            parts.append(application.given)
        if application.definition is not None and function.bindings.get(application.definition.name.value):
            parts.append(application.definition)  # defined in the function: what it captures
            local.discard(application.definition.name.value)
        for part in parts:
            free = _free_names(model, part)
            if free is None or free & local:
                return  # a factory: each call makes a different remote function
        caller = _repeated_call(model, info)
        if caller is None:
            return
        name = info.node.name.value
        ctx.report(
            application.report,
            f"{application.what} runs on every call of `{name}`, which is called in a loop ({ctx.line_of(caller.node)})",
        )

    def _hoist(self, ctx: Context, application: _Application, loop: Loop) -> FixPlan | None:
        """Move the definition (or `name = ray.remote(f)` line) before the outermost loop around it."""
        chain = _loops(loop)
        if any(not isinstance(each.node, (cst.For, cst.While)) for each in chain):
            return None
        inner, outer = chain[0].node, chain[-1].node
        assert isinstance(inner, (cst.For, cst.While)) and isinstance(outer, (cst.For, cst.While))
        moved = self._moved_statement(application, chain[0])
        if moved is None:
            return None
        statement, name = moved
        if not all(_directly_in(nested.node, parent.node) for nested, parent in zip(chain, chain[1:])):
            return None
        if len(application.scope.bindings.get(name, ())) != 1 or not _only_submitted(outer, name, _binders(application.scope, name)):
            return None
        if _has_multiline_string(outer):
            return None
        return _hoist_plan(ctx, inner, outer, statement, application)

    def _moved_statement(self, application: _Application, loop: Loop) -> tuple[cst.CSTNode, str] | None:
        """The statement to move and the name it binds: the decorated definition, or a line that is
        just `name = ray.remote(f)`, directly in the loop's body."""
        body = loop.node.body
        if not isinstance(body, cst.IndentedBlock) or len(body.body) < 2:
            return None
        if isinstance(application.statement, _DEFINITIONS):
            statement: cst.CSTNode = application.statement
            name = application.statement.name.value
        else:
            line = next(
                (s for s in body.body if isinstance(s, cst.SimpleStatementLine) and any(x is application.statement for x in s.body)),
                None,
            )
            assign = application.statement
            if line is None or len(line.body) != 1 or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                return None
            target = assign.targets[0].target
            value = assign.value
            if not isinstance(target, cst.Name) or not (value is application.report or (isinstance(value, cst.Call) and value.func is application.report)):
                return None
            statement, name = line, target.value
        return (statement, name) if any(s is statement for s in body.body) else None


def _in_loop_body(model: SemanticModel, application: _Application) -> bool:
    """Whether the function or class given to `ray.remote(g)` is itself defined in the loop."""
    definition = application.definition
    if definition is None or application.loop is None:
        return False
    found = _definition_binding(model, definition)
    return found is not None and found[1] is not None and application.loop.encloses(found[1])


def _directly_in(inner: cst.CSTNode, outer: cst.CSTNode) -> bool:
    body = getattr(outer, "body", None)
    return isinstance(body, cst.IndentedBlock) and any(statement is inner for statement in body.body)


def _only_submitted(outer: cst.CSTNode, name: str, binders: set[int]) -> bool:
    """Whether every use of `name` in `outer` but the `binders` that store it is `name.remote(...)` or
    `name.options(...)`, so nothing can tell one remote function made there from another."""
    receivers: set[int] = set()
    for node in iter_subtree(outer):
        if isinstance(node, cst.Attribute) and node.attr.value in ("remote", "options") and isinstance(node.value, cst.Name):
            receivers.add(id(node.value))
    return all(
        id(node) in receivers or id(node) in binders
        for node in iter_subtree(outer)
        if isinstance(node, cst.Name) and node.value == name
    )


def _binders(scope: Scope, name: str) -> set[int]:
    """The name nodes that bind `name` in `scope`: assignment targets, and the names of definitions."""
    return {id(b.node.name) if isinstance(b.node, _DEFINITIONS) else id(b.node) for b in scope.bindings.get(name, ())}


def _has_multiline_string(node: cst.CSTNode) -> bool:
    """Re-indenting would change the text of a string that spans lines."""
    for inner in iter_subtree(node):
        if isinstance(inner, cst.SimpleString) and "\n" in inner.value:
            return True
        if isinstance(inner, cst.FormattedStringText) and "\n" in inner.value:
            return True
        if isinstance(inner, cst.FormattedString) and inner.start.endswith(('"""', "'''")):
            return True
    return False


def _hoist_plan(
    ctx: Context, inner: cst.For | cst.While, outer: cst.For | cst.While, statement: cst.CSTNode, application: _Application
) -> FixPlan | None:
    """Replace the outermost loop's text with the moved statement followed by the loop without it.
    libcst gives code without the base indentation, so every line after the first is indented by the
    loop's own (safe: no string in either spans lines); a trailing comment block that libcst counts
    in the loop but its position does not is left where it is."""
    module = ctx.model.module
    span = ctx.model.position(outer)
    lines = module.code.splitlines(keepends=True)
    prefix = lines[span.start.line - 1][: span.start.column]
    if prefix.strip():
        return None
    start = sum(len(line) for line in lines[: span.start.line - 1]) + span.start.column
    end = sum(len(line) for line in lines[: span.end.line - 1]) + span.end.column
    original = module.code[start:end]
    newline = module.default_newline
    full = _indent(module.code_for_node(outer.with_changes(leading_lines=())), prefix, newline)
    if not full.startswith(original):
        return None  # the node's code does not match the text it spans: do not risk an edit
    tail = full[len(original) :]
    remaining = _without(inner, statement)
    if remaining is None:
        return None
    if inner is not outer:
        replaced = outer.deep_replace(inner, remaining)
        if not isinstance(replaced, (cst.For, cst.While)):
            return None
        remaining = replaced
    rest = _indent(module.code_for_node(remaining.with_changes(leading_lines=())), prefix, newline)
    if not rest.endswith(tail):
        return None
    rest = rest[: len(rest) - len(tail)]
    leading = _without_blank_head(getattr(statement, "leading_lines", ()))
    moved = module.code_for_node(statement.with_changes(leading_lines=leading)).rstrip()  # type: ignore[attr-defined]
    text = _indent(moved, prefix, newline) + newline + prefix + rest
    return FixPlan(f"Move {application.what} before the loop", ((outer, text),), Applicability.UNSAFE)


def _without(loop: cst.For | cst.While, statement: cst.CSTNode) -> cst.For | cst.While | None:
    """The loop with `statement` taken out of its body (the next statement loses the blank lines
    that separated them, when the statement came first)."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    kept = [s for s in body.body if s is not statement]
    if len(kept) != len(body.body) - 1 or not kept:
        return None
    if body.body[0] is statement:
        head = kept[0]
        kept[0] = head.with_changes(leading_lines=_without_blank_head(head.leading_lines))
    return loop.with_changes(body=body.with_changes(body=kept))


def _without_blank_head(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    kept = list(lines)
    while kept and kept[0].comment is None:
        kept.pop(0)
    return kept


def _indent(code: str, prefix: str, newline: str) -> str:
    """Indent every line after the first by `prefix` (blank lines stay empty)."""
    lines = code.split(newline)
    return newline.join([lines[0], *(prefix + line if line.strip() else "" for line in lines[1:])])
