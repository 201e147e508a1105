"""Functions that wait on Ray: a function or method that submits a task or an actor call and blocks on
its result with `ray.get` each time it runs (`def get_attr(self, k): return ray.get(self.actor.get.remote(k))`).

Calling one in a loop waits once per iteration, as a `ray.get` in the loop would (RAY001); calling one
in a coroutine blocks its event loop (RAY006). A function counts when the get is in its own body,
outside any loop of its own (a loop inside it is RAY001's own finding there), on a ref submitted in the
same body, to a task, to an actor the function creates, or, for a method, to an actor the object holds
(`self.actor`): not to an actor the caller hands in (its calls queue on that actor whatever the caller
does), not to a method that blocks on purpose or reads a small fact (`blocks_or_reads`), not in a function
whose own name says it reads one (`get_master_port`), and not after a `ray.wait` with a timeout on the
same ref. A function that calls such a function of its own module (a helper, or a method of `self`),
outside any loop of its own, waits too, up to `MAX_CALL_DEPTH` calls deep (`score_and_log` calls
`score_one`, which gets): its summary keeps the get it reaches.

A wider summary serves RAY006: a synchronous function *blocks* when it calls `ray.get` or `ray.wait`
anywhere in its body (not only in an `except` fallback, not polling with `timeout=0`), whatever it waits
for; a sync method of an actor class counts too, for the async methods of the same actor.

Keys are `name` for a module-level function and `Class.name` for a method of a plain class (not an actor:
its methods run in a worker; for `blocks`, actor classes too). Other modules learn them through the
project facts `waits:<key>` and `blocks:<key>` (`wait_facts`), and `waiter_called` resolves a call to one:
a function of this module or imported (`from .client import fetch`), a method of `self`, of an object the
class holds (`self.client = Client()`), or of the instances of a class held in a list or dict
(`for w in self.workers: w.get_attr(k)`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.actor_state import blocks_or_reads, is_accessor
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    AFTER_ALL, Binding, CallSite, ClassInfo, FunctionInfo, Scope, is_name, iter_subtree, literal_number, names_read, root_name,
)

MAX_DEPTH = 4  # how many assignments a collection of instances is followed through
MAX_CALL_DEPTH = 3  # how many calls deep a wait is followed inside one module (the get's own function is 1)


@dataclass(frozen=True)
class Waiter:
    """A function that waits on Ray, as a call site sees it."""

    name: str  # `fetch`, `Client.fetch`, or the imported qualified name
    get: CallSite | None = None  # the `ray.get`, when this module holds the function
    requires: tuple[str, ...] = ()  # the project facts it needs when another module holds it


def waiting_functions(model: SemanticModel) -> dict[int, tuple[str, CallSite]]:
    """The module's functions and methods that wait on Ray, by the id of their `def`: (key, the get)."""
    return model.analysis(_Waiting).functions


def blocking_functions(model: SemanticModel) -> dict[int, tuple[str, CallSite]]:
    """The module's synchronous functions and methods that block on `ray.get` or `ray.wait` whenever they
    run (not only in an `except` fallback, not polling with `timeout=0`), by the id of their `def`."""
    return model.analysis(_Waiting).blocking


def waits_on_actors(model: SemanticModel, remote: RemoteDef | None, method: str | None) -> bool:
    """Whether actor method `method` of `remote` itself blocks on a call to an actor (`ray.get(peer.m.remote())`,
    by `blocking_functions`): actors that run one call at a time and wait on each other deadlock when they
    are all called at once, so a caller that waits for each such call before making the next is right. For
    a handle whose class is not known (taken from a list), every actor class of the module with such a
    method must block so."""
    if method is None:
        return False
    classes = [remote] if remote is not None else [r for r in model.remote_defs if r.kind == "actor"]
    methods = [info for r in classes if r.cls is not None and (info := model.method(r.cls, method)) is not None]
    blocking = blocking_functions(model)
    return bool(methods) and all(id(info.node) in blocking and _on_actor(model, blocking[id(info.node)][1]) for info in methods)


def _on_actor(model: SemanticModel, get: CallSite) -> bool:
    """Whether the get waits on `handle.method.remote(...)`, a call of an actor method (not a task's `f.remote(...)`)."""
    for node in iter_subtree(get.node):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "remote" and isinstance(func.value, cst.Attribute):
            submission = model.submission(node)
            if submission is None or submission.kind == "actor-method":
                return True
    return False


def wait_facts(model: SemanticModel) -> Iterator[str]:
    """`waits:<key>` for each function or method of the module that waits on Ray, `blocks:<key>` for
    each that blocks on it."""
    for key, _ in waiting_functions(model).values():
        yield f"waits:{key}"
    for key, _ in blocking_functions(model).values():
        yield f"blocks:{key}"


def waited_before(model: SemanticModel, ref: cst.BaseExpression | None, scope: Scope, at: int, producer: CallSite) -> bool:
    """A `ray.wait` with a timeout on the ref between its submission and the get: the code checks
    readiness instead of blocking (a `ray.wait` without a timeout blocks just like the get)."""
    names = names_read(ref) if ref is not None else set()
    for wait in model.calls_to("ray.wait"):
        timeout = next((arg.value for arg in wait.node.args if arg.keyword and arg.keyword.value == "timeout"), None)
        if timeout is None or (isinstance(timeout, cst.Name) and timeout.value == "None"):
            continue
        between = producer.index < wait.index < at and wait.scope is scope
        if between and any(names_read(arg.value) & names for arg in wait.node.args):
            return True
    return False


def waiter_called(model: SemanticModel, site: CallSite, *, instances_only: bool = False, blocks: bool = False) -> Waiter | None:
    """The function that waits on Ray which `site` calls, if any (with `blocks`, one that blocks on it at
    all). With `instances_only`, a method counts only when called on an element of a collection of
    instances (a loop over wrappers: each call waits on another actor); a method called on one object
    would wait on one actor, one call at a time anyway."""
    func = site.node.func
    functions = blocking_functions(model) if blocks else waiting_functions(model)
    fact = "blocks" if blocks else "waits"
    if isinstance(func, cst.Name) or (not instances_only and _on_self(func)):
        local = _local_callee(model, site, functions)
        if local is not None:
            return Waiter(_holder(model, *local), local[1])
    if isinstance(func, cst.Name):
        binding = model.reaching_binding(func.value, site.scope, site.index)
        if binding is not None and binding.kind == "import" and func.value[:1].islower() and not from_library(binding):
            return Waiter(binding.imported or func.value, requires=(f"{fact}:{func.value}",))
        return None
    if not isinstance(func, cst.Attribute) or _on_self(func):
        return None
    method = func.attr.value
    receiver = func.value
    cls = _element_class(model, receiver, site) if instances_only else _instance_class(model, receiver, site)
    if cls is None:
        return None
    local = _local_class(model, cls) if "." not in cls else None
    if local is not None:
        info = model.method(local, method)
        if info is None or id(info.node) not in functions:
            return None
        key, get = functions[id(info.node)]
        return Waiter(key, get)
    module, _, cls = cls.rpartition(".")  # `asyncio.Condition(...)`: the module it is reached through
    binding = model.reaching_binding(module or cls, model.module_scope, AFTER_ALL)
    if binding is not None and binding.kind == "import" and from_library(binding):
        return None  # `threading.Condition`, a class of Ray's own API: not the project's wrapper
    return Waiter(f"{cls}.{method}", requires=(f"{fact}:{cls}.{method}",))


class _Waiting:
    """The module's functions that wait on Ray (`functions`) and those that block on it (`blocking`),
    found once per model."""

    def __init__(self, model: SemanticModel) -> None:
        self.functions: dict[int, tuple[str, CallSite]] = {}
        self.blocking: dict[int, tuple[str, CallSite]] = {}
        for name in ("ray.get", "ray.wait"):
            for get in model.calls_to(name):
                info = _function_of(model, get.scope)
                if info is None or info.is_async or polls(get.node):
                    continue
                key = _key(model, info, actors=True)
                if key is not None and id(info.node) not in self.blocking and not _in_handler(model, get):
                    self.blocking[id(info.node)] = (key, get)
                if name != "ray.get" or get.loop is not None or get.scope is not info.scope or id(info.node) in self.functions:
                    continue
                key = _key(model, info)
                if key is None or model.remote_of_scope(info.scope) is not None or _named_as_fact(info.node.name.value):
                    continue
                if _waits_on_own_submission(model, info, get):
                    self.functions[id(info.node)] = (key, get)
        self._follow_calls(model)

    def _follow_calls(self, model: SemanticModel) -> None:
        """Add the functions that call one of the module's waiters (a helper, or a method of `self`) in their
        own body, outside any loop: each round goes one call further out, up to `MAX_CALL_DEPTH`."""
        for _ in range(MAX_CALL_DEPTH - 1 if self.functions else 0):  # most modules have no waiter to follow
            found: dict[int, tuple[str, CallSite]] = {}
            for site in model.calls:
                info = _function_of(model, site.scope)
                if info is None or site.loop is not None or site.scope is not info.scope or id(info.node) in self.functions:
                    continue
                if info.is_async or not (isinstance(site.node.func, cst.Name) or _on_self(site.node.func)):
                    continue
                callee = _local_callee(model, site, self.functions)
                if callee is None or model.remote_of_scope(info.scope) is not None or _named_as_fact(info.node.name.value):
                    continue
                key = _key(model, info)
                if key is not None:
                    found.setdefault(id(info.node), (key, callee[1]))
            if not found:
                return
            self.functions.update(found)


def from_library(binding: Binding) -> bool:
    """An import from the standard library or from Ray: never the project's own function or class, so a
    call of it needs no project fact (and makes no finding that waits for one)."""
    top = (binding.imported or "").split(".", 1)[0]
    return top in sys.stdlib_module_names or top == "ray"


def _named_as_fact(name: str) -> bool:
    """`get_master_port`, `alloc_rank`: a function whose name says it returns a small fact. (`is_up` is a
    predicate: it may run a probe of any length, so its name says nothing of its cost.)"""
    return is_accessor(name) and not name.startswith(("is_", "has_"))


def _key(model: SemanticModel, info: FunctionInfo, actors: bool = False) -> str | None:
    """`name` for a module-level function, `Class.name` for a method of a module-level plain class (or of
    an actor class too, with `actors`: a sync method an async method of the same actor calls)."""
    if info.parent_scope is model.module_scope:
        return info.node.name.value
    owner = info.owner
    if owner is None or owner.scope.parent is not model.module_scope:
        return None
    if not actors and any(r.cls is owner for r in model.remote_defs):
        return None
    return f"{owner.node.name.value}.{info.node.name.value}"


def polls(call: cst.Call) -> bool:
    """`timeout=0`: the call polls and returns (or raises) at once."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "timeout":
            return literal_number(arg.value) == 0
    return False


def _in_handler(model: SemanticModel, site: CallSite) -> bool:
    """A call in an `except` block: a fallback, not what the function does each time."""
    path = model.path_within(site.scope.node, site.node) or []
    return any(isinstance(node, cst.ExceptHandler) for node in path)


def _waits_on_own_submission(model: SemanticModel, info: FunctionInfo, get: CallSite) -> bool:
    ref = get.node.args[0].value if get.node.args and get.node.args[0].keyword is None else None
    origin = model.ref_origin(ref, get.scope, get.index) if ref is not None else None
    if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
        return False
    submission = model.submission(origin.producer)
    producer = model.call_site(origin.producer)
    if submission is None or producer is None or producer.scope is not get.scope or producer.loop is not None:
        return False
    if submission.kind == "actor-method":
        if blocks_or_reads(submission.method) or submission.handle is None:
            return False
        held = info.owner is not None and root_name(submission.handle) == "self"
        if not held and not _actor_made_here(model, submission.handle, producer):
            return False  # the caller's actor (a counter, a buffer): its calls queue on it whatever the caller does
    elif submission.kind == "actor-create":
        return False  # a task, or a function of another module (`f.remote()`, `mod.f.remote()`)
    return not waited_before(model, ref, get.scope, get.index, producer)


def _actor_made_here(model: SemanticModel, handle: cst.BaseExpression, site: CallSite) -> bool:
    """Whether the handle was made in the same function (`a = Worker.remote(); ray.get(a.f.remote())`)."""
    value = _assigned(model, handle, site)
    creation = model.submission(value) if isinstance(value, cst.Call) else None
    return creation is not None and creation.kind == "actor-create"


def _assigned(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> cst.BaseExpression | None:
    binding = model.reaching_binding(expr.value, site.scope, site.index) if isinstance(expr, cst.Name) else None
    return binding.value if binding is not None and binding.kind == "assign" else None


def _on_self(func: cst.BaseExpression) -> bool:
    """`self.method`: a method of the caller's own class."""
    return isinstance(func, cst.Attribute) and is_name(func.value, "self")


def _local_callee(model: SemanticModel, site: CallSite, functions: dict[int, tuple[str, CallSite]]) -> tuple[str, CallSite] | None:
    """The entry of `functions` that `site` calls: a function of this module by name, or a method of `self`."""
    func = site.node.func
    if isinstance(func, cst.Name):
        binding = model.reaching_binding(func.value, site.scope, site.index)
        return functions.get(id(binding.node)) if binding is not None and binding.kind == "def" else None
    owner = _own_class(model, site.scope) if _on_self(func) else None
    info = model.method(owner, func.attr.value) if owner is not None else None  # type: ignore[union-attr]
    return functions.get(id(info.node)) if info is not None else None


def _holder(model: SemanticModel, key: str, get: CallSite) -> str:
    """The key of the function that holds `get`: where a function that calls other waiters waits."""
    info = _function_of(model, get.scope)
    return (_key(model, info, actors=True) if info is not None else None) or key


def _function_of(model: SemanticModel, scope: Scope) -> FunctionInfo | None:
    """The function (not a lambda) whose body holds `scope`, comprehensions included."""
    function = scope.function
    return model.function_info(function.node) if function is not None and function.kind == "function" else None  # type: ignore[arg-type]


def _own_class(model: SemanticModel, scope: Scope) -> ClassInfo | None:
    info = _function_of(model, scope)
    return info.owner if info is not None else None


def _local_class(model: SemanticModel, name: str) -> ClassInfo | None:
    binding = model.reaching_binding(name, model.module_scope, AFTER_ALL)
    if binding is None or binding.kind != "class":
        return None
    return model.class_info(binding.node)  # type: ignore[arg-type]


def _instance_class(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> str | None:
    """The class of the object `expr` holds: `Client(...)` assigned to a name or to `self.client`, or an
    element of a collection of instances."""
    value = _value_of(model, expr, site)
    return _constructed(value) or _element_class(model, expr, site)


def _element_class(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> str | None:
    """The class of `expr` when it is an element of a collection of instances of one class: the target
    of a loop over `[Worker(i) for i in ...]` (also `enumerate`d or `.values()`), or `workers[i]`."""
    if isinstance(expr, cst.Subscript):
        return _collection_class(model, expr.value, site, 0)
    if not isinstance(expr, cst.Name):
        return None
    binding = model.reaching_binding(expr.value, site.scope, site.index)
    if binding is None or binding.kind != "loop-target" or binding.loop is None:
        return None
    loop = binding.loop.node
    iterable = loop.iter if isinstance(loop, cst.For) else loop.for_in.iter if hasattr(loop, "for_in") else None  # type: ignore[union-attr]
    if iterable is None:
        return None
    target = loop.target if isinstance(loop, cst.For) else loop.for_in.target  # type: ignore[union-attr]
    wrapper = iterable.func.value if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) else None
    if wrapper in ("enumerate", "zip") and isinstance(target, cst.Tuple):  # `for i, w in enumerate(ws)`, `zip(ws, xs)`
        names = [element.value for element in target.elements]
        position = next((i for i, name in enumerate(names) if is_name(name, expr.value)), None)
        sources = [None, *iterable.args] if wrapper == "enumerate" else list(iterable.args)  # type: ignore[union-attr]
        if position is None or position >= len(sources) or sources[position] is None or sources[position].star:  # type: ignore[union-attr]
            return None
        iterable = sources[position].value  # type: ignore[union-attr]
    elif not is_name(target, expr.value):
        return None
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value == "values":
        iterable = iterable.func.value
    return _collection_class(model, iterable, site, 0)


def _collection_class(model: SemanticModel, expr: cst.BaseExpression, site: CallSite, depth: int) -> str | None:
    """The class whose instances a list or dict holds: `[Worker(i) for i in ...]`, `{k: Worker(k) ...}`,
    `[Worker(0), Worker(1)]`, through names and `self.` attributes."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return _constructed(expr.elt)
    if isinstance(expr, cst.DictComp):
        return _constructed(expr.value)
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        classes = {_constructed(element.value) for element in expr.elements}
        return classes.pop() if len(classes) == 1 else None
    value = _value_of(model, expr, site)
    return _collection_class(model, value, site, depth + 1) if value is not None else None


def _value_of(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> cst.BaseExpression | None:
    """What a name or a `self.` attribute was assigned: the reaching assignment of a name, or the one
    assignment of `self.attr` in the class's methods (None when there are several)."""
    if isinstance(expr, cst.Name):
        binding: Binding | None = model.reaching_binding(expr.value, site.scope, site.index)
        return binding.value if binding is not None and binding.kind == "assign" else None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        owner = _own_class(model, site.scope)
        stores = model.self_assignments(owner, expr.attr.value) if owner is not None else []
        return stores[0].value if len(stores) == 1 else None
    return None


def _constructed(expr: cst.BaseExpression | None) -> str | None:
    """`Worker` for `Worker(...)`, `mod.Worker` for `mod.Worker(...)`: a capitalized name called (a class,
    by convention), with the module name it is reached through."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Name):
        name = func.value
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        name = f"{func.value.value}.{func.attr.value}"
    else:
        return None
    return name if name.rpartition(".")[2][:1].isupper() else None

