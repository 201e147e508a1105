"""The result cache, through the real command: a warm run reports exactly what a cold one does,
without importing libcst; edits, settings and versions invalidate; damaged, read-only and shared
caches still give correct results; `ray-lint clean` removes only a cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Runner

LOOP = """import ray


@ray.remote
def square(x):
    return x * x


results = []
for i in range(10):
    results.append(ray.get(square.remote(i)))
"""
CLEAN = "import ray\nprint(ray.__version__)\n"
NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": ["import ray\n", "@ray.remote\n", "def f(x):\n", "    return x\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": ["for i in range(3):\n", "    print(ray.get(f.remote(i)))\n"]},
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.ray-lint]\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "loop.py").write_text(LOOP, encoding="utf-8")
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "pkg" / "nb.ipynb").write_text(json.dumps(NOTEBOOK, indent=1), encoding="utf-8")
    return tmp_path


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/*/*/*.json"))


def findings(run: Runner, cwd: Path, *args: str) -> list[dict[str, object]]:
    proc = run(["check", "--output-format", "json", *args], cwd)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_warm_run_reports_what_a_cold_run_does_in_every_format(run: Runner, project: Path) -> None:
    cold = {fmt: run(["check", "--no-cache", "--output-format", fmt, "pkg"], project) for fmt in ("full", "json", "sarif")}
    assert not (project / ".ray_lint_cache").exists(), "--no-cache writes nothing"
    first = run(["check", "--output-format", "json", "pkg"], project)
    cache = project / ".ray_lint_cache"
    assert len(entries(cache)) == 3, "one entry per linted file"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert first.stdout == cold["json"].stdout
    for fmt, expected in cold.items():
        warm = run(["check", "--output-format", fmt, "pkg"], project)
        assert (warm.returncode, warm.stdout) == (expected.returncode, expected.stdout), fmt
    notebook = [f for f in json.loads(cold["json"].stdout) if f["filename"].endswith(".ipynb")]
    assert notebook and notebook[0]["cell"] == 2 and notebook[0]["location"]["row"] == 2


def test_a_full_cache_hit_neither_imports_libcst_nor_loads_the_rules(run: Runner, project: Path) -> None:
    probe = (
        "import sys\nfrom ray_lint.cli import main\ncode = main(sys.argv[1:])\n"
        "loaded = sorted(m for m in sys.modules if m == 'libcst' or m.startswith('ray_lint.rules.'))\n"
        "print('LOADED', loaded)\nraise SystemExit(code)\n"
    )
    program = [sys.executable, "-c", probe]
    cold = run(["check", "pkg"], project, program=program)
    assert "'libcst'" in cold.stdout, "the first run lints, so it must load libcst: the probe can see it"
    warm = run(["check", "pkg"], project, program=program)
    assert warm.returncode == 1 and "LOADED []" in warm.stdout
    (project / "pkg" / "clean.py").write_text(CLEAN + "# edited\n", encoding="utf-8")
    changed = run(["check", "pkg"], project, program=program)
    assert "'libcst'" in changed.stdout, "an edited file is linted again"


def test_an_edit_a_setting_or_a_per_file_ignore_change_is_seen(run: Runner, project: Path) -> None:
    assert [f["code"] for f in findings(run, project, "pkg/loop.py")] == ["RAY001"]
    (project / "pkg" / "loop.py").write_text(LOOP.replace("ray.get(square.remote(i))", "square.remote(i)"), encoding="utf-8")
    assert findings(run, project, "pkg/loop.py") == []
    (project / "pkg" / "loop.py").write_text(LOOP, encoding="utf-8")
    assert [f["code"] for f in findings(run, project, "pkg/loop.py")] == ["RAY001"]
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.ray-lint]\nignore = ["RAY001"]\n', encoding="utf-8")
    assert findings(run, project, "pkg/loop.py") == []
    pyproject.write_text('[tool.ray-lint]\nper-file-ignores = { "pkg/loop.py" = ["RAY001"] }\n', encoding="utf-8")
    assert findings(run, project, "pkg/loop.py") == []
    assert findings(run, project, "--extend-select", "RAY001", "--per-file-ignores", "other.py:RAY001", "pkg/loop.py") == []
    pyproject.write_text("[tool.ray-lint]\n", encoding="utf-8")
    assert [f["code"] for f in findings(run, project, "pkg/loop.py")] == ["RAY001"]


def test_a_bad_setting_is_reported_even_when_every_file_is_cached(run: Runner, project: Path) -> None:
    assert run(["check", "pkg"], project).returncode == 1
    (project / "pyproject.toml").write_text('[tool.ray-lint]\nselect = ["RAY999"]\n', encoding="utf-8")
    proc = run(["check", "pkg"], project)
    assert proc.returncode == 2
    assert "unknown rule selector `RAY999`" in proc.stderr
    (project / "pyproject.toml").write_text("[tool.ray-lint]\n", encoding="utf-8")
    assert run(["check", "pkg"], project).returncode == 1
    proc = run(["check", "--select", "RAY9", "pkg"], project)  # the command line is a layer too
    assert proc.returncode == 2 and "unknown rule selector `RAY9`" in proc.stderr


def _tamper(cache: Path) -> None:
    """Mark every cached finding, so that a run that uses the entries shows it."""
    for entry in entries(cache):
        data = json.loads(entry.read_text())
        for item in data["diagnostics"]:
            item["message"] = "TAMPERED " + item["message"]
        entry.write_text(json.dumps(data))


def test_entries_are_used_only_by_the_same_version(run: Runner, project: Path) -> None:
    cache = project / ".ray_lint_cache"
    assert run(["check", "pkg"], project).returncode == 1
    _tamper(cache)
    assert "TAMPERED" in run(["check", "pkg"], project).stdout, "the entries are read: the check below can fail"
    other = "import ray_lint, sys\nray_lint.__version__ = '99.0'\nfrom ray_lint.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    proc = run(["check", "pkg"], project, program=[sys.executable, "-c", other])
    assert proc.returncode == 1 and "TAMPERED" not in proc.stdout and "RAY001" in proc.stdout
    assert len([d for d in cache.iterdir() if d.is_dir()]) == 1, "another version's cache is removed"


def test_damaged_entries_are_linted_again(run: Runner, project: Path) -> None:
    cache = project / ".ray_lint_cache"
    expected = run(["check", "--no-cache", "pkg"], project)
    run(["check", "pkg"], project)
    damaged = entries(cache)
    for index, entry in enumerate(damaged):
        entry.write_bytes([b"", b"{not json", b'{"diagnostics": [{"code": 1}]}'][index % 3])
    again = run(["check", "pkg"], project)
    assert (again.returncode, again.stdout) == (expected.returncode, expected.stdout)
    assert all(json.loads(entry.read_text())["diagnostics"] is not None for entry in damaged), "rewritten"


def test_a_cache_that_cannot_be_created_is_not_used_and_does_not_fail(run: Runner, project: Path) -> None:
    (project / "blocker").write_text("a file where the cache directory would go\n", encoding="utf-8")
    proc = run(["check", "--cache-dir", "blocker/cache", "pkg"], project)
    assert proc.returncode == 1 and "RAY001" in proc.stdout and proc.stderr == ""


def test_cache_dir_option_and_environment_variable(run: Runner, project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    run(["check", "--cache-dir", elsewhere / "a", "pkg"], project)
    run(["check", "pkg"], project, env={"RAY_LINT_CACHE_DIR": str(elsewhere / "b")})
    assert len(entries(elsewhere / "a")) == 3 and len(entries(elsewhere / "b")) == 3
    assert not (project / ".ray_lint_cache").exists()
    (project / "pkg" / "deeper").mkdir()
    run(["check", "."], project / "pkg" / "deeper")
    assert (project / ".ray_lint_cache").is_dir(), "the default is the root of the linted path's project"


def test_the_default_cache_is_in_the_linted_project_not_the_working_directory(
    run: Runner, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    proc = run(["check", project / "pkg"], elsewhere)
    assert proc.returncode == 1, proc.stderr
    assert len(entries(project / ".ray_lint_cache")) == 3
    assert not (elsewhere / ".ray_lint_cache").exists()
    warm = run(["check", "--timings", project / "pkg"], elsewhere)
    assert "3 from the cache" in warm.stderr, warm.stderr


def test_clean_removes_the_cache_and_nothing_else(run: Runner, project: Path) -> None:
    run(["check", "pkg"], project)
    proc = run(["clean"], project)
    assert proc.returncode == 0 and f"Removed {project / '.ray_lint_cache'}" in proc.stdout
    assert not (project / ".ray_lint_cache").exists()
    assert "No cache at" in run(["clean"], project).stdout
    keep = project / "keep"
    keep.mkdir()
    (keep / "data.txt").write_text("mine\n", encoding="utf-8")
    proc = run(["clean", "--cache-dir", "keep"], project)
    assert proc.returncode == 2 and "not a ray-lint cache" in proc.stderr and "Traceback" not in proc.stderr
    assert (keep / "data.txt").read_text() == "mine\n"


def test_two_runs_at_once_share_the_cache_safely(run: Runner, project: Path) -> None:
    for index in range(40):
        (project / "pkg" / f"loop_{index}.py").write_text(LOOP.replace("range(10)", f"range({index})"), encoding="utf-8")
    expected = run(["check", "--no-cache", "--output-format", "json", "pkg"], project).stdout
    command = [sys.executable, "-m", "ray_lint", "check", "--output-format", "json", "--jobs", "2", "pkg"]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    runs = [subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [proc.communicate(timeout=120)[0] for proc in runs]
    assert outputs == [expected, expected]
    assert run(["check", "--output-format", "json", "pkg"], project).stdout == expected
    assert not list((project / ".ray_lint_cache").rglob("*.tmp")), "no temporary files are left"


def test_fix_and_add_noqa_still_change_files_whose_findings_are_cached(run: Runner, project: Path) -> None:
    run(["check", "pkg"], project)
    proc = run(["check", "--fix", "--unsafe-fixes", "pkg/loop.py"], project)
    assert proc.returncode == 0 and "ray.get(" in (project / "pkg" / "loop.py").read_text()
    assert "1 fixed" in proc.stdout
    (project / "pkg" / "loop.py").write_text(LOOP, encoding="utf-8")
    run(["check", "pkg"], project)
    assert run(["check", "--add-noqa", "pkg/loop.py"], project).returncode == 0
    assert "# noqa: RAY001" in (project / "pkg" / "loop.py").read_text()
    assert run(["check", "pkg/loop.py"], project).returncode == 0


def test_timings_name_each_phase_and_rule_and_say_what_came_from_the_cache(run: Runner, project: Path) -> None:
    proc = run(["check", "--timings", "--statistics", "--no-cache", "pkg"], project)
    assert proc.returncode == 1
    assert "RAY001" in proc.stdout and "get-in-loop" in proc.stdout, "--statistics still goes to standard output"
    for row in ("decode", "pre-filter", "parse", "semantic model", "RAY001 get-in-loop", "RAY010", "positions and fixes", "total"):
        assert row in proc.stderr
    assert "3 files." in proc.stderr
    run(["check", "pkg"], project)
    warm = run(["check", "--timings", "pkg"], project)
    assert "3 from the cache, not timed" in warm.stderr
    machine = run(["check", "--timings", "--no-cache", "--output-format", "json", "pkg"], project)
    assert json.loads(machine.stdout), "timings never mix into machine-readable output"
