"""The language server's record of what it has published for each document (`Shown`), kept in step
with the edits the editor sends, so that hover can describe a squiggle without linting again and the
last good findings can stay on screen while the buffer does not parse.

Everything here is front-end state in the client's position units (UTF-8, UTF-16 or UTF-32 columns,
as negotiated): the change ranges the editor sends are in those units, so moving a published range
along with an edit needs neither the old text nor a conversion to ray-lint's code-point columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import attrs
from lsprotocol import types

from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Diagnostic, docs_url
from ray_lint.rule import Rule, rule_by_code_or_name

# How the engine words a RAY000 for text it cannot parse (ray_lint.engine: `_syntax_error`,
# `_nesting_error`, `_parse_and_run`); a file that cannot be read, a config error, or a file nested
# too deep to lint are other RAY000s, which typing on does not cure.
_PARSE_FAILURES = ("syntax error", "cannot be parsed", "nested too deeply to parse")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line ends LSP counts
_SECTION = re.compile(r"^## What it does[ \t]*\n(?P<body>.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)

Units = Callable[[str], int]  # the length of a text in the client's position units


@dataclass(frozen=True)
class Shown:
    """One published diagnostic: as the client has it (`lsp`, its range moved along with later edits)
    and the finding behind it. `kept`: carried over from an earlier lint while the buffer does not
    parse, so its fix (edits against older text) is not offered."""

    lsp: types.Diagnostic
    finding: Diagnostic
    kept: bool = False


def is_parse_failure(diagnostic: Diagnostic) -> bool:
    """A RAY000 for text that does not parse (what a half-written line gives), not for a file that
    cannot be read or configured."""
    return diagnostic.code == FILE_ERROR_CODE and diagnostic.message.startswith(_PARSE_FAILURES)


def parse_failed(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(is_parse_failure(d) for d in diagnostics)


# ---------------------------------------------------------------------------------- edits


def _key(position: types.Position) -> tuple[int, int]:
    return position.line, position.character


def _moved(position: types.Position, change: types.Range, text: str, units: Units) -> types.Position:
    """Where a position at or after the end of `change` is once `change` is replaced by `text`."""
    pieces = _LINE_BREAK.split(text)
    added = len(pieces) - 1
    if position.line == change.end.line:  # on the change's last line: the columns after it move too
        first = change.start.character if added == 0 else 0
        return types.Position(
            line=change.start.line + added,
            character=first + units(pieces[-1]) + position.character - change.end.character,
        )
    return types.Position(line=position.line + added - (change.end.line - change.start.line), character=position.character)


def shift_range(range_: types.Range, change: types.Range, text: str, units: Units) -> types.Range | None:
    """`range_` after `change` is replaced by `text`: unmoved when the change comes after it, moved
    when the change comes before it (an insertion at its start included), None when the change
    overlaps it (the finding's text is no longer what was linted)."""
    if _key(change.end) <= _key(range_.start):
        return types.Range(start=_moved(range_.start, change, text, units), end=_moved(range_.end, change, text, units))
    if _key(change.start) >= _key(range_.end):
        return range_
    return None


def apply_change(shown: Sequence[Shown], change: types.TextDocumentContentChangeEvent, units: Units) -> list[Shown]:
    """`shown` after one content change of a didChange. A whole-document replacement (no range) says
    nothing about where the old findings went, so it drops them."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return []
    moved = []
    for entry in shown:
        range_ = shift_range(entry.lsp.range, change.range, change.text, units)
        if range_ is not None:
            moved.append(entry if range_ is entry.lsp.range else Shown(attrs.evolve(entry.lsp, range=range_), entry.finding, entry.kept))
    return moved


# ---------------------------------------------------------------------------------- hover


def contains(range_: types.Range, position: types.Position) -> bool:
    """Half-open, as editors draw a squiggle; an empty range (a point) contains its position."""
    start, end, here = _key(range_.start), _key(range_.end), _key(position)
    return here == start if start == end else start <= here < end


def rule_summary(rule: type[Rule]) -> str:
    """The "What it does" section of the rule's docs (the rule's message when it has none)."""
    match = _SECTION.search(rule.docs)
    return match.group("body").strip() if match else rule.message


def describe(entry: Shown) -> str:
    """Markdown for one diagnostic: code and name, message, what the rule does, its fix and its page."""
    finding = entry.finding
    rule = rule_by_code_or_name(finding.code)
    description = entry.lsp.code_description
    url = description.href if description is not None else docs_url(finding.code)
    lines = [f"**{finding.code}** `{finding.name}`: {finding.message}", ""]
    if rule is not None:
        lines += [rule_summary(rule), ""]
    fix = finding.fix
    if fix is not None:
        safety = "unsafe" if fix.applicability is Applicability.UNSAFE else "safe"
        lines += [f"Fix ({safety}): {fix.message}", ""]
    if entry.kept:
        lines += ["*From the last version of this file that parsed; its fix returns once the file parses again.*", ""]
    lines.append(f"[{finding.code} documentation]({url})")
    return "\n".join(lines)


def hover_markdown(entries: Sequence[Shown]) -> str:
    return "\n\n---\n\n".join(describe(entry) for entry in entries)
