"""Whether a loop's iterations depend on each other, for the rules about results fetched inside loops
and actors called from them: what a loop does with the results it fetches (`LoopResults`), whether it
waits for one call at a time on purpose, repeats the same call, sends every call to one actor, or
carries a value from one iteration to the next.

The memos (one `LoopResults` per loop and fetch functions, the attributes a loop assigns) live in the
model's `analysis` cache, so they go with the model."""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from ray_lint.analyses.loops import SLEEPS
from ray_lint.model import RemoteDef, Submission
from ray_lint.python_model import (
    COMPREHENSIONS,
    CONTAINER_MUTATORS,
    EXITS,
    Loop,
    PythonModel,
    between,
    block_statements,
    child_nodes,
    dotted_name,
    has_exit,
    is_true,
    iter_subtree,
    keys_read,
    names_read,
    target_keys,
    target_names,
)

class Waiting(Protocol):
    """Where a loop waits for a result: a `ray.get(...)` call site, or an `await` a rule located."""

    @property
    def node(self) -> cst.CSTNode: ...
    @property
    def index(self) -> int: ...
    @property
    def statement(self) -> cst.CSTNode | None: ...


TIMERS = ("time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns", "time.monotonic_ns")


class LoopResults:
    """What a loop's body does with the results it fetches, by walking its statements in order and
    tracking which names hold a fetched result (directly, through other such names, or assigned under
    a condition that reads one). The walk repeats with the state one iteration leaves behind, so values
    carried to the next iteration count, until nothing changes.

    - `derived`: names, dotted names (`self.last`) and containers filled by `.append(...)` that hold a
      result at some point of an iteration;
    - `exits_on_result`: a break, return or raise under a condition read from a result;
    - `guarded_nodes`: calls that run only under such a condition, or after an `if` on one that leaves
      the iteration (`if name in seen: continue`);
    - `polls`: the loop sleeps (`time.sleep`, `asyncio.sleep`): a polling loop is sequential by design.

    With `awaits`, the value of any `await` counts as a fetched result too (an ObjectRef is awaitable).
    """

    MAX_PASSES = 4

    def __init__(
        self,
        model: PythonModel,
        loop: Loop,
        get_functions: tuple[str, ...],
        helpers: frozenset[str] = frozenset(),
        awaits: bool = False,
    ) -> None:
        """`get_functions`: qualified names that fetch a result (`ray.get` and any a rule adds);
        `helpers`: names of functions (or wrapper methods, called as `w.name(...)`) that fetch one; `awaits`: whether an
        `await` fetches one too."""
        self.model = model
        self.get_functions = get_functions
        self.helpers = helpers
        self.awaits = awaits
        self.derived: set[str] = set()
        self.exits_on_result = False
        self.polls = False
        self.guarded_nodes: set[cst.CSTNode] = set()
        targets = target_names(loop.node.target) if isinstance(loop.node, cst.For) else set()
        carried: set[str] = set()
        for _ in range(self.MAX_PASSES):
            state = carried - targets  # the loop's own target is rebound from its iterable each time
            if isinstance(loop.node, cst.While) and self._reads_result(loop.node.test, state):
                self.exits_on_result = True
            if isinstance(loop.node, COMPREHENSIONS):
                state = self._visit(loop.node, state, guarded=False)
            else:
                state = self._block(loop.node.body, state, guarded=False)
            self.derived |= state
            if state <= carried:
                break
            carried |= state

    def _reads_result(self, expr: cst.CSTNode, state: set[str]) -> bool:
        if keys_read(expr) & state:
            return True
        for node in iter_subtree(expr, into_functions=False):
            if self.awaits and isinstance(node, cst.Await):
                return True
            if isinstance(node, cst.Call):
                site = self.model.call_site(node)
                if site is not None and self.model.call_name(site) in self.get_functions:
                    return True
                if isinstance(node.func, cst.Name) and node.func.value in self.helpers:
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in self.helpers:  # a wrapper method
                    return True
        return False

    def _block(self, block: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        gated = False
        for statement in block_statements(block):
            if gated:  # `if name in known: continue` came first: this runs only under a condition read from a result
                self.guarded_nodes.update(
                    node for node in iter_subtree(statement, into_functions=False) if isinstance(node, (cst.Call, cst.Await))
                )
            state = self._visit(statement, state, guarded)
            if isinstance(statement, cst.If) and self._reads_result(statement.test, state) and _leaves_block(statement.body):
                gated = True
        return state

    def _visit(self, node: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        """The state after `node`, given the state before it."""
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return state
        if isinstance(node, (cst.If, cst.While)):
            inner = guarded or self._reads_result(node.test, state)
            after = self._block(node.body, set(state), inner)
            if isinstance(node, cst.While):
                after = self._block(node.body, after, inner)  # a second round sees what the first left
            if isinstance(node.orelse, cst.If):
                after |= self._visit(node.orelse, set(state), inner)
            elif node.orelse is not None:
                after |= self._block(node.orelse.body, set(state), inner)
            return state | after
        if isinstance(node, cst.For):
            self._visit_expression(node.iter, state, guarded)
            inner_state = set(state)
            if self._reads_result(node.iter, state):
                inner_state |= target_names(node.target)
            after = self._block(node.body, inner_state, guarded)
            after = self._block(node.body, after, guarded)
            if node.orelse is not None:
                after = self._block(node.orelse.body, after, guarded)
            return state | after
        if isinstance(node, cst.BaseCompoundStatement):  # try, with, match: run every part in order
            for child in child_nodes(node):
                if isinstance(child, (cst.BaseSuite, cst.ExceptHandler, cst.Else, cst.Finally)):
                    state = state | self._block(child, set(state), guarded)
                else:
                    self._visit_expression(child, state, guarded)
            return state
        return self._visit_expression(node, state, guarded)

    def _visit_expression(self, node: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        """A simple statement, or a header part of a compound one."""
        if isinstance(node, (cst.Break, cst.Return, cst.Raise)) and guarded:
            self.exits_on_result = True
        for inner in iter_subtree(node, into_functions=False):
            if guarded and isinstance(inner, cst.Await):
                self.guarded_nodes.add(inner)
            if isinstance(inner, cst.Call):
                if guarded:
                    self.guarded_nodes.add(inner)
                site = self.model.call_site(inner)
                if site is not None and self.model.call_name(site) in SLEEPS:
                    self.polls = True
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            names = set().union(*(target_keys(t) for t in targets))
            holds_result = guarded or self._reads_result(node.value, state)
            if isinstance(node, cst.AugAssign) or any(isinstance(t, cst.Subscript) for t in targets):
                holds_result = holds_result or bool(names & state)  # `xs[k] = v` keeps what `xs` held
            return (state | names) if holds_result else (state - names)
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):  # `self.states.append(ray.get(r))`
            func = node.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in CONTAINER_MUTATORS:
                container = dotted_name(func.value)
                if container is not None and any(self._reads_result(arg.value, state) for arg in node.value.args):
                    return state | {container}
        return state


def _leaves_block(block: cst.BaseSuite) -> bool:
    """Whether a block ends by leaving the iteration: `continue`, `break`, `return` or `raise`."""
    statements = block_statements(block)
    return bool(statements) and isinstance(statements[-1], (cst.Continue, *EXITS))


class _Memos:
    """The per-model memos of this module, kept by `PythonModel.analysis`."""

    def __init__(self, model: PythonModel) -> None:
        self.results: dict[tuple[int, tuple[str, ...], frozenset[str], bool], LoopResults] = {}
        self.attributes_stored: dict[int, set[str | None]] = {}
        self.runs_alone: dict[int, bool] = {}  # by loop: `_runs_alone`


def loop_results(
    model: PythonModel,
    loop: Loop,
    get_functions: tuple[str, ...] = ("ray.get",),
    helpers: frozenset[str] = frozenset(),
    awaits: bool = False,
) -> LoopResults:
    """What the loop does with the results it fetches (see `LoopResults`); computed once per loop.
    `helpers`: names of functions in this module that fetch a result themselves; `awaits`: whether an
    `await` fetches one too."""
    memo = model.analysis(_Memos).results
    key = (id(loop), get_functions, helpers, awaits)
    results = memo.get(key)
    if results is None:
        results = memo[key] = LoopResults(model, loop, get_functions, helpers, awaits)
    return results


def sequential_by_design(model: PythonModel, loop: Loop, waiting: Waiting, results: LoopResults | None = None) -> bool:
    """Whether a loop waits for one call at a time on purpose: it always exits in its first
    iteration, or right after the wait; it retries until an attempt succeeds (`try: ...; break`);
    it runs forever with no exit (a consumer: there is no "all" to submit first); it times each
    iteration (a benchmark); or it polls, or decides whether to go on, from the results it fetches
    (`results`: the loop's `LoopResults` for the caller's fetch functions; `ray.get` by default)."""
    if not isinstance(loop.node, (cst.For, cst.While)):
        return False
    memo = model.analysis(_Memos).runs_alone
    if id(loop) not in memo:
        memo[id(loop)] = _runs_alone(loop.node)
    if memo[id(loop)]:
        return True
    if waiting.statement is not None and model.exits_after(loop.node.body, waiting.statement):
        return True
    timers = [site.index for name in TIMERS for site in between(model.calls_to(name), loop.start, loop.end)]
    if any(i < waiting.index for i in timers) and any(i > waiting.index for i in timers):
        return True
    facts = results or loop_results(model, loop)
    return facts.exits_on_result or facts.polls


def _runs_alone(loop: cst.For | cst.While) -> bool:
    """What `sequential_by_design` can tell from the loop alone, whatever it waits for: it always exits in
    its first iteration, retries until an attempt succeeds, or runs forever with no exit."""
    body = block_statements(loop.body)
    if any(isinstance(s, EXITS) for s in body):
        return True
    if any(isinstance(s, cst.Try) and any(isinstance(t, EXITS) for t in block_statements(s.body)) for s in body):
        return True
    return isinstance(loop, cst.While) and is_true(loop.test) and not has_exit(loop.body)


def repeats_discarded_call(model: PythonModel, loop: Loop, get: Waiting, call: cst.Call) -> bool:
    """`for _ in range(5): ray.get(f.remote(x))`: the loop makes the same call again and again (no
    argument or receiver changes between iterations) and throws each result away, as warm-ups, stress tests
    and retries do; there is no batch of different work to spread out."""
    statement = get.statement
    value = statement.value if isinstance(statement, cst.Expr) else None
    if isinstance(value, COMPREHENSIONS) and not isinstance(value, cst.DictComp):
        value = value.elt  # `[ray.get(f.remote()) for _ in range(5)]` as a statement
    if value is not get.node:
        return False
    inputs = set().union(names_read(call.func), *(names_read(arg.value) for arg in call.args))
    return not inputs & model.names_bound_in(loop)


def single_actor(model: PythonModel, submission: Submission, loop: Loop) -> RemoteDef | None:
    """The actor when every call a loop makes through `submission` goes to one actor that runs
    them one at a time: a plain name bound outside the loop to a handle of a synchronous,
    unthreaded actor class defined in this module."""
    actor, handle = submission.remote, submission.handle
    if submission.kind != "actor-method" or actor is None or actor.cls is None or not isinstance(handle, cst.Name):
        return None
    if actor.is_async_actor or actor.is_threaded_actor:
        return None
    site = model.call_site(submission.call)
    if site is None:
        return None
    binding = model.reaching_binding(handle.value, site.scope, site.index)
    if binding is None or loop.encloses(binding.loop) or binding.kind == "loop-target":
        return None
    return actor


def loop_invariant(model: PythonModel, expr: cst.BaseExpression, loop: Loop) -> bool:
    """Whether `expr` names the same thing in every iteration of `loop`: it reads no name the loop
    binds and no attribute the loop assigns (`self.buffer`, `handles[0]`, `get_queue()`)."""
    if names_read(expr) & model.names_bound_in(loop):
        return False
    memo = model.analysis(_Memos).attributes_stored
    stored = memo.get(id(loop))
    if stored is None:
        stored = memo[id(loop)] = {
            dotted_name(s.target) for s in between(model.stores, loop.start, loop.end) if isinstance(s.target, cst.Attribute)
        }
    return not keys_read(expr) & stored


def carried_names(loop: Loop, names: set[str], at: int) -> set[str]:
    """Of `names` read at event `at` inside `loop`, those whose value there comes from the previous
    iteration: bound later in the body, and not earlier in the same iteration."""
    carried = set()
    at = min(max(at, loop.start), loop.end)
    for name in names:
        bindings = loop.scope.bindings.get(name, [])
        if any(b.kind != "loop-target" for b in between(bindings, at, loop.end)) and not any(
            b.kind != "loop-target" for b in between(bindings, loop.start, at)
        ):
            carried.add(name)
    return carried
