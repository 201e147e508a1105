"""What a remote function or actor class captures: the names its body reads from enclosing scopes, which
cloudpickle copies into the definition Ray exports. Shared by the rules about large and ObjectRef captures."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import Binding, Scope, child_nodes, iter_subtree, scope_within
from ray_lint.sizes import Size, size_of

# Statements whose names are not reads of a value.
_NOT_READS = (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)


@dataclass(frozen=True)
class Capture:
    """A name a remote body reads from an enclosing scope: its first read, and every binding of the name
    in the scope it resolves to (the value pickled is whichever of them holds when Ray exports the body)."""

    name: str
    use: cst.Name
    bindings: tuple[Binding, ...]


def pickled_by_value(model: SemanticModel, remote: RemoteDef) -> bool:
    """Whether cloudpickle copies the remote's code, with the globals and closure cells it reads, instead of
    naming it for the worker to import. A `@ray.remote` decorator leaves a `RemoteFunction` or `ActorClass`
    under the definition's name, so cloudpickle cannot find the plain function there and pickles it by value;
    so does a definition inside a function (`<locals>` in its qualified name). `g = ray.remote(f)` of a
    module-level `f` leaves `f` importable: cloudpickle pickles it by reference, and the worker imports the
    module (in a `__main__` script it would be by value, which this file cannot tell)."""
    if isinstance(remote.declared_at, cst.Decorator):
        return True
    defined_in = _definition_scope(model, remote)
    if defined_in is None:
        return False
    scope: Scope | None = defined_in
    while scope is not None:
        if scope.kind in ("function", "lambda"):
            return True
        scope = scope.parent
    for binding in defined_in.bindings.get(remote.name, ()):  # `f = ray.remote(f)`: the name now holds the remote
        value = binding.value
        if binding.kind == "assign" and (value is remote.declared_at or (isinstance(value, cst.Call) and value.func is remote.declared_at)):
            return True
    return False


def large_outside_reads(
    model: SemanticModel, body: cst.CSTNode, own: Scope, threshold: int, loaders: frozenset[str]
) -> Iterator[tuple[cst.Name, Size]]:
    """The first read of each name that `body` (of a function or lambda whose scope is `own`) reads from
    outside itself, when the name is bound once, to a large object: what cloudpickle copies with a function
    it pickles by value. A name bound more than once is left out: which value is pickled depends on when."""
    seen: set[str] = set()
    for node in iter_subtree(body):
        if not isinstance(node, cst.Name) or node.value in seen:
            continue
        seen.add(node.value)
        binding = model.reaching_binding(node.value, own, 0)
        if binding is None or binding.kind != "assign" or scope_within(binding.scope, own):
            continue
        if len(binding.scope.bindings.get(node.value, ())) != 1:
            continue
        size = size_of(model, node, binding.scope, binding.index + 1, loaders)
        if size is not None and size.at_least(threshold):
            yield node, size


def runs_as_main(model: SemanticModel, scope: Scope) -> bool:
    """Whether code in `scope` runs with its module as `__main__` (a script or a notebook), whose module-level
    functions cloudpickle copies by value: `scope` is its top-level code (an `if __name__ == "__main__":` block
    included), or that of a function its top-level code calls by name. A module others import seldom does either."""
    function = scope.function
    if function is None:
        return True
    for site in model.calls:
        if site.scope.function is None and isinstance(site.node.func, cst.Name):
            binding = model.reaching_binding(site.node.func.value, site.scope, site.index)
            if binding is not None and binding.kind == "def" and binding.node is function.node:
                return True
    return False


def captured_by_remotes(model: SemanticModel) -> Iterator[tuple[RemoteDef, list[Capture]]]:
    """Each remote function and actor class that cloudpickle pickles by value, with its captures."""
    scopes = {id(scope.node): scope for scope in model.scopes}
    for remote in model.remote_defs:
        if pickled_by_value(model, remote):
            yield remote, captures(model, remote, scopes)


def captures(model: SemanticModel, remote: RemoteDef, scopes: dict[int, Scope]) -> list[Capture]:
    """The free variables of a remote function or of every method of an actor class (nested functions,
    lambdas and comprehensions included).
    `scopes`: the model's scopes by the id of their node."""
    return free_variables(model, [(function.node.body, function.scope) for function in model.remote_functions(remote)], scopes)


def free_variables(
    model: SemanticModel, bodies: Iterable[tuple[cst.CSTNode, Scope]], scopes: dict[int, Scope]
) -> list[Capture]:
    """The free variables of code that runs elsewhere, given as (body, its own scope) pairs: a remote's
    functions, or a Ray Data UDF (a function, a lambda, a callable class's methods). Names read there that
    no scope of the body binds, with the bindings they resolve to; builtins and names bound nowhere (star
    imports) are left out. `scopes`: the model's scopes by the id of their node."""
    found: dict[str, Capture] = {}
    for body, body_scope in bodies:
        for use, scope in _name_reads(body, body_scope, scopes):
            if use.value in found or not _is_free(use.value, scope, body_scope):
                continue
            resolved = model.reaching_binding(use.value, scope, 0)  # at 0: no binding of an enclosing scope "comes first"
            if resolved is None:
                continue
            bindings = tuple(resolved.scope.bindings.get(use.value, ()))
            found[use.value] = Capture(use.value, use, bindings)
    return list(found.values())


def captured_size(model: SemanticModel, capture: Capture, threshold: int) -> Size | None:
    """The smallest size the captured name may hold, when every binding of it is certainly large."""
    sizes: list[Size] = []
    for binding in capture.bindings:
        if binding.kind != "assign":
            return None
        # Folding the name itself just after its binding also honours `# ray-lint: large` on that line.
        size = size_of(model, capture.use, binding.scope, binding.index + 1)
        if size is None or not size.at_least(threshold):
            return None
        sizes.append(size)
    if not sizes:
        return None
    return min(sizes, key=lambda size: size.bytes if size.bytes is not None else threshold)


def _definition_scope(model: SemanticModel, remote: RemoteDef) -> Scope | None:
    if remote.cls is not None:
        return remote.cls.scope.parent
    info = model.function_info(remote.target)  # type: ignore[arg-type]
    return info.parent_scope if info is not None else None


def _name_reads(root: cst.CSTNode, scope: Scope, scopes: dict[int, Scope]) -> Iterator[tuple[cst.Name, Scope]]:
    """Every `Name` under `root` with the scope it is read in (attribute and keyword names are not `Name`
    children here; import, `global` and `nonlocal` statements are skipped)."""
    stack: list[tuple[cst.CSTNode, Scope]] = [(root, scope)]
    while stack:
        node, current = stack.pop()
        if isinstance(node, _NOT_READS):
            continue
        if isinstance(node, cst.Name):
            yield node, current
            continue
        inner = scopes.get(id(node), current)
        stack.extend((child, inner) for child in reversed(list(child_nodes(node))))


def _is_free(name: str, scope: Scope, body: Scope) -> bool:
    """Whether `name`, read in `scope` (inside the remote's `body` scope), is bound by none of the scopes
    from there up to `body`. A name the body declares `global` is written by it (a lazily filled cache),
    so it does not count. Class scopes are seen only from their own body, as in Python."""
    current: Scope | None = scope
    while current is not None:
        if name in current.globals:
            return False
        if (current is scope or current.kind != "class") and current.bindings.get(name):
            return False
        if current is body:
            return True
        current = current.parent
    return False
