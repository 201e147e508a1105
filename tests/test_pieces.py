"""A long file parsed in pieces gives, node for node, the tree a parse of the whole file gives: on real
code (the eval modules, the examples and a sample of the installed Ray package) and on the layouts
that could fool the split (strings and brackets over column-0 lines, decorators, `else`, comments,
continuations, a file's last lines). The engine finds a node nested too deeply in any piece."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from test_positions import real_files

from ray_lint import engine, pieces
from ray_lint.config import Settings


def pieces_of(text: str, monkeypatch: pytest.MonkeyPatch, lines: int = 3) -> list[str] | None:
    monkeypatch.setattr(pieces, "PIECE_LINES", lines)
    found = pieces.split(text, lambda tree, piece: None)
    return [piece for piece, _ in found] if found is not None else None


def assert_same_tree(text: str, monkeypatch: pytest.MonkeyPatch, lines: int = 3) -> int:
    """The number of pieces `text` was parsed in."""
    split = pieces_of(text, monkeypatch, lines)
    assert split is not None and "".join(split) == text
    module = pieces.parse(split)
    assert module is not None
    assert module.deep_equals(cst.parse_module(text))
    assert module.code == text
    return len(split)


LAYOUTS = {
    "blocks": "import ray\n\n\n" + "@ray.remote\ndef f(x):\n    return x\n\nresults = [ray.get(f.remote(i)) for i in range(10)]\n\n\n" * 6,
    "string": "a = 1\nb = 2\nc = 3\ns = '''\ntext\n\nin column 0\nx = 1\n'''\nd = 4\ne = 5\nf = 6\ng = 7\nh = 8\n",
    "brackets": "a = 1\nb = 2\nc = 3\nd = [\n1,\nx,\ny,\n]\ne = 5\nf = 6\ng = 7\nh = 8\ni = 9\n",
    "else": "a = 1\nb = 2\nc = 3\nif a:\n    pass\nelse:\n    pass\ntry:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\nz = 1\ny = 2\n",
    "decorators": "a = 1\nb = 2\nc = 3\n@d(\n    1,\n)\n@e\n\n# why\ndef f():\n    pass\n@g\nclass K:\n    pass\nx = 1\ny = 2\nz = 3\n",
    "comments": "a = 1\nb = 2\nc = 3\ndef f():\n    return 1\n    # end of f\n\n# about g\n\ndef g():\n    return 2\n    \n\nh = 1\ni = 2\nj = 3\n",
    "continuation": "a = 1\nb = 2\nc = 3\nd = 1 + \\\n2\ne = 5 \\\n\nf = 6\ng = 7\nh = 8\ni = 9\n",
    "tail": "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n\n# the end\n\n",
    "no-final-newline": "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 7",
    "two-space-indent": "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ndef f():\n  return 1\ng = 7\nh = 8\ni = 9\nj = 10\n",
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_layouts(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert assert_same_tree(LAYOUTS[name], monkeypatch) > 1


def test_real_files(monkeypatch: pytest.MonkeyPatch) -> None:
    files = real_files()
    assert len(files) > 40
    split = sum(assert_same_tree(path.read_text(encoding="utf-8"), monkeypatch, lines) > 1 for path in files for lines in (5, 40))
    assert split > 60


def test_files_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A carriage return, or code CPython rejects: one parse of the whole file, as before."""
    assert pieces_of("a = 1\r\nb = 2\r\n" * 10, monkeypatch) is None
    assert pieces_of("a = 1\n" * 10 + "def (:\n", monkeypatch) is None
    assert pieces_of("a = 1\n" * 5, monkeypatch, lines=1_000) == ["a = 1\n" * 5]  # short: one piece


def test_indentation_disagreement_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "a = 1\nb = 2\nc = 3\ndef f():\n  return 1\nd = 4\ne = 5\nf = 6\ng = 7\ndef g():\n    return 2\nh = 8\n"
    split = pieces_of(text, monkeypatch)
    assert split is not None and len(split) > 1
    assert pieces.parse(split) is None


def test_engine_finds_deep_nesting_in_a_later_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "x = " + "+".join(["1"] * 1_100) + "\n"
    text = "import ray\n" + "a = 1\n" * 20 + deep + "b = 2\n" * 20
    whole = engine._nesting_error(text, None)
    monkeypatch.setattr(pieces, "PIECE_LINES", 5)
    split = engine._split(text)
    assert split is not None and len(split[0]) > 1
    assert whole is not None and split[1] == whole
    assert whole.start.line == 22


def test_engine_lints_a_long_file_in_pieces(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = LAYOUTS["blocks"]
    rules = Settings(()).rules_for(tmp_path / "a.py")
    whole = engine.lint_text(text, rules)
    monkeypatch.setattr(pieces, "PIECE_LINES", 3)
    assert engine.lint_text(text, rules) == whole
    assert [d.code for d in whole] == ["RAY001"] * 6
