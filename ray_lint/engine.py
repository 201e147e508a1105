"""The lint engine: one file's text in, diagnostics (and fixed text) out.

Each file is parsed at most once per pass, and only when it contains a token one of the enabled
rules needs; one semantic model serves every rule. Nothing here imports Ray.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field

import libcst as cst

from ray_lint import noqa, pieces
from ray_lint.analyses.forks import fork_facts
from ray_lint.analyses.gpu_use import gpu_facts
from ray_lint.analyses.waits import wait_facts
from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Diagnostic, Position, Timings, apply_edits, file_error
from ray_lint.fixes import offered
from ray_lint.model import SemanticModel
from ray_lint.project import LONE_FILE, SUMMARISED, ProjectFacts, facts_of, facts_of_calls, may_give
from ray_lint.rule import Context, Report, Rule
from ray_lint.syntax import parses, python_parse

MAX_FIX_PASSES = 10
Clock = Callable[[str], AbstractContextManager[object]]


def _untimed(key: str) -> AbstractContextManager[object]:
    return nullcontext()


INTERNAL_ERROR = "internal error"


class _ScannedText(str):
    """A file's text that remembers which tokens it holds: fifty rules' pre-filters share many tokens
    (`.remote(`, `ray.get(`), and each search is a scan of the whole file."""

    __slots__ = ("_found",)
    _found: dict[object, bool]

    def __new__(cls, text: str) -> _ScannedText:
        scanned = super().__new__(cls, text)
        scanned._found = {}
        return scanned

    def __contains__(self, token: object) -> bool:
        found = self._found.get(token)
        if found is None:
            found = self._found[token] = str.__contains__(self, token)  # type: ignore[operator]
        return found


def _wanting(text: str, rules: list[Rule]) -> list[Rule]:
    """The rules whose pre-filter passes. RAY000 wants a file when another rule does (see its docs), so it
    is asked on its own only when it is the one rule to run."""
    scanned = _ScannedText(text)
    wanting = [rule for rule in rules if rule.code != FILE_ERROR_CODE and rule.wants(scanned)]
    file_errors = [rule for rule in rules if rule.code == FILE_ERROR_CODE]
    if wanting or (file_errors and len(rules) == 1 and file_errors[0].wants(scanned)):
        wanting += file_errors
    return wanting


def wanted(text: str, rules: list[Rule]) -> bool:
    """Whether some rule's pre-filter passes: a file no rule wants has no findings, and nothing to cache."""
    return bool(_wanting(text, rules))


def lint_text(
    text: str,
    rules: list[Rule],
    describe_line: Callable[[int], str] | None = None,
    timings: Timings | None = None,
    noqa_comments: noqa.Handling = "honour",
    python_tree: ast.Module | None = None,
    project: ProjectFacts | None = LONE_FILE,
    provides: set[str] | None = None,
) -> list[Diagnostic]:
    """Run `rules` on one file's text. Never raises: failures become RAY000 diagnostics (when RAY000 is
    among `rules`). `noqa_comments` says who reads line `# noqa` comments (a file-level `# ray-lint: noqa`
    always applies): "honour" drops the findings they suppress and gives each other finding the line
    its `# noqa` would go on; "honour-only" drops them but leaves `noqa_line` unset (the language server
    works it out for the one line a user acts on; the tokenize pass behind it then runs only for a text
    with a `# noqa` to honour); "caller" leaves them to the caller (flake8 reads them itself).
    `describe_line` names a line in messages (a notebook names the cell). `timings`, when given,
    collects the time of each phase and rule.
    `python_tree` is CPython's parse of the text where the caller already has one (flake8 does).
    `project`: the facts of the project's other files (by default none: a lone file); None when the caller
    gathers them later, and then a finding that depends on other files keeps its conditions (`unless`,
    `requires`). `provides`, when given, receives the facts this file gives (read from the semantic
    model; a file no selected rule wants is read with CPython's parser when it mentions `.remote`)."""
    clock = timings.measure if timings is not None else _untimed
    with clock("pre-filter"):
        wanting = _wanting(text, rules)  # the cheap check first: most files never mention Ray
    if not wanting:
        if provides is not None and ".remote" in text:  # Ray code that the selected rules skip
            with clock("project facts"):
                provides |= facts_of(text)
        return []
    suppression = noqa.file_suppression(text)
    active = [rule for rule in wanting if not noqa.file_suppresses(suppression, rule.code)]
    if not active:
        return []
    report_file_errors = any(rule.code == FILE_ERROR_CODE for rule in active)
    with _collector_paused():
        checked = _check(text, active, describe_line or _plain_line, clock, python_tree, project, provides)
    # a rule's own crash is a bug in ray-lint, shown even when RAY000 is not selected: else it looks like a clean file
    diagnostics = [d for d in checked if d.code != FILE_ERROR_CODE or report_file_errors or d.message.startswith(INTERNAL_ERROR)]
    if not diagnostics:
        return []
    noqa_lines = noqa_comments == "honour"
    if noqa_comments == "caller" or not (noqa_lines or noqa.has_inline_noqa(text)):
        return sorted(diagnostics, key=lambda d: (d.start, d.code))
    with clock("noqa comments"):
        lines = noqa.NoqaMap.build(text)
    kept = []
    for diagnostic in diagnostics:
        if diagnostic.code != FILE_ERROR_CODE and lines.suppresses(diagnostic.start.line, diagnostic.code):
            continue
        kept.append(_with_noqa_line(diagnostic, lines.noqa_line(diagnostic.start.line)) if noqa_lines else diagnostic)
    return sorted(kept, key=lambda d: (d.start, d.code))


def _with_noqa_line(diagnostic: Diagnostic, line: int) -> Diagnostic:
    return dataclasses.replace(diagnostic, noqa_line=line)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """A parsed file is tens of thousands of new objects, and Python's cyclic garbage collector would
    scan them again and again while they are built (half the time of a 1,000-line file). They are
    freed by reference counting; whatever cycles remain are collected once the pause ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _plain_line(line: int) -> str:
    return f"line {line}"


def _check(
    text: str,
    rules: list[Rule],
    describe_line: Callable[[int], str],
    clock: Clock,
    python_tree: ast.Module | None,
    project: ProjectFacts | None,
    provides: set[str] | None,
) -> list[Diagnostic]:
    with clock("nesting check"):
        split = _split(text) if python_tree is None else None
        too_deep = split[1] if split is not None else _nesting_error(text, python_tree)
    if too_deep is not None:
        return [too_deep]
    with _recursion_limit(_RULES_RECURSION_LIMIT):
        return _parse_and_run(text, split[0] if split is not None else None, rules, describe_line, clock, project, provides)


def _split(text: str) -> tuple[list[str], Diagnostic | None] | None:
    """The pieces a file is parsed in (`ray_lint.pieces`), and the error for a node nested too deeply: the
    one a walk of the whole file's tree finds first (it takes the last statement first). None when the
    file must be parsed whole."""
    found = pieces.split(text, lambda tree, piece: _first_node_deeper_than(tree, MAX_NESTING, piece))
    if found is None:
        return None
    deepest, first_line = None, 1
    for piece, (line, column) in found:
        if line:
            deepest = _too_deep(first_line + line - 1, column)
        first_line += piece.count("\n")
    return [piece for piece, _ in found], deepest


def _parse(text: str, split: list[str] | None) -> cst.Module:
    """libcst's tree of the file, put together from its pieces where it has several."""
    if split is not None and len(split) > 1:
        try:
            module = pieces.parse(split)
        except Exception:  # a piece libcst rejects: the whole file's parse says why
            module = None
        if module is not None:
            return module
    return cst.parse_module(text)


def _parse_and_run(
    text: str,
    split: list[str] | None,
    rules: list[Rule],
    describe_line: Callable[[int], str],
    clock: Clock,
    project: ProjectFacts | None,
    provides: set[str] | None,
) -> list[Diagnostic]:
    try:
        with clock("parse"):
            module = _parse(text, split)
    except cst.ParserSyntaxError as error:
        return [_syntax_error(text, error)]
    except (RecursionError, MemoryError):
        return [file_error("nested too deeply to parse")]
    except Exception as error:  # libcst's native parser may raise its own errors on odd input
        return [file_error(f"cannot be parsed: {type(error).__name__}: {error}")]
    try:
        with clock("semantic model"):
            model = SemanticModel(module, project)
    except (RecursionError, MemoryError) as error:
        return [file_error(f"could not be analysed: {type(error).__name__}")]
    try:
        if provides is not None:
            with clock("project facts"):
                provides |= set(model.actor_facts())
                provides |= {SUMMARISED, *gpu_facts(model, text), *fork_facts(model, text), *wait_facts(model)}
                if may_give(text):
                    provides |= facts_of_calls(model.call_shapes())
        return _run_rules(model, rules, describe_line, clock)
    finally:
        model.close()


def summary_facts(text: str) -> frozenset[str]:
    """The function summaries a module gives the project (`waits:`, `blocks:`, `gpu:`, `forks:` facts), from the
    semantic model: for a module a run did not parse, when a finding elsewhere needs one of its
    functions. Nothing for a module that cannot be parsed."""
    split = _split(text)
    if split is not None and split[1] is not None:
        return frozenset()
    try:
        with _collector_paused():
            model = SemanticModel(_parse(text, split[0] if split is not None else None))
    except Exception:  # a module that does not parse or is too deep gives no facts, as in `facts_of`
        return frozenset()
    try:
        return frozenset((*gpu_facts(model, text), *fork_facts(model, text), *wait_facts(model)))
    finally:
        model.close()


def _run_rules(model: SemanticModel, rules: list[Rule], describe_line: Callable[[int], str], clock: Clock) -> list[Diagnostic]:
    """Run every rule, then place all their findings with one pass over the module (`Positions.locate`)."""
    checked: list[tuple[Rule, Context | None, list[Diagnostic]]] = []
    for rule in rules:
        ctx = Context(model, rule.settings, describe_line)
        try:
            with clock(rule.code):
                rule.check(ctx)
            checked.append((rule, ctx, []))
        except Exception as error:
            checked.append((rule, None, [_rule_error(rule, error)]))
    with clock("positions and fixes"):
        with suppress(Exception):  # a failure shows again, as each rule's, when its findings are placed
            model.locate(node for _, ctx, _ in checked if ctx is not None for report in ctx.reports for node in _located(report))
        for rule, ctx, diagnostics in checked:
            if ctx is None:
                continue
            try:
                diagnostics.extend(_to_diagnostic(rule, report, ctx) for report in ctx.reports)
            except Exception as error:
                diagnostics.append(_rule_error(rule, error))
    return _one_per_problem([d for _, _, diagnostics in checked for d in diagnostics], rules)


def _rule_error(rule: Rule, error: Exception) -> Diagnostic:
    return file_error(f"{INTERNAL_ERROR} in rule {rule.code} ({rule.name}): {type(error).__name__}: {error}")


def _located(report: Report) -> Iterator[cst.CSTNode]:
    """The nodes whose positions a finding needs: its own, and those its fix replaces."""
    yield report.node
    if report.fix is not None:
        yield from (node for node, _ in report.fix.replacements)


def _one_per_problem(diagnostics: list[Diagnostic], rules: list[Rule]) -> list[Diagnostic]:
    """Drop a finding when a more specific rule reported the same line (its `supersedes` names the other):
    one problem, one finding."""
    superseding = {rule.code: rule.supersedes for rule in rules if rule.supersedes}
    if not superseding:
        return diagnostics
    replaced = {(d.start.line, code) for d in diagnostics for code in superseding.get(d.code, ())}
    return [d for d in diagnostics if (d.start.line, d.code) not in replaced]


MAX_NESTING = 1000  # in `ast` levels; CPython allows about 3,000
_PYTHON_NESTING_ERRORS = ("too many nested parentheses", "too many levels of indentation")
_RULES_RECURSION_LIMIT = 20_000  # libcst's code generation (behind positions) takes a few frames per level


def _nesting_error(text: str, tree: ast.Module | None) -> Diagnostic | None:
    """Refuse text nested deeper than MAX_NESTING before libcst sees it. libcst has no nesting limit: its
    parse time grows with the cube of an expression's depth (a 4,000-term `1+1+...` takes 6 s) until
    its native stack overflows and the whole process dies (8,000 terms). CPython's parser measures the
    text in milliseconds. Other syntax errors are left to libcst, which knows grammar newer than the
    running Python's. `tree` is CPython's parse when the caller has one (flake8 hands plugins theirs)."""
    if tree is None:
        try:
            tree = python_parse(text)
        except (RecursionError, MemoryError):
            return file_error(f"syntax error: nested too deeply for Python's parser; ray-lint lints up to {MAX_NESTING} levels")
        except SyntaxError as error:
            if error.msg in _PYTHON_NESTING_ERRORS:
                return file_error(f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
            return None
        except ValueError:  # NUL bytes: libcst reports them
            return None
    line, column = _first_node_deeper_than(tree, MAX_NESTING, text)
    return _too_deep(line, column) if line else None


def _too_deep(line: int, column: int) -> Diagnostic:
    return file_error(f"nested more than {MAX_NESTING} levels deep; not linted (libcst's parse time grows with the cube of the depth)", line, column + 1)


def _first_node_deeper_than(tree: ast.AST, limit: int, text: str) -> tuple[int, int]:
    """Line and 0-based column of a node more than `limit` levels down (of its nearest positioned
    ancestor), or (0, 0). Iterative: the tree may be deeper than Python's recursion limit.

    Cheap on ordinary code: a subtree adds at most two `ast` levels per character of its source (a
    call, a starred argument and a call again take three characters), so a node whose source is
    short enough to stay within the limit is not entered. Most statements are never opened."""
    longest_line = max(map(len, text.split("\n")))
    stack: list[tuple[ast.AST, int, int, int]] = [(tree, 0, 1, 0)]
    while stack:
        node, depth, line, column = stack.pop()
        if depth > limit:
            return line, column
        end_line = getattr(node, "end_lineno", None)
        if end_line is not None:
            line, column = node.lineno, node.col_offset  # type: ignore[attr-defined]
            # one line: its bytes (at least its characters); more: as many longest lines
            length = node.end_col_offset - column if end_line == line else (end_line - line + 1) * longest_line  # type: ignore[attr-defined]
            if depth + 2 * length + 2 <= limit:
                continue
        stack.extend((child, depth + 1, line, column) for child in ast.iter_child_nodes(node))
    return 0, 0


@contextmanager
def _recursion_limit(limit: int) -> Iterator[None]:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _syntax_error(text: str, error: cst.ParserSyntaxError) -> Diagnostic:
    """Python's own message and position where it has one (they are clearer than libcst's)."""
    try:
        python_parse(text)
    except SyntaxError as python_error:
        return file_error(f"syntax error: {python_error.msg}", python_error.lineno or 1, python_error.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        pass
    return file_error(f"syntax error: {error.message}", error.editor_line, error.editor_column)


def _to_diagnostic(rule: Rule, report: Report, ctx: Context) -> Diagnostic:
    span = ctx.model.position(report.node)
    return Diagnostic(
        code=rule.code,
        name=rule.name,
        message=report.message,
        severity=rule.severity,
        start=Position(span.start.line, span.start.column + 1),
        end=Position(span.end.line, span.end.column + 1),
        fix=offered(ctx.model, report.fix) if report.fix is not None else None,
        facts=report.facts,
        unless=report.unless,
        requires=report.requires,
    )


# ---------------------------------------------------------------------------- fixes


@dataclass
class FixOutcome:
    text: str
    diagnostics: list[Diagnostic]
    applied: Counter[str] = field(default_factory=Counter)
    refused: list[Diagnostic] = field(default_factory=list)  # fixes that would not parse


def fix_text(
    text: str,
    rules: list[Rule],
    unsafe: bool,
    describer: Callable[[str], Callable[[int], str]] | None = None,
    timings: Timings | None = None,
    project: ProjectFacts | None = LONE_FILE,
) -> FixOutcome:
    """Apply fixes until none is left (at most MAX_FIX_PASSES passes), never keeping unparseable code.
    `describer` gives the `describe_line` for a text, which fixes change (a notebook's cells move).
    Without `project`, a finding another file may contradict (one with `unless`) is not fixed."""

    def lint(current: str) -> list[Diagnostic]:
        describe_line = describer(current) if describer is not None else None
        return lint_text(current, rules, describe_line=describe_line, timings=timings, project=project)

    outcome = FixOutcome(text, [])
    refused_at: set[tuple[str, Position]] = set()
    for _ in range(MAX_FIX_PASSES):
        diagnostics = lint(outcome.text)
        chosen = _non_overlapping(
            d
            for d in diagnostics
            if d.fix is not None
            and not d.conditional
            and (d.fix.applicability is Applicability.SAFE or unsafe)
            and (d.code, d.start) not in refused_at
        )
        if not chosen:
            outcome.diagnostics = diagnostics
            return outcome
        candidate = apply_edits(outcome.text, [e for d in chosen for e in d.fix.edits])  # type: ignore[union-attr]
        if parses(candidate, outcome.text):
            outcome.text = candidate
            outcome.applied.update(d.code for d in chosen)
            continue
        for diagnostic in chosen:  # find the fix that breaks the code; keep the others
            assert diagnostic.fix is not None
            single = apply_edits(outcome.text, list(diagnostic.fix.edits))
            if parses(single, outcome.text):
                outcome.text = single
                outcome.applied[diagnostic.code] += 1
                break
            refused_at.add((diagnostic.code, diagnostic.start))
            outcome.refused.append(diagnostic)
    outcome.diagnostics = lint(outcome.text)
    return outcome


def _non_overlapping(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    chosen: list[Diagnostic] = []
    taken: list[tuple[Position, Position]] = []
    for diagnostic in sorted(diagnostics, key=lambda d: d.start):
        assert diagnostic.fix is not None
        spans = [(e.start, e.end) for e in diagnostic.fix.edits]
        if all(end <= s or e <= start for start, end in spans for s, e in taken):
            chosen.append(diagnostic)
            taken.extend(spans)
    return chosen
