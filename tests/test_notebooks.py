"""End-to-end tests of Jupyter notebooks: positions per cell, IPython magics, suppressions, fixes and
`--add-noqa` written back into the cells only (outputs, metadata and JSON layout untouched), bad
notebooks, discovery and standard input. Every test drives the real `ray-lint` command."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., "subprocess.CompletedProcess[str]"]
Cell = dict[str, Any]

# The RAY001 line of test_cli_check.py: `ray.get` starts at column 12, after "results = [".
LOOP = "results = [ray.get(f.remote(x)) for x in xs]"
FIXED_LOOP = "results = ray.get([f.remote(x) for x in xs])"
OTHER = "other = [ray.get(f.remote(y)) for y in ys]"
FIXED_OTHER = "other = ray.get([f.remote(y) for y in ys])"
# Cell 1 of most notebooks here: the import and the remote function the later cells call.
REMOTE = "import ray\n\n\n@ray.remote\ndef f(x):\n    return x * 2\n"
MESSAGE = "`ray.get` in a loop waits for each task in turn"
# Outputs as Jupyter stores them; a fix must leave them exactly as they are.
OUTPUTS = [
    {"name": "stdout", "output_type": "stream", "text": ["[0, 2, 4, 6]\n"]},
    {
        "data": {
            "image/png": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==\n",
            "text/plain": ["<Figure size 640x480 with 1 Axes>"],
        },
        "metadata": {"needs_background": "light"},
        "output_type": "display_data",
    },
]


# ---------------------------------------------------------------------------- helpers


def code(
    source: str, *, as_string: bool = False, outputs: list[dict[str, Any]] | None = None, tags: list[str] | None = None
) -> Cell:
    """A code cell; its keys are deliberately not in sorted order, so that an unsorted dump differs
    from nbformat's. The source is a list of lines (as Jupyter writes it) unless `as_string`."""
    return {
        "source": source if as_string else source.splitlines(keepends=True),
        "cell_type": "code",
        "outputs": OUTPUTS if outputs is None else outputs,
        "metadata": {"tags": tags or [], "collapsed": False},
        "execution_count": 7,
    }


def markdown(source: str) -> Cell:
    return {"source": source.splitlines(keepends=True), "cell_type": "markdown", "metadata": {}}


def notebook(*cells: Cell, kernel_language: str | None = "python", language_info: str | None = "python") -> dict[str, Any]:
    """A notebook with cell ids, a kernel spec and language info (`None` leaves either out)."""
    metadata: dict[str, Any] = {"custom": {"zeta": 1, "alpha": [1, 2]}}
    if kernel_language is not None:
        metadata["kernelspec"] = {"display_name": kernel_language, "language": kernel_language, "name": "k"}
    if language_info is not None:
        metadata["language_info"] = {"name": language_info, "version": "3.11.7"}
    numbered = [{**cell, "id": f"cell-{index}"} for index, cell in enumerate(cells, start=1)]
    return {"nbformat_minor": 5, "nbformat": 4, "metadata": metadata, "cells": numbered}


def dump(
    document: dict[str, Any], *, indent: int = 1, sort_keys: bool = True, ensure_ascii: bool = False, newline: str = "\n"
) -> str:
    """The file text; the defaults are nbformat's own layout."""
    return json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + newline


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))  # no newline translation: the layout is what is tested
    return path


def write_notebook(path: Path, *cells: Cell, **layout: Any) -> Path:
    return write(path, dump(notebook(*cells), **layout))


def check_json(run: Run, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["check", "--jobs", "1", "--output-format", "json", *args], cwd)


def located(proc: subprocess.CompletedProcess[str]) -> set[tuple[str, str, int | None, int, int]]:
    """(filename, code, cell, row, column) of each finding in a JSON report."""
    return {(d["filename"], d["code"], d["cell"], d["location"]["row"], d["location"]["column"]) for d in json.loads(proc.stdout)}


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """The (old, new) pairs of raw lines that differ; the files must have as many lines."""
    old, new = before.split("\n"), after.split("\n")
    assert len(old) == len(new), "a fix added or removed lines of the notebook file"
    return [(a, b) for a, b in zip(old, new) if a != b]


def cell_text(cell: Cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


# ---------------------------------------------------------------------------- positions


def test_positions_are_per_cell_in_every_format(run: Run, tmp_path: Path) -> None:
    """Rows count from the cell's first line and the cell is named, as ruff reports notebooks;
    plain Python files in the same run keep `"cell": null`."""
    write_notebook(tmp_path / "nb.ipynb", markdown("# Title\n"), code(REMOTE), code("xs = range(4)\n" + LOOP))
    write(tmp_path / "plain.py", "import ray\n" + LOOP + "\n")

    proc = check_json(run, tmp_path, "nb.ipynb", "plain.py")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {("nb.ipynb", "RAY001", 3, 2, 12), ("plain.py", "RAY001", None, 2, 12)}
    by_file = {d["filename"]: d for d in json.loads(proc.stdout)}
    in_cell = by_file["nb.ipynb"]
    assert in_cell["end_location"] == {"row": 2, "column": 32}
    assert in_cell["noqa_row"] == 2
    (edit,) = in_cell["fix"]["edits"]
    assert (edit["location"], edit["end_location"]) == ({"row": 2, "column": 11}, {"row": 2, "column": 45})
    assert by_file["plain.py"]["cell"] is None

    concise = run(["check", "--jobs", "1", "--output-format", "concise", "nb.ipynb"], tmp_path)
    assert f"nb.ipynb:cell 3:2:12: RAY001 {MESSAGE}" in concise.stdout.splitlines()

    full = run(["check", "--jobs", "1", "--output-format", "full", "nb.ipynb"], tmp_path)
    lines = [line.strip() for line in full.stdout.splitlines()]
    assert f"nb.ipynb:cell 3:2:12: RAY001 {MESSAGE}" in lines
    # The snippet shows the cell's own lines, numbered within the cell.
    assert "1 | xs = range(4)" in lines
    assert f"2 | {LOOP}" in lines

    sarif = json.loads(run(["check", "--jobs", "1", "--output-format", "sarif", "nb.ipynb"], tmp_path).stdout)
    (result,) = sarif["runs"][0]["results"]
    assert result["properties"] == {"notebookCell": 3}
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    for p in (proc, concise, full):
        assert_no_traceback(p)


def test_cells_see_each_other(run: Run, tmp_path: Path) -> None:
    """The engine lints all code cells as one module: an import, a remote function or a helper
    defined in an earlier cell makes a loop in a later cell a finding."""
    write_notebook(tmp_path / "split.ipynb", code(REMOTE), code("xs = range(4)\n" + LOOP))
    write_notebook(tmp_path / "alone.ipynb", code("xs = range(4)\n" + LOOP))  # no `import ray` anywhere
    helper = "def fetch(x):\n    return ray.get(f.remote(x))\n"
    write_notebook(tmp_path / "helper.ipynb", markdown("# helper"), code(REMOTE), code(helper), code("results = [fetch(x) for x in xs]"))
    write_notebook(tmp_path / "no_helper.ipynb", code(REMOTE), code("results = [fetch(x) for x in xs]"))
    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {("split.ipynb", "RAY001", 2, 2, 12), ("helper.ipynb", "RAY001", 4, 1, 12)}


# ---------------------------------------------------------------------------- IPython magics


def test_magics_keep_rows_and_parse(run: Run, tmp_path: Path) -> None:
    """IPython syntax is not Python: every kind must neither break the parse (RAY000) nor shift
    the rows of the findings after it; a `%%bash` cell is not linted at all."""
    cells = [
        code(REMOTE),  # 1
        code("%time warm = f.remote(0)\n" + LOOP),  # 2
        code("%matplotlib inline\n" + LOOP),  # 3
        code("!pip install ray\n" + LOOP),  # 4
        code("files = !ls\n" + LOOP),  # 5
        code("f?\n" + LOOP),  # 6
        code("for x in xs:\n    %time g()\n" + LOOP),  # 7: indented, inside a loop body
        code("%%time\n" + LOOP + "\n"),  # 8: a cell magic whose body is Python
        code("%%bash\necho $((1 + 2))\nfor x in $(ls); do ray.get(f.remote(x)); done\n"),  # 9: not Python
        code("%env RAY_DEDUP_LOGS=0 \\\n    OTHER=1\n" + LOOP),  # 10: a line magic continued
        code("?f\nf??\nn = %time len(xs)\n" + LOOP),  # 11
        code("%load_ext autoreload\n%autoreload 2\n!echo it's fine\nx = !pwd\nfor x in xs:\n    !echo {x}\n    %time h(x)\n" + LOOP),  # 12
    ]
    write_notebook(tmp_path / "nb.ipynb", *cells)
    proc = check_json(run, tmp_path, "nb.ipynb")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {
        ("nb.ipynb", "RAY001", 2, 2, 12),
        ("nb.ipynb", "RAY001", 3, 2, 12),
        ("nb.ipynb", "RAY001", 4, 2, 12),
        ("nb.ipynb", "RAY001", 5, 2, 12),
        ("nb.ipynb", "RAY001", 6, 2, 12),
        ("nb.ipynb", "RAY001", 7, 3, 12),
        ("nb.ipynb", "RAY001", 8, 2, 12),
        ("nb.ipynb", "RAY001", 10, 3, 12),
        ("nb.ipynb", "RAY001", 11, 4, 12),
        ("nb.ipynb", "RAY001", 12, 8, 12),
    }

    # The report shows the cell as written, magics and all, never the placeholders.
    full = run(["check", "--jobs", "1", "nb.ipynb"], tmp_path)
    lines = [line.strip() for line in full.stdout.splitlines()]
    assert "1 | %time warm = f.remote(0)" in lines
    assert "1 | %%time" in lines
    assert "ray-lint: IPython magic" not in full.stdout
    assert_no_traceback(full)


def test_magic_cell_alone_is_the_cell_magic_that_decides(run: Run, tmp_path: Path) -> None:
    """Only a cell magic whose body is Python is linted: the same body under `%%bash` or
    `%%sql` gives nothing, and under `%%capture` or `%%timeit` gives the finding."""
    body = "import ray\n" + LOOP + "\n"
    write_notebook(
        tmp_path / "nb.ipynb",
        code("%%bash\n" + body),
        code("%%sql\nSELECT * FROM t WHERE f.remote(x)\n"),
        code("%%capture captured\n" + body),
        code("\n%%timeit -n 1\n" + body),  # blank lines before the magic are allowed
    )
    proc = check_json(run, tmp_path, "nb.ipynb")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {("nb.ipynb", "RAY001", 3, 3, 12), ("nb.ipynb", "RAY001", 4, 4, 12)}


# ---------------------------------------------------------------------------- markdown and noqa


def test_markdown_cells_are_ignored(run: Run, tmp_path: Path) -> None:
    """Markdown is prose: code in it is not linted, and a `# ray-lint: noqa` heading in it is not a
    file-level suppression."""
    write_notebook(
        tmp_path / "nb.ipynb",
        markdown("Do not write this:\n\n```python\nimport ray\nfor x in xs:\n    print(ray.get(f.remote(x)))\n```\n"),
        markdown("# ray-lint: noqa\n"),
        code(REMOTE),
        code(LOOP),
    )
    write_notebook(tmp_path / "prose.ipynb", markdown("import ray\nfor x in xs:\n    print(ray.get(f.remote(x)))\n"))
    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {("nb.ipynb", "RAY001", 4, 1, 12)}


def test_noqa_in_cells(run: Run, tmp_path: Path) -> None:
    """A line `# noqa` works in its cell only; `# ray-lint: noqa` in any code cell covers the whole
    notebook, as it would a file."""
    write_notebook(
        tmp_path / "lines.ipynb",
        code(REMOTE),
        code(f"{LOOP}  # noqa: RAY001\n{OTHER}  # noqa: RAY010\n"),  # row 2 reported
        code(f"{OTHER}\n"),  # reported
    )
    gpu = "@ray.remote\ndef train(c):\n    return Net().cuda()\n"
    write_notebook(
        tmp_path / "whole.ipynb",
        code(REMOTE),
        code(LOOP),
        code(gpu),  # a RAY040 finding: everything is suppressed, not only RAY001
        code("# ray-lint: noqa\nprint('done')\n"),
    )
    write_notebook(tmp_path / "codes.ipynb", code(REMOTE), code(LOOP), code(gpu), code("# ray-lint: noqa: RAY001\n"))
    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {
        ("lines.ipynb", "RAY001", 2, 2, 10),
        ("lines.ipynb", "RAY001", 3, 1, 10),
        ("codes.ipynb", "RAY040", 3, 1, 1),
    }


# ---------------------------------------------------------------------------- fixes


LAYOUTS = {
    "nbformat": {"indent": 1, "sort_keys": True},
    "indent-2-unsorted": {"indent": 2, "sort_keys": False},
    "ascii-escaped": {"indent": 1, "sort_keys": True, "ensure_ascii": True},
    "no-final-newline": {"indent": 1, "sort_keys": True, "newline": ""},
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_fix_rewrites_only_the_fixed_lines(run: Run, tmp_path: Path, layout: str) -> None:
    """A fix changes the fixed source lines and nothing else in the file: other cells, outputs,
    execution counts, metadata, the source's list-or-string form and the JSON layout stay."""
    document = notebook(
        markdown("# Ray démo\n\nSee `ray.get` below.\n"),
        code(REMOTE, tags=["setup"]),
        code(f"xs = range(4)\n{LOOP}\nprint(results)"),  # a list of lines, the last without "\n"
        code(f"ys = [1, 2]\n{OTHER}\n", as_string=True, outputs=[]),  # one string
        code("print('done')  # café\n", outputs=[]),
    )
    original = dump(document, **LAYOUTS[layout])
    if layout == "indent-2-unsorted":
        assert original != dump(document, indent=2, sort_keys=True)  # the variant is a real one
    target = write(tmp_path / "nb.ipynb", original)

    proc = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "--show-fixes", "nb.ipynb"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Found 2 problems (2 fixed, 0 remaining)." in proc.stdout
    assert "Fixed 2 × RAY001 in nb.ipynb" in proc.stderr
    fixed = target.read_bytes().decode("utf-8")

    # Byte for byte, only the two lines holding the fixed code differ.
    expected = [(line, line.replace(LOOP, FIXED_LOOP).replace(OTHER, FIXED_OTHER)) for line in original.split("\n")]
    assert changed_lines(original, fixed) == [(a, b) for a, b in expected if a != b]
    assert len(changed_lines(original, fixed)) == 2

    before, after = json.loads(original), json.loads(fixed)
    assert {k: v for k, v in after.items() if k != "cells"} == {k: v for k, v in before.items() if k != "cells"}
    assert [c for i, c in enumerate(after["cells"]) if i not in (2, 3)] == [c for i, c in enumerate(before["cells"]) if i not in (2, 3)]
    for index in (2, 3):
        assert {k: v for k, v in after["cells"][index].items() if k != "source"} == {
            k: v for k, v in before["cells"][index].items() if k != "source"
        }
    assert after["cells"][2]["source"] == ["xs = range(4)\n", f"{FIXED_LOOP}\n", "print(results)"]
    assert after["cells"][3]["source"] == f"ys = [1, 2]\n{FIXED_OTHER}\n"

    # Nothing is left to fix: a second run writes nothing.
    again = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "nb.ipynb"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.strip() == "All checks passed!"
    assert target.read_bytes().decode("utf-8") == fixed
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ray_lint_cache", "nb.ipynb"]  # no temporary files left
    for p in (proc, again):
        assert_no_traceback(p)


def test_fix_without_unsafe_fixes_leaves_the_notebook(run: Run, tmp_path: Path) -> None:
    """RAY001's fix is unsafe: `--fix` alone must not touch the file."""
    original = dump(notebook(code(REMOTE), code(LOOP)))
    target = write(tmp_path / "nb.ipynb", original)
    proc = run(["check", "--jobs", "1", "--fix", "nb.ipynb"], tmp_path)
    assert proc.returncode == 1
    assert "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in proc.stdout
    assert target.read_bytes().decode("utf-8") == original


def test_fix_next_to_magics_keeps_them(run: Run, tmp_path: Path) -> None:
    """A fix that replaces a whole `for` block puts back the magics around it and inside the
    enclosing block; a loop whose body holds a magic is not rewritten (the magic is a statement of
    the body, so the loop is not a bare append) but still reported."""
    before_after_block = "results = []\n%time pass\nfor x in xs:\n    results.append(ray.get(f.remote(x)))\n%time h()\nprint(results)\n"
    nested = "results = []\nif xs:\n    for x in xs:\n        results.append(ray.get(f.remote(x)))\n    %time g()\n    !echo done\n"
    magic_in_body = "results = []\nfor x in xs:\n    %time g()\n    results.append(ray.get(f.remote(x)))\n"
    continued = "%env A=1 \\\n    B=2\n" + LOOP + "\n"
    cell_magic = "%%time\n" + LOOP
    original = dump(notebook(code(REMOTE), code(before_after_block), code(nested), code(magic_in_body), code(continued), code(cell_magic)))
    target = write(tmp_path / "nb.ipynb", original)

    proc = run(["check", "--jobs", "1", "--output-format", "concise", "--fix", "--unsafe-fixes", "nb.ipynb"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Found 5 problems (4 fixed, 1 remaining)." in proc.stdout
    cells = [cell_text(c) for c in json.loads(target.read_text(encoding="utf-8"))["cells"]]
    assert cells == [
        REMOTE,
        "results = []\n%time pass\nresults.extend(ray.get([f.remote(x) for x in xs]))\n%time h()\nprint(results)\n",
        "results = []\nif xs:\n    results.extend(ray.get([f.remote(x) for x in xs]))\n    %time g()\n    !echo done\n",
        magic_in_body,
        "%env A=1 \\\n    B=2\n" + FIXED_LOOP + "\n",
        "%%time\n" + FIXED_LOOP,
    ]
    remaining = check_json(run, tmp_path, "nb.ipynb")
    assert located(remaining) == {("nb.ipynb", "RAY001", 4, 4, 20)}  # the loop with a magic in its body
    for p in (proc, remaining):
        assert_no_traceback(p)


def test_diff_labels_cells_and_writes_nothing(run: Run, tmp_path: Path) -> None:
    """`--diff` shows one hunk per changed cell, named `nb.ipynb:cell N`, and leaves the file."""
    original = dump(notebook(markdown("# t\n"), code(REMOTE), code(f"xs = range(4)\n{LOOP}"), code("print(xs)\n"), code(f"ys = xs\n{OTHER}\n")))
    target = write(tmp_path / "nb.ipynb", original)

    proc = run(["check", "--jobs", "1", "--diff", "--unsafe-fixes", "nb.ipynb"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line.startswith(("---", "+++"))] == [
        "--- a/nb.ipynb:cell 3",
        "+++ b/nb.ipynb:cell 3",
        "--- a/nb.ipynb:cell 5",
        "+++ b/nb.ipynb:cell 5",
    ]
    assert [line for line in lines if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        f"-{LOOP}",
        f"+{FIXED_LOOP}",
        f"-{OTHER}",
        f"+{FIXED_OTHER}",
    ]
    assert " xs = range(4)" in lines
    assert target.read_bytes().decode("utf-8") == original

    safe_only = run(["check", "--jobs", "1", "--diff", "nb.ipynb"], tmp_path)  # the fixes are unsafe
    assert safe_only.returncode == 0
    assert safe_only.stdout == ""
    assert target.read_bytes().decode("utf-8") == original
    for p in (proc, safe_only):
        assert_no_traceback(p)


def test_add_noqa_writes_into_the_right_cell_line(run: Run, tmp_path: Path) -> None:
    """`--add-noqa` puts the comment on the reported line of the right cell (after a magic, and on
    the first line of a call that spans several), and changes nothing else in the file."""
    multiline = "for x in xs:\n    print(ray.get(\n        f.remote(x)\n    ))"
    original = dump(notebook(markdown("# t\n"), code(REMOTE), code(f"%time warm = 1\n{LOOP}  # keep\n"), code(multiline)))
    target = write(tmp_path / "nb.ipynb", original)

    added = run(["check", "--jobs", "1", "--add-noqa", "nb.ipynb"], tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "Added 2 noqa directives." in added.stderr
    annotated = target.read_bytes().decode("utf-8")
    assert changed_lines(original, annotated) == [
        (f'    "{LOOP}  # keep\\n"', f'    "{LOOP}  # keep  # noqa: RAY001\\n"'),
        ('    "    print(ray.get(\\n",', '    "    print(ray.get(  # noqa: RAY001\\n",'),
    ]
    cells = json.loads(annotated)["cells"]
    assert cell_text(cells[2]) == f"%time warm = 1\n{LOOP}  # keep  # noqa: RAY001\n"

    after = run(["check", "--jobs", "1", "nb.ipynb"], tmp_path)
    assert after.returncode == 0, after.stdout
    assert after.stdout.strip() == "All checks passed!"
    again = run(["check", "--jobs", "1", "--add-noqa", "nb.ipynb"], tmp_path)
    assert "Added 0 noqa directives." in again.stderr
    assert target.read_bytes().decode("utf-8") == annotated
    for p in (added, after, again):
        assert_no_traceback(p)


# ---------------------------------------------------------------------------- bad notebooks


def test_bad_notebooks_are_file_errors(run: Run, tmp_path: Path) -> None:
    """A notebook that cannot be read is one RAY000 naming the problem, not a crash: the other
    files' findings are still reported. A notebook in another language is not Python: silence."""
    write(tmp_path / "good.py", "import ray\n" + LOOP + "\n")
    write(tmp_path / "broken.ipynb", '{"cells": [{"cell_type": "code",\n')
    write(tmp_path / "nocells.ipynb", '{"metadata": {}, "nbformat": 4}\n')
    write(tmp_path / "toplist.ipynb", "[1, 2]\n")
    write(tmp_path / "badsource.ipynb", '{"cells": [{"cell_type": "markdown", "source": "x"}, {"cell_type": "code", "source": 5}]}\n')
    (tmp_path / "latin1.ipynb").write_bytes(b'{"cells": [], "metadata": {"author": "Ren\xe9"}}\n')
    # R code that is not Python (the `{`) next to Ray-like text: linted as Python it would be a
    # RAY000 and a RAY001.
    r_cell = code("library(ray)\nif (TRUE) { print(1) }\nresults = [ray.get(f.remote(x)) for x in xs]\n")
    write(tmp_path / "r_kernel.ipynb", dump(notebook(r_cell, kernel_language="R", language_info=None)))
    write(tmp_path / "r_language_info.ipynb", dump(notebook(r_cell, kernel_language=None, language_info="R")))

    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert_no_traceback(proc)
    assert located(proc) == {
        ("good.py", "RAY001", None, 2, 12),
        ("broken.ipynb", "RAY000", None, 1, 1),
        ("nocells.ipynb", "RAY000", None, 1, 1),
        ("toplist.ipynb", "RAY000", None, 1, 1),
        ("badsource.ipynb", "RAY000", None, 1, 1),
        ("latin1.ipynb", "RAY000", None, 1, 1),
    }
    messages = {d["filename"]: d["message"] for d in json.loads(proc.stdout)}
    assert messages["broken.ipynb"].startswith("is not a valid notebook: not JSON (")
    assert "line 2" in messages["broken.ipynb"]
    assert messages["nocells.ipynb"] == "is not a valid notebook: it has no `cells` list"
    assert messages["toplist.ipynb"] == "is not a valid notebook: it has no `cells` list"
    assert messages["badsource.ipynb"] == "is not a valid notebook: cell 2 has a source that is not text"
    assert messages["latin1.ipynb"].startswith("is not a valid notebook: not UTF-8 (byte 0xe9")

    concise = run(["check", "--jobs", "1", "--output-format", "concise", "broken.ipynb"], tmp_path)
    assert concise.returncode == 1
    assert any(line.startswith("broken.ipynb:1:1: RAY000 is not a valid notebook: not JSON") for line in concise.stdout.splitlines())
    assert_no_traceback(concise)


def test_syntax_error_names_the_cell(run: Run, tmp_path: Path) -> None:
    """A syntax error is reported in its own cell, at its row there, even when later cells follow
    (the engine sees them as one text)."""
    write_notebook(tmp_path / "last.ipynb", markdown("# t\n"), code(REMOTE), code("a = 1\nref = f.remote(\n"))
    write_notebook(tmp_path / "middle.ipynb", code(REMOTE), code("ref = f.remote(\n"), code("y = 2\nz = 3\n"))
    write_notebook(tmp_path / "string.ipynb", code(REMOTE), code("note = '''open\n"), code("ref = f.remote(1)\n"))
    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {
        ("last.ipynb", "RAY000", 3, 2, 15),
        ("middle.ipynb", "RAY000", 2, 1, 15),
        ("string.ipynb", "RAY000", 2, 1, 8),
    }
    messages = {d["filename"]: d["message"] for d in json.loads(proc.stdout)}
    assert messages["last.ipynb"] == "syntax error: '(' was never closed"
    assert messages["string.ipynb"].startswith("syntax error: unterminated triple-quoted string literal")

    concise = run(["check", "--jobs", "1", "--output-format", "concise", "last.ipynb"], tmp_path)
    assert "last.ipynb:cell 3:2:15: RAY000 syntax error: '(' was never closed" in concise.stdout.splitlines()
    assert_no_traceback(concise)


# ---------------------------------------------------------------------------- discovery


def test_directory_discovery(run: Run, tmp_path: Path) -> None:
    """Directories yield notebooks along with Python files; Jupyter's `.ipynb_checkpoints/` copies
    are excluded by default (but linted when named), and other JSON files are not linted."""
    project = tmp_path / "proj"
    write_notebook(project / "notebooks" / "nb.ipynb", code(REMOTE), code(LOOP))
    write_notebook(project / "notebooks" / ".ipynb_checkpoints" / "nb-checkpoint.ipynb", code(REMOTE), code(LOOP))
    write(project / "notebooks" / "data.json", dump(notebook(code(REMOTE), code(LOOP))))
    write(project / "src" / "a.py", "import ray\n" + LOOP + "\n")

    proc = check_json(run, tmp_path, "proj")
    assert proc.returncode == 1, proc.stderr
    assert located(proc) == {("proj/notebooks/nb.ipynb", "RAY001", 2, 1, 12), ("proj/src/a.py", "RAY001", None, 2, 12)}
    inside = check_json(run, project)  # no path: the current directory
    assert located(inside) == {("notebooks/nb.ipynb", "RAY001", 2, 1, 12), ("src/a.py", "RAY001", None, 2, 12)}
    named = check_json(run, project, "notebooks/.ipynb_checkpoints/nb-checkpoint.ipynb")
    assert located(named) == {("notebooks/.ipynb_checkpoints/nb-checkpoint.ipynb", "RAY001", 2, 1, 12)}
    excluded = check_json(run, tmp_path, "--extend-exclude", "*.ipynb", "proj")
    assert located(excluded) == {("proj/src/a.py", "RAY001", None, 2, 12)}


def test_parallel_jobs_give_the_same_notebook_report(run: Run, tmp_path: Path) -> None:
    """Notebook results cross process boundaries with `--jobs`; the report must not change."""
    for index in range(10):
        padding = "# pad\n" * (index % 3)
        write_notebook(tmp_path / f"nb_{index:02d}.ipynb", markdown("m"), code(REMOTE), code(padding + LOOP))
    one = run(["check", "--jobs", "1", "--output-format", "json", "."], tmp_path)
    two = run(["check", "--jobs", "3", "--output-format", "json", "."], tmp_path)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    assert located(one) == {(f"nb_{i:02d}.ipynb", "RAY001", 3, 1 + i % 3, 12) for i in range(10)}


# ---------------------------------------------------------------------------- standard input


def test_stdin_notebook(run: Run, tmp_path: Path) -> None:
    """With `--stdin-filename x.ipynb`, standard input is read as a notebook: findings name cells,
    and `--fix` prints the fixed notebook JSON (only the fixed line differs) and writes no file."""
    original = dump(notebook(markdown("# t\n"), code(REMOTE), code(f"xs = range(4)\n{LOOP}\n")))
    args = ["check", "--jobs", "1", "-", "--stdin-filename", "nb.ipynb"]

    report = run([*args, "--output-format", "json"], tmp_path, stdin=original)
    assert report.returncode == 1, report.stderr
    assert located(report) == {("nb.ipynb", "RAY001", 3, 2, 12)}

    fixed = run([*args, "--fix", "--unsafe-fixes"], tmp_path, stdin=original)
    assert fixed.returncode == 0, fixed.stderr
    assert changed_lines(original, fixed.stdout) == [(f'    "{LOOP}\\n"', f'    "{FIXED_LOOP}\\n"')]
    assert cell_text(json.loads(fixed.stdout)["cells"][2]) == f"xs = range(4)\n{FIXED_LOOP}\n"

    unchanged = run([*args, "--fix"], tmp_path, stdin=original)  # only an unsafe fix: nothing changes
    assert unchanged.returncode == 1
    assert unchanged.stdout == original

    broken = run([*args, "--output-format", "json"], tmp_path, stdin='{"cells": [')
    assert broken.returncode == 1
    assert located(broken) == {("nb.ipynb", "RAY000", None, 1, 1)}
    assert list(tmp_path.iterdir()) == []  # nothing written for standard input
    for p in (report, fixed, unchanged, broken):
        assert_no_traceback(p)


# ---------------------------------------------------------------------------- non-ASCII


def test_columns_count_code_points(run: Run, tmp_path: Path) -> None:
    """Columns count characters, not UTF-8 bytes, as in Python files; the fix keeps the text."""
    accented = "é = [ray.get(f.remote(x)) for x in xs]"
    wide = 's = "日本語🚀"; ' + LOOP
    original = dump(notebook(code(REMOTE), code(accented), code(wide + "\n")))
    target = write(tmp_path / "nb.ipynb", original)

    proc = check_json(run, tmp_path, "nb.ipynb")
    assert proc.returncode == 1, proc.stderr
    start = len('s = "日本語🚀"; results = [') + 1
    assert located(proc) == {("nb.ipynb", "RAY001", 2, 1, 6), ("nb.ipynb", "RAY001", 3, 1, start)}
    ends = {d["cell"]: d["end_location"] for d in json.loads(proc.stdout)}
    assert ends == {2: {"row": 1, "column": 26}, 3: {"row": 1, "column": start + 20}}
    concise = run(["check", "--jobs", "1", "--output-format", "concise", "nb.ipynb"], tmp_path)
    assert f"nb.ipynb:cell 2:1:6: RAY001 {MESSAGE}" in concise.stdout.splitlines()

    fix = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "nb.ipynb"], tmp_path)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    cells = json.loads(target.read_text(encoding="utf-8"))["cells"]
    assert cell_text(cells[1]) == "é = ray.get([f.remote(x) for x in xs])"
    assert cell_text(cells[2]) == 's = "日本語🚀"; ' + FIXED_LOOP + "\n"
    assert len(changed_lines(original, target.read_text(encoding="utf-8"))) == 2
