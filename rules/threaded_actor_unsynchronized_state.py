"""RAY079 threaded-actor-unsynchronized-state: a threaded actor's method reads and writes back `self` state without a lock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    ClassInfo,
    FunctionInfo,
    Store,
    child_nodes,
    dotted_name,
    iter_subtree,
    literal_number,
    literal_string,
    root_name,
)
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

# Methods that run before (or after) the actor serves calls: nothing runs beside them.
LIFECYCLE_METHODS = frozenset({"__init__", "__new__", "__del__", "__ray_shutdown__"})
# Words in a context manager's name that say it serializes the block (`with self._lock_for(key):`).
LOCK_WORDS = ("lock", "mutex", "semaphore", "sem", "cond", "synchron", "guard", "critical", "atomic")
# Values that make an attribute a mutable container: `self.x += [...]` then extends it in place.
CONTAINER_CALLS = frozenset({"list", "dict", "set", "bytearray", "deque", "defaultdict", "OrderedDict", "Counter"})
CONTAINER_DISPLAYS = (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)


@dataclass(frozen=True)
class _Update:
    """A read-then-write of `self` state: the statement that writes, and the state's text (`self.count`)."""

    statement: cst.CSTNode
    state: str
    how: str  # what the statement does, for the message


@dataclass(frozen=True)
class ThreadFacts:
    """What the model needs: the state the method updates (its text), and how many calls run at once
    (None when the code computes it)."""

    state: str
    threads: int | None


# A threaded actor of `{threads}` threads whose `add`, called `{calls}` times from the driver, runs `{update}`:
# UNGUARDED (read a counter, work a millisecond, write it back) or GUARDED (the same under a lock, the fix).
COUNTER_MODEL = """\
import threading

CALLS = {calls}

@ray.remote(max_concurrency={threads})
class Counter:
    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()

    def add(self):
{update}

    def total(self):
        return self.count

counter = Counter.remote()
ray.get([counter.add.remote() for _ in range(CALLS)])
total = ray.get(counter.total.remote())
if total < CALLS:
    __ray_lint_evidence__ = {{"wrong": (
        f"{{CALLS}} calls each added 1 to a counter (standing for `{state}`) in an actor that runs up to {threads} "
        f"calls at once, yet it counts {{total}}: {{CALLS - total}} updates were lost"
    )}}
else:
    __ray_lint_evidence__ = {{"right": f"the counter reached {{total}} of {{CALLS}}"}}
"""
UNGUARDED = """\
        value = self.count
        time.sleep(0.001)  # the method's work between the read and the write
        self.count = value + 1"""
GUARDED = """\
        with self.lock:
            value = self.count
            time.sleep(0.001)
            self.count = value + 1"""


class LostUpdateExperiment(ReproductionExperiment[ThreadFacts]):
    """Runs the race: 200 calls into a threaded actor (the finding's `max_concurrency`, else 8) whose
    method reads a counter, works a millisecond, and writes it back, without a lock and with one (the
    fix). The model stands for the method's own update: the work between the read and the write is
    what lets another thread run in between."""

    facts_type = ThreadFacts
    shares_driver = True
    CALLS = 200
    ASSUMED_THREADS = 8

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        threads = facts.threads or self.ASSUMED_THREADS
        shared = {"calls": self.CALLS, "threads": threads, "state": facts.state}
        counted = "" if facts.threads else f" ({threads} assumed: the code computes it)"
        return Plan(
            Variant("no lock", script(COUNTER_MODEL.format(**shared, update=UNGUARDED))),
            Variant("with a lock", script(COUNTER_MODEL.format(**shared, update=GUARDED))),
            "modelled",
            f"{self.CALLS} calls into an actor with max_concurrency={threads}{counted}; each reads a counter, works 1 ms and writes it back",
        )


class ThreadedActorUnsynchronizedState(Rule):
    code = "RAY079"
    name = "threaded-actor-unsynchronized-state"
    message = "A threaded actor's method updates `self` state (read, then write) without a lock"
    severity = Severity.WARNING
    category = "correctness"
    preview = True
    tokens = ("max_concurrency",)
    also_tokens = REMOTE_MADE
    experiment = LostUpdateExperiment()
    docs = """
## What it does
Finds a method of a threaded actor, a synchronous actor class given a `max_concurrency` that
is a literal above 1 or computed at run time (in `@ray.remote(...)`, `ray.remote(...)(Cls)` or
an `.options(...)` call in the module), that reads a piece of `self` state and writes it back
outside any lock:
- `self.count += 1`, `self.totals[key] += value`;
- `self.total = self.total + value`, `self.best = max(self.best, score)`,
  `self.queue = self.queue[1:]`, `self.counts[k] = self.counts.get(k, 0) + 1`;
- `n = self.count` followed by `self.count = n + 1`.

Each piece of state is reported once per class, at its first such update.

## Why is this bad?
A threaded actor runs up to `max_concurrency` calls at once, each in a thread of a pool
(Ray's "Threaded Actors"). `self.count += 1` is a load, an add and a store: two threads that
load the same value both store value + 1, and one update is lost. Ray does not warn. Measured
with Ray 2.60 on 2 vCPUs: 2000 read-then-write increments sent to an actor with
`max_concurrency=8` left the counter at 295.

ray-lint is silent for:
- updates inside `with self._lock:` (any `with` on a plain object, or on a call whose name says
  lock, mutex, semaphore, condition...), and methods that call `.acquire()` themselves;
- `__init__` and private helpers called only from it: nothing runs beside the constructor;
- single operations the GIL keeps whole: `self.items.append(x)`, `self.cache[k] = v`,
  `self.x = new_value`; and `+=` on an attribute made a list, dict or set (an in-place extend);
- one-off transformations (`self.model = self.model.to(device)`) and conditional assignments
  (`self.x = self.x or default`);
- state reached through `threading.local()`;
- async actors (one event loop, no threads), actors whose `max_concurrency` is a literal 1 (or
  not given), and methods in a named concurrency group unless its literal size is above 1.

This rule is in preview: the code does not show whether callers ever overlap their calls
(a driver that waits for each call before the next cannot race), and a value may be a
mutable container whose `+=` is safe.

## Example
```python
@ray.remote(max_concurrency=8)
class Counter:
    def __init__(self):
        self.count = 0

    def increment(self):
        self.count += 1
        return self.count
```

## Use instead
```python
@ray.remote(max_concurrency=8)
class Counter:
    def __init__(self):
        self.count = 0
        self._lock = threading.Lock()

    def increment(self):
        with self._lock:
            self.count += 1
            return self.count
```
or an async actor (`async def increment`), whose calls interleave only at `await`.

## Fix safety
There is no automatic fix: which statements a lock must cover (the read, the write and what
depends on them) is the author's decision.

## References
- [Threaded actors](https://docs.ray.io/en/latest/ray-core/actors/async_api.html#threaded-actors)
- [Limiting concurrency per method with concurrency groups](https://docs.ray.io/en/latest/ray-core/actors/concurrency_group_api.html)
"""

    VALID = [
        Valid(
            "import threading\nimport ray\n\n@ray.remote(max_concurrency=8)\nclass Counter:\n    def __init__(self):\n"
            "        self.count = 0\n        self.lock = threading.Lock()\n\n    def increment(self):\n        with self.lock:\n"
            "            self.count += 1\n            return self.count\n",
            "guarded by a lock",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def __init__(self):\n        self.count = 0\n\n"
            "    def increment(self):\n        self.count += 1\n        return self.count\n",
            "not threaded: calls run one at a time",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=8)\nclass Counter:\n    def __init__(self):\n        self.count = 0\n\n"
            "    async def increment(self):\n        self.count += 1\n        return self.count\n",
            "async actor: one event loop thread",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Collector:\n    def __init__(self):\n        self.items = []\n"
            "        self.latest = None\n\n    def add(self, item):\n        self.items.append(item)\n        self.latest = item\n",
            "GIL-atomic append and a plain store",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Model:\n    def __init__(self):\n        self.total = 0\n"
            "        self.total = self.total + 1\n        self._warm()\n\n    def _warm(self):\n        self.total += 1\n\n"
            "    def predict(self, x):\n        return x * self.total\n",
            "updates only in __init__ and a helper it alone calls",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Buffer:\n    def __init__(self):\n        self.rows = []\n\n"
            "    def extend(self, batch):\n        self.rows += batch\n",
            "`+=` on a list extends it in place",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Model:\n    def __init__(self, model):\n        self.model = model\n\n"
            "    def to_gpu(self):\n        self.model = self.model.to('cuda')\n",
            "a one-off transformation, not an accumulation",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Cache:\n    def lookup(self, key):\n"
            "        self.table = self.table or load_table()\n        return self.table[key]\n",
            "a lazy default, the same from any thread",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=1)\nclass Counter:\n    def increment(self):\n        self.count += 1\n",
            "max_concurrency=1 is not threaded",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=4, concurrency_groups={'io': 1})\nclass Loader:\n"
            "    @ray.method(concurrency_group='io')\n    def load(self):\n        self.loaded += 1\n",
            "a concurrency group of one thread",
        ),
        Valid(
            "import threading\nimport ray\n\n@ray.remote(max_concurrency=8)\nclass Stats:\n    def __init__(self):\n"
            "        self.local = threading.local()\n\n    def hit(self):\n        self.local.hits = getattr(self.local, 'hits', 0) + 1\n"
            "        self.local.count += 1\n",
            "per-thread state",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_concurrency=8)\nclass Counter:\n    def increment(self):\n        self._lock.acquire()\n"
            "        try:\n            self.count += 1\n        finally:\n            self._lock.release()\n",
            "locked with acquire / release",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote(max_concurrency=8)\nclass Counter:\n    def __init__(self):\n        self.count = 0\n\n"
            "    def increment(self):\n        self.count += 1\n        return self.count\n",
            9,
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Stats:\n    def __init__(self):\n        self.total = 0.0\n\n"
            "    def record(self, value):\n        self.total = self.total + value\n\n"
            "stats = Stats.options(max_concurrency=16).remote()\n",
            9,
            note="threaded through .options",
        ),
        Invalid(
            "import ray\n\n@ray.remote(max_concurrency=4)\nclass Tracker:\n    def __init__(self):\n        self.counts = {}\n\n"
            "    def seen(self, key):\n        self.counts[key] = self.counts.get(key, 0) + 1\n",
            9,
        ),
        Invalid(
            "import threading\nimport ray\n\n@ray.remote(max_concurrency=4)\nclass Best:\n    def __init__(self):\n"
            "        self.best = float('-inf')\n        self.lock = threading.Lock()\n        self.calls = 0\n\n"
            "    def offer(self, score):\n        with self.lock:\n            self.calls += 1\n"
            "        self.best = max(self.best, score)\n",
            14,
            note="the lock covers another update only",
        ),
        Invalid(
            "import ray\n\nclass Sequencer:\n    def __init__(self):\n        self.next_id = 0\n\n    def take(self):\n"
            "        current = self.next_id\n        self.next_id = current + 1\n        return current\n\n"
            "RemoteSequencer = ray.remote(max_concurrency=10)(Sequencer)\n",
            9,
            note="read into a local, written back later",
        ),
        Invalid(
            "import ray\n\n@ray.remote(max_concurrency=2, concurrency_groups={'io': 4})\nclass Loader:\n"
            "    @ray.method(concurrency_group='io')\n    def load(self, n):\n        self.loaded_bytes += n\n",
            7,
            note="a concurrency group of four threads",
        ),
        Invalid(
            "import threading\nimport time\nimport ray\n\n@ray.remote(num_cpus=0)\nclass Coordinator:\n    def __init__(self, n):\n"
            "        self._lock = threading.Lock()\n        self._overhead_s = 0.0\n\n    def get(self, split):\n"
            "        start = time.perf_counter()\n        with self._lock:\n            item = self._take(split)\n"
            "        self._overhead_s += time.perf_counter() - start\n        return item\n\n"
            "def make(n):\n    return Coordinator.options(max_concurrency=n + 1).remote(n)\n",
            15,
            note="max_concurrency computed at run time; the update after the lock",
        ),
        Invalid(
            "import ray\n\n@ray.remote(max_concurrency=8)\nclass Queue:\n    def __init__(self):\n        self.pending = ()\n\n"
            "    def pop(self):\n        head = self.pending[0]\n        self.pending = self.pending[1:]\n        return head\n\n"
            "    def push(self, item):\n        self.pending = self.pending + (item,)\n",
            10,
            note="reported once per attribute",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote in model.remote_defs:
            if remote.kind != "actor" or remote.cls is None or remote.is_async_actor:
                continue
            default_threads = _default_threads(model, remote)
            groups = _group_sizes(remote)
            if default_threads is None and not groups:
                continue
            cls = remote.cls
            skipped = LIFECYCLE_METHODS | _init_only_helpers(model, cls)
            containers, thread_locals = _attribute_kinds(model, cls)
            reported: set[str] = set()
            for method in cls.methods:
                name = method.node.name.value
                this = _self_name(method)
                if name in skipped or this is None or not _plain_method(model, method):
                    continue
                threads = _threads_for(model, method, default_threads, groups)
                if threads is None or _acquires(model, method):
                    continue
                for update in _updates(model, method, this, containers, thread_locals):
                    if update.state in reported:
                        continue
                    reported.add(update.state)
                    state = update.state if len(update.state) <= 30 else update.state[:27] + "..."
                    ctx.report(
                        update.statement,
                        f"`{state}` is updated without a lock, but `{cls.node.name.value}` runs up to {threads} calls at once",
                        facts=ThreadFacts(update.state, int(threads) if threads.isdigit() else None),
                    )


def _default_threads(model: SemanticModel, remote: RemoteDef) -> str | None:
    """How many calls the actor runs at once, for the message, when `max_concurrency` may be above 1: the
    largest literal above 1, else a value computed at run time (`max_concurrency=n + 1`)."""
    values = list(remote.option_values("max_concurrency"))
    numbers = [int(n) for n in (literal_number(value) for value in values) if n is not None and n > 1]
    if numbers:
        return str(max(numbers))
    computed = [value for value in values if literal_number(value) is None]
    return f"`{model.module.code_for_node(computed[0])}`" if computed else None


def _group_sizes(remote: RemoteDef) -> dict[str, str]:
    """Concurrency groups with a literal size above 1: `concurrency_groups={"io": 4}`."""
    sizes: dict[str, str] = {}
    for value in remote.option_values("concurrency_groups"):
        if not isinstance(value, cst.Dict):
            continue
        for element in value.elements:
            if isinstance(element, cst.DictElement):
                key, size = literal_string(element.key), literal_number(element.value)
                if key is not None and size is not None and size > 1:
                    sizes[key] = str(max(int(sizes.get(key, "0")), int(size)))
    return sizes


def _threads_for(model: SemanticModel, method: FunctionInfo, default_threads: str | None, groups: dict[str, str]) -> str | None:
    """How many calls of the method may run at once: its concurrency group's size, or `max_concurrency`."""
    scope = method.parent_scope
    for decorator in method.node.decorators:
        call = decorator.decorator
        if not isinstance(call, cst.Call) or model.qualified_name(call.func, scope, AFTER_ALL) != "ray.method":
            continue
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "concurrency_group":
                group = literal_string(arg.value)
                return groups.get(group) if group is not None else None
    return default_threads


def _self_name(method: FunctionInfo) -> str | None:
    params = method.node.params
    positional = [*params.posonly_params, *params.params]
    return positional[0].name.value if positional else None


def _plain_method(model: SemanticModel, method: FunctionInfo) -> bool:
    """An instance method without decorators other than `ray.method` (a `@synchronized` wrapper may lock it)."""
    scope = method.parent_scope
    for decorator in method.node.decorators:
        expr = decorator.decorator
        func = expr.func if isinstance(expr, cst.Call) else expr
        if model.qualified_name(func, scope, AFTER_ALL) != "ray.method":
            return False
    return True


def _init_only_helpers(model: SemanticModel, cls: ClassInfo) -> set[str]:
    """Private methods called on `self` only from `__init__`: they run before the actor serves calls."""
    init = model.method(cls, "__init__")
    if init is None:
        return set()
    private = {m.node.name.value for m in cls.methods if m.node.name.value.startswith("_") and not m.node.name.value.endswith("__")}
    callers: dict[str, set[int]] = {}
    for site in model.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in private:
            callers.setdefault(func.attr.value, set()).add(id(site.scope.function or site.scope))
    return {name for name, scopes in callers.items() if scopes == {id(init.scope)}}


def _attribute_kinds(model: SemanticModel, cls: ClassInfo) -> tuple[set[str], set[str]]:
    """Attributes, as the text after `self` (`.items`), that the constructor or the class body makes
    mutable containers, and those it makes `threading.local()` objects."""
    containers: set[str] = set()
    thread_locals: set[str] = set()
    init = model.method(cls, "__init__")
    this = _self_name(init) if init is not None else None
    for store in model.stores:
        if init is None or store.scope is not init.scope or store.kind != "assign" or store.value is None:
            continue
        target = dotted_name(store.target) if isinstance(store.target, cst.Attribute) else None
        if target is None or root_name(store.target) != this:
            continue
        attribute = target[len(this or "") :]
        if _is_container(store.value):
            containers.add(attribute)
        elif isinstance(store.value, cst.Call) and model.qualified_name(store.value.func, store.scope, store.index) == "threading.local":
            thread_locals.add(attribute)
    for name, bindings in cls.scope.bindings.items():
        if any(b.kind == "assign" and b.value is not None and _is_container(b.value) for b in bindings):
            containers.add(f".{name}")
    return containers, thread_locals


def _is_container(value: cst.BaseExpression) -> bool:
    if isinstance(value, CONTAINER_DISPLAYS):
        return True
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        return name is not None and name.rsplit(".", 1)[-1] in CONTAINER_CALLS
    return False


def _acquires(model: SemanticModel, method: FunctionInfo) -> bool:
    """Whether the method locks by hand (`self._lock.acquire()`)."""
    return any(
        isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value == "acquire" and site.scope.function is method.scope
        for site in model.calls_by_tail.get("acquire", ())
    )


def _locked_nodes(method: FunctionInfo) -> set[int]:
    """Ids of the nodes inside a `with` block that holds a lock."""
    locked: set[int] = set()
    for node in iter_subtree(method.node.body, into_functions=False):
        if isinstance(node, cst.With) and any(_is_lock(item.item) for item in node.items):
            locked.update(id(inner) for inner in iter_subtree(node.body, into_functions=False))
    return locked


def _is_lock(expr: cst.BaseExpression) -> bool:
    """`with self._lock:` (a plain object used as a context manager: a lock, condition or semaphore), or a call
    whose name says it locks (`with self._lock_for(key):`); not `open(...)`, `torch.no_grad()`."""
    if not isinstance(expr, cst.Call):
        return True
    name = dotted_name(expr.func) or ""
    return any(word in name.lower() for word in LOCK_WORDS)


def _updates(
    model: SemanticModel, method: FunctionInfo, this: str, containers: set[str], thread_locals: set[str]
) -> Iterator[_Update]:
    """The read-then-write updates of `self` state in the method's own body, outside locks, in order."""
    locked: set[int] | None = None
    for store in model.stores:
        if store.scope is not method.scope or store.kind == "del" or root_name(store.target) != this:
            continue
        state = _text(model, store.target)
        attribute = state[len(this) :]
        if any(attribute.startswith((prefix + ".", prefix + "[")) for prefix in thread_locals):
            continue
        how = _read_then_written(model, store, state, attribute in containers)
        if how is None:
            continue
        if locked is None:
            locked = _locked_nodes(method)
        if id(store.statement) not in locked:
            yield _Update(store.statement, state, how)


def _read_then_written(model: SemanticModel, store: Store, state: str, container: bool) -> str | None:
    """What the store does with the state it reads, for the message; None for a plain write."""
    value = store.value
    if value is None:
        return None
    if store.kind == "augassign":
        if isinstance(value, (*CONTAINER_DISPLAYS, cst.Tuple)) or container:
            return None  # a container extended in place: one object, nothing to lose
        return f"reads `{state}` and writes it back"
    if isinstance(value, (cst.BooleanOperation, cst.IfExp)):
        return None  # `self.x = self.x or default`: a lazy default, the same from any thread
    if _reads_state(model, value, state) or (isinstance(store.target, cst.Subscript) and _reads_by_get(model, value, store.target)):
        return f"reads `{state}` and writes it back"
    for name in {node.value for node in iter_subtree(value, into_functions=False) if isinstance(node, cst.Name)}:
        binding = model.reaching_binding(name, store.scope, store.index)
        depth = 0
        while binding is not None and binding.scope is store.scope and depth < 4:
            if binding.value is not None and binding.kind in ("assign", "augassign") and _reads_state(model, binding.value, state):
                return f"writes back `{state}`, read earlier into `{name}`,"
            if binding.kind != "augassign":
                break
            binding, depth = model.reaching_binding(name, store.scope, binding.index), depth + 1
    return None


def _reads_state(model: SemanticModel, value: cst.BaseExpression, state: str) -> bool:
    """Whether `value` uses the state's current value as data: an operand, an argument, a slice of it (not
    only a method called on it, as in `self.model.to(device)`)."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(value, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, (cst.Lambda, cst.FunctionDef)):
            continue
        if isinstance(node, (cst.Attribute, cst.Subscript)) and _text(model, node) == state:
            if not (isinstance(parent, cst.Attribute) and parent.value is node):
                return True
            continue
        stack.extend((child, node) for child in child_nodes(node))
    return False


def _reads_by_get(model: SemanticModel, value: cst.BaseExpression, target: cst.Subscript) -> bool:
    """`self.counts[k] = self.counts.get(k, 0) + 1`."""
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    container, key = _text(model, target.value), _text(model, target.slice[0].slice.value)
    for node in iter_subtree(value, into_functions=False):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "get"
            and node.args
            and _text(model, node.func.value) == container
            and _text(model, node.args[0].value) == key
        ):
            return True
    return False


def _text(model: SemanticModel, node: cst.CSTNode) -> str:
    return "".join(model.module.code_for_node(node).split())
