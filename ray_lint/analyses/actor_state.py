"""Whether an actor keeps state between calls, and whether a method only reads a small fact: the
judgements behind the rules about single actors, results fetched in loops and needless gets."""

from __future__ import annotations

import libcst as cst

from ray_lint.model import RemoteDef
from ray_lint.python_model import FunctionInfo, PythonModel, between, block_statements, root_name

# Method names that change the object they are called on (containers, queues, files, optimizers,
# environments, connections, metrics): calling one on `self.x` makes an actor method stateful.
MUTATING_METHODS = frozenset(
    {
        "append", "appendleft", "extend", "extendleft", "insert", "add", "update", "pop", "popleft",
        "popitem", "remove", "discard", "clear", "setdefault", "sort", "reverse", "put", "put_nowait",
        "write", "writelines", "send", "sendall", "step", "reset", "zero_grad", "backward", "fit",
        "partial_fit", "train", "load_state_dict", "execute", "executemany", "commit", "rollback",
        "acquire", "release", "seek", "flush", "close", "inc", "dec", "increment", "observe", "record",
        "set", "incr", "push", "enqueue", "register", "feed", "learn", "store", "save", "apply_gradients",
        "set_weights", "set_state", "copy_", "add_", "mul_", "zero_", "fill_",
    }
)
# Actor methods that exist to block: waiting on them one at a time is the point (a lock, a barrier).
SYNCHRONIZATION_METHODS = frozenset({"acquire", "release", "lock", "unlock", "wait", "barrier", "notify", "notify_all", "signal"})
# Reads of counters an actor keeps (`get_metrics`): a small dict of numbers, like the accessors' small facts.
METRIC_READS = frozenset({"get_metrics", "get_stats", "metrics", "stats"})
# Actor methods that read a small fact (`get_rank`, `is_ready`, `ping`), by Python's naming habits:
# a round trip of milliseconds that returns an address, a rank or a flag, not bulk data or compute.
ACCESSORS = frozenset({"ping", "ready", "health", "health_check", "status", "rank", "address", "node_ip"})
SMALL_FACTS = frozenset(
    {
        "rank", "ranks", "address", "addr", "ip", "node", "port", "ports", "id", "ids", "name", "info", "status",
        "host", "hostname", "url", "pid", "device", "devices", "gpu", "gpus", "size", "count", "version", "config",
        "world", "coordinator", "location", "ready", "alive", "healthy", "metadata",
    }
)


def blocks_or_reads(method: str | None) -> bool:
    """A method that exists to block (a lock, a barrier), or reads a small fact: asking a group of actors
    for their ranks (or their metrics) one at a time costs milliseconds, not the parallelism lost to waits."""
    return method in SYNCHRONIZATION_METHODS or is_accessor(method) or method in METRIC_READS


def is_accessor(method: str | None) -> bool:
    """`is_*`/`has_*` flags, `ping`-like probes, and `get_*`/`alloc_*` of an address, a rank, an id, a port
    (`get_weights` and `get_batch` move data: they are not accessors)."""
    if method is None:
        return False
    if method in ACCESSORS or method.startswith(("is_", "has_")):
        return True
    verb, _, rest = method.partition("_")
    return verb in ("get", "alloc") and any(word in SMALL_FACTS for word in rest.split("_"))


def mutates_state(model: PythonModel, method: FunctionInfo, _seen: frozenset[int] = frozenset()) -> bool:
    """Whether an actor method leaves state behind for the next call: it assigns or deletes through
    `self`, calls a mutating method (`append`, `update`, `step`, `execute`, ...) on something reached
    from `self`, declares a global, or calls another method of its class on `self` that does."""
    params = method.node.params
    positional = [*params.posonly_params, *params.params]
    if method.owner is None or not positional:
        return False
    this = positional[0].name.value
    own = method.scope
    inside = model.scopes[own.first : own.last]  # the method's scope and those nested in it
    if any(scope.globals for scope in inside):
        return True
    if any(root_name(store.target) == this for store in between(model.stores, own.start, own.end)):
        return True
    holders = {this} | {  # local names that alias something reached from self: `buf = self.buf`
        name
        for scope in inside
        for name, bindings in scope.bindings.items()
        if any(b.value is not None and not isinstance(b.value, cst.Name) and root_name(b.value) == this for b in bindings)
    }
    for site in between(model.calls, own.start, own.end):
        func = site.node.func
        if isinstance(func, cst.Name) and func.value == "setattr":
            return True
        if not isinstance(func, cst.Attribute) or root_name(func.value) not in holders:
            continue
        if isinstance(func.value, cst.Name) and func.value.value == this:  # `self.helper(...)`
            callee = model.method(method.owner, func.attr.value)
            if callee is not None and id(callee) not in _seen and mutates_state(model, callee, _seen | {id(method)}):
                return True
        elif func.attr.value in MUTATING_METHODS:
            return True
    return False


def changed_parameters(model: PythonModel, function: FunctionInfo) -> frozenset[int]:
    """The positions of the parameters a function changes in place: it assigns or deletes through one
    (`policy.table[s] = v`) or calls a mutating method on it or on something reached from it
    (`state.buffer.append(x)`), and never rebinds its name. The caller's object changes with it."""
    params = function.node.params
    positional = [param.name.value for param in (*params.posonly_params, *params.params)]
    own = function.scope
    rebound = {name for name, bindings in own.bindings.items() if any(b.kind != "param" for b in bindings)}
    changed: set[str] = set()
    for store in between(model.stores, own.start, own.end):
        if store.kind != "del" and store.scope is own:
            changed.add(root_name(store.target) or "")
    for site in between(model.calls, own.start, own.end):
        func = site.node.func
        if site.scope is own and isinstance(func, cst.Attribute) and func.attr.value in MUTATING_METHODS:
            changed.add(root_name(func.value) or "")
    return frozenset(i for i, name in enumerate(positional) if name in changed and name not in rebound and name != "self")


def returns_stored_state(model: PythonModel, remote: RemoteDef | None, method: str | None) -> bool:
    """Whether actor method `method` of `remote` only hands back what an earlier call stored
    (`return self.sorted_frame`, after asserts): no work runs, so nothing waits on compute."""
    if remote is None or remote.cls is None or method is None:
        return False
    info = model.method(remote.cls, method)
    if info is None:
        return False
    *before, last = block_statements(info.node.body)
    docstring = (cst.SimpleString, cst.ConcatenatedString)
    if not all(isinstance(s, (cst.Assert, cst.Pass)) or (isinstance(s, cst.Expr) and isinstance(s.value, docstring)) for s in before):
        return False
    return (
        isinstance(last, cst.Return)
        and isinstance(last.value, cst.Attribute)
        and isinstance(last.value.value, cst.Name)
        and last.value.value.value == "self"
    )

