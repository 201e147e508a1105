"""End-to-end tests of files ray-lint cannot lint as they are. Each bad file must give a clear RAY000
message naming it, never a traceback, and must not stop the findings of a good file in the same run."""

from __future__ import annotations

import ast
import json
import os
import random
from pathlib import Path

import pytest

SNIPPET = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
FIXED = "import ray\nresults = ray.get([f.remote(x) for x in xs])\n"
BOM = b"\xef\xbb\xbf"


def write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def lint(run, cwd: Path, *paths: str, extra: tuple[str, ...] = (), concise: bool = False) -> dict[str, list[dict]]:
    """Lint `paths` (default: the whole directory) next to a good file with one RAY001 finding; check
    that the good file's finding comes out and that nothing crashed (with `concise`, also that the
    concise report gives each finding as `file:row:column: CODE message`). Returns the JSON findings
    by file name."""
    write_bytes(cwd / "good.py", SNIPPET.encode())
    targets = list(paths) if paths else ["."]
    if paths:
        targets.insert(0, "good.py")
    procs = [run(["check", "--jobs", "1", "--output-format", "json", *extra, *targets], cwd)]
    if concise:
        procs.append(run(["check", "--jobs", "1", "--output-format", "concise", *extra, *targets], cwd))
    for p in procs:
        assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
        assert p.returncode == 1, p.stdout + p.stderr
    proc = procs[0]
    by_file: dict[str, list[dict]] = {}
    for finding in json.loads(proc.stdout):
        by_file.setdefault(finding["filename"], []).append(finding)
    good = by_file.get("good.py", [])
    assert [(d["code"], d["location"]["row"], d["location"]["column"]) for d in good] == [("RAY001", 2, 12)]
    if concise:
        lines = procs[1].stdout.splitlines()
        for filename, findings in by_file.items():
            for d in findings:
                line = f"{filename}:{d['location']['row']}:{d['location']['column']}: {d['code']} {d['message']}"
                assert line in lines
    return by_file


def only_file_error(by_file: dict[str, list[dict]], filename: str) -> dict:
    findings = by_file.get(filename, [])
    assert [d["code"] for d in findings] == ["RAY000"], findings
    return findings[0]


def test_syntax_error(run, tmp_path):
    source = "import ray\nref = f.remote(1)\nfor x in xs\n    pass\n"
    write_bytes(tmp_path / "bad.py", source.encode())
    by_file = lint(run, tmp_path)
    error = only_file_error(by_file, "bad.py")
    try:
        ast.parse(source)
    except SyntaxError as python:
        expected_message, expected_column = python.msg, python.offset
    assert "expected ':'" in expected_message
    assert error["message"] == f"syntax error: {expected_message}"
    assert error["location"] == {"row": 3, "column": expected_column}


def test_latin1_without_coding_cookie(run, tmp_path):
    # 0xe9 is "é" in latin-1 and not valid UTF-8; it is the 6th byte of line 3.
    write_bytes(tmp_path / "latin.py", b"import ray\nx = 1\n# caf\xe9\nref = f.remote(1)\n")
    error = only_file_error(lint(run, tmp_path), "latin.py")
    assert "not valid utf-8" in error["message"]
    assert "line 3" in error["message"]
    assert error["location"] == {"row": 3, "column": 6}


def test_latin1_in_first_line_without_coding_cookie(run, tmp_path):
    # A latin-1 header comment: the most common place for such bytes. Still not valid UTF-8, on line 1.
    write_bytes(tmp_path / "latin.py", b"# Auteur: Ren\xe9\nimport ray\nref = f.remote(1)\n")
    error = only_file_error(lint(run, tmp_path), "latin.py")
    assert "not valid utf-8" in error["message"]
    assert "line 1" in error["message"]
    assert error["location"]["row"] == 1


def test_latin1_with_coding_cookie(run, tmp_path):
    data = b"# -*- coding: latin-1 -*-\nimport ray\n# caf\xe9\nresults = [ray.get(f.remote(x)) for x in xs]\n"
    target = write_bytes(tmp_path / "latin.py", data)
    by_file = lint(run, tmp_path)
    assert [(d["code"], d["location"]["row"], d["location"]["column"]) for d in by_file["latin.py"]] == [("RAY001", 4, 12)]

    # Fixing keeps the file in its declared encoding.
    fixed = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "latin.py"], tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert target.read_bytes() == (
        b"# -*- coding: latin-1 -*-\nimport ray\n# caf\xe9\nresults = ray.get([f.remote(x) for x in xs])\n"
    )


def test_nul_byte(run, tmp_path):
    write_bytes(tmp_path / "nul.py", b"import ray\nx = 1\x00\nref = f.remote(1)\n")
    error = only_file_error(lint(run, tmp_path), "nul.py")
    assert "NUL" in error["message"]
    assert error["location"]["row"] == 2


def test_empty_file(run, tmp_path):
    write_bytes(tmp_path / "empty.py", b"")
    write_bytes(tmp_path / "blank.py", b"\n\n   \n")
    by_file = lint(run, tmp_path)
    assert set(by_file) == {"good.py"}


def test_large_file(run, tmp_path):
    lines = ["import ray"] + [f"value_{n} = {n}" for n in range(2, 20001)]
    lines[4999] = "a = [ray.get(f.remote(x)) for x in xs]"  # line 5000
    lines[19999] = "b = [ray.get(g.remote(y)) for y in ys]"  # line 20000, the last
    assert len(lines) == 20000
    write_bytes(tmp_path / "big.py", ("\n".join(lines) + "\n").encode())
    by_file = lint(run, tmp_path)
    assert [(d["code"], d["location"]["row"], d["location"]["column"]) for d in by_file["big.py"]] == [
        ("RAY001", 5000, 6),
        ("RAY001", 20000, 6),
    ]


def test_binary_file_with_python_name(run, tmp_path):
    noise = random.Random(20240501).randbytes(4096)
    data = noise[:1000] + b"\x00" + noise[1000:]
    write_bytes(tmp_path / "blob.py", data)
    error = only_file_error(lint(run, tmp_path), "blob.py")
    assert "NUL" in error["message"]
    assert error["location"]["row"] == data.count(b"\n", 0, data.find(b"\x00")) + 1


def test_directory_named_like_a_python_file(run, tmp_path):
    (tmp_path / "x.py").mkdir()
    error = only_file_error(lint(run, tmp_path), "x.py")
    assert "is a directory" in error["message"]


def test_utf8_bom(run, tmp_path):
    target = write_bytes(tmp_path / "bom.py", BOM + SNIPPET.encode())
    # On the first line, the BOM does not count as a column: `ray.get` is at column 24.
    write_bytes(tmp_path / "bom_first.py", BOM + b"import ray; results = [ray.get(f.remote(x)) for x in xs]\n")
    by_file = lint(run, tmp_path)
    assert [(d["code"], d["location"]["row"], d["location"]["column"]) for d in by_file["bom.py"]] == [("RAY001", 2, 12)]
    assert [(d["code"], d["location"]["row"], d["location"]["column"]) for d in by_file["bom_first.py"]] == [("RAY001", 1, 24)]

    fixed = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "bom.py"], tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert target.read_bytes() == BOM + FIXED.encode()


def test_unreadable_file(run, tmp_path):
    secret = write_bytes(tmp_path / "secret.py", SNIPPET.encode())
    os.chmod(secret, 0)
    try:
        readable = os.access(secret, os.R_OK)  # root reads it anyway
        by_file = lint(run, tmp_path)  # asserts no traceback and the good file's finding
        if not readable:
            error = only_file_error(by_file, "secret.py")
            assert "permission denied" in error["message"]
    finally:
        os.chmod(secret, 0o644)


def test_path_that_does_not_exist(run, tmp_path):
    by_file = lint(run, tmp_path, "missing.py", "missing_dir")
    assert "no such file" in only_file_error(by_file, "missing.py")["message"]
    assert "no such file" in only_file_error(by_file, "missing_dir")["message"]


def test_symlink_loop_directory(run, tmp_path):
    inner = tmp_path / "d"
    write_bytes(inner / "a.py", SNIPPET.encode())
    os.symlink(".", inner / "loop")
    by_file = lint(run, tmp_path)
    assert [(d["code"], d["location"]["row"]) for d in by_file["d/a.py"]] == [("RAY001", 2)]
    assert set(by_file) == {"good.py", "d/a.py"}  # reached once, not again through d/loop


def test_symlink_loop_file(run, tmp_path):
    """A symlink to itself named like a Python file: it cannot be read, which is a RAY000, not a crash."""
    (tmp_path / "d").mkdir()
    os.symlink("self.py", tmp_path / "d" / "self.py")
    by_file = lint(run, tmp_path)
    error = only_file_error(by_file, "d/self.py")
    assert "cannot be read" in error["message"]


def test_bad_files_together(run, tmp_path):
    """All of them in one run (and with worker processes): each reported, none hiding the others."""
    write_bytes(tmp_path / "syntax.py", b"import ray\nref = f.remote(\n")
    write_bytes(tmp_path / "latin.py", b"import ray\n# caf\xe9\nref = f.remote(1)\n")
    write_bytes(tmp_path / "nul.py", b"x = 1\x00\n")
    write_bytes(tmp_path / "empty.py", b"")
    (tmp_path / "dir.py").mkdir()
    write_bytes(tmp_path / "zz_good.py", SNIPPET.encode())
    for n in range(6):
        write_bytes(tmp_path / f"other_{n}.py", SNIPPET.encode())
    for jobs in ("1", "2"):
        by_file = lint(run, tmp_path, extra=("--jobs", jobs), concise=jobs == "1")
        assert set(by_file) == {"good.py", "zz_good.py", "syntax.py", "latin.py", "nul.py", "dir.py"} | {
            f"other_{n}.py" for n in range(6)
        }
        assert [d["code"] for d in by_file["zz_good.py"]] == ["RAY001"]
        for name in ("syntax.py", "latin.py", "nul.py", "dir.py"):
            assert [d["code"] for d in by_file[name]] == ["RAY000"], name


# ---------------------------------------------------------------------------- hostile input corpus (issue 9)

RAY_HEADER = "import ray\nref = f.remote(1)\n"  # makes the rules want the file, so RAY000 reports it


# Syntax errors of every kind CPython's parser reports (each body follows RAY_HEADER's two lines).
SYNTAX_ERRORS = {
    "unclosed_bracket": "x = (1,\n",
    "unterminated_string": "x = 'abc\n",
    "unterminated_triple_quoted": "x = \"\"\"abc\n",
    "unexpected_indent": "  x = 1\n",
    "unindent_mismatch": "if x:\n        a = 1\n    b = 2\n",
    "missing_indented_block": "for i in range(3):\nbreak\n",
    "invalid_character": "x = 1 \u20ac 2\n",
    "unmatched_bracket": "x = 1)\n",
    "assignment_to_call": "f() = 1\n",
    "augmented_assignment_to_tuple": "a, b += 1\n",
    "delete_call": "del f()\n",
    "walrus_as_statement": "x := 1\n",
    "keyword_as_name": "class = 1\n",
    "default_before_non_default": "def g(a=1, b):\n    pass\n",
    "bad_parameter_list": "def g(:\n",
    "f_string": "x = f\"{\"\n",
    "continuation_at_eof": "x = 1 \\",
    "else_without_if": "else:\n    pass\n",
    "decorator_without_definition": "@dec\nx = 1\n",
    "python2_print": "print 'hello'\n",
    "conditional_without_else": "x = 1 if y\n",
    "yield_in_lambda": "lambda x: yield\n",
    "empty_comprehension_source": "x = [i for i in]\n",
    "bare_import": "import\n",
    "octal_without_prefix": "x = 0777\n",
    "double_underscore_in_number": "x = 1__0\n",
}


def test_syntax_errors_of_every_kind(run, tmp_path):
    """Each is reported as Python words it, at Python's line and column, all in one run."""
    for name, body in SYNTAX_ERRORS.items():
        write_bytes(tmp_path / f"{name}.py", (RAY_HEADER + body).encode())
    by_file = lint(run, tmp_path, concise=True)
    for name, body in SYNTAX_ERRORS.items():
        with pytest.raises(SyntaxError) as python:
            ast.parse(RAY_HEADER + body)
        error = only_file_error(by_file, f"{name}.py")
        assert error["message"] == f"syntax error: {python.value.msg}", name
        assert error["location"] == {"row": python.value.lineno, "column": python.value.offset}, name


def test_errors_only_python_compiler_finds_are_left_to_python(run, tmp_path):
    """libcst parses these and CPython's parser does too (or, for a non-ASCII bytes literal, only CPython
    objects): they fail when Python compiles or runs them, and ray-lint lints them as written."""
    for name, body in {
        "break_outside_loop": "break\n",
        "return_outside_function": "return 1\n",
        "nonlocal_at_module_level": "nonlocal x\n",
        "duplicate_argument": "def g(x, x):\n    pass\n",
        "non_ascii_bytes": "x = b'\u00e9'\n",
    }.items():
        write_bytes(tmp_path / f"{name}.py", (RAY_HEADER + body + "for i in range(3):\n    ray.get(f.remote(i))\n").encode())
    by_file = lint(run, tmp_path)
    assert {name: [d["code"] for d in findings] for name, findings in by_file.items() if name != "good.py"} == {
        f"{name}.py": ["RAY001"]
        for name in ("break_outside_loop", "return_outside_function", "nonlocal_at_module_level", "duplicate_argument", "non_ascii_bytes")
    }



def test_code_python_warns_about_is_linted_quietly(run, tmp_path):
    """CPython parses each file before libcst (for its nesting limits). Its warnings are not ours to print,
    and under `-W error` (PYTHONWARNINGS=error) they must not turn valid code into a syntax error."""
    write_bytes(tmp_path / "warns.py", (RAY_HEADER + "z = '\\d'\nfor i in range(3):\n    ray.get(f.remote(i))\n").encode())
    for warnings in ("default", "error"):
        proc = run(["check", "--jobs", "1", "--output-format", "concise", "warns.py"], tmp_path, env={"PYTHONWARNINGS": warnings})
        assert proc.returncode == 1 and "Warning" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("warns.py")] == ["RAY001"]


def test_python2_code(run, tmp_path):
    write_bytes(tmp_path / "print2.py", (RAY_HEADER + 'print "x"\n').encode())
    write_bytes(tmp_path / "exec2.py", (RAY_HEADER + 'exec "code"\n').encode())
    write_bytes(tmp_path / "backticks.py", (RAY_HEADER + "y = `x`\n").encode())
    by_file = lint(run, tmp_path, concise=True)
    assert "Missing parentheses in call to 'print'" in only_file_error(by_file, "print2.py")["message"]
    assert "Missing parentheses in call to 'exec'" in only_file_error(by_file, "exec2.py")["message"]
    error = only_file_error(by_file, "backticks.py")
    assert error["message"].startswith("syntax error")
    assert error["location"]["row"] == 3


def test_mixed_tabs_and_spaces(run, tmp_path):
    write_bytes(tmp_path / "tabs.py", (RAY_HEADER + "if True:\n\tx = 1\n        y = 2\n").encode())
    error = only_file_error(lint(run, tmp_path), "tabs.py")
    assert error["message"] == "syntax error: inconsistent use of tabs and spaces in indentation"
    assert error["location"]["row"] == 5


def test_100_mb_file(run, tmp_path):
    with open(tmp_path / "huge.py", "wb") as out:
        out.write(RAY_HEADER.encode())
        out.truncate(100 * 2**20)  # sparse: quick to make
    error = only_file_error(lint(run, tmp_path), "huge.py")
    assert error["message"] == "is 100.0 MiB, over the 10 MiB limit; skipped"


def test_line_of_1_mb(run, tmp_path):
    source = 'import ray\nx = "' + "a" * 2**20 + '"\nfor i in range(3):\n    ray.get(f.remote(i))\n'
    write_bytes(tmp_path / "long_line.py", source.encode())
    by_file = lint(run, tmp_path)
    assert [(d["code"], d["location"]["row"]) for d in by_file["long_line.py"]] == [("RAY001", 4)]


def test_blocks_nested_1000_deep(run, tmp_path):
    body = "".join("    " * depth + "if True:\n" for depth in range(1000)) + "    " * 1000 + "pass\n"
    write_bytes(tmp_path / "blocks.py", (RAY_HEADER + body).encode())
    error = only_file_error(lint(run, tmp_path), "blocks.py")
    assert error["message"] == "syntax error: too many levels of indentation"  # Python's limit is 100


def test_brackets_nested_1000_deep(run, tmp_path):
    """CPython refuses more than 200 nested brackets; libcst would parse them. Python's verdict wins."""
    write_bytes(tmp_path / "brackets.py", (RAY_HEADER + "x = " + "[" * 1000 + "]" * 1000 + "\n").encode())
    error = only_file_error(lint(run, tmp_path), "brackets.py")
    assert error["message"] == "syntax error: too many nested parentheses"
    assert error["location"]["row"] == 3


@pytest.mark.parametrize(
    "expression",
    [
        "+".join(["1"] * 30_000),  # libcst's parse took over 2 minutes, and crashed the process at 300,000
        "(" + " +\n    ".join(["1"] * 30_000) + ")",  # the same, one term per line
        " if c else ".join(["a"] * 30_000),
        "f" + "()" * 30_000,
        "a" + ".b" * 30_000,
    ],
    ids=["one-line-sum", "multi-line-sum", "conditional-chain", "call-chain", "attribute-chain"],
)
def test_expressions_too_deep_for_python(run, tmp_path, expression):
    """Expressions nested beyond CPython's limits are refused at once with Python's own reason; libcst
    has no limit, and its parse time grows with the cube of the depth until its native stack overflows."""
    write_bytes(tmp_path / "deep.py", (RAY_HEADER + "x = " + expression + "\n").encode())
    error = only_file_error(lint(run, tmp_path), "deep.py")
    assert error["message"] == "syntax error: nested too deeply for Python's parser; ray-lint lints up to 1000 levels"


@pytest.mark.parametrize("shape", ["+", " if c else ", "."])
def test_nesting_limit(run, tmp_path, shape):
    """Within ray-lint's limit (1,000 levels; libcst's parse at that depth takes a fraction of a second)
    a deep expression is linted, findings after it included; over it, the file is refused with the line."""
    tail = "\nfor i in range(3):\n    ray.get(f.remote(i))\n"
    write_bytes(tmp_path / "within.py", (RAY_HEADER + "x = " + shape.join(["a"] * 950) + tail).encode())
    write_bytes(tmp_path / "over.py", (RAY_HEADER + "\n" + "x = " + shape.join(["a"] * 1100) + tail).encode())
    by_file = lint(run, tmp_path)
    assert [d["code"] for d in by_file["within.py"]] == ["RAY001"]
    error = only_file_error(by_file, "over.py")
    assert error["message"] == "nested more than 1000 levels deep; not linted (libcst's parse time grows with the cube of the depth)"
    assert error["location"]["row"] == 4


def test_broken_notebooks(run, tmp_path):
    write_bytes(tmp_path / "not_json.ipynb", b"not json {")
    write_bytes(tmp_path / "no_cells.ipynb", b'{"foo": 1}')
    write_bytes(tmp_path / "list.ipynb", b"[1, 2]")
    write_bytes(tmp_path / "bad_source.ipynb", b'{"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4}')
    by_file = lint(run, tmp_path, concise=True)
    assert only_file_error(by_file, "not_json.ipynb")["message"].startswith("is not a valid notebook: not JSON")
    assert only_file_error(by_file, "no_cells.ipynb")["message"] == "is not a valid notebook: it has no `cells` list"
    assert only_file_error(by_file, "list.ipynb")["message"] == "is not a valid notebook: it has no `cells` list"
    assert only_file_error(by_file, "bad_source.ipynb")["message"] == "is not a valid notebook: cell 1 has a source that is not text"


def test_pyproject_that_is_not_toml(run, tmp_path):
    write_bytes(tmp_path / "good.py", SNIPPET.encode())
    # With a `[tool.ray-lint` table the run cannot know its settings: exit 2, naming the file.
    write_bytes(tmp_path / "pyproject.toml", b'[tool.ray-lint\nselect = ["RAY"\n')
    proc = run(["check", "--jobs", "1", "good.py"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pyproject.toml: not valid TOML" in proc.stderr
    # Without one, the file is not ray-lint's configuration: it is ignored and the run goes on.
    write_bytes(tmp_path / "pyproject.toml", b'[project]\nname = "x"\n[[broken\n')
    proc = run(["check", "--jobs", "1", "--output-format", "json", "good.py"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [d["code"] for d in json.loads(proc.stdout)] == ["RAY001"]


# ---------------------------------------------------------------------------- fix safety (issue 9)


def test_fix_keeps_crlf_mode_and_leaves_no_temporary_files(run, tmp_path):
    target = write_bytes(tmp_path / "crlf.py", SNIPPET.replace("\n", "\r\n").encode())
    os.chmod(target, 0o640)
    proc = run(["check", "--jobs", "1", "--no-cache", "--fix", "--unsafe-fixes", "crlf.py"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_bytes() == FIXED.replace("\n", "\r\n").encode()
    assert os.stat(target).st_mode & 0o7777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crlf.py"]


def test_unsafe_fix_needs_unsafe_fixes(run, tmp_path):
    target = write_bytes(tmp_path / "bad.py", SNIPPET.encode())
    proc = run(["check", "--jobs", "1", "--no-cache", "--fix", "bad.py"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert target.read_text() == SNIPPET  # RAY001's fix is unsafe: not applied
    proc = run(["check", "--jobs", "1", "--no-cache", "--fix", "--unsafe-fixes", "bad.py"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_text() == FIXED
