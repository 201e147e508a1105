"""The lint path never imports Ray, even where Ray would import.

A fake `ray` package goes on PYTHONPATH; importing it (from any process, workers included) writes a
marker file. The command line is then run over Ray code in every mode that lints, and the marker
must not exist afterwards, while the findings still come out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ray_lint.api import PARALLEL_MIN_FILES_PER_JOB

RAY_LINT = Path(sys.executable).parent / "ray-lint"  # the console script of the test environment

_LEAKY_ENV = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH",
    "RAY_LINT_OUTPUT_FORMAT", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
)

FAKE_RAY_INIT = '''\
import os, sys
with open({marker!r}, "a", encoding="utf-8") as _out:
    _out.write(f"pid={{os.getpid()}} argv={{sys.argv!r}}\\n")
'''

# Files of Ray code and the RAY001 rows each one must report. `helpers.fetch` is flagged only
# because the project's pyproject.toml names it in `extra-get-functions`.
SOURCES: dict[str, tuple[str, list[int]]] = {
    "comprehension.py": ("import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n", [2]),
    "append_loop.py": ("import ray\nfor x in xs:\n    results.append(ray.get(f.remote(x)))\n", [3]),
    "aliased.py": ("import ray as r\ni = 0\nwhile i < n:\n    print(r.get(f.remote(i)))\n    i += 1\n", [4]),
    "from_import.py": ("from ray import get as fetch\nfor x in xs:\n    print(fetch(f.options(num_cpus=2).remote(x)))\n", [3]),
    "actor.py": ("import ray\nworkers = [Worker.remote() for _ in range(4)]\nfor w in workers:\n    print(ray.get(w.step.remote()))\n", [4]),
    "optional_import.py": (
        "try:\n    import ray\nexcept ImportError:\n    ray = None\n\nfor x in xs:\n    print(ray.get(f.remote(x)))\n",
        [7],
    ),
    "configured_helper.py": ("import ray\nfrom helpers import fetch\nfor x in xs:\n    print(fetch(f.remote(x)))\n", [4]),
    "good_batch.py": ("import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n", []),
    "good_wait.py": (
        "import ray\npending = [f.remote(x) for x in xs]\nwhile pending:\n"
        "    ready, pending = ray.wait(pending)\n    print(ray.get(ready[0]))\n",
        [],
    ),
    "sequential.py": ("import ray\nx = 0\nfor _ in range(10):\n    x = ray.get(step.remote(x))\n", []),
    "decorated.py": (
        "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\n"
        "def main(xs):\n    return {k: ray.get(f.remote(k)) for k in xs}\n",
        [8],
    ),
    "no_ray_here.py": ("for x in xs:\n    ray.get(f.remote(x))\n", []),
}

PYPROJECT = '[tool.ray-lint]\n\n[tool.ray-lint.rules.get-in-loop]\nextra-get-functions = ["helpers.fetch"]\n'


def expected_findings() -> list[tuple[str, str, int]]:
    return sorted(("RAY001", name, row) for name, (_, rows) in SOURCES.items() for row in rows)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ray-was-imported.txt"


@pytest.fixture
def env(tmp_path: Path, marker: Path) -> dict[str, str]:
    """The environment of every command here: a fake, importable `ray` first on PYTHONPATH."""
    site = tmp_path / "fake-site"
    (site / "ray").mkdir(parents=True)
    (site / "ray" / "__init__.py").write_text(FAKE_RAY_INIT.format(marker=str(marker)))
    environment = {key: value for key, value in os.environ.items() if key not in _LEAKY_ENV}
    environment["PYTHONPATH"] = str(site)
    return environment


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    for name, (text, _) in SOURCES.items():
        (root / name).write_text(text)
    return root


def run(args: list[object], cwd: Path, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"command: {proc.args}\nexit: {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def assert_ray_not_imported(marker: Path) -> None:
    assert not marker.exists(), "Ray was imported on the lint path:\n" + marker.read_text()


def findings(report: str) -> list[tuple[str, str, int]]:
    return sorted((f["code"], Path(f["filename"]).name, f["location"]["row"]) for f in json.loads(report))


def test_the_fake_ray_is_importable_and_leaves_the_marker(env: dict[str, str], marker: Path, tmp_path: Path) -> None:
    """The check below can fail: with this environment, importing Ray does write the marker."""
    proc = run([sys.executable, "-c", "import ray; print(ray.__file__)"], tmp_path, env)
    assert proc.returncode == 0, explain(proc)
    assert Path(proc.stdout.strip()).parent.parent == tmp_path / "fake-site"
    assert marker.exists()


@pytest.mark.parametrize("jobs", [1, 2])
def test_check_reports_findings_without_importing_ray(
    jobs: int, env: dict[str, str], marker: Path, project: Path
) -> None:
    # With 2 jobs, enough files that lint_paths really starts worker processes.
    assert len(SOURCES) >= 2 * PARALLEL_MIN_FILES_PER_JOB
    proc = run(
        [sys.executable, "-m", "ray_lint", "check", "--jobs", jobs, "--no-cache", "--output-format", "json", "."],
        project,
        env,
    )
    assert proc.returncode == 1, explain(proc)
    assert findings(proc.stdout) == expected_findings()
    assert_ray_not_imported(marker)


def test_check_human_output_without_importing_ray(env: dict[str, str], marker: Path, project: Path) -> None:
    proc = run([RAY_LINT, "check", "--jobs", "1", "--no-cache", "--color", "never", "."], project, env)
    assert proc.returncode == 1, explain(proc)
    assert "RAY001" in proc.stdout
    assert "comprehension.py:2:" in proc.stdout
    assert_ray_not_imported(marker)


def test_check_from_stdin_without_importing_ray(env: dict[str, str], marker: Path, project: Path) -> None:
    text, rows = SOURCES["comprehension.py"]
    proc = run(
        [RAY_LINT, "check", "--output-format", "json", "--stdin-filename", "piped.py", "-"], project, env, stdin=text
    )
    assert proc.returncode == 1, explain(proc)
    assert findings(proc.stdout) == [("RAY001", "piped.py", row) for row in rows]
    assert_ray_not_imported(marker)


def test_fix_diff_without_importing_ray(env: dict[str, str], marker: Path, project: Path) -> None:
    proc = run([RAY_LINT, "check", "--diff", "--unsafe-fixes", "--jobs", "1", "--no-cache", "comprehension.py"], project, env)
    assert proc.returncode == 1, explain(proc)
    assert "+results = ray.get([f.remote(x) for x in xs])" in proc.stdout, explain(proc)
    assert (project / "comprehension.py").read_text() == SOURCES["comprehension.py"][0]  # --diff writes nothing
    assert_ray_not_imported(marker)


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_rule_all_without_importing_ray(output_format: str, env: dict[str, str], marker: Path, tmp_path: Path) -> None:
    proc = run([RAY_LINT, "rule", "--all", "--output-format", output_format], tmp_path, env)
    assert proc.returncode == 0, explain(proc)
    if output_format == "json":
        codes = {rule["code"] for rule in json.loads(proc.stdout)}
        assert {"RAY000", "RAY001"} <= codes
    else:
        assert any(line.split()[:2] == ["RAY001", "get-in-loop"] for line in proc.stdout.splitlines()), explain(proc)
        assert "RAY000" in proc.stdout
    assert_ray_not_imported(marker)


def test_config_without_importing_ray(env: dict[str, str], marker: Path, project: Path) -> None:
    proc = run([RAY_LINT, "config", "--output-format", "json"], project, env)
    assert proc.returncode == 0, explain(proc)
    settings = json.loads(proc.stdout)
    assert settings["rules.get-in-loop.extra-get-functions"]["value"] == ["helpers.fetch"]
    assert "RAY001" in settings["enabled rules"]["value"]
    proc = run([RAY_LINT, "config"], project, env)
    assert proc.returncode == 0, explain(proc)
    assert "rules.get-in-loop.extra-get-functions" in proc.stdout, explain(proc)
    assert_ray_not_imported(marker)


def test_importing_the_api_and_cli_does_not_import_ray(env: dict[str, str], marker: Path, tmp_path: Path) -> None:
    code = "import ray_lint.api, ray_lint.cli; import sys; print('ray' in sys.modules)"
    proc = run([sys.executable, "-c", code], tmp_path, env)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.strip() == "False"
    assert_ray_not_imported(marker)


def test_importing_every_module_and_rule_does_not_import_ray(env: dict[str, str], marker: Path, tmp_path: Path) -> None:
    code = (
        "import importlib, pkgutil, sys, ray_lint\n"
        "for info in pkgutil.walk_packages(ray_lint.__path__, 'ray_lint.'):\n"
        "    if info.name != 'ray_lint.__main__':\n"
        "        importlib.import_module(info.name)\n"
        "from ray_lint.rule import all_rules\n"
        "print(len(all_rules()))\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    proc = run([sys.executable, "-c", code], tmp_path, env)
    assert proc.returncode == 0, explain(proc)
    count, ray_modules = proc.stdout.splitlines()
    assert int(count) >= 2
    assert ray_modules == "[]"
    assert_ray_not_imported(marker)
