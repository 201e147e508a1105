"""`# noqa` comments, with flake8's semantics, and `--add-noqa`.

- `# noqa` on the reported line suppresses every finding there; `# noqa: RAY001,RAY010` only the
  codes listed, each taken as a prefix and case-sensitively (as flake8 does). The comment may stand
  anywhere on the line.
- Lines joined by a multi-line string or a backslash continuation count as one, as in flake8: a
  comment on any of them covers all of them.
- `# ray-lint: noqa` on a line of its own suppresses the whole file; `# ray-lint: noqa: RAY001`
  only those codes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Literal

from ray_lint.diagnostics import Diagnostic, Edit, Position

# Who reads a file's line `# noqa` comments (`engine.lint_text`): "honour" drops what they suppress and
# gives each finding the line its `# noqa` would go on; "honour-only" drops what they suppress (no lines:
# they cost a tokenize pass); "caller" leaves them to the caller (flake8 reads them itself).
Handling = Literal["honour", "honour-only", "caller"]

# flake8's own pattern (flake8/defaults.py), so that a comment means the same to both tools.
NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
NOQA_FILE = re.compile(
    r"^[ \t]*#[ \t]*ray-lint[ \t]*:[ \t]*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_SEPARATOR = re.compile(r"[,\s]+")
LINE_SPLIT = re.compile(r"\r\n|\r|\n")


def _codes(text: str | None) -> frozenset[str] | None:
    """None means all codes."""
    if text is None:
        return None
    return frozenset(code for code in _SEPARATOR.split(text) if code)


def _matches(code: str, codes: frozenset[str] | None) -> bool:
    return codes is None or any(code.startswith(prefix) for prefix in codes)


def has_inline_noqa(text: str) -> bool:
    return NOQA_INLINE.search(text) is not None


def file_suppression(text: str) -> tuple[bool, frozenset[str]]:
    """(all suppressed, codes suppressed) by `# ray-lint: noqa` comments."""
    codes: set[str] = set()
    for match in NOQA_FILE.finditer(text):
        found = _codes(match.group("codes"))
        found = found if found is None else frozenset(code.upper() for code in found)
        if found is None:
            return True, frozenset()
        codes |= found
    return False, frozenset(codes)


def file_suppresses(suppression: tuple[bool, frozenset[str]], code: str) -> bool:
    everything, codes = suppression
    return everything or _matches(code, codes)


@dataclass
class NoqaMap:
    """For each line, the range of lines flake8 searches for its `# noqa` (flake8's
    `FileProcessor._noqa_line_mapping`: lines are joined until a NEWLINE or NL token)."""

    lines: list[str]
    ranges: dict[int, tuple[int, int]]

    @classmethod
    def build(cls, text: str) -> NoqaMap:
        lines = LINE_SPLIT.split(text)
        ranges: dict[int, tuple[int, int]] = {}
        low, high = len(lines) + 2, -1
        try:
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                    continue
                low, high = min(low, token.start[0]), max(high, token.end[0])
                if token.type in (tokenize.NL, tokenize.NEWLINE):
                    for line in range(low, high + 1):
                        ranges[line] = (low, high)
                    low, high = len(lines) + 2, -1
        except (tokenize.TokenError, SyntaxError):
            pass
        return cls(lines, ranges)

    def noqa_line(self, line: int) -> int:
        """The line where a `# noqa` for `line` goes: the last of the lines joined with it."""
        return self.ranges.get(line, (line, line))[1]

    def suppresses(self, line: int, code: str) -> bool:
        low, high = self.ranges.get(line, (line, line))
        text = "".join(self.lines[max(low, 1) - 1 : high])
        match = NOQA_INLINE.search(text)
        return match is not None and _matches(code, _codes(match.group("codes")))


def add_noqa(text: str, codes_by_line: dict[int, set[str]]) -> tuple[str, int]:
    """Add or extend `# noqa: CODES` comments on the given (governing) lines; returns the new text and
    how many lines changed. Other comments stay as they are; a bare `# noqa` already covers everything."""
    parts = LINE_SPLIT.split(text)
    endings = LINE_SPLIT.findall(text)
    changed = 0
    for row, codes in sorted(codes_by_line.items()):
        if not 1 <= row <= len(parts):
            continue
        line = parts[row - 1]
        match = NOQA_INLINE.search(line)
        if match is not None and match.group("codes") is None:
            continue
        if match is not None:
            present = _codes(match.group("codes")) or frozenset()
            missing = sorted(code for code in codes if not _matches(code, present))
            if not missing:
                continue
            matched = match.group(0)
            trailing = matched[len(matched.rstrip(", \t")) :]  # the pattern swallows the separator after the codes
            new_comment = f"# noqa: {', '.join([*sorted(present), *missing])}{trailing}"
            parts[row - 1] = line[: match.start()] + new_comment + line[match.end() :]
        else:
            stripped = line.rstrip()
            if stripped.endswith("\\"):
                continue  # a comment after a line continuation would break the code
            parts[row - 1] = f"{stripped}  # noqa: {', '.join(sorted(codes))}"
        changed += 1
    out = []
    for index, part in enumerate(parts):
        out.append(part)
        if index < len(endings):
            out.append(endings[index])
    return "".join(out), changed


def disable_for_line(text: str, diagnostic: Diagnostic) -> Edit | None:
    """The edit that adds (or extends) the `# noqa` silencing `diagnostic`: one line rewritten, or None when
    no comment can go there (a line continuation) or one already covers it."""
    line = diagnostic.noqa_line or NoqaMap.build(text).noqa_line(diagnostic.start.line)
    annotated, changed = add_noqa(text, {line: {diagnostic.code}})
    if not changed:
        return None
    old_line = LINE_SPLIT.split(text)[line - 1]
    return Edit(Position(line, 1), Position(line, len(old_line) + 1), LINE_SPLIT.split(annotated)[line - 1])
