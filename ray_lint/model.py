"""The semantic model of Ray code that every rule queries.

One iterative walk over the libcst tree records scopes, bindings, calls, loops, functions and
classes. Everything else (qualified names, remote functions and actors, ObjectRef flow) is
resolved lazily from those records, so a rule pays only for what it asks.

Order matters for the flow questions ("was this ref created earlier in the same iteration?"),
so the walk visits children in evaluation order and numbers every event: a value is numbered
before the names it binds, a loop's iterable before the loop, a decorator before its function.
Flow is approximated linearly: the binding that reaches a use is the last one before it in the
same scope. That ignores branches, which is the right trade for a linter that must stay quiet.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal, Protocol, TypeVar, Union

import libcst as cst
from libcst.metadata import CodeRange

from ray_lint.positions import Positions
from ray_lint.project import CallShape, ProjectFacts

ScopeKind = Literal["module", "function", "lambda", "class", "comprehension"]
LoopKind = Literal["for", "while", "comprehension"]
BindingKind = Literal["import", "assign", "augassign", "def", "class", "loop-target", "param", "other"]

Comprehension = Union[cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp]
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

# Fields that never hold code a rule cares about (whitespace, brackets, operators, keyword names).
_SKIPPED_FIELDS = frozenset(
    {
        "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
        "footer", "newline", "trailing_whitespace", "operator", "dot", "equal", "colon",
        "asynchronous", "keyword", "attr", "lbracket", "rbracket", "lbrace", "rbrace", "star_tok",
    }
)
# Evaluation order where libcst's field order differs from it.
_FIELD_ORDER: dict[type, tuple[str, ...]] = {
    cst.IfExp: ("test", "body", "orelse"),
    cst.DictComp: ("for_in", "key", "value"),
    cst.ListComp: ("for_in", "elt"),
    cst.SetComp: ("for_in", "elt"),
    cst.GeneratorExp: ("for_in", "elt"),
}
_fields_cache: dict[type, tuple[str, ...]] = {}

TIMERS = ("time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns", "time.monotonic_ns")
_EXITS = (cst.Break, cst.Return, cst.Raise)
# A line that says `# ray-lint: large` marks the values it binds as large (`ray_lint.sizes` reads the marks).
LARGE_MARKER = "ray-lint: large"
AnalysisT = TypeVar("AnalysisT")
AFTER_ALL = 1 << 62  # an event number after every other: a name then resolves to its last binding in the scope
ALL_CORES = math.inf  # a thread count that means "one per core of the node"
CPU_COUNT_FUNCTIONS = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count", "joblib.cpu_count"})

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


def is_accessor(method: str | None) -> bool:
    """`is_*`/`has_*` flags, `ping`-like probes, and `get_*`/`alloc_*` of an address, a rank, an id, a port
    (`get_weights` and `get_batch` move data: they are not accessors)."""
    if method is None:
        return False
    if method in ACCESSORS or method.startswith(("is_", "has_")):
        return True
    verb, _, rest = method.partition("_")
    return verb in ("get", "alloc") and any(word in SMALL_FACTS for word in rest.split("_"))


# Methods that change a list, dict, set or deque in place (not `setdefault`: that is how a cache is filled).
CONTAINER_MUTATORS = frozenset(
    {
        "append", "appendleft", "extend", "extendleft", "insert", "update", "pop", "popleft", "popitem",
        "remove", "discard", "clear", "add", "sort", "reverse",
    }
)


class _Event(Protocol):
    index: int


_E = TypeVar("_E", bound=_Event)
_event = attrgetter("index")


def between(records: Sequence[_E], start: int, end: int) -> Sequence[_E]:
    """The records of a list kept in event order (bindings, calls, stores) numbered in [start, end): two
    binary searches, where a filter over the whole list would make a query per loop or function cost
    the size of the file."""
    return records[bisect_left(records, start, key=_event) : bisect_left(records, end, key=_event)]


def child_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Children in evaluation order, without whitespace and punctuation, and without rebuilding nodes
    (libcst's own visitor reconstructs every node it passes, which doubles the cost of a walk)."""
    cls = type(node)
    names = _fields_cache.get(cls)
    if names is None:
        names = _FIELD_ORDER.get(cls) or tuple(
            f.name
            for f in dataclasses.fields(node)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
        _fields_cache[cls] = names
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def iter_subtree(node: cst.CSTNode, *, into_functions: bool = True) -> Iterator[cst.CSTNode]:
    """Every node under `node` (itself included), optionally not descending into nested defs and lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if not into_functions and current is not node and isinstance(
            current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)
        ):
            continue
        stack.extend(reversed(list(child_nodes(current))))


def path_to(root: cst.CSTNode, target: cst.CSTNode, *, into_functions: bool = True) -> list[cst.CSTNode] | None:
    """The nodes from `root` down to `target` (both included), optionally not descending into nested
    defs, classes and lambdas; None when `target` is not found."""
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        if not into_functions and node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend((child, depth + 1) for child in reversed(list(child_nodes(node))))
    return None


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` as text, or None for anything that is not a plain dotted name."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def literal_number(expr: cst.BaseExpression | None) -> float | None:
    """The value of an int or float literal (with an optional minus sign), else None."""
    negative = False
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        negative, expr = True, expr.expression
    if isinstance(expr, (cst.Integer, cst.Float)):
        value = float(expr.evaluated_value)
        return -value if negative else value
    return None


def literal_string(expr: cst.BaseExpression | None) -> str | None:
    """The value of a plain (or implicitly concatenated) string literal, else None."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def root_name(expr: cst.BaseExpression) -> str | None:
    """`self` for `self.a.b[0].c`: the name an attribute/subscript chain starts from."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


# Scopes, loops, bindings, calls and stores number hundreds of thousands in a long file: slots keep them small.
@dataclass(eq=False, repr=False, slots=True)
class Scope:
    kind: ScopeKind
    node: cst.CSTNode
    parent: Scope | None
    is_async: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=lambda: defaultdict(list))  # each list in event order
    globals: set[str] = field(default_factory=set)
    start: int = 0  # the events of its code, nested scopes' included: [start, end)
    end: int = AFTER_ALL
    first: int = 0  # its place in `SemanticModel.scopes`; the scopes nested in it follow it, up to `last`
    last: int = 1 << 62

    @property
    def function(self) -> Scope | None:
        """The nearest enclosing function or lambda scope (comprehensions run inside it)."""
        scope: Scope | None = self
        while scope is not None and scope.kind in ("comprehension", "class"):
            scope = scope.parent
        return scope if scope is not None and scope.kind in ("function", "lambda") else None


@dataclass(eq=False, repr=False, slots=True)
class Loop:
    kind: LoopKind
    node: cst.For | cst.While | Comprehension
    parent: Loop | None
    scope: Scope  # the scope the loop's body runs in (a comprehension's own scope)
    start: int  # event numbers of the body: [start, end)
    end: int = AFTER_ALL

    def contains_index(self, index: int) -> bool:
        return self.start <= index < self.end

    def encloses(self, other: Loop | None) -> bool:
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False

@dataclass(eq=False, repr=False, slots=True)
class Binding:
    name: str
    kind: BindingKind
    scope: Scope
    index: int
    node: cst.CSTNode
    value: cst.BaseExpression | None = None  # for `name = value`
    imported: str | None = None  # qualified name, for imports
    loop: Loop | None = None
    source: cst.BaseExpression | None = None  # what the value was computed from (also when unpacked)
    statement: cst.CSTNode | None = None  # the statement that binds it


@dataclass(eq=False, repr=False, slots=True)
class CallSite:
    node: cst.Call
    scope: Scope
    index: int
    loop: Loop | None
    statement: cst.CSTNode | None


@dataclass(eq=False, repr=False, slots=True)
class Store:
    """A write through an attribute or subscript target: `a.b = v`, `a[k] += v`, `del a.b`."""

    target: cst.Attribute | cst.Subscript
    value: cst.BaseExpression | None  # None for `del` and for unpacking (`a.x, a.y = pair`)
    kind: Literal["assign", "augassign", "del"]
    statement: cst.CSTNode
    scope: Scope
    index: int


@dataclass(eq=False, repr=False)
class FunctionInfo:
    node: cst.FunctionDef
    scope: Scope  # the function's own scope
    parent_scope: Scope
    owner: ClassInfo | None  # the class it is a method of

    @property
    def is_async(self) -> bool:
        return self.node.asynchronous is not None


@dataclass(eq=False, repr=False)
class ClassInfo:
    node: cst.ClassDef
    scope: Scope
    methods: list[FunctionInfo] = field(default_factory=list)


@dataclass(eq=False, repr=False)
class RemoteOptions:
    """Options given to `ray.remote(...)` or `.options(...)`: literal keyword expressions, and whether
    `**kwargs` made the full set unknowable."""

    node: cst.Call | None
    values: dict[str, cst.BaseExpression] = field(default_factory=dict)
    has_unpacked: bool = False

    @classmethod
    def from_call(cls, call: cst.Call) -> RemoteOptions:
        options = cls(node=call)
        for arg in call.args:
            if arg.keyword is not None:
                options.values[arg.keyword.value] = arg.value
            elif arg.star == "**":
                options.has_unpacked = True
        return options


@dataclass(eq=False, repr=False)
class RemoteDef:
    """A remote function or actor class, with everything the module says about its options."""

    kind: Literal["task", "actor"]
    target: cst.FunctionDef | cst.ClassDef
    declared_at: cst.CSTNode  # the decorator or the `ray.remote(...)` call: where rules report
    options: RemoteOptions
    call_options: list[RemoteOptions] = field(default_factory=list)
    cls: ClassInfo | None = None
    escapes: bool = False  # handed by name to other code, which may set options this module does not show

    @property
    def name(self) -> str:
        return self.target.name.value

    def option_values(self, name: str) -> Iterator[cst.BaseExpression]:
        """Every expression given for option `name`, in the decorator and at `.options(...)` calls."""
        for options in (self.options, *self.call_options):
            if name in options.values:
                yield options.values[name]

    @property
    def options_unknowable(self) -> bool:
        return self.escapes or any(o.has_unpacked for o in (self.options, *self.call_options))

    @property
    def is_async_actor(self) -> bool:
        return self.cls is not None and any(m.is_async for m in self.cls.methods)

    @property
    def is_threaded_actor(self) -> bool:
        """`max_concurrency > 1` or concurrency groups; an unknown value counts as threaded."""
        for value in self.option_values("max_concurrency"):
            number = literal_number(value)
            if number is None or number > 1:
                return True
        return any(True for _ in self.option_values("concurrency_groups"))


@dataclass(frozen=True, repr=False)
class Submission:
    """What a `.remote(...)` call does. `kind` is "unknown" when the receiver cannot be resolved."""

    kind: Literal["task", "actor-create", "actor-method", "unknown"]
    call: cst.Call
    remote: RemoteDef | None = None  # the function, or the actor class
    handle: cst.BaseExpression | None = None  # for actor methods, the handle expression
    method: str | None = None

    @property
    def returns_ref(self) -> bool:
        return self.kind != "actor-create"


@dataclass(frozen=True, repr=False)
class RefOrigin:
    """Where an ObjectRef (or a list of them) held by an expression came from."""

    kind: Literal["ref", "ref-list"]
    producer: cst.BaseExpression  # the `.remote(...)`, `ray.put(...)` or list expression
    index: int  # event number at which the expression got its value
    binding: Binding | None  # the name binding that holds the producer itself, if it came through names


class SemanticModel:
    """Facts about one module, for rules to query. Build it with `SemanticModel(module)`."""

    def __init__(self, module: cst.Module, project: ProjectFacts | None = None) -> None:
        self.module = module
        self.project = project  # the other files' facts, when the caller knows them (`ray_lint.project`)
        self.module_scope = Scope("module", module, None)
        self.scopes: list[Scope] = [self.module_scope]
        self.loops: list[Loop] = []
        self.calls: list[CallSite] = []
        self.calls_by_tail: dict[str, list[CallSite]] = defaultdict(list)
        self.functions: list[FunctionInfo] = []
        self.classes: list[ClassInfo] = []
        self.star_imports: set[str] = set()
        self._call_sites: dict[int, CallSite] = {}
        self._class_by_node: dict[int, ClassInfo] = {}
        self._function_by_node: dict[int, FunctionInfo] = {}
        self.stores: list[Store] = []
        self.bindings: list[Binding] = []  # every scope's, in event order
        self._definitions: dict[int, Binding] = {}  # id of a def or class -> the binding of its name
        self._names_bound: dict[int, frozenset[str]] = {}
        self._methods: dict[int, dict[str, FunctionInfo]] = {}
        self._attributes_stored: dict[int, set[str | None]] = {}
        self._positions: Positions | None = None
        self._loop_results: dict[tuple[int, tuple[str, ...], frozenset[str]], LoopResults] = {}
        self._calls_to: dict[str, tuple[CallSite, ...]] = {}
        self.marked_large: set[int] = set()  # ids of statements on a line that says `# ray-lint: large`
        self._analyses: dict[Callable[[SemanticModel], Any], Any] = {}
        _Walker(self).run()

    # ------------------------------------------------------------------ names

    def reaching_binding(self, name: str, scope: Scope, at: int) -> Binding | None:
        """The binding of `name` visible at event `at` in `scope`: in the same scope, the last one before
        `at`; in an enclosing scope (code that runs later, such as a function body), the last one before
        `at` or else the last one of all. A binary search of the scope's bindings of the name, which are in
        event order: a scan made each lookup cost the file's size where a name is bound once per block."""
        current: Scope | None = scope
        same_scope = True
        while current is not None:
            if not same_scope and current.kind == "class":  # class bodies are not enclosing scopes
                current = current.parent
                continue
            if name in current.globals:
                current, same_scope = self.module_scope, False
            bindings = current.bindings.get(name)
            if bindings:
                before = bisect_left(bindings, at, key=_event)  # how many come before `at`
                if before:
                    return bindings[before - 1]
                return None if same_scope else bindings[-1]
            current, same_scope = current.parent, False
        return None

    def sole_assignment(self, name: str, scope: Scope, at: int) -> Binding | None:
        """The binding of `name` at `at` when it is the name's only binding in its scope and a plain
        `name = value`: no branch, loop or later statement can have given it another value."""
        binding = self.reaching_binding(name, scope, at)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return None
        return binding if len(binding.scope.bindings.get(name, ())) == 1 else None

    def qualified_name(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> str | None:
        """`ray.get` for `ray.get`, `r.get` (after `import ray as r`), `fetch` (after
        `from ray import get as fetch`) and `get = ray.get; get`; None for local or unknown names."""
        if _depth > 8:
            return None
        if isinstance(expr, cst.Attribute):
            base = self.qualified_name(expr.value, scope, at, _depth + 1)
            return f"{base}.{expr.attr.value}" if base else None
        if not isinstance(expr, cst.Name):
            return None
        binding = self.reaching_binding(expr.value, scope, at)
        if binding is None:
            if len(self.star_imports) == 1:  # `from ray import *`
                return f"{next(iter(self.star_imports))}.{expr.value}"
            return None
        if binding.kind == "import":
            return binding.imported
        if binding.kind == "assign" and _is_none_literal(binding.value):
            imports = [b for b in binding.scope.bindings[expr.value] if b.kind == "import"]
            if imports:  # `try: import ray` / `except ImportError: ray = None`
                return imports[-1].imported
        if binding.kind == "assign" and isinstance(binding.value, (cst.Name, cst.Attribute)):
            return self.qualified_name(binding.value, binding.scope, binding.index, _depth + 1)
        return None

    def call_site(self, call: cst.Call) -> CallSite | None:
        return self._call_sites.get(id(call))

    def call_name(self, site: CallSite) -> str | None:
        return self.qualified_name(site.node.func, site.scope, site.index)

    def calls_to(self, qualified: str) -> tuple[CallSite, ...]:
        """Calls that resolve to `qualified` (e.g. "ray.get"), through any alias; computed once per name
        (rules ask again for every call they check)."""
        found = self._calls_to.get(qualified)
        if found is None:
            found = self._calls_to[qualified] = self._find_calls_to(qualified)
        return found

    def _find_calls_to(self, qualified: str) -> tuple[CallSite, ...]:
        tails = {qualified.rsplit(".", 1)[-1]} | self._alias_names(qualified)
        found = []
        for tail in tails:
            for site in self.calls_by_tail.get(tail, ()):
                if self.call_name(site) == qualified:
                    found.append(site)
        found.sort(key=lambda site: site.index)
        return tuple(found)

    @cached_property
    def _aliases(self) -> dict[str, set[str]]:
        """Qualified name -> local names that may stand for it (import aliases and `x = a.b` copies)."""
        aliases: dict[str, set[str]] = defaultdict(set)
        for scope in self.scopes:
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    if binding.kind == "import" and binding.imported:
                        aliases[binding.imported].add(name)
                    elif binding.kind == "assign" and isinstance(binding.value, (cst.Name, cst.Attribute)):
                        resolved = self.qualified_name(binding.value, scope, binding.index)
                        if resolved:
                            aliases[resolved].add(name)
        return aliases

    def _alias_names(self, qualified: str) -> set[str]:
        return self._aliases.get(qualified, set())

    def imports_module(self, module: str) -> bool:
        """Whether the file imports `module` or something inside it."""
        prefix = module + "."
        return any(q == module or q.startswith(prefix) for q in self._aliases) or module in self.star_imports

    # ------------------------------------------------------------------ remote functions and actors

    @property
    def remote_defs(self) -> list[RemoteDef]:
        """Every remote function and actor class, in all the forms `ray.remote` is applied."""
        return self._remotes[0]

    @cached_property
    def _remotes(self) -> tuple[list[RemoteDef], dict[int, RemoteDef]]:
        found: dict[int, RemoteDef] = {}
        definitions: list[FunctionInfo | ClassInfo] = [*self.functions, *self.classes]
        for info in definitions:
            scope = info.parent_scope if isinstance(info, FunctionInfo) else info.scope.parent
            assert scope is not None
            index = self._definition_index(info.node, scope)
            for decorator in info.node.decorators:
                options = self._remote_options(decorator.decorator, scope, index)
                if options is not None:
                    found[id(info.node)] = self._make_remote(info.node, decorator, options)
        applications: list[tuple[cst.Call, int]] = []
        for site in self.calls_to("ray.remote"):
            target, options = self._applied_remote(site)
            if target is not None:
                applications.append((site.node, id(target)))
                if id(target) not in found:
                    found[id(target)] = self._make_remote(target, site.node, options)
        by_node: dict[int, RemoteDef] = {}
        for remote in found.values():
            by_node[id(remote.target)] = remote
            by_node[id(remote.declared_at)] = remote
        for call, target_id in applications:  # `g = ray.remote(f)` names the same definition
            by_node[id(call)] = found[target_id]
            applying = self._applied_call.get(id(call))
            if applying is not None:
                by_node[id(applying)] = found[target_id]
        self._remotes = (list(found.values()), by_node)  # `.options` lookups below need the map
        for site in self.calls_by_tail.get("options", ()):
            func = site.node.func
            if isinstance(func, cst.Attribute):
                named = self.remote_def_of(func.value, site.scope, site.index)
                if named is not None:
                    named.call_options.append(RemoteOptions.from_call(site.node))
        self._mark_escapes({id(call) for call, _ in applications})
        return self._remotes

    def _mark_escapes(self, applying_calls: set[int]) -> None:
        """Flag remote functions and actor classes handed by name to other calls (a worker-group
        factory, `map_batches`, a trainer): that code may set their options, so they are unknowable.
        Only direct hand-overs count (`f(Actor)`, `f(cls=Actor)`, `f([A, B])`): a walk of every
        argument's subtree would cost a second pass over the file."""
        names = {remote.name for remote in self.remote_defs} | {
            name for scope in self.scopes for name, bindings in scope.bindings.items()
            if any(b.kind == "assign" and isinstance(b.value, cst.Call) and id(b.value) in self._remote_by_node for b in bindings)
        }
        if not names:
            return
        for site in self.calls:
            if id(site.node) in applying_calls or id(site.node.func) in applying_calls:
                continue
            for arg in site.node.args:
                value = arg.value  # the name itself, or an item of a literal list, tuple, set or dict
                items = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple, cst.Set, cst.Dict)) else [value]
                for item in items:
                    if isinstance(item, cst.Name) and item.value in names:
                        remote = self.remote_def_of(item, site.scope, site.index)
                        if remote is not None:
                            remote.escapes = True

    def _make_remote(
        self, target: cst.FunctionDef | cst.ClassDef, declared_at: cst.CSTNode, options: RemoteOptions
    ) -> RemoteDef:
        if isinstance(target, cst.ClassDef):
            return RemoteDef("actor", target, declared_at, options, cls=self._class_by_node[id(target)])
        return RemoteDef("task", target, declared_at, options)

    def _remote_options(self, expr: cst.BaseExpression, scope: Scope, at: int) -> RemoteOptions | None:
        """Options if `expr` is `ray.remote` or `ray.remote(...)` used as a decorator."""
        if isinstance(expr, cst.Call):
            if self.qualified_name(expr.func, scope, at) == "ray.remote":
                return RemoteOptions.from_call(expr)
            return None
        if self.qualified_name(expr, scope, at) == "ray.remote":
            return RemoteOptions(node=None)
        return None

    def _applied_remote(
        self, site: CallSite
    ) -> tuple[cst.FunctionDef | cst.ClassDef | None, RemoteOptions]:
        """For `ray.remote(f)` or `ray.remote(**opts)(f)`: the definition of `f` and the options."""
        call = site.node
        applied = self._applied_call.get(id(call))
        if applied is not None:  # `ray.remote(...)(f)`
            options, call = RemoteOptions.from_call(call), applied
        else:
            options = RemoteOptions(node=call)
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) != 1 or not isinstance(positional[0].value, cst.Name):
            return None, options
        binding = self.reaching_binding(positional[0].value.value, site.scope, site.index)
        if binding is not None and binding.kind in ("def", "class"):
            return binding.node, options  # type: ignore[return-value]
        return None, options

    @cached_property
    def _applied_call(self) -> dict[int, cst.Call]:
        """`id(ray.remote(...))` -> the call `ray.remote(...)(f)` that applies it."""
        applied = {}
        for site in self.calls:
            if isinstance(site.node.func, cst.Call):
                applied[id(site.node.func)] = site.node
        return applied

    @property
    def _remote_by_node(self) -> dict[int, RemoteDef]:
        return self._remotes[1]

    def remote_def_of(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> RemoteDef | None:
        """The remote function or actor class that `expr` names, if the module defines it."""
        if _depth > 8:
            return None
        if isinstance(expr, cst.Call):
            return self._remote_by_node.get(id(expr))
        if not isinstance(expr, cst.Name):
            return None
        binding = self.reaching_binding(expr.value, scope, at)
        if binding is None:
            return None
        if binding.kind in ("def", "class"):
            remote = self._remote_by_node.get(id(binding.node))
            # After `g = ray.remote(f)`, `f` is still the plain function: only a decorator makes the name remote.
            return remote if remote is not None and isinstance(remote.declared_at, cst.Decorator) else None
        if binding.kind == "assign" and binding.value is not None:
            return self.remote_def_of(binding.value, binding.scope, binding.index, _depth + 1)
        return None

    def definition_binding(self, node: cst.FunctionDef | cst.ClassDef) -> Binding | None:
        """The binding a `def` or `class` makes of its name."""
        return self._definitions.get(id(node))

    def _definition_index(self, node: cst.FunctionDef | cst.ClassDef, scope: Scope) -> int:
        binding = self.definition_binding(node)
        return binding.index if binding is not None and binding.scope is scope else AFTER_ALL

    # ------------------------------------------------------------------ what remote code runs and requests

    def function_info(self, node: cst.FunctionDef) -> FunctionInfo | None:
        return self._function_by_node.get(id(node))

    def remote_functions(self, remote: RemoteDef) -> list[FunctionInfo]:
        """The functions whose bodies run in a Ray worker for `remote`: the task, or every method of the actor."""
        if remote.cls is not None:
            return list(remote.cls.methods)
        info = self.function_info(remote.target)  # type: ignore[arg-type]
        return [info] if info is not None else []

    def parameter_defaults(self, remote: RemoteDef) -> Iterator[tuple[FunctionInfo, cst.Param, cst.BaseExpression, int]]:
        """Each parameter default of the remote's functions, as (function, parameter, default, event): defaults
        are evaluated in the function's parent scope, just before the `def` binds its name."""
        for function in self.remote_functions(remote):
            at = self._definition_index(function.node, function.parent_scope)
            params = function.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                if param.default is not None:
                    yield function, param, param.default, at

    @cached_property
    def _remote_by_scope(self) -> dict[int, tuple[RemoteDef, FunctionInfo]]:
        return {id(info.scope): (remote, info) for remote in self.remote_defs for info in self.remote_functions(remote)}

    def remote_of_scope(self, scope: Scope) -> tuple[RemoteDef, FunctionInfo] | None:
        """The remote function or actor (and its function) whose body runs the code of `scope` directly:
        comprehensions inside the body count, nested functions and lambdas do not (they may run anywhere)."""
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return self._remote_by_scope.get(id(scope))

    def cpu_share(self, remote: RemoteDef) -> float | None:
        """The CPUs a task or actor requests: the largest literal `num_cpus` given anywhere in the module,
        1 by default (Ray also sets OMP_NUM_THREADS to 1 for actors), None when a value is not literal."""
        if remote.options_unknowable:
            return None
        numbers = [literal_number(value) for value in remote.option_values("num_cpus")]
        if any(number is None for number in numbers):
            return None
        return max((n for n in numbers if n is not None), default=1.0)

    def gpu_request(self, remote: RemoteDef) -> Literal["requested", "none", "unknown"]:
        """Whether `remote` asks for a GPU anywhere in the module (`num_gpus` or `resources={"GPU": ...}`)."""
        if remote.options_unknowable:
            return "unknown"
        unknown = False
        for value in remote.option_values("num_gpus"):
            number = literal_number(value)
            if number is None:
                unknown = True
            elif number > 0:
                return "requested"
        for value in remote.option_values("resources"):
            if not isinstance(value, cst.Dict):
                unknown = True
                continue
            for element in value.elements:
                if not isinstance(element, cst.DictElement):
                    unknown = True
                elif literal_string(element.key) == "GPU":
                    return "requested"
        return "unknown" if unknown else "none"

    def is_cpu_count(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """Whether `expr` is the machine's core count: `os.cpu_count()` (also `... or 1`, `str(...)`,
        `multiprocessing.cpu_count()`, `psutil.cpu_count()`, `joblib.cpu_count()`)."""
        if isinstance(expr, cst.BooleanOperation):
            return self.is_cpu_count(expr.left, scope, at)
        if not isinstance(expr, cst.Call):
            return False
        name = self.qualified_name(expr.func, scope, at)
        if name in CPU_COUNT_FUNCTIONS:
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value in ("str", "int") and len(expr.args) == 1:
            return self.is_cpu_count(expr.args[0].value, scope, at)
        return False

    def method(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """The method `name` defined in the body of `cls` (the last definition wins, as in Python)."""
        methods = self._methods.get(id(cls))
        if methods is None:
            methods = self._methods[id(cls)] = {m.node.name.value: m for m in cls.methods}
        return methods.get(name)

    def mutates_state(self, method: FunctionInfo, _seen: frozenset[int] = frozenset()) -> bool:
        """Whether an actor method leaves state behind for the next call: it assigns or deletes through
        `self`, calls a mutating method (`append`, `update`, `step`, `execute`, ...) on something reached
        from `self`, declares a global, or calls another method of its class on `self` that does."""
        params = method.node.params
        positional = [*params.posonly_params, *params.params]
        if method.owner is None or not positional:
            return False
        this = positional[0].name.value
        own = method.scope
        inside = self.scopes[own.first : own.last]  # the method's scope and those nested in it
        if any(scope.globals for scope in inside):
            return True
        if any(root_name(store.target) == this for store in between(self.stores, own.start, own.end)):
            return True
        holders = {this} | {  # local names that alias something reached from self: `buf = self.buf`
            name
            for scope in inside
            for name, bindings in scope.bindings.items()
            if any(b.value is not None and not isinstance(b.value, cst.Name) and root_name(b.value) == this for b in bindings)
        }
        for site in between(self.calls, own.start, own.end):
            func = site.node.func
            if isinstance(func, cst.Name) and func.value == "setattr":
                return True
            if not isinstance(func, cst.Attribute) or root_name(func.value) not in holders:
                continue
            if isinstance(func.value, cst.Name) and func.value.value == this:  # `self.helper(...)`
                callee = self.method(method.owner, func.attr.value)
                if callee is not None and id(callee) not in _seen and self.mutates_state(callee, _seen | {id(method)}):
                    return True
            elif func.attr.value in MUTATING_METHODS:
                return True
        return False

    def call_shapes(self) -> Iterator[CallShape]:
        """The module's calls as `ray_lint.project` reads them for project facts (resource options given
        to a class by name), from the calls the model already holds: no second walk of the tree."""
        for site in self.calls:
            call, func = site.node, site.node.func
            keywords = tuple(arg.keyword.value if arg.keyword is not None else None for arg in call.args if arg.keyword or arg.star == "**")
            if isinstance(func, cst.Attribute) and func.attr.value == "options":
                yield CallShape(keywords, options_of=_bare_name(func.value))
            elif isinstance(func, cst.Call) and _bare_name(func.func) == "remote" and call.args:
                inner = tuple(a.keyword.value if a.keyword is not None else None for a in func.args if a.keyword or a.star == "**")
                yield CallShape(inner, remote_of=_bare_name(call.args[0].value))
            elif keywords:
                yield CallShape(keywords, names=tuple(name for arg in call.args if (name := _bare_name(arg.value)) is not None))

    def actor_facts(self) -> Iterator[str]:
        """`actor:async:Name`, `actor:threaded:Name` or `actor:sync:Name` for the module's actor classes."""
        for remote in self.remote_defs:
            if remote.kind == "actor" and remote.cls is not None:
                if remote.is_async_actor:
                    yield f"actor:async:{remote.name}"
                if remote.is_threaded_actor:
                    yield f"actor:threaded:{remote.name}"
                if not remote.is_async_actor and not remote.is_threaded_actor:
                    yield f"actor:sync:{remote.name}"

    # ------------------------------------------------------------------ ObjectRefs

    def submission(self, call: cst.Call) -> Submission | None:
        """What `call` submits, if it is a `.remote(...)` call."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "remote"):
            return None
        site = self.call_site(call)
        if site is None:
            return None
        receiver = func.value
        if (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value == "options"
        ):
            receiver = receiver.func.value
        remote = self.remote_def_of(receiver, site.scope, site.index)
        if remote is not None:
            return Submission("task" if remote.kind == "task" else "actor-create", call, remote)
        if isinstance(receiver, cst.Attribute):
            actor = self.actor_of_handle(receiver.value, site.scope, site.index)
            if actor is not None or not self._names_module(receiver.value, site.scope, site.index):
                return Submission("actor-method", call, actor, receiver.value, receiver.attr.value)
        return Submission("unknown", call)

    def looped_submissions(
        self, *kinds: Literal["task", "actor-create", "actor-method"]
    ) -> Iterator[tuple[CallSite, Submission, RemoteDef]]:
        """Each `.remote(...)` call inside a loop that submits one of `kinds` defined in this module (a task,
        an actor's creation, an actor method call), with what it submits and that task's function or that
        actor's class."""
        for site in self.calls_by_tail.get("remote", ()):
            if site.loop is None:
                continue
            submission = self.submission(site.node)
            if submission is None or submission.kind not in kinds or submission.remote is None:
                continue
            yield site, submission, submission.remote

    def _names_module(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """Whether `expr` is an imported module or name (so `mod.f.remote()` is a task, not a method)."""
        return self.qualified_name(expr, scope, at) is not None

    def actor_of_handle(self, expr: cst.BaseExpression, scope: Scope, at: int) -> RemoteDef | None:
        """The actor class of a handle expression such as `h` after `h = Actor.remote()`."""
        if isinstance(expr, cst.Call):
            submission = self.submission(expr)
            return submission.remote if submission and submission.kind == "actor-create" else None
        if isinstance(expr, cst.Name):
            binding = self.reaching_binding(expr.value, scope, at)
            if binding is not None and binding.kind == "assign" and isinstance(binding.value, cst.Call):
                return self.actor_of_handle(binding.value, binding.scope, binding.index)
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):  # `workers[i]`
            binding = self.reaching_binding(expr.value.value, scope, at)
            made = binding.value if binding is not None and binding.kind == "assign" else None
            if isinstance(made, cst.ListComp) and isinstance(made.elt, cst.Call):
                return self.actor_of_handle(made.elt, binding.scope, binding.index)  # type: ignore[union-attr]
        return None

    def returns_stored_state(self, remote: RemoteDef | None, method: str | None) -> bool:
        """Whether actor method `method` of `remote` only hands back what an earlier call stored
        (`return self.sorted_frame`, after asserts): no work runs, so nothing waits on compute."""
        if remote is None or remote.cls is None or method is None:
            return False
        info = self.method(remote.cls, method)
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

    def ref_origin(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> RefOrigin | None:
        """Where the ObjectRef(s) that `expr` holds at event `at` were created, if the module shows it:
        `.remote(...)`, `ray.put(...)`, names bound to those, list literals and comprehensions of refs,
        and lists filled with `.append(ref)`."""
        if _depth > 8:
            return None
        if isinstance(expr, cst.Call):
            site = self.call_site(expr)
            if site is None:
                return None
            submission = self.submission(expr)
            if submission is not None:
                return RefOrigin("ref", expr, site.index, None) if submission.returns_ref else None
            if self.call_name(site) == "ray.put":
                return RefOrigin("ref", expr, site.index, None)
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            elements = [e.value for e in expr.elements]
            if elements and all(self.ref_origin(e, scope, at, _depth + 1) for e in elements):
                return RefOrigin("ref-list", expr, at, None)
            return None
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            inner = self._comprehension_scope(expr)
            if inner is not None and self.ref_origin(expr.elt, inner, AFTER_ALL, _depth + 1):
                return RefOrigin("ref-list", expr, at, None)
            return None
        if isinstance(expr, cst.Name):
            binding = self.reaching_binding(expr.value, scope, at)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            value = binding.value
            if isinstance(value, cst.List) and not value.elements and self._appended_refs(binding):
                return RefOrigin("ref-list", value, binding.index, binding)
            origin = self.ref_origin(value, binding.scope, binding.index, _depth + 1)
            if origin is not None:
                return RefOrigin(origin.kind, origin.producer, binding.index, origin.binding or binding)
        return None

    def _appended_refs(self, binding: Binding) -> bool:
        """Whether a list bound empty is later filled with `name.append(ref)`."""
        return any(self.ref_origin(value, site.scope, site.index) for site, value in self.appends_to(binding))

    def appends_to(self, binding: Binding) -> list[tuple[CallSite, cst.BaseExpression]]:
        """Each later `name.append(value)` (one argument) on the value `binding` bound, with the value."""
        found: list[tuple[CallSite, cst.BaseExpression]] = []
        for site in between(self._appends.get(binding.name, []), binding.index + 1, AFTER_ALL):
            if len(site.node.args) == 1 and self.reaching_binding(binding.name, site.scope, site.index) is binding:
                found.append((site, site.node.args[0].value))
        return found

    def appends_in(self, function: Scope, name: str) -> list[tuple[cst.Name, cst.BaseExpression | None]]:
        """Each `name.append(...)` call in the function's body (its comprehensions included), as
        (receiver, appended value; None unless the call has exactly one argument)."""
        found: list[tuple[cst.Name, cst.BaseExpression | None]] = []
        for site in self._appends.get(name, ()):
            if site.scope.function is function:
                receiver = site.node.func.value  # type: ignore[attr-defined]
                found.append((receiver, site.node.args[0].value if len(site.node.args) == 1 else None))
        return found

    @cached_property
    def _appends(self) -> dict[str, list[CallSite]]:
        """`name.append(...)` calls by the receiver's name, in event order."""
        found: dict[str, list[CallSite]] = defaultdict(list)
        for site in self.calls_by_tail.get("append", ()):
            func = site.node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                found[func.value.value].append(site)
        return found

    @cached_property
    def _comprehension_scopes(self) -> dict[int, Scope]:
        return {id(s.node): s for s in self.scopes if s.kind == "comprehension"}

    def _comprehension_scope(self, node: cst.CSTNode) -> Scope | None:
        return self._comprehension_scopes.get(id(node))

    # ------------------------------------------------------------------ loops

    def common_loop(self, first: Loop | None, second: Loop | None) -> Loop | None:
        """The innermost loop that encloses both (within one function)."""
        loop = first
        while loop is not None:
            if loop.encloses(second):
                return loop
            loop = loop.parent
        return None

    def literal_iterations(self, loop: Loop) -> int | None:
        """How many times the loop runs, when the code says so: `range(k)` or a literal list or tuple."""
        if isinstance(loop.node, cst.While):
            return None
        iterable = loop.node.iter if isinstance(loop.node, cst.For) else loop.node.for_in.iter
        if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
            return len(iterable.elements)
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
            numbers = [literal_number(arg.value) for arg in iterable.args]
            bounds = [int(n) for n in numbers if n is not None]
            if len(bounds) == len(numbers) == 1:
                return max(0, bounds[0])
            if len(bounds) == len(numbers) == 2:
                return max(0, bounds[1] - bounds[0])
        return None

    def names_bound_in(self, loop: Loop) -> frozenset[str]:
        """Names the loop binds in its body or target (in its own scope or a comprehension's within it):
        what can change from one iteration to the next. Computed once per loop (rules ask for each call)."""
        names = self._names_bound.get(id(loop))
        if names is None:
            names = self._names_bound[id(loop)] = frozenset(
                b.name
                for b in between(self.bindings, loop.start, loop.end)  # the target's binding is in the body's events
                if b.scope is loop.scope or (b.scope.kind == "comprehension" and scope_within(b.scope, loop.scope))
            )
        return names

    def sequential_by_design(self, loop: Loop, waiting: CallSite, results: LoopResults | None = None) -> bool:
        """Whether a loop waits for one call at a time on purpose: it always exits in its first
        iteration, or right after the wait; it retries until an attempt succeeds (`try: ...; break`);
        it runs forever with no exit (a consumer: there is no "all" to submit first); it times each
        iteration (a benchmark); or it polls, or decides whether to go on, from the results it fetches
        (`results`: the loop's `LoopResults` for the caller's fetch functions; `ray.get` by default)."""
        if not isinstance(loop.node, (cst.For, cst.While)):
            return False
        body = block_statements(loop.node.body)
        if any(isinstance(s, _EXITS) for s in body):
            return True
        if any(isinstance(s, cst.Try) and any(isinstance(t, _EXITS) for t in block_statements(s.body)) for s in body):
            return True
        if waiting.statement is not None and exits_after(loop.node.body, waiting.statement, inside_loop=False):
            return True
        if isinstance(loop.node, cst.While) and is_true(loop.node.test) and not has_exit(loop.node.body):
            return True
        timers = [site.index for name in TIMERS for site in between(self.calls_to(name), loop.start, loop.end)]
        if any(i < waiting.index for i in timers) and any(i > waiting.index for i in timers):
            return True
        facts = results or self.loop_results(loop)
        return facts.exits_on_result or facts.polls

    def repeats_discarded_call(self, loop: Loop, get: CallSite, call: cst.Call) -> bool:
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
        return not inputs & self.names_bound_in(loop)

    def single_actor(self, submission: Submission, loop: Loop) -> RemoteDef | None:
        """The actor when every call a loop makes through `submission` goes to one actor that runs
        them one at a time: a plain name bound outside the loop to a handle of a synchronous,
        unthreaded actor class defined in this module."""
        actor, handle = submission.remote, submission.handle
        if submission.kind != "actor-method" or actor is None or actor.cls is None or not isinstance(handle, cst.Name):
            return None
        if actor.is_async_actor or actor.is_threaded_actor:
            return None
        site = self.call_site(submission.call)
        if site is None:
            return None
        binding = self.reaching_binding(handle.value, site.scope, site.index)
        if binding is None or loop.encloses(binding.loop) or binding.kind == "loop-target":
            return None
        return actor

    def loop_invariant(self, expr: cst.BaseExpression, loop: Loop) -> bool:
        """Whether `expr` names the same thing in every iteration of `loop`: it reads no name the loop
        binds and no attribute the loop assigns (`self.buffer`, `handles[0]`, `get_queue()`)."""
        if names_read(expr) & self.names_bound_in(loop):
            return False
        stored = self._attributes_stored.get(id(loop))
        if stored is None:
            stored = self._attributes_stored[id(loop)] = {
                dotted_name(s.target) for s in between(self.stores, loop.start, loop.end) if isinstance(s.target, cst.Attribute)
            }
        return not keys_read(expr) & stored

    def carried_names(self, loop: Loop, names: set[str], at: int) -> set[str]:
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

    def loop_results(
        self, loop: Loop, get_functions: tuple[str, ...] = ("ray.get",), helpers: frozenset[str] = frozenset()
    ) -> LoopResults:
        """What the loop does with the results it fetches (see `LoopResults`); computed once per loop.
        `helpers`: names of functions in this module that fetch a result themselves."""
        key = (id(loop), get_functions, helpers)
        results = self._loop_results.get(key)
        if results is None:
            results = self._loop_results[key] = LoopResults(self, loop, get_functions, helpers)
        return results

    def analysis(self, kind: Callable[[SemanticModel], AnalysisT]) -> AnalysisT:
        """The one instance of an analysis layered on this model (`sizes.SizeFolder`, ...), made on first use
        and dropped by `close`: the model keeps the analyses' memos without knowing them."""
        found = self._analyses.get(kind)
        if found is None:
            found = self._analyses[kind] = kind(self)
        return found  # type: ignore[no-any-return]

    def close(self) -> None:
        """Break the model's back-references (a binding's scope, a loop's results), so that the file's
        objects are freed at once by reference counting instead of by a later garbage-collector pass
        over the whole tree (15-35 ms after each lint of a 1,000-line file in the language server)."""
        for scope in self.scopes:
            scope.bindings.clear()
        self._loop_results.clear()
        self._analyses.clear()

    # ------------------------------------------------------------------ positions

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Line and column range of `node`. Positions cost a code-generation pass over the module, so they
        are computed once, on the first call, and only for files that report something."""
        return self._positioned[node]

    def locate(self, nodes: Iterable[cst.CSTNode]) -> None:
        """Work out the positions of `nodes` (a file's findings) in one pass that keeps no other node's."""
        self._positioned.locate(nodes)

    def source_of(self, node: cst.CSTNode) -> str:
        """The node's text as it stands in the file (over the span `position` gives). Unlike libcst's
        `code_for_node`, continuation lines keep the indentation of the block around them."""
        return self._positioned.source(node)

    def line_text(self, number: int) -> str:
        """Line `number` (1-based) of the file, with its line break."""
        return self._positioned.line(number)

    @property
    def _positioned(self) -> Positions:
        if self._positions is None:
            self._positions = Positions(self.module)
        return self._positions


def exits_after(block: cst.CSTNode, target: cst.CSTNode, inside_loop: bool) -> bool:
    """Whether some block on the way from `block` down to the statement `target` leaves the loop right
    after the statement that holds it (a `break`, or a `return` or `raise`, that always follows)."""
    statements = block_statements(block)
    for position, statement in enumerate(statements):
        if statement is not target and not any(node is target for node in iter_subtree(statement, into_functions=False)):
            continue
        exits = (cst.Return, cst.Raise) if inside_loop else _EXITS
        if any(isinstance(after, exits) for after in statements[position + 1 :]):
            return True
        if statement is target:
            return False
        nested = inside_loop or isinstance(statement, (cst.For, cst.While))
        return any(
            exits_after(child, target, nested)
            for child in child_nodes(statement)
            if isinstance(child, (cst.BaseSuite, cst.ExceptHandler, cst.Else, cst.Finally, cst.If))
        )
    return False


def has_exit(block: cst.CSTNode) -> bool:
    """A `break`, `return` or `raise` anywhere in the loop's own body (not in nested loops or functions)."""
    stack = list(block_statements(block))
    while stack:
        node = stack.pop()
        if isinstance(node, _EXITS):
            return True
        if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
            nested = iter_subtree(node.body, into_functions=False) if isinstance(node, (cst.For, cst.While)) else ()
            if any(isinstance(inner, (cst.Return, cst.Raise)) for inner in nested):
                return True
            continue
        stack.extend(child_nodes(node))
    return False


def is_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or literal_number(test) == 1


def scope_within(scope: Scope | None, ancestor: Scope) -> bool:
    """Whether `scope` is `ancestor` or nested inside it."""
    while scope is not None:
        if scope is ancestor:
            return True
        scope = scope.parent
    return False


def _bare_name(expr: cst.BaseExpression) -> str | None:
    """`Worker` for `Worker`, `mod.Worker` and `self.Worker`."""
    if isinstance(expr, cst.Name):
        return expr.value if expr.value not in ("True", "False", "None") else None  # constants, as in `ast`
    return expr.attr.value if isinstance(expr, cst.Attribute) else None


def _is_none_literal(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def names_read(expr: cst.CSTNode) -> set[str]:
    """Plain names an expression reads (attribute names and keyword names excluded)."""
    return {node.value for node in iter_subtree(expr) if isinstance(node, cst.Name)}


def keys_read(expr: cst.CSTNode) -> set[str]:
    """Names and dotted names (`self.refs`) an expression reads, outside nested functions."""
    keys = set()
    for node in iter_subtree(expr, into_functions=False):
        if isinstance(node, (cst.Name, cst.Attribute)):
            key = dotted_name(node)
            if key is not None:
                keys.add(key)
    return keys


def target_keys(target: cst.CSTNode) -> set[str]:
    """What an assignment target binds or overwrites: names, and dotted names for `self.x = ...` and
    `self.x[k] = ...` (the container then holds the value)."""
    while isinstance(target, cst.Subscript):
        target = target.value
    if isinstance(target, cst.Attribute):
        key = dotted_name(target)
        return {key} if key is not None else set()
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(set(), *(target_keys(element.value) for element in target.elements))
    if isinstance(target, cst.StarredElement):
        return target_keys(target.value)
    return target_names(target)


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
    """

    SLEEPS = ("time.sleep", "asyncio.sleep")
    MAX_PASSES = 4

    def __init__(
        self, model: SemanticModel, loop: Loop, get_functions: tuple[str, ...], helpers: frozenset[str] = frozenset()
    ) -> None:
        """`get_functions`: qualified names that fetch a result (`ray.get` and any a rule adds);
        `helpers`: plain names of the module's own functions that fetch one."""
        self.model = model
        self.get_functions = get_functions
        self.helpers = helpers
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
            if isinstance(node, cst.Call):
                site = self.model.call_site(node)
                if site is not None and self.model.call_name(site) in self.get_functions:
                    return True
                if isinstance(node.func, cst.Name) and node.func.value in self.helpers:
                    return True
        return False

    def _block(self, block: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        gated = False
        for statement in block_statements(block):
            if gated:  # `if name in known: continue` came first: this runs only under a condition read from a result
                self.guarded_nodes.update(node for node in iter_subtree(statement, into_functions=False) if isinstance(node, cst.Call))
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
            if isinstance(inner, cst.Call):
                if guarded:
                    self.guarded_nodes.add(inner)
                site = self.model.call_site(inner)
                if site is not None and self.model.call_name(site) in self.SLEEPS:
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
    return bool(statements) and isinstance(statements[-1], (cst.Continue, *_EXITS))


def target_names(target: cst.CSTNode) -> set[str]:
    """Names an assignment target binds (not those read inside attribute or subscript targets)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(set(), *(target_names(element.value) for element in target.elements))
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def block_statements(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of a block (or of a compound statement's parts), flattening simple lines."""
    if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)):
        out: list[cst.CSTNode] = []
        for item in node.body:
            out.extend(item.body if isinstance(item, cst.SimpleStatementLine) else [item])
        return out
    if isinstance(node, (cst.Else, cst.Finally, cst.ExceptHandler)):
        return block_statements(node.body)
    return [node]


_Action = Callable[[], None]


class _Walker:
    """Fills a SemanticModel in one iterative pass (no recursion limit on deeply nested code)."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.index = 0
        self.scope = model.module_scope
        self.loop: Loop | None = None
        self.statement: cst.CSTNode | None = None
        self.owner: ClassInfo | None = None
        self.stack: list[cst.CSTNode | _Action] = []
        self.handlers: dict[type, Callable[[cst.CSTNode], None]] = {
            cst.Import: self._import,
            cst.ImportFrom: self._import_from,
            cst.FunctionDef: self._function,
            cst.ClassDef: self._class,
            cst.Lambda: self._lambda,
            cst.For: self._for,
            cst.While: self._while,
            cst.ListComp: self._comprehension,
            cst.SetComp: self._comprehension,
            cst.DictComp: self._comprehension,
            cst.GeneratorExp: self._comprehension,
            cst.Assign: self._assign,
            cst.AnnAssign: self._ann_assign,
            cst.AugAssign: self._aug_assign,
            cst.NamedExpr: self._named_expr,
            cst.WithItem: self._with_item,
            cst.ExceptHandler: self._except_handler,
            cst.Global: self._global,
            cst.Del: self._del,
            cst.Nonlocal: self._global,
            cst.Call: self._call,
            cst.SimpleStatementLine: self._simple_statement_line,
        }
        self.statement_types = (cst.BaseSmallStatement, cst.BaseCompoundStatement)

    def run(self) -> None:
        self.stack.append(self.model.module)
        stack, handlers = self.stack, self.handlers
        while stack:
            item = stack.pop()
            if not isinstance(item, cst.CSTNode):
                item()
                continue
            self.index += 1
            if isinstance(item, self.statement_types):
                self.statement = item
            handler = handlers.get(type(item))
            if handler is not None:
                handler(item)
            else:
                stack.extend(reversed(list(child_nodes(item))))
        self.handlers.clear()  # bound methods refer back to the walker: a cycle that would hold the whole tree

    def push(self, *items: cst.CSTNode | _Action | None) -> None:
        """Schedule items to run in the order given."""
        self.stack.extend(item for item in reversed(items) if item is not None)

    def push_all(self, nodes: Iterator[cst.CSTNode] | list[cst.CSTNode]) -> None:
        self.stack.extend(reversed(list(nodes)))

    # --- bindings

    def bind(
        self,
        name: str,
        kind: BindingKind,
        node: cst.CSTNode,
        value: cst.BaseExpression | None = None,
        imported: str | None = None,
        source: cst.BaseExpression | None = None,
    ) -> None:
        self.index += 1
        scope = self.model.module_scope if name in self.scope.globals else self.scope
        binding = Binding(name, kind, scope, self.index, node, value, imported, self.loop, source, self.statement)
        scope.bindings[name].append(binding)
        self.model.bindings.append(binding)
        if kind in ("def", "class"):
            self.model._definitions[id(node)] = binding

    def bind_target(
        self,
        target: cst.BaseExpression,
        kind: BindingKind,
        value: cst.BaseExpression | None,
        source: cst.BaseExpression | None = None,
    ) -> None:
        """Bind the names in an assignment target; walk the expressions inside attribute and subscript targets."""
        if isinstance(target, cst.Name):
            self.bind(target.value, kind, target, value, source=source)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind_target(element.value, kind, None, source)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, kind, None, source)
        else:
            if isinstance(target, (cst.Attribute, cst.Subscript)):
                self.store(target, value, "augassign" if kind == "augassign" else "assign")
            self.push(target)

    def store(self, target: cst.Attribute | cst.Subscript, value: cst.BaseExpression | None, kind: str) -> None:
        assert self.statement is not None
        self.model.stores.append(Store(target, value, kind, self.statement, self.scope, self.index))  # type: ignore[arg-type]

    def later_bind(
        self, target: cst.BaseExpression, kind: BindingKind, value: cst.BaseExpression | None, source: cst.BaseExpression | None = None
    ) -> _Action:
        return lambda: self.bind_target(target, kind, value, source if source is not None else value)

    # --- handlers

    def _import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bind(alias.asname.name.value, "import", alias, imported=full)
            else:
                top = full.split(".", 1)[0]
                self.bind(top, "import", alias, imported=top)

    def _import_from(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module is not None and not node.relative else None
        if isinstance(node.names, cst.ImportStar):
            if module is not None:
                self.model.star_imports.add(module)
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else alias.name.value
            self.bind(local, "import", alias, imported=f"{module}.{alias.name.value}" if module else None)

    def _enter_scope(self, kind: ScopeKind, node: cst.CSTNode, is_async: bool = False) -> _Action:
        """Open a scope (and, for functions, a fresh loop context); returns the action that closes it."""
        outer_scope, outer_loop, outer_owner = self.scope, self.loop, self.owner
        scopes = self.model.scopes
        scope = self.scope = Scope(kind, node, outer_scope, is_async, start=self.index + 1, first=len(scopes))
        scopes.append(scope)
        if kind in ("function", "lambda", "class"):
            self.loop = None

        def leave() -> None:
            scope.end, scope.last = self.index + 1, len(scopes)
            self.scope, self.loop, self.owner = outer_scope, outer_loop, outer_owner

        return leave

    def _params(self, params: cst.Parameters) -> list[cst.CSTNode]:
        """Defaults and annotations, which are evaluated in the enclosing scope."""
        evaluated: list[cst.CSTNode] = []
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                evaluated.append(param.default)
            if param.annotation is not None:
                evaluated.append(param.annotation.annotation)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param) and star.annotation is not None:
                evaluated.append(star.annotation.annotation)
        return evaluated

    def _bind_params(self, params: cst.Parameters) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params, params.star_arg, params.star_kwarg):
            if isinstance(param, cst.Param):
                self.bind(param.name.value, "param", param)

    def _function(self, node: cst.FunctionDef) -> None:
        owner = self.owner if self.scope.kind == "class" else None

        def enter() -> None:
            self.bind(node.name.value, "def", node)
            leave = self._enter_scope("function", node, node.asynchronous is not None)
            info = FunctionInfo(node, self.scope, self.scope.parent, owner)  # type: ignore[arg-type]
            self.model.functions.append(info)
            self.model._function_by_node[id(node)] = info
            if owner is not None:
                owner.methods.append(info)
            self.owner = None
            self._bind_params(node.params)
            self.push(node.body, leave)

        self.push(*(d.decorator for d in node.decorators), *self._params(node.params), node.returns, enter)

    def _class(self, node: cst.ClassDef) -> None:
        def enter() -> None:
            self.bind(node.name.value, "class", node)
            leave = self._enter_scope("class", node)
            info = ClassInfo(node, self.scope)
            self.model.classes.append(info)
            self.model._class_by_node[id(node)] = info
            self.owner = info
            self.push(node.body, leave)

        self.push(*(d.decorator for d in node.decorators), *(a.value for a in node.bases), *(a.value for a in node.keywords), enter)

    def _lambda(self, node: cst.Lambda) -> None:
        def enter() -> None:
            leave = self._enter_scope("lambda", node)
            self._bind_params(node.params)
            self.push(node.body, leave)

        self.push(*self._params(node.params), enter)

    def _open_loop(self, kind: LoopKind, node: cst.For | cst.While | Comprehension) -> _Action:
        outer = self.loop
        loop = Loop(kind, node, outer, self.scope, self.index + 1)
        self.model.loops.append(loop)
        self.loop = loop

        def close() -> None:
            loop.end = self.index + 1
            self.index += 1
            self.loop = outer

        return close

    def _for(self, node: cst.For) -> None:
        def enter() -> None:
            close = self._open_loop("for", node)
            self.push(self.later_bind(node.target, "loop-target", None, node.iter), node.body, close, node.orelse)

        self.push(node.iter, enter)

    def _while(self, node: cst.While) -> None:
        close = self._open_loop("while", node)
        self.push(node.test, node.body, close, node.orelse)

    def _comprehension(self, node: Comprehension) -> None:
        first = node.for_in

        def enter() -> None:
            leave = self._enter_scope("comprehension", node)
            close = self._open_loop("comprehension", node)
            items: list[cst.CSTNode | _Action] = []
            comp_for: cst.CompFor | None = first
            while comp_for is not None:
                if comp_for is not first:
                    items.append(comp_for.iter)
                items.append(self.later_bind(comp_for.target, "loop-target", None, comp_for.iter))
                items.extend(condition.test for condition in comp_for.ifs)
                comp_for = comp_for.inner_for_in
            if isinstance(node, cst.DictComp):
                items += [node.key, node.value]
            else:
                items.append(node.elt)
            self.push(*items, close, leave)

        self.push(first.iter, enter)

    def _simple_statement_line(self, node: cst.SimpleStatementLine) -> None:
        comment = node.trailing_whitespace.comment
        if comment is not None and LARGE_MARKER in comment.value:
            self.model.marked_large.update(id(statement) for statement in node.body)
        self.push_all(node.body)

    def _assign(self, node: cst.Assign) -> None:
        single = len(node.targets) == 1
        self.push(
            node.value,
            *(self.later_bind(t.target, "assign", node.value if single else None, node.value) for t in node.targets),
        )

    def _ann_assign(self, node: cst.AnnAssign) -> None:
        bind = self.later_bind(node.target, "assign", node.value) if node.value is not None else None
        self.push(node.annotation.annotation, node.value, bind)

    def _aug_assign(self, node: cst.AugAssign) -> None:
        target = node.target
        self.push(node.value, self.later_bind(target, "augassign", node.value))

    def _named_expr(self, node: cst.NamedExpr) -> None:
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent

        def bind() -> None:
            inner, self.scope = self.scope, scope
            self.bind_target(node.target, "assign", node.value, node.value)
            self.scope = inner

        self.push(node.value, bind)

    def _with_item(self, node: cst.WithItem) -> None:
        bind = self.later_bind(node.asname.name, "other", None) if node.asname is not None else None
        self.push(node.item, bind)

    def _except_handler(self, node: cst.ExceptHandler) -> None:
        bind = None
        if node.name is not None and isinstance(node.name.name, cst.Name):
            bind = self.later_bind(node.name.name, "other", None)
        self.push(node.type, bind, node.body)

    def _del(self, node: cst.Del) -> None:
        targets = [e.value for e in node.target.elements] if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            if isinstance(target, (cst.Attribute, cst.Subscript)):
                self.store(target, None, "del")
        self.push(node.target)

    def _global(self, node: cst.Global | cst.Nonlocal) -> None:
        if isinstance(node, cst.Global):
            self.scope.globals.update(item.name.value for item in node.names)

    def _call(self, node: cst.Call) -> None:
        site = CallSite(node, self.scope, self.index, self.loop, self.statement)
        model = self.model
        model.calls.append(site)
        model._call_sites[id(node)] = site
        func = node.func
        if isinstance(func, cst.Attribute):
            model.calls_by_tail[func.attr.value].append(site)
        elif isinstance(func, cst.Name):
            model.calls_by_tail[func.value].append(site)
        self.push(func, *(arg.value for arg in node.args))
