"""The Python model: what one module's code says as Python, and nothing about Ray.

One iterative walk over the libcst tree records scopes, bindings, calls, loops, functions, classes and
stores (writes through attributes and subscripts). Everything else (the binding that reaches a use,
qualified names through imports and aliases, the calls to a name) is resolved lazily from those
records, so a rule pays only for what it asks.

Order matters for the flow questions ("was this name bound earlier in the same iteration?"), so the
walk visits children in evaluation order and numbers every event: a value is numbered before the
names it binds, a loop's iterable before the loop, a decorator before its function. Flow is
approximated linearly: the binding that reaches a use is the last one before it in the same scope.
That ignores branches, which is the right trade for a linter that must stay quiet.

`PythonModel` knows nothing of Ray: `ray_lint.model.SemanticModel` builds the Ray facts (remote
functions and actors, submissions, ObjectRef flow) on top of it, and `ray_lint.analyses` holds the
judgements several rules share. Analyses keep their per-file memos in `PythonModel.analysis`.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal, Protocol, TypeVar, Union

import libcst as cst
from libcst.metadata import CodeRange

from ray_lint.positions import Positions

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

EXITS = (cst.Break, cst.Return, cst.Raise)  # statements that leave a loop for good
# A line that says `# ray-lint: large` marks the values it binds as large (`ray_lint.sizes` reads the marks).
LARGE_MARKER = "ray-lint: large"
AnalysisT = TypeVar("AnalysisT")
AFTER_ALL = 1 << 62  # an event number after every other: a name then resolves to its last binding in the scope
# Builtins whose result has as many items as their one argument (`set` may have fewer: not one).
SIZE_KEEPING = frozenset({"list", "tuple", "sorted", "reversed", "enumerate", "iter"})
MAX_FOLD_DEPTH = 8  # how many names and operations deep constants are folded
ModelT = TypeVar("ModelT", bound="PythonModel")

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


def is_generator(function: cst.FunctionDef) -> bool:
    """Whether the function's own body yields (nested functions, lambdas and classes do not count): calling
    it runs none of its body, and an `async def` that yields is an async generator."""
    return any(isinstance(node, cst.Yield) for node in iter_subtree(function.body, into_functions=False))


def comments_in(node: cst.CSTNode) -> list[str]:
    """Every comment inside `node`, in order. A walk of all children, whitespace included, which the
    other walks skip: call it only for code that holds a `#`."""
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Comment):
            found.append(current.value)
        stack.extend(reversed(current.children))
    return found


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


def constant_int(
    model: PythonModel, expr: cst.BaseExpression | None, scope: Scope, at: int, depth: int = 0, *, signed: bool = False
) -> int | None:
    """An int the code computes from literals and names bound once to such ints (`N = 10_000`, `2 * N`).
    Unless `signed`, the result is a count: never negative, with `a << b` folded; when `signed`, `-a` and
    `a - b` are folded instead (as for `range` bounds)."""
    if expr is None or depth > MAX_FOLD_DEPTH:
        return None
    if isinstance(expr, cst.Integer):
        value = expr.evaluated_value
        return value if isinstance(value, int) else None
    if signed and isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = constant_int(model, expr.expression, scope, at, depth + 1, signed=signed)
        return -inner if inner is not None else None
    if isinstance(expr, cst.Name):
        binding = model.sole_assignment(expr.value, scope, at)  # rebound somewhere: the value is not certain
        if binding is None or binding.value is None:
            return None
        return constant_int(model, binding.value, binding.scope, binding.index, depth + 1, signed=signed)
    if isinstance(expr, cst.BinaryOperation):
        left = constant_int(model, expr.left, scope, at, depth + 1, signed=signed)
        right = constant_int(model, expr.right, scope, at, depth + 1, signed=signed)
        if left is None or right is None:
            return None
        operator = expr.operator
        if isinstance(operator, cst.Multiply):
            return left * right
        if isinstance(operator, cst.Add):
            return left + right
        if signed and isinstance(operator, cst.Subtract):
            return left - right
        if isinstance(operator, cst.FloorDivide) and right:
            return left // right
        if isinstance(operator, cst.Power) and 0 <= right <= 64:
            return left**right
        if not signed and isinstance(operator, cst.LeftShift) and right <= 64:
            return left << right
    return None


def is_static(method: FunctionInfo) -> bool:
    """A method decorated with `@staticmethod` alone: callable through its class like a function."""
    decorators = [decorator.decorator for decorator in method.node.decorators]
    return len(decorators) == 1 and is_name(decorators[0], "staticmethod")


def is_name(expr: cst.BaseExpression, name: str) -> bool:
    """`expr` is the bare name `name`."""
    return isinstance(expr, cst.Name) and expr.value == name


def _tests_version(test: cst.BaseExpression) -> bool:
    """Whether a condition reads a name or attribute that holds a version (`RAY_VERSION`, `ray.__version__`)."""
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and "version" in node.value.lower():
            return True
        if isinstance(node, cst.Attribute) and "version" in node.attr.value.lower():
            return True
        stack.extend(child_nodes(node))
    return False


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
    reads: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # each name's reads, in event order
    start: int = 0  # the events of its code, nested scopes' included: [start, end)
    end: int = AFTER_ALL
    first: int = 0  # its place in `PythonModel.scopes`; the scopes nested in it follow it, up to `last`
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

    @property
    def is_generator(self) -> bool:
        return is_generator(self.node)


@dataclass(eq=False, repr=False)
class ClassInfo:
    node: cst.ClassDef
    scope: Scope
    methods: list[FunctionInfo] = field(default_factory=list)



class PythonModel:
    """Python facts about one module, for rules and analyses to query: scopes, bindings, calls, loops,
    functions, classes and stores, names resolved to what they import, and source positions. Build it
    with `PythonModel(module)`; `ray_lint.model.SemanticModel` adds what Ray makes of the same code."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
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
        self._self_stores: dict[int, dict[str, list[Store]]] = {}
        self._modules_returned: dict[int, str | None] = {}
        self._positions: Positions | None = None
        self._calls_to: dict[str, tuple[CallSite, ...]] = {}
        self.marked_large: set[int] = set()  # ids of statements on a line that says `# ray-lint: large`
        self._analyses: dict[Callable[[Any], Any], Any] = {}
        self._exits_after: dict[int, dict[int, bool]] = {}  # id of a loop's body -> each statement's answer
        self._parents: dict[int, dict[int, cst.CSTNode]] = {}  # id of a root -> the parent of each node under it
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

    @cached_property
    def read_counts(self) -> Counter[str]:
        """How many times the file reads each name, in all scopes."""
        counts: Counter[str] = Counter()
        for scope in self.scopes:
            for name, reads in scope.reads.items():
                counts[name] += len(reads)
        return counts

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
        if binding.kind == "assign" and isinstance(binding.value, cst.Call) and isinstance(binding.value.func, cst.Name):
            return self._module_returned(binding.value.func, binding.scope, binding.index)
        return None

    def _module_returned(self, func: cst.Name, scope: Scope, at: int) -> str | None:
        """The module a call of a module function returns when every `return` of its body returns one
        module it imports (`def _import_serve(): from ray import serve ... return serve`): a lazy import,
        as libraries write them for optional dependencies. Memoized per function."""
        binding = self.reaching_binding(func.value, scope, at)
        if binding is None or binding.kind != "def" or not isinstance(binding.node, cst.FunctionDef):
            return None
        key = id(binding.node)
        if key not in self._modules_returned:
            self._modules_returned[key] = None  # while it is asked: a recursive importer returns nothing known
            info = self.function_info(binding.node)
            returned = {
                self.qualified_name(node.value, info.scope, AFTER_ALL) if isinstance(node.value, cst.Name) else None
                for node in iter_subtree(binding.node.body, into_functions=False)
                if isinstance(node, cst.Return)
            } if info is not None else set()
            only = next(iter(returned)) if len(returned) == 1 else None
            imported = only is not None and any(
                b.kind == "import" and b.imported == only for bindings in info.scope.bindings.values() for b in bindings  # type: ignore[union-attr]
            )
            self._modules_returned[key] = only if imported else None
        return self._modules_returned[key]

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

    # ------------------------------------------------------------------ definitions

    def definition_binding(self, node: cst.FunctionDef | cst.ClassDef) -> Binding | None:
        """The binding a `def` or `class` makes of its name."""
        return self._definitions.get(id(node))

    def definition_index(self, node: cst.FunctionDef | cst.ClassDef, scope: Scope) -> int:
        """The event at which a `def` or `class` binds its name in `scope` (decorators and defaults are
        evaluated just before it), or AFTER_ALL when it binds it elsewhere."""
        binding = self.definition_binding(node)
        return binding.index if binding is not None and binding.scope is scope else AFTER_ALL

    def function_info(self, node: cst.FunctionDef) -> FunctionInfo | None:
        return self._function_by_node.get(id(node))

    def class_info(self, node: cst.ClassDef) -> ClassInfo | None:
        return self._class_by_node.get(id(node))

    def self_stores(self, cls: ClassInfo) -> dict[str, list[Store]]:
        """The writes through `self` in the class's own methods (`self.x = v`, `self.x[k] = v`,
        `del self.x`), by attribute name, in event order; memoized per class."""
        found = self._self_stores.get(id(cls))
        if found is None:
            found = self._self_stores[id(cls)] = defaultdict(list)
            for store in between(self.stores, cls.scope.start, cls.scope.end):
                target = store.target
                while isinstance(target, cst.Subscript) or (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Attribute)):
                    target = target.value  # `self.x[k]`, `self.x.y`: a write to what `self.x` holds
                function = store.scope.function
                info = self.function_info(function.node) if function is not None else None  # type: ignore[arg-type]
                if (
                    isinstance(target, cst.Attribute)
                    and isinstance(target.value, cst.Name)
                    and info is not None
                    and info.owner is cls
                    and target.value.value == "self"
                ):
                    found[target.attr.value].append(store)
        return found

    def self_assignments(self, cls: ClassInfo, attribute: str) -> list[Store]:
        """Every write to `self.<attribute>` in the class's methods, when each is a plain `self.x = value`;
        empty when any is not (`self.x[k] = v`, `self.x += v`, an unpacking, `del`): what the attribute
        may hold is then unknown."""
        stores = self.self_stores(cls).get(attribute, [])
        plain = all(
            store.kind == "assign" and store.value is not None and isinstance(store.target, cst.Attribute) and is_name(store.target.value, "self")
            for store in stores
        )
        return stores if plain else []

    def method(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """The method `name` defined in the body of `cls` (the last definition wins, as in Python)."""
        methods = self._methods.get(id(cls))
        if methods is None:
            methods = self._methods[id(cls)] = {m.node.name.value: m for m in cls.methods}
        return methods.get(name)

    def local_callee(self, caller: FunctionInfo | None, call: cst.Call) -> FunctionInfo | None:
        """The function of this module that `call` (made in `caller`, when known) runs: `helper(...)` bound
        to a `def` of the module, `self.method(...)` of the caller's own class, or a static method called
        through its class (`DataUtils.load(path)`)."""
        func = call.func
        site = self.call_site(call)
        if site is None:
            return None
        if isinstance(func, cst.Name):
            binding = self.reaching_binding(func.value, site.scope, site.index)
            if binding is not None and binding.kind == "def" and isinstance(binding.node, cst.FunctionDef):
                return self.function_info(binding.node)
            return None
        if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
            return None
        if is_name(func.value, "self"):
            return self.method(caller.owner, func.attr.value) if caller is not None and caller.owner is not None else None
        binding = self.reaching_binding(func.value.value, site.scope, site.index)
        cls = self.class_info(binding.node) if binding is not None and isinstance(binding.node, cst.ClassDef) else None
        method = self.method(cls, func.attr.value) if cls is not None else None
        return method if method is not None and is_static(method) else None

    @cached_property
    def _comprehension_scopes(self) -> dict[int, Scope]:
        return {id(s.node): s for s in self.scopes if s.kind == "comprehension"}

    def comprehension_scope(self, node: cst.CSTNode) -> Scope | None:
        """The scope a comprehension's body runs in."""
        return self._comprehension_scopes.get(id(node))

    @cached_property
    def _loops_by_node(self) -> dict[int, Loop]:
        return {id(loop.node): loop for loop in self.loops}

    def loop_of(self, node: cst.CSTNode) -> Loop | None:
        """The loop a `for`, `while` or comprehension node makes."""
        return self._loops_by_node.get(id(node))

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
        """How many times the loop runs, when the code says so: `range(k)`, a literal list or tuple, either
        through `list(...)`, `enumerate(...)` and the like, or a name assigned one of these once."""
        iterated = self.iterable(loop)
        return None if iterated is None else self.iteration_count(*iterated, loop.start)

    @staticmethod
    def iterable(loop: Loop) -> tuple[cst.BaseExpression, Scope] | None:
        """What a `for` or a comprehension iterates, and the scope it is evaluated in (resolve its names
        at `loop.start`); None for a `while`."""
        if isinstance(loop.node, cst.While):
            return None
        if isinstance(loop.node, cst.For):
            return loop.node.iter, loop.scope
        return loop.node.for_in.iter, loop.scope.parent or loop.scope  # a comprehension's first iterable: the scope around it

    def iteration_count(self, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> int | None:
        """How many items iterating `expr` (evaluated in `scope` at event `at`) gives, when the code says so:
        `range(...)` of constant bounds, a literal list or tuple, either through `list(...)`,
        `enumerate(...)` and the like or through a name assigned one of these once."""
        if depth > 3:
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else len(expr.elements)
        if isinstance(expr, cst.Name):
            binding = self.sole_assignment(expr.value, scope, at)
            return None if binding is None else self.iteration_count(binding.value, binding.scope, binding.index, depth + 1)  # type: ignore[arg-type]
        if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Name) or any(arg.keyword or arg.star for arg in expr.args):
            return None
        function, args = expr.func.value, [arg.value for arg in expr.args]
        if self.reaching_binding(function, scope, at) is not None:
            return None  # a function of the module's own, not the builtin
        if function == "range":
            bounds = [constant_int(self, arg, scope, at, signed=True) for arg in args]
            if not 1 <= len(bounds) <= 3 or None in bounds or (len(bounds) == 3 and bounds[2] == 0):
                return None
            return len(range(*bounds))  # type: ignore[arg-type]
        if function in SIZE_KEEPING and len(args) == 1:
            return self.iteration_count(args[0], scope, at, depth + 1)
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

    # ------------------------------------------------------------------ analyses layered on the model

    def analysis(self: ModelT, kind: Callable[[ModelT], AnalysisT]) -> AnalysisT:
        """The one instance of an analysis layered on this model (`sizes.SizeFolder`, the memos of
        `analyses.loop_dependence`, ...), made on first use and dropped by `close`: the model keeps the
        analyses' memos without knowing them."""
        found = self._analyses.get(kind)
        if found is None:
            found = self._analyses[kind] = kind(self)
        return found  # type: ignore[no-any-return]

    def exits_after(self, block: cst.CSTNode, target: cst.CSTNode) -> bool:
        """Whether some block on the way from a loop's body `block` down to the statement `target` leaves
        the loop right after the statement that holds it (a `break`, or a `return` or `raise`, that always
        follows). Every statement's answer is worked out on the first question about `block`, so a loop
        with a thousand waits costs one pass, not a thousand."""
        answers = self._exits_after.get(id(block))
        if answers is None:
            answers = self._exits_after[id(block)] = {}
            _exits_after_each(block, False, False, answers)
        return answers.get(id(target), False)

    def path_within(self, root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
        """`path_to(root, target, into_functions=False)`, answered from a map of the parents under `root`
        that is built on the first question about `root`: many targets under one loop cost one walk."""
        parents = self._parents.get(id(root))
        if parents is None:
            parents = self._parents[id(root)] = {}
            stack = [root]
            while stack:
                node = stack.pop()
                for child in child_nodes(node):
                    parents[id(child)] = node
                    if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                        stack.append(child)
        if target is not root and id(target) not in parents:
            return None
        path = [target]
        while path[-1] is not root:
            path.append(parents[id(path[-1])])
        path.reverse()
        return path

    def version_gated(self, node: cst.CSTNode, scope: Scope) -> bool:
        """Whether `node` (in `scope`) sits in a branch of an `if` or conditional expression that tests a
        version (`if RAY_VERSION >= (2, 33, 0):`, `if ray.__version__ < "2.10":`), in its own scope or an
        enclosing one: code kept for other versions of a library."""
        target: cst.CSTNode = node
        current: Scope | None = scope
        while current is not None:
            path = self.path_within(current.node, target) or []
            for parent, child in zip(path, path[1:]):
                if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test and _tests_version(parent.test):
                    return True
            target, current = current.node, current.parent
        return False

    def close(self) -> None:
        """Break the model's back-references (a binding's scope, an analysis's model), so that the file's
        objects are freed at once by reference counting instead of by a later garbage-collector pass
        over the whole tree (15-35 ms after each lint of a 1,000-line file in the language server)."""
        for scope in self.scopes:
            scope.bindings.clear()
        self._analyses.clear()
        self._exits_after.clear()
        self._parents.clear()

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


def _exits_after_each(block: cst.CSTNode, inside_loop: bool, exited: bool, answers: dict[int, bool]) -> None:
    """`PythonModel.exits_after` for every statement under `block`, in one pass: a statement's answer is
    its outer blocks' (`exited`) or whether an exit always follows it in its own block."""
    statements = block_statements(block)
    exits = (cst.Return, cst.Raise) if inside_loop else EXITS
    follows = [False] * len(statements)  # whether an exit comes after each statement of this block
    for position in range(len(statements) - 2, -1, -1):
        follows[position] = follows[position + 1] or isinstance(statements[position + 1], exits)
    for position, statement in enumerate(statements):
        here = exited or follows[position]
        answers[id(statement)] = here
        nested = inside_loop or isinstance(statement, (cst.For, cst.While))
        for child in child_nodes(statement):
            if isinstance(child, (cst.BaseSuite, cst.ExceptHandler, cst.Else, cst.Finally, cst.If)):
                _exits_after_each(child, nested, here, answers)


def has_exit(block: cst.CSTNode) -> bool:
    """A `break`, `return` or `raise` anywhere in the loop's own body (not in nested loops or functions)."""
    stack = list(block_statements(block))
    while stack:
        node = stack.pop()
        if isinstance(node, EXITS):
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
    """Fills a PythonModel in one iterative pass (no recursion limit on deeply nested code)."""

    def __init__(self, model: PythonModel) -> None:
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
            cst.Name: self._name,
            cst.Attribute: self._attribute,
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

    def _name(self, node: cst.Name) -> None:
        """A name the walk reaches is read: targets are bound without being walked."""
        self.scope.reads[node.value].append(self.index)

    def _attribute(self, node: cst.Attribute) -> None:
        self.push(node.value)  # `.attr` names an attribute, not a variable

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
