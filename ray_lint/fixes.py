"""What every fix must pass before it is offered, and its minimal edits.

A rule plans a fix as "replace this node's code with that text" (`rule.FixPlan`). Before the engine
offers it, `refusal` checks it against the model of the file as written: the fix keeps every comment
in the code it rewrites, it uses no name that is undefined where it lands, it removes no binding
that code outside the rewritten span still reads (a loop variable used after the loop), and it
leaves no import or local variable unused. A fix that
fails is not offered at all; the finding stays. `minimal_edit` then trims the replacement to the
characters that change, so an editor's undo and a reviewer's diff see only those.
"""

from __future__ import annotations

import builtins
import keyword
import re
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ray_lint.diagnostics import Edit, Fix, Position
from ray_lint.python_model import (
    Binding,
    Loop,
    PythonModel,
    Scope,
    comments_in,
    iter_subtree,
)

if TYPE_CHECKING:
    from ray_lint.rule import FixPlan

BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__"}
BLOCKS = (cst.Module, cst.IndentedBlock)
WORD = re.compile(r"[^\W\d]\w*")


def offered(model: PythonModel, plan: FixPlan) -> Fix | None:
    """The plan as a fix with minimal edits, or None when it fails a check every fix must pass."""
    if refusal(model, plan.replacements) is not None:
        return None
    edits = []
    for node, text in plan.replacements:
        start = model.position(node).start
        edit = minimal_edit(model.source_of(node), text, Position(start.line, start.column + 1))
        if edit is not None:
            edits.append(Edit(*edit))
    return Fix(plan.message, tuple(edits), plan.applicability) if edits else None


def refusal(model: PythonModel, replacements: tuple[tuple[cst.CSTNode, str], ...]) -> str | None:
    """Why the fix that makes these replacements must not be offered, or None when it may be. The
    replacements are judged together: one may add the import another uses, or drop the read of a name
    whose import another removes."""
    for node, text in replacements:
        reason = _dropped_comment(model, node, text)
        if reason is not None:
            return reason
    if not any(_names_change(model.source_of(node), text) for node, text in replacements):
        return None  # the same names, as often: a fix that only moves code leaves nothing to check
    parts = [_Part(model, node, text) for node, text in replacements]
    plan = _Plan(
        bound={name for part in parts if part.replacement is not None for name in part.replacement.module_scope.bindings},
        reads_removed=sum((part.reads_removed for part in parts), Counter()),
        unbound={binding.name for part in parts for binding in part.removed_bindings(set())},
    )
    for part in parts:
        reason = part.refusal(plan)
        if reason is not None:
            return reason
    return None


def minimal_edit(old: str, new: str, start: Position) -> tuple[Position, Position, str] | None:
    """The replacement of `old` (which starts at `start`) by `new`, trimmed of the text they share at
    both ends: the range and the text to put there, or None when nothing changes."""
    if old == new:
        return None
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return _advance(start, old[:prefix]), _advance(start, old[: len(old) - suffix]), new[prefix : len(new) - suffix]


def _advance(start: Position, text: str) -> Position:
    """The position after `text` when it starts at `start` (1-based columns in code points)."""
    lines = text.count("\n")
    if lines == 0:
        return Position(start.line, start.column + len(text))
    return Position(start.line + lines, len(text) - text.rfind("\n"))


# ---------------------------------------------------------------------------- the checks


@dataclass(frozen=True)
class _Plan:
    """What a fix's replacements do together to the file's names."""

    bound: set[str]  # names the replacements bind
    reads_removed: Counter[str]  # reads of each name the replacements take out
    unbound: set[str]  # names whose binding the replacements take out


class _Part:
    """One replacement of a fix: a node of the file, the text that replaces it, and what that does."""

    def __init__(self, model: PythonModel, node: cst.CSTNode, text: str) -> None:
        self.model, self.node, self.text = model, node, text
        self.replacement = _snippet_model(model, node, text)
        self.inside = list(iter_subtree(node))
        self.ids = {id(n) for n in self.inside}
        self.by_node = model.analysis(BindingsByNode)
        self.names_before = Counter(n.value for n in self.inside if isinstance(n, cst.Name))
        after = Counter(n.value for n in iter_subtree(self.replacement.module) if isinstance(n, cst.Name)) if self.replacement else self.names_before
        self.reads_removed = self.names_before - after

    def removed_bindings(self, bound: set[str]) -> list[Binding]:
        """The bindings of the node's scope made inside the node that the replacement does not make again."""
        found = []
        for candidate in self.inside:
            binding = self.by_node.bindings.get(id(candidate))
            if binding is not None and binding.name not in bound and id(binding.scope.node) not in self.ids:
                found.append(binding)
        return found

    def refusal(self, plan: _Plan) -> str | None:
        model, node = self.model, self.node
        if self.replacement is None:
            return None  # the engine refuses a fix whose result does not parse
        if isinstance(node, cst.Name) and self.text.isidentifier():
            return None  # a keyword or attribute renamed: rules never rename a variable
        events = _event_span(model, self.inside, self.by_node)
        for binding in self.removed_bindings(plan.bound) if events is not None else ():
            elsewhere = plan.reads_removed[binding.name] - self.reads_removed[binding.name]  # by the other replacements
            if _reads_outside(model, binding, node, self.ids, events) > elsewhere:  # type: ignore[arg-type]
                return f"`{binding.name}` is still read after the code the fix rewrites"
        for name, removed in self.reads_removed.items():
            if name not in plan.unbound and model.read_counts[name] <= removed and _unused_when_unread(model, name):
                return f"it would leave `{name}` unused"
        scope, at = _where(model, self.inside, self.by_node)
        for name in sorted(_free_names(self.replacement) - set(self.names_before) - plan.bound):
            if name in BUILTIN_NAMES or model.star_imports:
                continue
            if model.reaching_binding(name, scope, at) is None:
                return f"it would use `{name}`, which is not defined there"
        return None


def _dropped_comment(model: PythonModel, node: cst.CSTNode, text: str) -> str | None:
    """The refusal of a replacement that drops a comment of the code it replaces."""
    span = model.source_of(node)
    for comment in comments_in(node) if "#" in span else ():
        if comment in span and comment not in text:
            return f"it would drop the comment `{comment}`"
    return None


def _names_change(old: str, new: str) -> bool:
    """Whether a replacement may add or remove a name: a word of `new` not in `old`, or a word fewer.
    A cheap screen on the text; only replacements that pass it are parsed and checked."""
    before, after = Counter(WORD.findall(old)), Counter(WORD.findall(new))
    return any(not keyword.iskeyword(word) for word in after - before) or bool(before - after)


def _snippet_model(model: PythonModel, node: cst.CSTNode, text: str) -> PythonModel | None:
    """A model of the replacement on its own: an expression in parentheses, statements dedented from
    the column the node starts at. None when it does not parse alone."""
    if isinstance(node, cst.BaseExpression):
        source = f"(\n{text}\n)\n"
    else:
        source = textwrap.dedent(" " * model.position(node).start.column + text) + "\n"
    try:
        return PythonModel(cst.parse_module(source))
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None


def _free_names(snippet: PythonModel) -> set[str]:
    """Names the replacement reads that it does not bind itself."""
    free = set()
    for scope in snippet.scopes:
        for name in scope.reads:
            current: Scope | None = scope
            while current is not None and name not in current.bindings:
                current = current.parent
            if current is None:
                free.add(name)
    return free


class BindingsByNode:
    """The binding each binding node makes (a target name, an import alias, a def), and the names read in
    nested scopes without a binding of their own: tables for the fixes of one file, made once."""

    def __init__(self, model: PythonModel) -> None:
        self.bindings: dict[int, Binding] = {id(binding.node): binding for binding in model.bindings}
        self.free_reads: dict[str, list[Scope]] = defaultdict(list)
        for scope in model.scopes[1:]:
            for name in scope.reads:
                if name not in scope.bindings:
                    self.free_reads[name].append(scope)


def _event_span(model: PythonModel, inside: list[cst.CSTNode], by_node: BindingsByNode) -> tuple[int, int] | None:
    """The event numbers the rewritten code covers, from the bindings, calls and loops in it."""
    events: list[int] = []
    for node in inside:
        binding = by_node.bindings.get(id(node))
        if binding is not None:
            events.append(binding.index)
        elif isinstance(node, cst.Call) and (site := model.call_site(node)) is not None:
            events.append(site.index)
        loop = model.loop_of(node)
        if loop is not None:
            events += [loop.start, loop.end]
    return (min(events), max(events)) if events else None


def _reads_outside(model: PythonModel, binding: Binding, node: cst.CSTNode, ids: set[int], span: tuple[int, int]) -> int:
    """How many reads outside `node` may see the value `binding` gives its name: a read after it in its
    scope (unless a plain assignment in the same block rebinds the name first), a read before it in a
    loop around it, and every read in a function or class nested in the scope, which may run at any
    time. An augmented assignment after it counts as more reads than any fix removes."""
    scope, name = binding.scope, binding.name
    low, high = span
    around = _loop_around(binding, ids)
    count = 0
    for read in scope.reads.get(name, ()):
        if read > high and not _rebound_between(model, scope, name, node, high, read):
            count += 1
        elif read < low and around is not None and around.start <= read < around.end:
            count += 1
    if any(b.kind == "augassign" and b.index > high for b in scope.bindings.get(name, ())):
        return 1 << 30
    for nested in model.analysis(BindingsByNode).free_reads.get(name, ()):
        if scope.first < nested.first <= scope.last and id(nested.node) not in ids and _resolves_to(nested, scope, name):
            count += len(nested.reads[name])
    return count


def _loop_around(binding: Binding, ids: set[int]) -> Loop | None:
    """The innermost loop of the binding's scope around the rewritten code: on its next turn, a read
    before the rewritten code sees the value the last turn gave."""
    loop = binding.loop
    while loop is not None and id(loop.node) in ids:
        loop = loop.parent
    return loop if loop is not None and loop.scope is binding.scope else None


def _rebound_between(model: PythonModel, scope: Scope, name: str, node: cst.CSTNode, after: int, before: int) -> bool:
    """Whether `name` is bound again between the two events, so that a read at `before` cannot see the
    value the rewritten code gave: by a statement in the same block as the rewritten code, or as the
    target of a loop whose body holds the read."""
    block = _block_of(model, scope, node)
    for binding in scope.bindings.get(name, ()):
        if not after < binding.index < before:
            continue
        loop = binding.loop
        if binding.kind == "loop-target" and loop is not None and loop.start <= before < loop.end:
            return True  # read in the body of a loop over the name: the loop binds it first
        if binding.kind in ("assign", "loop-target", "import", "def", "class"):
            statement = binding.statement
            if statement is not None and block is not None and _block_of(model, scope, statement) is block:
                return True
    return False


def _block_of(model: PythonModel, scope: Scope, node: cst.CSTNode) -> cst.CSTNode | None:
    """The block (module or indented body) whose statement holds `node`, within `scope`."""
    path = model.path_within(scope.node, node)
    if path is None:
        return None
    for parent in reversed(path[:-1]):
        if isinstance(parent, BLOCKS):
            return parent
    return None


def _resolves_to(nested: Scope, scope: Scope, name: str) -> bool:
    """Whether `name` read in `nested` means the binding in `scope` (no scope between binds it)."""
    current = nested.parent
    while current is not None and current is not scope:
        if current.kind != "class" and name in current.bindings:
            return False
        current = current.parent
    return current is scope or name in nested.globals


def _unused_when_unread(model: PythonModel, name: str) -> bool:
    """Whether `name`, once nothing reads it, is a name pyflakes reports as unused: one that only
    imports or assignments in functions bind. (Only asked when the file reads the name no more.)"""
    bindings = [binding for scope in model.scopes for binding in scope.bindings.get(name, ())]
    return bool(bindings) and all(
        binding.kind == "import" or (binding.kind == "assign" and binding.scope.function is not None) for binding in bindings
    )


def _where(model: PythonModel, inside: list[cst.CSTNode], by_node: BindingsByNode) -> tuple[Scope, int]:
    """The scope the rewritten code runs in and an event number in it, to resolve the names a fix adds."""
    for node in inside:
        if isinstance(node, cst.Call) and (site := model.call_site(node)) is not None:
            return site.scope, site.index
        binding = by_node.bindings.get(id(node))
        if binding is not None:
            return binding.scope, binding.index
    return model.module_scope, 1 << 62
