"""RAY008 sync-actor-busy-loop: a method of a synchronous actor loops forever, so no other call ever runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import SCHEDULED_S, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    ClassInfo,
    FunctionInfo,
    Loop,
    Scope,
    block_statements,
    dotted_name,
    has_exit,
    is_true,
    iter_subtree,
    scope_within,
)
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

# Calls that end the loop as surely as a `return`: the process or the actor goes away.
EXIT_CALLS = ("sys.exit", "os._exit", "ray.actor.exit_actor")
EXIT_BUILTINS = frozenset({"exit", "quit"})
# Calls that start code which runs beside the actor's one thread and may change a flag.
THREAD_STARTERS = ("threading.Thread", "threading.Timer", "signal.signal", "concurrent.futures.ThreadPoolExecutor", "_thread.start_new_thread")
EVENT_CHANGERS = frozenset({"set", "clear"})


def _self_name(method: FunctionInfo) -> str | None:
    """The name a method calls its instance by (`self`), or None for a static or class method."""
    params = method.node.params
    positional = [*params.posonly_params, *params.params]
    if not positional or any(dotted_name(d.decorator) in ("staticmethod", "classmethod") for d in method.node.decorators):
        return None
    return positional[0].name.value


def _self_attribute(expr: cst.BaseExpression, this: str) -> str | None:
    """`running` for `self.running`."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == this:
        return expr.attr.value
    return None


def _flags_of(test: cst.BaseExpression, this: str) -> list[tuple[str, bool]] | None:
    """For `while self.running`, `while not self.stopped`, `while not self.stop_event.is_set()` and
    `and`/`or` combinations of them: each attribute that decides the loop, and whether it is an event
    (changed by `.set()`/`.clear()`); None when the test reads anything else."""
    if isinstance(test, cst.BooleanOperation):
        left, right = _flags_of(test.left, this), _flags_of(test.right, this)
        return left + right if left is not None and right is not None else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    attribute = _self_attribute(test, this)
    if attribute is not None:
        return [(attribute, False)]
    if (
        isinstance(test, cst.Call)
        and not test.args
        and isinstance(test.func, cst.Attribute)
        and test.func.attr.value == "is_set"
    ):
        attribute = _self_attribute(test.func.value, this)
        if attribute is not None:
            return [(attribute, True)]
    return None


@dataclass(frozen=True)
class BusyLoopFacts:
    """What the experiment needs of the flagged loop: the names the message gives."""

    method: str  # the method that loops
    other: str  # a method that cannot run meanwhile: the flag's setter, or another public method
    flag: str | None  # the attribute the loop waits on (`while self.running:`), None for `while True:`


class BusyLoopExperiment(ReproductionExperiment[BusyLoopFacts]):
    """A synchronous actor whose method loops as the flagged one does, then a call of the other
    method, waited for with a timeout; against the same class as a threaded actor
    (`max_concurrency=2`), where the call runs beside the loop."""

    facts_type = BusyLoopFacts
    TIMEOUT_S = 2.0
    beside_others = True  # a sync actor never runs the second call, on an idle cluster too

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        method, other, flag = facts.method, facts.other, facts.flag
        test = f"self.{flag}" if flag is not None else "True"
        begin = f"        self.{flag} = True\n" if flag is not None else ""
        act = f"        self.{flag} = False\n" if flag is not None else ""
        actor = (
            "@ray.remote{options}\nclass Looper:\n    def __init__(self):\n"
            f"        self.ray_lint_turns = 0\n{begin}\n"
            f"    def {method}(self):\n        while {test}:\n            self.ray_lint_turns += 1\n            time.sleep(0.01)\n"
            "        return self.ray_lint_turns\n\n"
            f"    def {other}(self):\n{act}        return self.ray_lint_turns\n\n"
        )
        after = (
            f"    ray.get(loop, timeout={SCHEDULED_S})\n"
            f"    __ray_lint_evidence__ = {{'right': '`{other}` ran after ' + waited + ' and `{method}` returned'}}\n"
            if flag is not None
            else f"    __ray_lint_evidence__ = {{'right': '`{other}` ran after ' + waited + ' while `{method}` kept looping'}}\n"
        )
        calls = (
            "looper = Looper.remote()\n"
            f"loop = looper.{method}.remote()\n"
            "time.sleep(0.3)  # the loop is running\n"
            "start = time.perf_counter()\n"
            "try:\n"
            f"    ray.get(looper.{other}.remote(), timeout=WAIT_S)\n"
            "except ray.exceptions.GetTimeoutError:\n"
            "    __ray_lint_evidence__ = {\n"
            f"        'wrong': '`{other}` still pending after WAIT_S s: the actor never left `{method}`'\n"
            "    }\n"
            "else:\n"
            "    waited = f'{time.perf_counter() - start:.2f} s'\n"
            f"{after}"
            "ray.kill(looper)\n"
        )
        loops = f"until `{other}` changes `self.{flag}`" if flag is not None else "forever"
        return Plan(
            # the threaded actor's call may wait longer: it returns as soon as it ran, in well under a second
            Variant("sync actor", script(actor.replace("{options}", "") + calls.replace("WAIT_S", f"{self.TIMEOUT_S:g}"))),
            Variant("threaded actor", script(actor.replace("{options}", "(max_concurrency=2)") + calls.replace("WAIT_S", f"{SCHEDULED_S:g}"))),
            "modelled",
            f"an actor whose `{method}` loops {loops}, then a call of `{other}` waited for {self.TIMEOUT_S:g} s",
        )


class SyncActorBusyLoop(Rule):
    code = "RAY008"
    name = "sync-actor-busy-loop"
    message = "A method of a synchronous actor loops forever, so the actor never runs another method call"
    severity = Severity.ERROR
    category = "correctness"
    tokens = ("while ",)
    also_tokens = REMOTE_MADE
    experiment = BusyLoopExperiment()
    docs = """
## What it does
Finds a method of a synchronous actor (a `@ray.remote` class with no `async def` method, no
`max_concurrency` above 1 and no concurrency groups) that loops forever:
- a `while True:` loop with no `break`, `return`, `raise` or `sys.exit()` in its body, in an
  actor that has another public method someone may call;
- a `while self.running:` (or `while not self.stopped:`, `while not self.stop_event.is_set():`)
  loop whose body never changes that flag, when only another method of the actor (`stop()`)
  changes it.

## Why is this bad?
A synchronous actor runs one method call at a time, to the end, on one thread. While the loop
runs, every other call on the actor waits in its queue forever: `ray.get(actor.stats.remote())`
hangs, and a `stop()` meant to end the loop never runs, so the loop never ends. Ray's
"Pattern: Using asyncio to run actor methods concurrently" page shows this hang. Measured on a
2-core machine with Ray 2.60: a `ping` sent after `run()` started its loop timed out (GetTimeoutError
after 2.0 s) and would have waited forever.

ray-lint is silent for:
- async actors (any `async def` method) and threaded actors (`max_concurrency` above 1, or
  concurrency groups, in the decorator or at `.options(...)`), whose other calls do run; and for
  actor classes handed to other code or given `**options`, which may set those options;
- loops that can exit (`break`, `return`, `raise`, `sys.exit()`, `ray.actor.exit_actor()`), and
  flag loops whose body (or a method it calls on `self`) changes the flag. An exit only under a
  flag the actor fixes at construction (`if self.eval: break`, with `self.eval` assigned in
  `__init__` alone) does not count: the loop ends for some actors of the class and runs forever
  in the others;
- generator methods (streaming results) and private (`_loop`) or dunder methods, and methods
  the class itself refers to (a thread's `target=self.run`);
- flag loops in actors that start threads, timers or signal handlers, which may set the flag;
- a `while True` actor whose only other public methods are trivial (`ready()` returning a
  constant): such an actor is a dedicated loop, and nothing else is called on it.

## Example
```python
@ray.remote
class TaskExecutor:
    def __init__(self, task_store):
        self.task_store = task_store
        self.num_executed = 0

    def run(self):
        while True:
            task = ray.get(self.task_store.next.remote())
            self.execute(task)
            self.num_executed += 1

    def get_num_executed(self):
        return self.num_executed  # never runs once `run` started
```

## Use instead
An async actor, whose methods interleave at each `await`:
```python
@ray.remote
class TaskExecutor:
    async def run(self):
        while True:
            task = await self.task_store.next.remote()
            self.execute(task)
            self.num_executed += 1
            await asyncio.sleep(0)

    async def get_num_executed(self):
        return self.num_executed
```
or a threaded actor (`@ray.remote(max_concurrency=2)`, guarding shared state with a lock), or
a loop that ends (a stop condition it reads itself).

## Fix safety
There is no automatic fix: making the actor async or threaded changes how all of its methods
run.

## References
- [Pattern: Using asyncio to run actor methods concurrently](https://docs.ray.io/en/latest/ray-core/patterns/concurrent-operations-async-actor.html)
- [AsyncIO / concurrency for actors](https://docs.ray.io/en/latest/ray-core/actors/async_api.html)
- [Limiting concurrency per method with concurrency groups](https://docs.ray.io/en/latest/ray-core/actors/concurrency_group_api.html)
- [ray-project/ray#8710: a `stopSignal` call never runs while the actor's loop does](https://github.com/ray-project/ray/issues/8710)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nclass Sampler:\n    def __init__(self, limit):\n        self.limit = limit\n"
            "        self.sampling = True\n\n    def sample(self):\n        while self.sampling:\n            self.limit -= 1\n"
            "            if self.limit < 0:\n                break\n\n    def stop(self):\n        self.sampling = False\n",
            "the exit reads a counter the loop changes",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Executor:\n    async def run(self):\n        while True:\n"
            "            await self.step()\n    async def count(self):\n        return self.n\n",
            "an async actor: other calls run at each await",
        ),
        Valid(
            "import ray\n@ray.remote(max_concurrency=2)\nclass Executor:\n    def run(self):\n        while True:\n"
            "            self.step()\n    def count(self):\n        return self.n\n",
            "a threaded actor",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Executor:\n    def run(self):\n        while True:\n"
            "            self.step()\n    def count(self):\n        return self.n\n\n"
            "e = Executor.options(max_concurrency=4).remote()\n",
            "made threaded at `.options(...)`",
        ),
        Valid(
            "import ray\n@ray.remote(concurrency_groups={'io': 1, 'compute': 1})\nclass Executor:\n    def run(self):\n"
            "        while True:\n            self.step()\n    def count(self):\n        return self.n\n",
            "concurrency groups",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Executor:\n    def run(self):\n        while True:\n"
            "            task = ray.get(self.store.next.remote())\n            if task is None:\n                break\n"
            "            self.execute(task)\n    def count(self):\n        return self.n\n",
            "the loop ends when the queue is drained",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Server:\n    def __init__(self):\n        self.port = 80\n    def serve(self):\n"
            "        while True:\n            self.handle(self.accept())\n    def ready(self):\n        return True\n",
            "the loop method is the only real method; `ready` is a readiness probe",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Poller:\n    def run(self):\n        while self.running:\n"
            "            if self.poll() is None:\n                self.running = False\n    def stop(self):\n"
            "        self.running = False\n",
            "the loop changes its own flag",
        ),
        Valid(
            "import ray\nimport threading\n@ray.remote\nclass Poller:\n    def __init__(self):\n        self.running = True\n"
            "        threading.Thread(target=self._loop, daemon=True).start()\n    def _loop(self):\n"
            "        while self.running:\n            self.poll()\n    def stop(self):\n        self.running = False\n",
            "the loop runs on a thread of its own",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Producer:\n    def stream(self):\n        while True:\n"
            "            yield self.next_item()\n    def count(self):\n        return self.n\n",
            "a generator method streams its results",
        ),
        Valid(
            "class Executor:\n    def run(self):\n        while True:\n            self.step()\n    def count(self):\n"
            "        return self.n\n",
            "a plain class, not an actor",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Executor:\n    def run(self):\n        while True:\n            self.step()\n"
            "    def count(self):\n        return self.n\n\nmake_group(Executor)\n",
            "handed to other code, which may set max_concurrency",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\nclass Sampler:\n    def __init__(self, eval_mode):\n        self.eval = eval_mode\n"
            "        self.sampling = True\n\n    def sample(self):\n        while self.sampling:\n            done = self.step()\n"
            "            if done and self.eval:\n                break\n\n    def stop(self):\n        self.sampling = False\n\n"
            "    def step(self):\n        return True\n",
            9,
            note="an exit only for evaluation actors: the training actors loop until `stop`, which never runs",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass TaskExecutor:\n    def __init__(self, store):\n        self.store = store\n"
            "        self.n = 0\n    def run(self):\n        while True:\n            task = ray.get(self.store.next.remote())\n"
            "            self.execute(task)\n            self.n += 1\n    def get_num_executed(self):\n        return self.n\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Poller:\n    def __init__(self):\n        self.running = True\n    def run(self):\n"
            "        while self.running:\n            self.poll()\n    def stop(self):\n        self.running = False\n",
            7,
            note="`stop` can never run",
        ),
        Invalid(
            "import ray\nimport threading\nimport time\n@ray.remote\nclass Monitor:\n    def __init__(self):\n"
            "        self.done = threading.Event()\n    def watch(self):\n        while not self.done.is_set():\n"
            "            self.sample()\n            time.sleep(1)\n    def shutdown(self):\n        self.done.set()\n",
            9,
            note="an Event set only by another method",
        ),
        Invalid(
            "import ray\nimport time\nclass Heartbeat:\n    def beat(self):\n        while 1:\n            self.send()\n"
            "            time.sleep(5)\n    def last(self):\n        return self.t\n\nRemoteHeartbeat = ray.remote(Heartbeat)\n",
            5,
            note="made an actor with ray.remote(Cls)",
        ),
        Invalid(
            "import ray\n@ray.remote(max_concurrency=1, num_cpus=1)\nclass Trainer:\n    def train(self):\n"
            "        while not self.stopped:\n            self.step()\n    def step(self):\n        self.steps += 1\n"
            "    def stop(self):\n        self.stopped = True\n",
            5,
            note="max_concurrency=1 is not threaded; the helper the loop calls does not touch the flag",
        ),
        Invalid(
            "from ray import remote\n@remote\nclass Worker:\n    def loop(self):\n        for _ in range(3):\n"
            "            while True:\n                try:\n                    self.work()\n                except ValueError:\n"
            "                    continue\n    def status(self):\n        return self.state\n",
            6,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        while_loops = [loop for loop in model.loops if isinstance(loop.node, cst.While)]
        if not while_loops:
            return
        for remote in model.remote_defs:
            cls = remote.cls
            if cls is None or not self._runs_one_call_at_a_time(model, remote, cls):
                continue
            for method in cls.methods:
                this = _self_name(method)
                if this is None or not _is_entry_point(cls, method, this):
                    continue
                for loop in while_loops:
                    if loop.scope is method.scope:
                        self._check_loop(ctx, cls, method, this, loop)

    def _runs_one_call_at_a_time(self, model: SemanticModel, remote: RemoteDef, cls: ClassInfo) -> bool:
        if remote.is_async_actor or remote.is_threaded_actor or remote.options_unknowable:
            return False
        return not any(_is_async_class(model, base.value, cls) for base in cls.node.bases)

    def _check_loop(self, ctx: Context, cls: ClassInfo, method: FunctionInfo, this: str, loop: Loop) -> None:
        model = ctx.model
        node = loop.node
        assert isinstance(node, cst.While)
        if _can_exit(node.body, this, _constructor_only(model, cls, this)) or _calls_exit(model, loop):
            return
        name = method.node.name.value
        actor = cls.node.name.value
        if is_true(node.test):
            others = [m.node.name.value for m in cls.methods if m is not method and _is_entry_point(cls, m, this) and not _is_trivial(m)]
            if not others:
                return
            ctx.report(
                node,
                f"`{name}` of sync actor `{actor}` loops forever, so `{others[0]}` and later calls never run",
                facts=BusyLoopFacts(name, others[0], None),
            )
            return
        flags = _flags_of(node.test, this)
        if flags is None or _starts_threads(model, cls):
            return
        if any(_changes_flag_in_loop(model, cls, loop, this, attribute, is_event) for attribute, is_event in flags):
            return
        helpers = _methods_reached(model, cls, method.node.body, this)
        setters = [
            (m.node.name.value, attribute)
            for m in cls.methods
            if m is not method and m.node.name.value != "__init__" and all(m is not helper for helper in helpers)
            for attribute, is_event in flags
            if _changes_flag(model, m, attribute, is_event)
        ]
        if not setters:
            return
        setter, attribute = setters[0]
        ctx.report(
            node,
            f"`{name}` waits on `{this}.{attribute}`, but sync actor `{actor}` cannot run `{setter}` meanwhile",
            facts=BusyLoopFacts(name, setter, attribute),
        )


def _is_async_class(model: SemanticModel, base: cst.BaseExpression, cls: ClassInfo) -> bool:
    """Whether a base class defined in this module has an `async def` method (which makes the actor async)."""
    if not isinstance(base, cst.Name):
        return False
    parent = cls.scope.parent
    binding = model.reaching_binding(base.value, parent, AFTER_ALL) if parent is not None else None
    if binding is None or binding.kind != "class":
        return False
    return any(
        info.node is binding.node and any(m.is_async for m in info.methods) for info in model.classes
    )


def _is_public(method: FunctionInfo) -> bool:
    return not method.node.name.value.startswith("_")


def _is_entry_point(cls: ClassInfo, method: FunctionInfo, this: str) -> bool:
    """A public, non-generator method that the class itself never names: callers reach it only as an
    actor call (a method the class refers to may be a thread's target or a helper of another call)."""
    name = method.node.name.value
    if not _is_public(method) or any(isinstance(n, (cst.Yield, cst.Await)) for n in iter_subtree(method.node.body, into_functions=False)):
        return False
    return not any(_self_attribute(node, this) == name for node in iter_subtree(cls.node.body))


def _is_trivial(method: FunctionInfo) -> bool:
    """A method whose body only returns a constant or does nothing: a readiness probe such as `ready()`."""
    statements = [s for s in block_statements(method.node.body) if not _is_docstring(s)]
    if len(statements) != 1:
        return not statements
    statement = statements[0]
    if isinstance(statement, cst.Pass):
        return True
    if isinstance(statement, cst.Return):
        value = statement.value
        return value is None or isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)) or (
            isinstance(value, cst.Name) and value.value in ("True", "False", "None")
        )
    return False


def _is_docstring(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.Expr) and isinstance(statement.value, (cst.SimpleString, cst.ConcatenatedString))


def _can_exit(body: cst.CSTNode, this: str, fixed: frozenset[str]) -> bool:
    """An exit in the loop's body (`has_exit`) that is not only under a flag the actor fixes at construction
    (`fixed`: `if self.eval: break`, with `self.eval` set in `__init__` alone): such an exit ends the loop
    for some actors of the class, and the others loop forever."""
    for statement in block_statements(body):
        if isinstance(statement, cst.If) and fixed and _gated_by_fixed_flag(statement.test, this, fixed):
            if statement.orelse is not None and _can_exit(statement.orelse, this, fixed):
                return True  # the other actors' branch
            continue
        if isinstance(statement, cst.If):
            if _can_exit(statement.body, this, fixed) or (statement.orelse is not None and _can_exit(statement.orelse, this, fixed)):
                return True
            continue
        if has_exit(statement):
            return True
    return False


def _constructor_only(model: SemanticModel, cls: ClassInfo, this: str) -> frozenset[str]:
    """The attributes of `self` that only `__init__` assigns: fixed for the life of each actor."""
    init = model.method(cls, "__init__")
    if init is None or this != "self":  # the model indexes writes through `self`, as methods name it
        return frozenset()
    return frozenset(
        name for name, stores in model.self_stores(cls).items() if all(store.scope.function is init.scope for store in stores)
    )


def _gated_by_fixed_flag(test: cst.BaseExpression, this: str, fixed: frozenset[str]) -> bool:
    """A condition that some actors of the class never meet, whatever happens in the loop: a flag fixed at
    construction (`self.eval`, `not self.eval`), alone or as a part of an `and` (`done and self.eval`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_fixed(test.expression, this, fixed)
    if isinstance(test, cst.BooleanOperation):
        left, right = _gated_by_fixed_flag(test.left, this, fixed), _gated_by_fixed_flag(test.right, this, fixed)
        return (left or right) if isinstance(test.operator, cst.And) else (left and right)
    return _is_fixed(test, this, fixed)


def _is_fixed(expr: cst.BaseExpression, this: str, fixed: frozenset[str]) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == this and expr.attr.value in fixed


def _calls_exit(model: SemanticModel, loop: Loop) -> bool:
    """`sys.exit()`, `os._exit()` or `ray.actor.exit_actor()` in the loop's body (not in a nested function)."""
    sites = [site for name in EXIT_CALLS for site in model.calls_to(name)]
    sites += [site for name in EXIT_BUILTINS for site in model.calls_by_tail.get(name, ()) if isinstance(site.node.func, cst.Name)]
    return any(loop.contains_index(site.index) and site.scope.function is loop.scope for site in sites)


def _starts_threads(model: SemanticModel, cls: ClassInfo) -> bool:
    """Whether the class starts threads, timers or signal handlers, any of which may change a flag."""
    return any(scope_within(site.scope, cls.scope) for name in THREAD_STARTERS for site in model.calls_to(name))


def _methods_reached(model: SemanticModel, cls: ClassInfo, code: cst.CSTNode, this: str) -> list[FunctionInfo]:
    """The methods that `code` calls on `self`, and those they call on theirs, transitively."""
    reached: list[FunctionInfo] = []
    pending: list[tuple[cst.CSTNode, str]] = [(code, this)]
    while pending:
        current, name = pending.pop()
        for node in iter_subtree(current):
            if isinstance(node, cst.Call) and _self_attribute(node.func, name) is not None:
                assert isinstance(node.func, cst.Attribute)
                callee = model.method(cls, node.func.attr.value)
                callee_self = _self_name(callee) if callee is not None else None
                if callee is not None and callee_self is not None and all(callee is not m for m in reached):
                    reached.append(callee)
                    pending.append((callee.node.body, callee_self))
    return reached


def _changes_flag_in_loop(model: SemanticModel, cls: ClassInfo, loop: Loop, this: str, attribute: str, is_event: bool) -> bool:
    """Whether the loop's body may change the flag: directly, through a method it calls on `self`
    (one inherited from a base class counts), or by handing `self` or the flag to a call."""
    assert isinstance(loop.node, cst.While)
    for node in iter_subtree(loop.node.body):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value in ("setattr", "vars"):
                return True
            for arg in node.args:
                if (isinstance(arg.value, cst.Name) and arg.value.value == this) or _self_attribute(arg.value, this) == attribute:
                    return True
            called = _self_attribute(func, this)
            if called is not None and cls.node.bases and model.method(cls, called) is None:
                return True

    def in_loop(scope: Scope, index: int) -> bool:
        return loop.contains_index(index) and scope_within(scope, loop.scope)

    if _changes_flag_where(model, in_loop, this, attribute, is_event):
        return True
    return any(_changes_flag(model, m, attribute, is_event) for m in _methods_reached(model, cls, loop.node.body, this))


def _changes_flag(model: SemanticModel, method: FunctionInfo, attribute: str, is_event: bool) -> bool:
    this = _self_name(method)
    if this is None:
        return False
    return _changes_flag_where(model, lambda scope, _: scope_within(scope, method.scope), this, attribute, is_event)


def _changes_flag_where(
    model: SemanticModel, where: Callable[[Scope, int], bool], this: str, attribute: str, is_event: bool
) -> bool:
    """Whether code at a place `where` accepts (scope, event number) assigns or deletes `self.<attribute>`
    (also `self.<attribute>[k] = ...`) or, for an event, calls `self.<attribute>.set()` or `.clear()`."""
    for store in model.stores:
        if where(store.scope, store.index) and any(_self_attribute(t, this) == attribute for t in _target_parts(store.target)):
            return True
    if not is_event:
        return False
    for method_name in EVENT_CHANGERS:
        for site in model.calls_by_tail.get(method_name, ()):
            func = site.node.func
            if isinstance(func, cst.Attribute) and _self_attribute(func.value, this) == attribute and where(site.scope, site.index):
                return True
    return False


def _target_parts(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The attribute expressions an assignment target writes: unpacked tuples, and the object under a subscript."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_parts(element.value)
    elif isinstance(target, cst.Subscript):
        yield from _target_parts(target.value)
    else:
        yield target
