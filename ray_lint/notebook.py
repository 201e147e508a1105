"""Jupyter notebooks: the code cells become one Python text for the engine, and fixed text goes back
into the cells.

The engine sees every code cell in order (so a remote function defined in one cell is known in the
next), each followed by a marker comment line. IPython syntax that is not Python (`%time`, `!pip`,
`x = !ls`, `obj?`) becomes a `pass` placeholder on the same line, so rows and columns stay those of
the cell. Cells run by a non-Python cell magic (`%%bash`, `%%sql`) are left out. Writing a fix back
touches only the cells whose text changed, restores the magics, and keeps outputs, metadata and the
file's JSON layout.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ray_lint.declarations import Declaration, notebook_declaration
from ray_lint.diagnostics import Diagnostic, Edit, Fix, Position
from ray_lint.noqa import LINE_SPLIT

CELL_END = "# ray-lint: end of notebook cell"
MAGIC = "pass  # ray-lint: IPython magic"
MAGIC_CONTINUED = "# ray-lint: IPython magic, continued"
# Cell magics whose body is Python, as ruff treats them.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "pypy", "python", "python3"})
_ASSIGNED_MAGIC = re.compile(r"^\s*[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!]")
_ESCAPES = ("%", "!", "?")


class NotebookError(Exception):
    """A notebook that cannot be read as one (bad JSON, no cell list, ...)."""


class CellsChanged(Exception):
    """Fixed text whose cell structure or magics no longer match the notebook: not written back."""


@dataclass(frozen=True)
class Cell:
    """A code cell in the Python text: `index` is 1-based among all cells (markdown ones included,
    as ruff and Jupyter count them); `first_line` is where it starts in the Python text."""

    index: int
    first_line: int
    text: str  # the cell as written, magics included
    python: str  # the cell as the engine sees it
    magics: tuple[tuple[str, ...], ...]  # the original lines of each magic, in order


@dataclass(frozen=True)
class Notebook:
    raw: str  # the file's JSON text ("" for an editor's open notebook, which is never rendered)
    cells: tuple[Cell, ...]

    @classmethod
    def parse(cls, raw: str) -> Notebook:
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as error:
            raise NotebookError(f"is not a valid notebook: not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
        if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
            raise NotebookError("is not a valid notebook: it has no `cells` list")
        if not _is_python(document):
            return cls(raw, ())
        texts = []
        for index, cell in enumerate(document["cells"], start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(part, str) for part in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise NotebookError(f"is not a valid notebook: cell {index} has a source that is not text")
            texts.append((index, source))
        return cls.from_cells(texts, raw)

    @classmethod
    def from_cells(cls, texts: Iterable[tuple[int, str]], raw: str = "") -> Notebook:
        """A notebook from its code cells' (1-based index, text)."""
        cells, line = [], 1
        for index, text in texts:
            python, magics = _python_view(text)
            if python is None:
                continue
            cells.append(Cell(index, line, text, python, magics))
            line += python.count("\n") + 1  # the cell's lines, then its end marker
        return cls(raw, tuple(cells))

    @property
    def declared_ray(self) -> Declaration | None:
        """The notebook's own install of Ray (`!pip install "ray[data]==2.2.0"`), if it has one."""
        return notebook_declaration([line for cell in self.cells for magic in cell.magics for line in magic])

    @property
    def python(self) -> str:
        return "".join(f"{cell.python}{CELL_END}\n" for cell in self.cells)

    def locate(self, line: int) -> tuple[Cell, int] | None:
        """The cell holding `line` of the Python text, and the row within it (an end marker counts
        as the last row of its cell)."""
        for cell in reversed(self.cells):
            if line >= cell.first_line:
                rows = cell.python.count("\n")
                return cell, max(1, min(line - cell.first_line + 1, rows))
        return None

    def in_cell(self, diagnostic: Diagnostic) -> tuple[Cell, Diagnostic] | None:
        """The cell a diagnostic of the Python text is in, and the diagnostic with rows counted within
        that cell (fix edits and the noqa row too)."""
        located = self.locate(diagnostic.start.line)
        if located is None:
            return None
        cell, row = located
        shift = diagnostic.start.line - row

        def moved(position: Position) -> Position:
            return Position(position.line - shift, position.column)

        fix = diagnostic.fix
        if fix is not None:
            fix = Fix(fix.message, tuple(Edit(moved(e.start), moved(e.end), e.content) for e in fix.edits), fix.applicability)
        inside = diagnostic.end.line - shift <= cell.python.count("\n")
        return cell, dataclasses.replace(
            diagnostic,
            start=moved(diagnostic.start),
            end=moved(diagnostic.end) if inside else moved(diagnostic.start),
            fix=fix,
            noqa_line=None if diagnostic.noqa_line is None else diagnostic.noqa_line - shift,
        )

    def describe_line(self, line: int) -> str:
        located = self.locate(line)
        return f"cell {located[0].index}, line {located[1]}" if located else f"line {line}"

    def describer(self, fixed: str) -> Callable[[int], str]:
        """`describe_line` for the Python text as fixes leave it."""
        return self.after(fixed).describe_line if fixed != self.python else self.describe_line

    def after(self, fixed: str) -> Notebook:
        """The notebook as the fixed Python text leaves it (for positions of what is left to report)."""
        texts = {cell.index: cell.text for cell in self.cells}
        texts.update((cell.index, text) for cell, text in self.changed_cells(fixed))
        return Notebook.from_cells(sorted(texts.items()), self.raw)

    def changed_cells(self, fixed: str) -> list[tuple[Cell, str]]:
        """The cells whose text the fixed Python text changes, with their new text (magics restored).
        Raises CellsChanged when the fixes moved a cell boundary or a magic."""
        parts = fixed.split(f"{CELL_END}\n")
        if len(parts) != len(self.cells) + 1 or parts[-1]:
            raise CellsChanged("the fixes would move code between cells")
        changed = []
        for cell, python in zip(self.cells, parts):
            if python != cell.python:
                changed.append((cell, _restore(cell, python)))
        return changed

    def render(self, fixed: str) -> str:
        """The notebook file with the fixed Python text in its cells, laid out as it was."""
        document = json.loads(self.raw)  # a fresh copy; cells not changed keep their exact values
        for cell, text in self.changed_cells(fixed):
            entry = document["cells"][cell.index - 1]
            entry["source"] = text.splitlines(keepends=True) if isinstance(entry.get("source"), list) else text
        return _dump_like(document, self.raw)


def _is_python(document: dict[str, Any]) -> bool:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            return value[field].lower() == "python"
    return True


def _python_view(text: str) -> tuple[str | None, tuple[tuple[str, ...], ...]]:
    """The cell with each magic replaced by a placeholder (None for a cell that is not Python), and
    the magics' original lines."""
    lines = LINE_SPLIT.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    magic_rows: list[tuple[int, int]] = []
    body = 0  # where the Python starts: after the cell magics, which may be stacked (`%%capture`, then `%%time`)
    while (first := next((i for i in range(body, len(lines)) if lines[i].strip()), None)) is not None:
        if not lines[first].lstrip().startswith("%%"):
            break
        name = lines[first].lstrip()[2:].split(maxsplit=1)
        if not name or name[0] not in PYTHON_CELL_MAGICS:  # the body is run by another magic: `%%!`, `%%bash`
            return None, ()
        magic_rows.append((first, first))
        body = first + 1
    magic_rows += _line_magics(lines, skip=set(range(body)))
    view = list(lines)
    magics = []
    for start, end in sorted(magic_rows):
        magics.append(tuple(lines[start : end + 1]))
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        view[start] = indent + MAGIC
        for row in range(start + 1, end + 1):
            view[row] = MAGIC_CONTINUED
    return "".join(line + "\n" for line in view), tuple(magics)


def _line_magics(lines: list[str], skip: set[int]) -> list[tuple[int, int]]:
    """(first, last) row (0-based) of each IPython escape: a logical line that starts with `%`, `!` or
    `?`, ends with `?`, or assigns one (`x = !ls`). None of these is valid Python, so the token test
    cannot catch real code; code the tokenizer rejects falls back to a test of each line's start."""
    masked = ["" if row in skip else line for row, line in enumerate(lines)]
    found: list[tuple[int, int]] = []
    logical: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO("".join(line + "\n" for line in masked)).readline):
            # A logical line ends at NEWLINE: inside brackets a line break is an NL, and a `%` that starts the
            # next row (`"power=%.2f"` then `% power`) is an operator, as IPython reads it too.
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or (token.type == tokenize.NL and not logical):
                if logical and _is_magic(logical):
                    found.append((logical[0].start[0] - 1, token.start[0] - 1))
                logical = []
            elif token.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT) and token.string.strip():
                logical.append(token)  # (the pure-Python tokenizer yields stray spaces as error tokens)
    except (tokenize.TokenError, SyntaxError):
        return [
            (row, row)
            for row, line in enumerate(masked)
            if line.lstrip().startswith(_ESCAPES) or _ASSIGNED_MAGIC.match(line) or line.rstrip().endswith("?")
        ]
    return found


def _is_magic(tokens: list[tokenize.TokenInfo]) -> bool:
    strings = [token.string for token in tokens]
    if strings[0] in _ESCAPES or strings[-1] == "?":
        return True
    if "=" in strings:
        after = strings.index("=") + 1
        return after < len(strings) and strings[after] in ("%", "!")
    return False


def _restore(cell: Cell, python: str) -> str:
    """Put the magics back where their placeholders ended up; keep the cell's final-newline style."""
    out: list[str] = []
    magics = iter(cell.magics)
    for line in LINE_SPLIT.split(python)[:-1]:
        if line.strip() == MAGIC:
            original = next(magics, None)
            if original is None:
                raise CellsChanged(f"the fixes would change cell {cell.index}'s IPython magics")
            out.extend(original)
        elif line != MAGIC_CONTINUED:
            out.append(line)
    if next(magics, None) is not None:
        raise CellsChanged(f"the fixes would remove an IPython magic from cell {cell.index}")
    newline = next(iter(LINE_SPLIT.findall(cell.text)), "\n")
    text = newline.join(out)
    return text + newline if cell.text.endswith(("\n", "\r")) else text


def _dump_like(document: dict[str, Any], raw: str) -> str:
    """Serialize in the layout `raw` has (indent, key order, escaping, final newline, CRLF line ends);
    nbformat's own layout when none of those reproduces it."""
    crlf = "\r\n" in raw
    raw = raw.replace("\r\n", "\n")  # JSON strings hold no raw line ends, so this touches layout only
    original = json.loads(raw)
    second = raw.split("\n", 2)[1] if raw.count("\n") >= 2 else ""
    indent = len(second) - len(second.lstrip(" ")) or None
    for sort_keys in (True, False):
        for ensure_ascii in (False, True):
            for newline in ("\n", ""):
                dumped = json.dumps(original, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + newline
                if dumped == raw:
                    text = json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + newline
                    return text.replace("\n", "\r\n") if crlf else text
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
