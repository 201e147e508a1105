"""RAY060 global-variable-shared-state: module globals used to pass state between the driver and Ray workers,
which each hold their own copy."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel, Submission
from ray_lint.python_model import (
    AFTER_ALL,
    CONTAINER_MUTATORS,
    Binding,
    CallSite,
    FunctionInfo,
    Loop,
    Scope,
    Store,
    child_nodes,
    dotted_name,
    names_read,
    root_name,
)
from ray_lint.rule import MAX_MESSAGE, REMOTE_MADE, Context, Invalid, Rule, Valid

CONTAINER_FACTORIES = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"})
CONTAINER_LITERALS = (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)
VARIABLE_KINDS = frozenset({"assign", "augassign", "loop-target"})
# Statements whose names are not reads of a value.
_NOT_READS = (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_CONDITIONS = (cst.If, cst.While, cst.IfExp, cst.Assert)
_T = TypeVar("_T")


@dataclass(eq=False)
class _Body:
    """What one function that runs in a worker (a task, or one actor method) does with module globals."""

    remote: RemoteDef
    function: FunctionInfo
    reads: set[str] = field(default_factory=set)
    helper_reads: set[str] = field(default_factory=set)  # through module-level functions it uses
    writes: list[tuple[str, cst.CSTNode]] = field(default_factory=list)  # the global and the statement
    tested: set[str] = field(default_factory=set)  # globals read in a condition: a lazily filled cache


@dataclass(frozen=True, eq=False)
class _Submitted:
    site: CallSite
    submission: Submission


@dataclass(frozen=True, eq=False)
class _Change:
    """A change the driver makes to a module global: a rebinding, a store into it, or a mutating call."""

    name: str
    node: cst.CSTNode
    index: int
    loop: Loop | None


class _Globals:
    """The module's globals as the remote bodies and the driver code around them use them. Stores, calls, loops
    and bindings are indexed once by the scope whose code holds them, so that no query rescans the module."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.scopes = {id(scope.node): scope for scope in model.scopes}
        module_bindings = model.module_scope.bindings
        self.binding_nodes = {id(b.node) for scope in model.scopes for bs in scope.bindings.values() for b in bs}
        self.variable_names = {name for name, bindings in module_bindings.items() if all(b.kind in VARIABLE_KINDS for b in bindings)}
        self.remote_targets = {id(remote.target) for remote in model.remote_defs}
        # module bindings by node, numbered in the order `module_scope.bindings` lists them
        self.module_bindings: dict[int, list[tuple[int, Binding]]] = {}
        for number, binding in enumerate(b for bindings in module_bindings.values() for b in bindings):
            self.module_bindings.setdefault(id(binding.node), []).append((number, binding))
        functions = [(remote, function) for remote in model.remote_defs for function in model.remote_functions(remote)]
        body_scopes = {id(function.scope) for _, function in functions}
        # for each scope, the remote-body function scopes that enclose it (itself included)
        self.in_bodies = {id(scope): _enclosing(scope, body_scopes) for scope in model.scopes}
        self.inner: dict[int, list[Scope]] = _bucket(model.scopes, self.in_bodies, lambda scope: scope)
        self.body_stores: dict[int, list[Store]] = _bucket(model.stores, self.in_bodies, lambda store: store.scope)
        self.body_calls: dict[int, list[CallSite]] = _bucket(model.calls, self.in_bodies, lambda site: site.scope)
        self.helper_cache: dict[int, set[str]] = {}
        self.bodies = [self._body(remote, function) for remote, function in functions]
        self.bodies_of: dict[int, list[_Body]] = {}
        for body in self.bodies:
            self.bodies_of.setdefault(id(body.remote), []).append(body)
        self.remote_scopes = {id(scope) for scope in model.scopes if self.in_bodies[id(scope)]}
        self.owned_stores: dict[int, list[Store]] = _by_owner(model.stores, lambda store: store.scope)
        self.owned_calls: dict[int, list[CallSite]] = _by_owner(model.calls, lambda site: site.scope)
        self.owned_loops: dict[int, list[Loop]] = _by_owner(model.loops, lambda loop: loop.scope)
        restarts = [site for name in ("ray.init", "ray.shutdown") for site in model.calls_to(name)]
        self.owned_restarts: dict[int, list[CallSite]] = _by_owner(restarts, lambda site: site.scope)
        self.submitted: dict[int, list[_Submitted]] = {}  # by driver scope
        for site in model.calls_by_tail.get("remote", ()):
            submission = model.submission(site.node)
            driver = _owner(site.scope)
            if submission is None or submission.remote is None or id(driver) in self.remote_scopes:
                continue
            self.submitted.setdefault(id(driver), []).append(_Submitted(site, submission))
        self.driver_scopes = {id(scope): scope for scope in model.scopes if id(scope) in self.submitted}
        self.submitted_by_remote: dict[int, list[tuple[Scope, _Submitted]]] = {}  # by remote, across drivers
        for driver_id, calls in self.submitted.items():
            for call in calls:
                self.submitted_by_remote.setdefault(id(call.submission.remote), []).append((self.driver_scopes[driver_id], call))
        self.writers: dict[str, set[int]] = {}  # the remotes whose bodies write each global
        for body in self.bodies:
            for name, _ in body.writes:
                self.writers.setdefault(name, set()).add(id(body.remote))
        self.other_readers: dict[str, _Body | None] = {}
        self.own_uses: dict[int, list[tuple[cst.CSTNode, Scope]]] = {}
        self.driver_reads: dict[tuple[int, str], tuple[list[int], list[cst.Name]]] = {}
        self.written: dict[int, set[int]] = {}  # by driver: the names that stores and mutating calls go through

    # --- what a name is

    def is_global(self, name: str, scope: Scope) -> bool:
        """Whether `name`, used in `scope`, is a module-level variable (not a module, function or class)."""
        if name not in self.variable_names:
            return False
        binding = self.model.reaching_binding(name, scope, AFTER_ALL)
        return binding is not None and binding.scope is self.model.module_scope

    def is_container(self, name: str) -> bool:
        """Whether the global is bound to a list, dict, set or deque (not an object that may share state itself,
        such as a Ray queue or a manager proxy)."""
        return any(_is_container_value(b.value) for b in self.model.module_scope.bindings.get(name, ()))

    # --- remote bodies

    def _body(self, remote: RemoteDef, function: FunctionInfo) -> _Body:
        body = _Body(remote, function)
        declared_bindings: list[tuple[int, Binding]] = []
        for node, scope in _uses(function.node.body, function.scope, self.scopes, into_functions=True):
            declared_bindings += self.module_bindings.get(id(node), ())
            if isinstance(node, _CONDITIONS):
                body.tested |= names_read(node.test)
            elif isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
                body.tested |= names_read(node.left)  # `_model = _model or load()`
            elif isinstance(node, cst.Name) and id(node) not in self.binding_nodes:
                if self.is_global(node.value, scope):
                    body.reads.add(node.value)
                elif (helper := self._helper(node.value, scope)) is not None:
                    body.helper_reads |= self._helper_reads(helper, frozenset())
        key = id(function.scope)
        declared: set[str] = set().union(*(scope.globals for scope in self.inner.get(key, ())))
        written: dict[str, list[tuple[int, Binding]]] = {}
        for number, binding in sorted(dict(declared_bindings).items()):
            written.setdefault(binding.name, []).append((number, binding))
        for name in declared:
            for _, binding in written.get(name, ()):
                if binding.kind in ("assign", "augassign"):
                    body.writes.append((name, binding.statement or binding.node))
        for store in self.body_stores.get(key, ()):
            stored = root_name(store.target)
            if stored and self.is_global(stored, store.scope) and self.is_container(stored):
                body.writes.append((stored, store.statement))
        for site in self.body_calls.get(key, ()):
            mutated = _mutated_container(site)
            if mutated and self.is_global(mutated, site.scope) and self.is_container(mutated):
                body.writes.append((mutated, site.statement or site.node))
        return body

    def _helper(self, name: str, scope: Scope) -> FunctionInfo | None:
        """The plain module-level function `name` stands for: cloudpickle ships it with the remote code."""
        binding = self.model.reaching_binding(name, scope, AFTER_ALL)
        if binding is None or binding.scope is not self.model.module_scope or binding.kind != "def":
            return None
        if id(binding.node) in self.remote_targets:
            return None
        return self.model.function_info(binding.node)  # type: ignore[arg-type]

    def _helper_reads(self, function: FunctionInfo, seen: frozenset[int]) -> set[str]:
        """The globals a module-level function reads, itself or through the module-level functions it uses."""
        known = self.helper_cache.get(id(function))
        if known is not None:
            return known
        reads: set[str] = set()
        for node, scope in _uses(function.node.body, function.scope, self.scopes, into_functions=True):
            if not isinstance(node, cst.Name) or id(node) in self.binding_nodes:
                continue
            if self.is_global(node.value, scope):
                reads.add(node.value)
            elif (helper := self._helper(node.value, scope)) is not None and id(helper) not in seen and len(seen) < 8:
                reads |= self._helper_reads(helper, seen | {id(function)})
        self.helper_cache[id(function)] = reads
        return reads

    # --- driver code

    def _own_uses(self, driver: Scope) -> list[tuple[cst.CSTNode, Scope]]:
        """The nodes of `driver`'s own code, walked once per driver."""
        uses = self.own_uses.get(id(driver))
        if uses is None:
            uses = self.own_uses[id(driver)] = list(_uses(driver.node, driver, self.scopes, into_functions=False))
        return uses

    def changes(self, driver: Scope) -> list[_Change]:
        """The driver's changes to module globals in `driver`'s own code (comprehensions included), in order."""
        found: list[_Change] = []
        own = {id(node) for node, _ in self._own_uses(driver)}
        rebound = {number: binding for node_id in own for number, binding in self.module_bindings.get(node_id, ())}
        for _, binding in sorted(rebound.items()):
            if binding.kind in VARIABLE_KINDS:
                found.append(_Change(binding.name, binding.node, binding.index, binding.loop))
        stores: list[tuple[str, Store]] = []
        for store in self.owned_stores.get(id(driver), ()):
            stored = root_name(store.target)
            if stored and self.is_global(stored, store.scope) and self.is_container(stored):
                stores.append((stored, store))
        loops = _innermost_loops(self.owned_loops.get(id(driver), []), [store.index for _, store in stores])
        for stored, store in stores:
            found.append(_Change(stored, store.statement, store.index, loops[store.index]))
        for site in self.owned_calls.get(id(driver), ()):
            mutated = _mutated_container(site)
            if mutated and self.is_global(mutated, site.scope) and self.is_container(mutated):
                found.append(_Change(mutated, site.statement or site.node, site.index, site.loop))
        return sorted(found, key=lambda change: change.index)

    def reads_after(self, driver: Scope, name: str, line: int) -> cst.Name | None:
        """The first read of global `name` in `driver`'s own code below `line` (not a store into it or a
        mutating call on it)."""
        reads = self.driver_reads.get((id(driver), name))
        if reads is None:
            reads = self.driver_reads[(id(driver), name)] = self._driver_reads(driver, name)
        highest, nodes = reads  # the highest line so far, read by read in walking order
        at = bisect_right(highest, line)
        return nodes[at] if at < len(nodes) else None

    def _driver_reads(self, driver: Scope, name: str) -> tuple[list[int], list[cst.Name]]:
        """The reads of global `name` in `driver`'s own code in walking order, each with the highest line of
        the reads up to it: the first read below a line is then found by bisection."""
        written = self.written.get(id(driver))
        if written is None:
            written = self.written[id(driver)] = {id(node) for node in self._written_names(driver)}
        highest: list[int] = []
        nodes: list[cst.Name] = []
        for node, scope in self._own_uses(driver):
            if (
                isinstance(node, cst.Name)
                and node.value == name
                and id(node) not in self.binding_nodes
                and id(node) not in written
                and self.is_global(name, scope)
            ):
                line = self.model.position(node).start.line
                highest.append(max(line, highest[-1]) if highest else line)
                nodes.append(node)
        return highest, nodes

    def _written_names(self, driver: Scope) -> Iterator[cst.Name]:
        for store in self.owned_stores.get(id(driver), ()):
            target: cst.BaseExpression = store.target
            while isinstance(target, (cst.Attribute, cst.Subscript)):
                target = target.value
            if isinstance(target, cst.Name):
                yield target
        for site in self.owned_calls.get(id(driver), ()):
            func = site.node.func
            if _mutated_container(site) and isinstance(func, cst.Attribute):
                yield func.value  # type: ignore[misc]

    def other_reader(self, name: str) -> _Body | None:
        """The first body that reads global `name` in a remote that never writes it (the methods of one actor
        run in one process): the same for every body that writes `name`, so found once."""
        if name not in self.other_readers:
            writers = self.writers.get(name, set())
            self.other_readers[name] = next(
                (body for body in self.bodies if id(body.remote) not in writers and name in body.reads), None
            )
        return self.other_readers[name]

    def restarts(self, driver: Scope) -> list[int]:
        """Where `driver` calls `ray.init` or `ray.shutdown`: a new job exports the remote definitions again."""
        return [site.index for site in self.owned_restarts.get(id(driver), ())]


def _owner(scope: Scope) -> Scope:
    """The function, class or module whose code runs a comprehension's scope."""
    while scope.kind == "comprehension" and scope.parent is not None:
        scope = scope.parent
    return scope


def _enclosing(scope: Scope, wanted: set[int]) -> list[int]:
    """The ids of `scope` and the scopes around it that are in `wanted`."""
    found = []
    current: Scope | None = scope
    while current is not None:
        if id(current) in wanted:
            found.append(id(current))
        current = current.parent
    return found


def _bucket(items: Iterable[_T], enclosing: dict[int, list[int]], scope_of: Callable[[_T], Scope]) -> dict[int, list[_T]]:
    """`items` by each scope of `enclosing` around the scope they are in, in their order."""
    found: dict[int, list[_T]] = {}
    for item in items:
        for key in enclosing[id(scope_of(item))]:
            found.setdefault(key, []).append(item)
    return found


def _by_owner(items: Iterable[_T], scope_of: Callable[[_T], Scope]) -> dict[int, list[_T]]:
    """`items` by the function, class or module whose code runs them, in their order."""
    found: dict[int, list[_T]] = {}
    for item in items:
        found.setdefault(id(_owner(scope_of(item))), []).append(item)
    return found


def _innermost_loops(loops: list[Loop], indices: list[int]) -> dict[int, Loop | None]:
    """For each event index, the loop of `loops` with the latest start that contains it (the first listed of
    equal starts): one sweep with a stack of the loops begun so far, latest on top."""
    order = sorted(range(len(loops)), key=lambda i: (loops[i].start, -i))
    found: dict[int, Loop | None] = {}
    stack: list[Loop] = []
    next_loop = 0
    for index in sorted(set(indices)):
        while next_loop < len(order) and loops[order[next_loop]].start <= index:
            stack.append(loops[order[next_loop]])
            next_loop += 1
        while stack and stack[-1].end <= index:
            stack.pop()  # ended before `index`, and so before every later one
        found[index] = stack[-1] if stack else None
    return found


def _uses(
    root: cst.CSTNode, scope: Scope, scopes: dict[int, Scope], *, into_functions: bool
) -> Iterator[tuple[cst.CSTNode, Scope]]:
    """Every node under `root` with the scope it runs in; import, `global` and `nonlocal` statements are
    skipped, and so are nested definitions unless `into_functions`."""
    stack: list[tuple[cst.CSTNode, Scope]] = [(root, scope)]
    while stack:
        node, current = stack.pop()
        if isinstance(node, _NOT_READS):
            continue
        if node is not root and not into_functions and isinstance(node, _DEFINITIONS):
            continue
        yield node, current
        inner = current if node is root else scopes.get(id(node), current)
        stack.extend((child, inner) for child in child_nodes(node))


def _mutated_container(site: CallSite) -> str | None:
    """`x` for `x.append(...)`, `x.update(...)` and the like."""
    func = site.node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in CONTAINER_MUTATORS:
        return func.value.value
    return None


def _is_container_value(value: cst.BaseExpression | None) -> bool:
    if isinstance(value, CONTAINER_LITERALS):
        return True
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        return name is not None and name.rsplit(".", 1)[-1] in CONTAINER_FACTORIES
    return False


def _reads_global(body: _Body | None, name: str) -> bool:
    return body is not None and (name in body.reads or name in body.helper_reads)


@dataclass(frozen=True)
class GlobalFacts:
    """The global a finding is about, and which way the state fails to travel."""

    name: str
    lost_write: bool  # a remote body writes it (else: the driver changes it after exporting the reader)


STALE_READ = """
SCALE = 1

@ray.remote
def scaled(x{param}):
    return x * {scale}

ray.get(scaled.remote(1{arg}), timeout=30)  # exports `scaled`, with SCALE as it is now
SCALE = 2
seen = ray.get(scaled.remote(1{arg}), timeout=30)
if seen == 2:
    __ray_lint_evidence__ = {{"right": "the task used the driver's new value 2"}}
else:
    __ray_lint_evidence__ = {{
        "wrong": f"the driver set a global (standing for `{name}`) to 2 after the first submission, yet the task still used {{seen}}"
    }}
"""

LOST_WRITE_MODEL = """
RESULTS = []

@ray.remote
def square(i):
    RESULTS.append(i * i)

ray.get([square.remote(i) for i in range(4)], timeout=30)
if RESULTS:
    __ray_lint_evidence__ = {{"right": f"the driver's list holds {{RESULTS}}"}}
else:
    __ray_lint_evidence__ = {{
        "wrong": f"4 tasks appended to a global list (standing for `{name}`), yet the driver's list is still {{RESULTS}}"
    }}
"""

LOST_WRITE_FIX = """
@ray.remote
def square(i):
    return i * i

results = ray.get([square.remote(i) for i in range(4)], timeout=30)
__ray_lint_evidence__ = {"right": f"the tasks' return values reach the driver: {results}"}
"""


class GlobalVariableExperiment(ReproductionExperiment[GlobalFacts]):
    """Runs the global's failure in a few lines: a task that reads a global the driver rebinds after the
    first submission (the fix passes it as an argument), or tasks that append to a global list the
    driver reads (the fix returns the values)."""

    facts_type = GlobalFacts
    shares_driver = True

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        if facts.lost_write:
            return Plan(
                Variant("write to the global", script(LOST_WRITE_MODEL.format(name=facts.name))),
                Variant("return the value", script(LOST_WRITE_FIX)),
                "modelled",
                "4 tasks append to a module-level list that the driver then reads",
            )
        read_global = STALE_READ.format(name=facts.name, param="", scale="SCALE", arg="")
        passed = STALE_READ.format(name=facts.name, param=", scale", scale="scale", arg=", SCALE")
        return Plan(
            Variant("read the global", script(read_global)),
            Variant("pass it as an argument", script(passed)),
            "modelled",
            "a task reads a global that the driver rebinds between two submissions",
        )


class GlobalVariableSharedState(Rule):
    code = "RAY060"
    name = "global-variable-shared-state"
    message = "A module global is used to share state between the driver and Ray tasks or actors"
    severity = Severity.ERROR
    category = "correctness"
    tokens = REMOTE_MADE
    experiment = GlobalVariableExperiment()
    docs = """
## What it does
Finds module-level variables used as if the driver, tasks and actors shared them:

- the driver changes a global (rebinds it, stores into it, or calls `append`/`update`/... on a
  list or dict) that a remote function or actor method reads, *after* it has submitted that
  function or created that actor, and submits calls that read it afterwards (or does both in
  one loop);
- a remote function or actor method writes a global (`global x; x += 1`, `results.append(...)`,
  `table[k] = v`) that the driver reads after submitting it, or that another remote function or
  another actor reads.

## Why is this bad?
The driver, every task worker and every actor are separate processes. Ray pickles a remote
function or actor class, with the values of the globals it reads, when it is first submitted,
and each worker gets that copy: a later change in the driver never reaches it, and a change
made in a worker stays in that worker. Measured on 2 vCPUs with Ray 2.60: an actor that returns
`global_var + 3` still returned 6 after the driver had set `global_var = 4` (7 expected), the
example of Ray's "Anti-pattern: Using global variables to share state" page.

ray-lint is silent for:
- read-only module constants, and globals changed before the first submission;
- worker-local caches filled lazily (`global _model; if _model is None: _model = load()`,
  `if key not in _cache: _cache[key] = ...`, `_model = _model or load()`): a global read in a
  condition of the body that writes it is taken as an intentional per-process cache;
- a global written and read by the methods of one actor (they run in one process);
- a global a remote body writes that nothing else reads (a per-worker counter or log);
- objects that are not plain containers (a Ray queue, a manager proxy) called with `put` etc.;
- submissions separated by `ray.shutdown()`/`ray.init()` (a new job exports the code again);
- names the remote body binds itself, or receives as parameters.

## Example
```python
global_var = 3

@ray.remote
class Actor:
    def f(self):
        return global_var + 3

actor = Actor.remote()
global_var = 4
assert ray.get(actor.f.remote()) == 6  # not 7
```

## Use instead
Pass the value as an argument, or keep shared state in an actor:
```python
@ray.remote
class Actor:
    def __init__(self, global_var_actor):
        self.global_var_actor = global_var_actor

    def f(self):
        return ray.get(self.global_var_actor.get_global_var.remote()) + 3
```
and return results from tasks instead of appending them to a global list.

## Fix safety
There is no automatic fix: moving state into arguments or an actor changes the program's design.

## References
- [Anti-pattern: Using global variables to share state between tasks and actors](https://docs.ray.io/en/latest/ray-core/patterns/global-variables.html)
- [Tips for testing Ray programs: process-level global state](https://docs.ray.io/en/latest/ray-core/examples/testing-tips.html)
"""

    VALID = [
        Valid(
            'import ray\nCONFIG = {"lr": 0.1}\n\n@ray.remote\ndef scale(x):\n    return x * CONFIG["lr"]\n\n'
            "print(ray.get([scale.remote(i) for i in range(4)]))\n",
            "a read-only module constant",
        ),
        Valid(
            "import ray\n_model = None\n\n@ray.remote\ndef predict(x):\n    global _model\n    if _model is None:\n"
            "        _model = load_model()\n    return _model(x)\n\nout = ray.get(predict.remote(1))\nprint(_model)\n",
            "a lazily loaded per-worker model",
        ),
        Valid(
            "import ray\n_cache = {}\n\n@ray.remote\ndef lookup(key):\n    if key not in _cache:\n        _cache[key] = fetch(key)\n"
            "    return _cache[key]\n\nout = ray.get([lookup.remote(k) for k in keys])\nprint(len(_cache))\n",
            "a per-worker cache filled under a membership test",
        ),
        Valid(
            "import ray\nSCALE = 1\n\n@ray.remote\ndef f(x):\n    return x * SCALE\n\nSCALE = 2\nprint(ray.get(f.remote(1)))\n",
            "changed before the first submission: pickled with the new value",
        ),
        Valid(
            "import ray\nscale = 1\n\n@ray.remote\ndef f(x, scale):\n    return x * scale\n\nref = f.remote(1, scale)\nscale = 2\n"
            "print(ray.get(f.remote(1, scale)))\n",
            "the value is passed as an argument",
        ),
        Valid(
            "import ray\ncalls = 0\n\n@ray.remote\ndef work(x):\n    global calls\n    calls += 1\n    return x, calls\n\n"
            "print(ray.get([work.remote(i) for i in range(4)]))\n",
            "a per-worker counter that only the task reads",
        ),
        Valid(
            "import ray\n_items = {}\n\n@ray.remote\nclass Store:\n    def put(self, k, v):\n        _items[k] = v\n"
            "    def get(self, k):\n        return _items[k]\n\ns = Store.remote()\ns.put.remote('a', 1)\nprint(ray.get(s.get.remote('a')))\n",
            "one actor's methods share its process",
        ),
        Valid(
            "import ray\nX = 1\n\n@ray.remote\ndef f():\n    return X\n\nray.get(f.remote())\nray.shutdown()\nX = 2\nray.init()\n"
            "print(ray.get(f.remote()))\n",
            "a new job exports the function again",
        ),
        Valid(
            "import ray\nSCALE = 1\n\n@ray.remote\ndef f(x):\n    SCALE = 3\n    return x * SCALE\n\nref = f.remote(1)\nSCALE = 2\n"
            "print(ray.get(f.remote(1)))\n",
            "the task's own local of the same name",
        ),
        Valid(
            "results = []\n\n@ray.remote\ndef work(i):\n    results.append(i)\n\nray.get([work.remote(i) for i in range(4)])\nprint(results)\n",
            "no `import ray`: not Ray's remote",
        ),
        Valid(
            "import ray\nfrom ray.util.queue import Queue\nqueue = Queue()\n\n@ray.remote\ndef consume():\n    return queue.get()\n\n"
            "ref = consume.remote()\nqueue.put(1)\nprint(ray.get(consume.remote()))\n",
            "a Ray queue is shared through its handle",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nglobal_var = 3\n\n@ray.remote\nclass Actor:\n    def f(self):\n        return global_var + 3\n\n"
            "actor = Actor.remote()\nglobal_var = 4\nassert ray.get(actor.f.remote()) == 6\n",
            10,
            note="the example of Ray's docs",
        ),
        Invalid(
            'import ray\nCONFIG = {"lr": 0.1}\n\n@ray.remote\ndef train(seed):\n    return run(seed, CONFIG["lr"])\n\nrefs = []\n'
            'for lr in [0.1, 0.01, 0.001]:\n    CONFIG["lr"] = lr\n    refs.append(train.remote(0))\n',
            10,
            note="a sweep through a global: every task after the first gets lr=0.1",
        ),
        Invalid(
            "import ray\nresults = []\n\n@ray.remote\ndef work(i):\n    results.append(i * i)\n\n"
            "ray.get([work.remote(i) for i in range(4)])\nprint(results)\n",
            6,
            note="appends in workers, the driver prints an empty list",
        ),
        Invalid(
            "import ray\ncounter = 0\n\n@ray.remote\ndef work(i):\n    global counter\n    counter += 1\n    return i\n\n"
            "def main():\n    ray.get([work.remote(i) for i in range(10)])\n    print(counter)\n",
            7,
            note="`global x; x += 1` in a task",
        ),
        Invalid(
            "import ray\n_model = None\n\n@ray.remote\ndef setup(path):\n    global _model\n    _model = load(path)\n\n"
            "@ray.remote\ndef predict(x):\n    return _model(x)\n",
            7,
            note="one task sets a global another task reads",
        ),
        Invalid(
            "import ray\nTHRESHOLD = 0.5\n\n@ray.remote\ndef keep(x):\n    return x > THRESHOLD\n\ndef main(xs):\n"
            "    global THRESHOLD\n    first = ray.get([keep.remote(x) for x in xs])\n    THRESHOLD = 0.9\n"
            "    return first, ray.get([keep.remote(x) for x in xs])\n",
            11,
            note="rebound with `global` in a driver function between submissions",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef square():\n    return i * i\n\nrefs = []\nfor i in range(4):\n    refs.append(square.remote())\n",
            8,
            note="a module-level loop variable read by the task",
        ),
        Invalid(
            "import ray\nseen = set()\n\n@ray.remote\nclass Tracker:\n    def mark(self, k):\n        seen.add(k)\n\n"
            "t = Tracker.remote()\nray.get(t.mark.remote('a'))\nassert 'a' in seen\n",
            7,
            note="an actor method adds to a global set the driver checks",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.remote_defs:
            return
        facts = _Globals(model)
        self._stale_reads(ctx, facts)
        self._lost_writes(ctx, facts)

    def _stale_reads(self, ctx: Context, facts: _Globals) -> None:
        """Driver changes to a global after the remote code that reads it was exported."""
        model = facts.model
        readers: dict[str, dict[int, RemoteDef]] = {}  # in the order the bodies first read each name
        for body in facts.bodies:
            for name in body.reads | body.helper_reads:
                readers.setdefault(name, {}).setdefault(id(body.remote), body.remote)
        if not readers:
            return
        for driver in facts.driver_scopes.values():
            submitted: dict[int, list[_Submitted]] = {}
            for call in facts.submitted[id(driver)]:
                submitted.setdefault(id(call.submission.remote), []).append(call)
            restarts = facts.restarts(driver)
            reported: set[str] = set()
            for change in facts.changes(driver):
                if change.name in reported:
                    continue
                for remote in readers.get(change.name, {}).values():
                    evidence = self._stale_evidence(model, facts, change, submitted.get(id(remote), []), restarts)
                    if evidence is None:
                        continue
                    reported.add(change.name)
                    ctx.report(
                        change.node,
                        f"`{remote.name}` never sees this change to `{change.name}`, pickled when first submitted ({evidence})",
                        facts=GlobalFacts(change.name, lost_write=False),
                    )
                    break

    def _stale_evidence(
        self, model: SemanticModel, facts: _Globals, change: _Change, calls: list[_Submitted], restarts: list[int]
    ) -> str | None:
        """Where the remote code was submitted before the change and runs again after it, if it does."""
        readers = [s for s in calls if self._runs_read(facts, s, change.name)]
        for before in calls:
            if before.site.index >= change.index:
                continue
            for after in readers:
                if after.site.index > change.index and not any(before.site.index < r < after.site.index for r in restarts):
                    return f"line {model.position(before.site.node).start.line}"
        if change.loop is None:
            return None
        for call in readers:
            loop = model.common_loop(change.loop, call.site.loop)
            if loop is None or model.literal_iterations(loop) in (0, 1) or any(loop.contains_index(r) for r in restarts):
                continue
            return f"loop on line {model.position(loop.node).start.line}"
        return None

    def _runs_read(self, facts: _Globals, call: _Submitted, name: str) -> bool:
        """Whether the call runs remote code that reads `name`: the task, the actor's `__init__`, or the method."""
        submission, remote = call.submission, call.submission.remote
        assert remote is not None
        bodies = facts.bodies_of.get(id(remote), [])
        if submission.kind == "task":
            return any(_reads_global(body, name) for body in bodies)
        wanted = "__init__" if submission.kind == "actor-create" else submission.method
        return any(_reads_global(body, name) for body in bodies if body.function.node.name.value == wanted)

    def _lost_writes(self, ctx: Context, facts: _Globals) -> None:
        """Writes to a global in remote code that the driver or other remote code expects to see."""
        for body in facts.bodies:
            seen: set[str] = set()
            for name, node in body.writes:
                if name in seen or name in body.tested:
                    continue
                evidence = self._driver_read(facts, body, name) or self._other_reader(facts, name)
                if evidence is None:
                    continue
                seen.add(name)
                message = f"This write to global `{name}` stays in `{body.function.node.name.value}`'s worker, but {evidence}"
                if len(message) > MAX_MESSAGE:
                    message = f"Global `{name}`: this write stays in the worker, but {evidence}"
                ctx.report(node, message, facts=GlobalFacts(name, lost_write=True))

    def _driver_read(self, facts: _Globals, body: _Body, name: str) -> str | None:
        model = facts.model
        for driver, call in facts.submitted_by_remote.get(id(body.remote), ()):
            if self._runs(call, body):
                line = model.position(call.site.node).start.line
                read = facts.reads_after(driver, name, line)
                if read is not None:
                    return f"the driver reads it on line {model.position(read).start.line}"
        return None

    def _other_reader(self, facts: _Globals, name: str) -> str | None:
        other = facts.other_reader(name)
        if other is None:
            return None
        return f"`{other.function.node.name.value}` reads it in other workers"

    def _runs(self, call: _Submitted, body: _Body) -> bool:
        """Whether `call`, a submission of `body`'s remote, runs `body`: the task, `__init__`, or the method."""
        submission = call.submission
        if submission.kind == "task":
            return True
        wanted = "__init__" if submission.kind == "actor-create" else submission.method
        return body.function.node.name.value == wanted
