"""A long file parsed a piece at a time, for memory.

At its peak, libcst's native parser holds about 12 KB per line of the file (tokens and two trees, in
Rust, before the Python nodes exist) and CPython's `ast` about 3 KB: a 140,000-line file took 1.8 GB.
Parsed in pieces of at least PIECE_LINES lines, each beginning with a top-level statement, the peak is
a piece's, and the module put together from the pieces is the one a parse of the whole file gives
(a test compares them, node for node, on real code).

A piece ends before a line that starts a statement in column 0 (not `else`, `elif`, `except` or
`finally`), and before the blank lines and column-0 comments above it: those are the statement's
`leading_lines` in the whole file's tree and the piece's `header` in its own. CPython's parser must
accept each piece on its own, which proves the line is not inside a string, brackets or a backslash
continuation (the piece would end unterminated); where it does not, the piece grows. Files with a
carriage return, files CPython cannot parse and files whose indented pieces disagree on the
indentation are parsed whole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import TypeVar

import libcst as cst

from ray_lint.syntax import python_parse

PIECE_LINES = 1_000
_CONTINUATION = re.compile(r"(else|elif|except|finally)\b")
_INDENTED = re.compile(r"^[ \t]", re.MULTILINE)  # a superset of the pieces that hold a block
_T = TypeVar("_T")


def split(text: str, inspect: Callable[[ast.Module, str], _T]) -> list[tuple[str, _T]] | None:
    """The pieces of `text`, each with what `inspect` made of CPython's tree of it (the trees themselves
    are dropped: all of them at once would cost what the whole file's does); None when CPython cannot
    parse the file or it has a carriage return. A file shorter than 2 * PIECE_LINES lines is one piece."""
    if "\r" in text:
        return None
    if text.count("\n") < 2 * PIECE_LINES:
        tree = _python_tree(text)
        return [(text, inspect(tree, text))] if tree is not None else None
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    pieces: list[tuple[str, _T]] = []
    start, size = 0, PIECE_LINES
    while True:
        end = _boundary(lines, start, start + size) if len(lines) - start >= 2 * size else None
        piece = text[offsets[start] : offsets[end]] if end is not None else text[offsets[start] :]
        tree = _python_tree(piece)
        if tree is None:
            if end is None:
                return None
            size *= 2  # the line is inside a string, brackets or a continuation, or the code is wrong: look further
            continue
        pieces.append((piece, inspect(tree, piece)))
        del tree
        if end is None:
            return pieces
        start, size = end, PIECE_LINES


def _python_tree(text: str) -> ast.Module | None:
    try:
        return python_parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _boundary(lines: list[str], start: int, at: int) -> int | None:
    """The first line from `at` on (0-based) where the piece that begins on line `start` may end: the blank
    lines and column-0 comments above a line that starts a statement in column 0 (with a name, a keyword
    or a decorator: a bracket or a quote there is more likely to close something), after a line that
    is neither blank, a comment, a decorator nor continued with a backslash."""
    for number in range(at, len(lines)):
        line = lines[number]
        if not line or not (line[0].isalpha() or line[0] in "_@") or _CONTINUATION.match(line):
            continue
        first = number
        while first > start and (not lines[first - 1] or lines[first - 1][0] == "#"):
            first -= 1
        before = lines[first - 1].strip() if first > start else ""
        if before and before[0] not in "#@" and not before.endswith("\\"):
            return first
    return None


def parse(pieces: list[str]) -> cst.Module | None:
    """The module the pieces make together, parsed one by one; None when pieces with indented lines
    disagree on the indentation (each detects its own, and the whole file's is its first block's: a
    block whose indentation is not the module's records its own)."""
    modules = [cst.parse_module(piece) for piece in pieces]
    first, last = modules[0], modules[-1]
    indents = {module.default_indent for module, piece in zip(modules, pieces, strict=True) if _INDENTED.search(piece)}
    if len(indents) > 1:
        return None
    body = list(first.body)
    for module in modules[1:]:
        head, *rest = module.body  # a piece begins with a statement; the lines above it are its header
        body.append(head.with_changes(leading_lines=(*module.header, *head.leading_lines)))
        body.extend(rest)
    return first.with_changes(
        body=body,
        footer=last.footer,
        has_trailing_newline=last.has_trailing_newline,
        default_indent=indents.pop() if indents else first.default_indent,
    )
