"""End-to-end tests of the flake8 plugin (`RAY`): the real `flake8` command over files in a temporary
directory, so option parsing, config files, `# noqa`, selection and worker processes are flake8's own.
Where it matters, the findings are compared with `ray-lint check` on the same files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ray_lint import __version__

Command = Callable[..., "subprocess.CompletedProcess[str]"]  # conftest's `run`, and `flake8` below
Finding = tuple[str, int, int, str]  # (file, row, 1-based column, code)

FLAKE8 = (sys.executable, "-m", "flake8")

# One RAY001 finding on line 2, column 12 (1-based; `ray.get` after "results = [").
SNIPPET = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
MESSAGE = "`ray.get` in a loop waits for each task in turn"
# RAY001 findings after non-ASCII text (2-byte, 3-byte and 4-byte UTF-8, a tab) on the same line, so a
# byte-based or UTF-16 column would differ from the character column flake8 and ray-lint use.
NON_ASCII = (
    "import ray\n"
    "\n"
    "résultats = [ray.get(f.remote(x)) for x in xs]\n"
    'label = "日本語"; out = [ray.get(g.remote(y)) for y in ys]\n'
    'emoji = "🚀";\ttotal = sum(ray.get(h.remote(z)) for z in zs)\n'
    "\n"
    "\n"
    "def main(items):\n"
    "    out = []\n"
    "    for x in items:\n"
    "        r = f.remote(x)\n"
    '        log("ü")\n'
    "        out.append(ray.get(r))\n"
    "    return out\n"
)
# RAY010: every call goes to one stateless actor (RAY001 stays silent on it).
ACTOR = (
    "import ray\n\n\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\n\n"
    "m = M.remote()\nrefs = [m.predict.remote(x) for x in xs]\n"
)
# Two loops that wait on a task through a helper; RAY001 reports one only when the helper is configured
# as a blocking function (`mypkg.fetch` on line 5, `other.fn` on line 8). No `import ray` needed.
HELPERS = (
    "from mypkg import fetch\nfrom other import fn\n\n"
    "for x in xs:\n    fetch(f.remote(x))\n\n"
    "for y in ys:\n    fn(g.remote(y))\n"
)
EXTRA_FLAG = "--ray-lint-get-in-loop-extra-get-functions"
EXTRA_PYPROJECT = '[tool.ray-lint.rules.get-in-loop]\nextra-get-functions = ["mypkg.fetch"]\n'

_LINE = re.compile(r"^(?P<file>.+?):(?P<row>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) ")


@pytest.fixture
def flake8(run: Command, tmp_path: Path) -> Command:
    """`flake8(*args)`: the real flake8 in `tmp_path`, through conftest's `run` (clean environment)."""

    def _flake8(*args: str) -> subprocess.CompletedProcess[str]:
        return run(list(args), tmp_path, program=FLAKE8)

    return _flake8


def make_files(root: Path, files: Mapping[str, str]) -> list[str]:
    """Write `files` (name -> text) under `root`; return the names, to pass on a command line."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return list(files)


def findings(proc: subprocess.CompletedProcess[str], prefix: str = "RAY") -> set[Finding]:
    """The findings flake8 printed whose code starts with `prefix`; `./a.py` and `a.py` read the same."""
    found: set[Finding] = set()
    for line in proc.stdout.splitlines():
        match = _LINE.match(line)
        if match and match["code"].startswith(prefix):
            found.add((Path(match["file"]).as_posix(), int(match["row"]), int(match["col"]), match["code"]))
    return found


def ray_lint_json(run: Command, cwd: Path, *paths: str) -> set[Finding]:
    """What `ray-lint check` reports for `paths`, in the same shape as `findings`."""
    proc = run(["check", "--jobs", "1", "--no-cache", "--output-format", "json", *paths], cwd)
    assert proc.returncode in (0, 1), proc.stderr
    return {
        (Path(d["filename"]).as_posix(), d["location"]["row"], d["location"]["column"], d["code"])
        for d in json.loads(proc.stdout)
    }


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- findings and columns


def test_finding_line_matches_ray_lint(flake8, tmp_path):
    make_files(tmp_path, {"a.py": SNIPPET})
    proc = flake8("--select", "RAY", "a.py")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [f"a.py:2:12: RAY001 {MESSAGE}"]


def test_columns_equal_ray_lint_check_after_non_ascii(flake8, run, tmp_path):
    """flake8 takes 0-based columns and prints them 1-based: off by one, or counting bytes, would show here."""
    names = make_files(tmp_path, {"a.py": SNIPPET, "multi.py": NON_ASCII})
    expected = {("a.py", 2, 12, "RAY001")} | {
        ("multi.py", row, line.index("ray.get(") + 1, "RAY001")
        for row, line in enumerate(NON_ASCII.splitlines(), start=1)
        if "ray.get(" in line
    }
    assert ("multi.py", 5, 26, "RAY001") in expected  # after the emoji and the tab: 26 characters, 29 bytes

    proc = flake8("--select", "RAY", *names)
    assert proc.returncode == 1, proc.stderr
    assert findings(proc) == expected
    assert ray_lint_json(run, tmp_path, *names) == expected


def test_default_selection_includes_ray(flake8, tmp_path):
    make_files(tmp_path, {"a.py": SNIPPET + "y=1\n"})
    proc = flake8("a.py")
    assert proc.returncode == 1, proc.stderr
    assert findings(proc) == {("a.py", 2, 12, "RAY001")}
    assert ("a.py", 3, 2, "E225") in findings(proc, prefix="E")  # pycodestyle still runs beside it


def test_file_without_ray_has_no_ray_output(flake8, tmp_path):
    make_files(tmp_path, {"plain.py": "import os\n\nresults = [os.path.join(x) for x in os.listdir()]\n"})
    proc = flake8("plain.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


# ---------------------------------------------------------------------------- noqa and flake8's selection


def test_noqa_comments(flake8, tmp_path):
    """`# noqa` is flake8's to apply: the plugin must report every finding and let flake8 drop them."""
    loop = "[ray.get(f.remote(x)) for x in xs]"
    make_files(tmp_path, {
        "n.py": (
            "import ray\n"
            f"a = {loop}  # noqa\n"
            f"b = {loop}  # noqa: RAY001\n"
            f"c = {loop}  # noqa: E501\n"
            f"d = {loop}  # noqa: E501,RAY001\n"
            f"e = {loop}\n"
        ),
    })
    shown = flake8("--select", "RAY", "n.py")
    assert shown.returncode == 1, shown.stderr
    assert {row for _, row, _, _ in findings(shown)} == {4, 6}

    disabled = flake8("--select", "RAY", "--disable-noqa", "n.py")
    assert {row for _, row, _, _ in findings(disabled)} == {2, 3, 4, 5, 6}


def test_per_file_ignores(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET, "b.py": SNIPPET})
    proc = flake8("--select", "RAY", "--per-file-ignores=a.py:RAY001", *names)
    assert findings(proc) == {("b.py", 2, 12, "RAY001")}


@pytest.mark.parametrize("option", ["--extend-ignore", "--ignore"])
def test_ignore_options(flake8, tmp_path, option):
    make_files(tmp_path, {"a.py": SNIPPET})
    ignored = flake8(option, "RAY001", "a.py")
    assert ignored.returncode == 1, ignored.stderr  # pyflakes' F821 (`f`, `xs`) still reported
    assert findings(ignored) == set()
    assert findings(ignored, prefix="F")

    other = flake8(option, "RAY010", "a.py")
    assert findings(other) == {("a.py", 2, 12, "RAY001")}


def test_statistics_and_count(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET, "b.py": SNIPPET + "again = [ray.get(f.remote(x)) for x in xs]\n"})
    proc = flake8("--select", "RAY", "--statistics", "--count", *names)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"^3\s+RAY001 `ray\.get` in a loop waits", lines[-2]), lines
    assert lines[-1] == "3"


def test_version_lists_plugin(flake8, tmp_path):
    proc = flake8("--version")
    assert proc.returncode == 0, proc.stderr
    assert f"ray-lint: {__version__}" in proc.stdout


# ---------------------------------------------------------------------------- worker processes


def _many_files(root: Path) -> tuple[list[str], set[Finding]]:
    """Ten files with a RAY001 finding each on a different line, plus one RAY010 and one clean file."""
    files = {f"pkg/f{i}.py": "import ray\n" + "#\n" * i + "r = [ray.get(f.remote(x)) for x in xs]\n" for i in range(10)}
    files["pkg/actor.py"] = ACTOR
    files["pkg/clean.py"] = "import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n"
    expected = {(f"pkg/f{i}.py", i + 2, 6, "RAY001") for i in range(10)} | {("pkg/actor.py", 11, 9, "RAY010")}
    return make_files(root, files), expected


def test_parallel_jobs_match_serial(flake8, tmp_path):
    names, expected = _many_files(tmp_path)
    serial = flake8("--select", "RAY", "--jobs", "1", *names)
    parallel = flake8("--select", "RAY", "--jobs", "2", *names)
    assert serial.returncode == parallel.returncode == 1, serial.stderr + parallel.stderr
    assert findings(serial) == expected
    assert findings(parallel) == expected


def test_spawned_workers_configure_the_plugin(run, tmp_path):
    """Spawned workers do not inherit the parent's plugin state: each must configure it again, options
    included (the `HELPERS` finding only appears when the flag reaches the worker)."""
    names, expected = _many_files(tmp_path)
    names += make_files(tmp_path, {"pkg/helpers.py": HELPERS})
    script = (
        "import multiprocessing as m, sys; m.set_start_method('spawn', force=True); "
        "from flake8.main.cli import main; "
        f"raise SystemExit(main(['--select', 'RAY', '--jobs', '2', '{EXTRA_FLAG}=other.fn', *sys.argv[1:]]))"
    )
    proc = run(names, tmp_path, program=[sys.executable, "-c", script])
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert findings(proc) == expected | {("pkg/helpers.py", 8, 5, "RAY001")}


# ---------------------------------------------------------------------------- the cache


def test_a_second_run_reads_the_cache(flake8, tmp_path):
    """What the first run found is stored and read back (a message planted in the entry shows it); a
    changed file, another selection of rules or `--ray-lint-no-cache` lints the text again."""
    names = make_files(tmp_path, {"a.py": SNIPPET})
    assert findings(flake8("--select", "RAY", "--extend-ignore", "RAY001", *names)) == set()  # RAY001 did not run
    assert findings(flake8("--select", "RAY", *names)) == {("a.py", 2, 12, "RAY001")}
    entry = next(
        path for path in (tmp_path / ".ray_lint_cache").rglob("*.json") if MESSAGE in path.read_text(encoding="utf-8")
    )
    entry.write_text(entry.read_text(encoding="utf-8").replace(MESSAGE, "read from the cache"), encoding="utf-8")
    assert "a.py:2:12: RAY001 read from the cache" in flake8("--select", "RAY", *names).stdout
    assert MESSAGE in flake8("--select", "RAY", "--ray-lint-no-cache", *names).stdout

    make_files(tmp_path, {"a.py": "# moved down\n\n" + SNIPPET})
    proc = flake8("--select", "RAY", *names)
    assert findings(proc) == {("a.py", 4, 12, "RAY001")} and MESSAGE in proc.stdout


def test_files_no_rule_wants_get_no_entry(flake8, tmp_path):
    """A file without Ray code has no findings to keep: its text scan costs less than an entry's hash,
    read and write (most files of a project are such files)."""
    names = make_files(tmp_path, {"a.py": SNIPPET, "plain.py": "import os\n\nprint(os.getcwd())\n"})
    assert findings(flake8("--select", "RAY", *names)) == {("a.py", 2, 12, "RAY001")}
    assert len(list((tmp_path / ".ray_lint_cache").rglob("*.json"))) == 1


def test_cache_dir_option(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET})
    assert findings(flake8("--select", "RAY", "--ray-lint-cache-dir", "elsewhere", *names)) == {("a.py", 2, 12, "RAY001")}
    assert list((tmp_path / "elsewhere").rglob("*.json")) and not (tmp_path / ".ray_lint_cache").exists()


# ---------------------------------------------------------------------------- broken input


def test_syntax_error_is_flake8s_e999(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET, "broken.py": "import ray\nref = f.remote(\n"})
    proc = flake8("--jobs", "1", *names)
    assert_no_traceback(proc)
    assert proc.returncode == 1
    assert [code for file, _, _, code in findings(proc, prefix="E") if file == "broken.py"] == ["E999"]
    assert findings(proc) == {("a.py", 2, 12, "RAY001")}  # no RAY000 for broken.py: flake8 already said it


def test_invalid_config_gives_ray000(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET, "pyproject.toml": '[tool.ray-lint]\nselct = ["RAY"]\n'})
    proc = flake8(*names[:1])
    assert_no_traceback(proc)
    assert proc.returncode == 1
    problem = f"{tmp_path.resolve() / 'pyproject.toml'} [tool.ray-lint]: unknown key `selct`; did you mean `select`?"
    assert [line for line in proc.stdout.splitlines() if " RAY" in line] == [f"a.py:1:1: RAY000 {problem}"]
    assert findings(proc, prefix="F")  # the other plugins ran as usual


# ---------------------------------------------------------------------------- configuration


def test_rule_option_from_pyproject(flake8, run, tmp_path):
    make_files(tmp_path, {"m.py": HELPERS})
    assert findings(flake8("--select", "RAY", "m.py")) == set()  # nothing until the option names `fetch`

    make_files(tmp_path, {"pyproject.toml": EXTRA_PYPROJECT})
    expected = {("m.py", 5, 5, "RAY001")}
    assert ray_lint_json(run, tmp_path, "m.py") == expected
    assert findings(flake8("--select", "RAY", "m.py")) == expected


def test_flake8_option_overrides_pyproject(flake8, tmp_path):
    make_files(tmp_path, {"m.py": HELPERS, "pyproject.toml": EXTRA_PYPROJECT})
    assert findings(flake8("--select", "RAY", f"{EXTRA_FLAG}=other.fn", "m.py")) == {("m.py", 8, 5, "RAY001")}
    both = flake8("--select", "RAY", f"{EXTRA_FLAG}=other.fn,mypkg.fetch", "m.py")
    assert findings(both) == {("m.py", 5, 5, "RAY001"), ("m.py", 8, 5, "RAY001")}


@pytest.mark.parametrize("config_name", ["setup.cfg", ".flake8"])
def test_flake8_config_file_overrides_pyproject(flake8, tmp_path, config_name):
    make_files(tmp_path, {
        "m.py": HELPERS,
        "pyproject.toml": EXTRA_PYPROJECT,
        config_name: "[flake8]\nray-lint-get-in-loop-extra-get-functions = other.fn\n",
    })
    assert findings(flake8("--select", "RAY", "m.py")) == {("m.py", 8, 5, "RAY001")}


def test_pyproject_ignore_and_exact_select(flake8, tmp_path):
    names = make_files(tmp_path, {"a.py": SNIPPET, "actor.py": ACTOR})
    both = {("a.py", 2, 12, "RAY001"), ("actor.py", 11, 9, "RAY010")}
    assert findings(flake8("--select", "RAY", *names)) == both

    make_files(tmp_path, {"pyproject.toml": '[tool.ray-lint]\nignore = ["RAY010"]\n'})
    assert findings(flake8("--select", "RAY", *names)) == {("a.py", 2, 12, "RAY001")}
    assert findings(flake8(*names)) == {("a.py", 2, 12, "RAY001")}
    assert findings(flake8("--select", "RAY010", *names)) == {("actor.py", 11, 9, "RAY010")}
