"""Notebooks in process (`ray_lint.notebook`): code cells to one Python text and back. Rows in the text map
to (cell, row), IPython magics become placeholders on the same rows, fixes go back into the changed
cells only with the file's JSON layout kept. tests/test_notebooks.py drives the real command through
subprocesses; these run in a second, for `make check`."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

import pytest

from ray_lint.diagnostics import Applicability, Diagnostic, Edit, Fix, Position, Severity
from ray_lint.engine import fix_text, lint_text
from ray_lint.notebook import CELL_END, MAGIC, MAGIC_CONTINUED, CellsChanged, Notebook, NotebookError
from ray_lint.rule import Rule, rule_by_code_or_name
from ray_lint.source import decode

REMOTE = "import ray\n\n@ray.remote\ndef f(x):\n    return x * 2\n"
LOOP = "results = [ray.get(f.remote(x)) for x in xs]"
FIXED_LOOP = "results = ray.get([f.remote(x) for x in xs])"


def get_in_loop() -> Rule:
    rule = rule_by_code_or_name("RAY001")
    assert rule is not None
    return rule()


def code(source: str, as_string: bool = False) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "source": source if as_string else source.splitlines(keepends=True),
        "outputs": [{"name": "stdout", "output_type": "stream", "text": ["done\n"]}],
        "metadata": {"tags": ["keep"]},
        "execution_count": 3,
    }


def markdown(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "source": [source], "metadata": {}}


def document(*cells: dict[str, Any], language: str = "python") -> dict[str, Any]:
    return {"cells": list(cells), "metadata": {"kernelspec": {"language": language, "name": "k"}}, "nbformat": 4, "nbformat_minor": 5}


def raw(*cells: dict[str, Any], indent: int | None = 1, sort_keys: bool = True, newline: str = "\n") -> str:
    return json.dumps(document(*cells), indent=indent, sort_keys=sort_keys, ensure_ascii=False) + newline


def warning(line: int, column: int, end_line: int, end_column: int, fix: Fix | None = None, noqa_line: int | None = None) -> Diagnostic:
    return Diagnostic("RAY001", "get-in-loop", "m", Severity.WARNING, Position(line, column), Position(end_line, end_column), fix, noqa_line)


# ---------------------------------------------------------------------------- cells to text


def test_code_cells_become_one_text_with_end_markers() -> None:
    notebook = Notebook.parse(raw(markdown("# Title"), code(REMOTE), code("xs = range(4)\n" + LOOP), markdown("end")))
    assert [(cell.index, cell.first_line) for cell in notebook.cells] == [(2, 1), (3, 7)]  # markdown cells count
    assert notebook.python == f"{REMOTE}{CELL_END}\nxs = range(4)\n{LOOP}\n{CELL_END}\n"


def test_rows_map_to_cells_and_back() -> None:
    notebook = Notebook.parse(raw(code(REMOTE), markdown("text"), code("xs = range(4)\n" + LOOP)))
    assert notebook.locate(1) is not None and notebook.locate(1)[0].index == 1
    cell, row = notebook.locate(8)  # type: ignore[misc]
    assert (cell.index, row) == (3, 2)
    assert notebook.describe_line(8) == "cell 3, line 2"
    assert notebook.describe_line(6) == "cell 1, line 5"  # an end marker counts as its cell's last row
    assert notebook.locate(0) is None


def test_a_diagnostic_moves_into_its_cell_with_its_fix_and_noqa_row() -> None:
    notebook = Notebook.parse(raw(code(REMOTE), code("xs = range(4)\n" + LOOP)))
    edit = Edit(Position(8, 11), Position(8, 45), FIXED_LOOP[10:])
    moved = notebook.in_cell(warning(8, 12, 8, 32, Fix("batch", (edit,), Applicability.UNSAFE), noqa_line=8))
    assert moved is not None
    cell, inside = moved
    assert cell.index == 2
    assert (inside.start, inside.end, inside.noqa_line) == (Position(2, 12), Position(2, 32), 2)
    assert inside.fix is not None and inside.fix.edits[0].start == Position(2, 11)
    spilling = notebook.in_cell(warning(8, 12, 9, 1))  # ends on the end marker: clamped to its start
    assert spilling is not None and spilling[1].end == Position(2, 12)


@pytest.mark.parametrize(
    "cell, view",
    [
        ("%time warm = f(0)\nx = 1\n", f"{MAGIC}\nx = 1\n"),
        ("!pip install ray\n", f"{MAGIC}\n"),
        ("files = !ls\nf?\n?f\n", f"{MAGIC}\n{MAGIC}\n{MAGIC}\n"),
        ("for x in xs:\n    %time g(x)\n", f"for x in xs:\n    {MAGIC}\n"),
        ("%env A=0 \\\n    B=1\ny = 2\n", f"{MAGIC}\n{MAGIC_CONTINUED}\ny = 2\n"),
        ("%%time\nx = 1\n", f"{MAGIC}\nx = 1\n"),  # a cell magic whose body is Python
        ("x = 1 % 2\ny = x if x else not x\n", "x = 1 % 2\ny = x if x else not x\n"),  # Python stays Python
        # A `%` that starts a row inside brackets continues the expression (IPython reads it so too).
        ('row = {\n    "power=%.2f"\n    % power: 1,\n}\n!ls\n', f'row = {{\n    "power=%.2f"\n    % power: 1,\n}}\n{MAGIC}\n'),
        ("%%capture\n%%time\nx = 1\n", f"{MAGIC}\n{MAGIC}\nx = 1\n"),  # stacked cell magics, Python inside
    ],
    ids=["line", "shell", "assigned-and-help", "indented", "continued", "cell-time", "python", "percent-in-brackets", "stacked"],
)
def test_magics_become_placeholders_on_the_same_rows(cell: str, view: str) -> None:
    [parsed] = Notebook.from_cells([(1, cell)]).cells
    assert parsed.python == view
    assert parsed.python.count("\n") == cell.count("\n")


def test_cells_that_are_not_python_are_left_out() -> None:
    notebook = Notebook.parse(raw(code("%%bash\necho hi\n"), code("%%sql\nselect 1\n"), code("%%capture\n%%!\nwget x\n"), code("x = 1\n")))
    assert [cell.index for cell in notebook.cells] == [4]  # `%%capture` runs its body, and `%%!` makes that shell
    r_kernel = json.dumps(document(code("x <- 1\n"), language="R"))
    assert Notebook.parse(r_kernel).cells == ()


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not JSON"),
        ('{"cells": 3}', "no `cells` list"),
        ('{"cells": [{"cell_type": "code", "source": 7}]}', "cell 1 has a source that is not text"),
    ],
)
def test_bad_notebooks_say_why(text: str, message: str) -> None:
    with pytest.raises(NotebookError, match=message):
        Notebook.parse(text)


# ---------------------------------------------------------------------------- through the engine, and back


def test_a_finding_in_a_later_cell_uses_an_earlier_cells_remote_function() -> None:
    notebook = Notebook.parse(raw(markdown("# t"), code(REMOTE), code("xs = range(4)\n" + LOOP)))
    [finding] = lint_text(notebook.python, [get_in_loop()], describe_line=notebook.describe_line)
    moved = notebook.in_cell(finding)
    assert moved is not None
    assert (moved[0].index, moved[1].start, moved[1].noqa_line) == (3, Position(2, 12), 2)
    alone = Notebook.parse(raw(code("xs = range(4)\n" + LOOP)))  # no `import ray` in any cell
    assert lint_text(alone.python, [get_in_loop()]) == []


def test_noqa_in_a_cell_applies_to_its_row() -> None:
    notebook = Notebook.parse(raw(code(REMOTE), code("xs = range(4)\n" + LOOP + "  # noqa: RAY001")))
    assert lint_text(notebook.python, [get_in_loop()]) == []


@pytest.mark.parametrize("layout", ["nbformat", "indent-2", "indent-2-unsorted", "compact", "crlf"])
def test_a_fix_goes_back_into_its_cell_only(layout: str) -> None:
    cells = (code(REMOTE), markdown("between"), code("%time warm = f.remote(0)\nxs = range(4)\n" + LOOP + "\n"), code("untouched = 1\n", as_string=True))
    options = {
        "nbformat": {},
        "indent-2": {"indent": 2},
        "indent-2-unsorted": {"indent": 2, "sort_keys": False},
        "compact": {"indent": None, "newline": ""},
        "crlf": {},
    }[layout]
    text = raw(*cells, **options)  # type: ignore[arg-type]
    if layout == "crlf":
        text = text.replace("\n", "\r\n")
    notebook = decode(text.encode("utf-8"), PurePath("nb.ipynb")).notebook
    assert notebook is not None
    outcome = fix_text(notebook.python, [get_in_loop()], unsafe=True)
    [(cell, new_text)] = notebook.changed_cells(outcome.text)
    assert cell.index == 3
    assert new_text == "%time warm = f.remote(0)\nxs = range(4)\n" + FIXED_LOOP + "\n"  # the magic is back
    rendered = notebook.render(outcome.text)
    expected = document(*cells)
    expected["cells"][2]["source"] = new_text.splitlines(keepends=True)
    assert json.loads(rendered) == expected  # outputs, metadata and other cells as they were
    original_lines, rendered_lines = text.splitlines(keepends=True), rendered.splitlines(keepends=True)
    assert len(original_lines) == len(rendered_lines)
    differing = [(a, b) for a, b in zip(original_lines, rendered_lines) if a != b]
    assert len(differing) == 1 and LOOP in differing[0][0] and FIXED_LOOP in differing[0][1]
    assert notebook.after(outcome.text).cells[1].text == new_text


def test_fixes_that_move_cell_boundaries_or_magics_are_refused() -> None:
    notebook = Notebook.from_cells([(1, "%time x = 1\ny = 2\n"), (2, "z = 3\n")])
    python = notebook.python
    with pytest.raises(CellsChanged, match="between cells"):
        notebook.changed_cells(python.replace(f"{CELL_END}\n", "", 1))
    with pytest.raises(CellsChanged, match="remove an IPython magic"):
        notebook.changed_cells(python.replace(f"{MAGIC}\n", "", 1))
    with pytest.raises(CellsChanged, match="change cell 1's IPython magics"):
        notebook.changed_cells(python.replace("y = 2\n", f"{MAGIC}\n", 1))
    assert notebook.changed_cells(python) == []
