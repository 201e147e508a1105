"""`ray-lint check --executor ray`: the same results as a local run, from tasks on a real Ray cluster
(the session's local cluster, named with `--address`, as a user names theirs); fixes are written by
the driver and the cache applies."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import Runner

from ray_lint.cli import main
from ray_lint.ray_executor import RayExecutor
from ray_lint.verify.cluster import Cluster

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LOOP = """import ray


@ray.remote
def square(x):
    return x * x


results = []
for i in range({n}):
    results.append(ray.get(square.remote(i)))
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for index in range(30):
        (tmp_path / f"loop_{index}.py").write_text(LOOP.format(n=index + 2), encoding="utf-8")
    (tmp_path / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (tmp_path / "latin1.py").write_bytes(b"x = '\xe9'\n")
    return tmp_path


def test_results_match_a_local_run(run: Runner, tree: Path, cluster: Cluster) -> None:
    local = run(["check", "--no-cache", "--output-format", "json", "."], tree)
    distributed = run(["check", "--no-cache", "--executor", "ray", "--address", cluster.address, "--output-format", "json", "."], tree)
    assert distributed.returncode == local.returncode == 1, distributed.stderr
    assert distributed.stdout == local.stdout
    codes = sorted({f["code"] for f in json.loads(local.stdout)})
    assert codes == ["RAY000", "RAY001"], "a syntax error and an undecodable file are reported as on one machine"


def test_fixes_are_written_and_the_cache_is_filled(run: Runner, tree: Path, cluster: Cluster) -> None:
    remote = ["--executor", "ray", "--address", cluster.address]
    proc = run(["check", *remote, "--timings", "."], tree)
    assert proc.returncode == 1 and "32 files." in proc.stderr
    warm = run(["check", "--timings", "."], tree)
    assert "32 files; 31 from the cache" in warm.stderr, "every file but the unreadable one came from the cluster's run"
    fixed = run(["check", *remote, "--fix", "--unsafe-fixes", "."], tree)
    assert "30 fixed" in fixed.stdout, fixed.stdout + fixed.stderr
    text = (tree / "loop_3.py").read_text(encoding="utf-8")
    assert "ray.get(square.remote(i))" not in text and "ray.get(" in text


def test_address_needs_the_ray_executor(run: Runner, tree: Path) -> None:
    proc = run(["check", "--address", "127.0.0.1:1", "."], tree)
    assert proc.returncode == 2 and "--address needs --executor ray" in proc.stderr


def test_empty_files_first_or_only(run: Runner, tmp_path: Path, cluster: Cluster) -> None:
    """An empty first file (an empty `__init__.py`) once found no batch to join: IndexError, exit 1."""
    remote = ["check", "--no-cache", "--executor", "ray", "--address", cluster.address, "--output-format", "json"]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "loop.py").write_text(LOOP.format(n=3), encoding="utf-8")
    (tmp_path / "empty").mkdir()
    for name in ("__init__.py", "a.py"):
        (tmp_path / "empty" / name).write_text("", encoding="utf-8")

    mixed = run([*remote, "pkg"], tmp_path)
    assert mixed.returncode == 1, mixed.stderr
    assert [(f["filename"], f["code"]) for f in json.loads(mixed.stdout)] == [("pkg/loop.py", "RAY001")]
    only_empty = run([*remote, "empty"], tmp_path)
    assert (only_empty.returncode, json.loads(only_empty.stdout)) == (0, []), only_empty.stderr


def test_an_internal_error_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug anywhere under `check` (here, in the executor) reads as one line, never a traceback."""

    def crash(self: RayExecutor, tasks: object) -> None:
        raise IndexError("list index out of range")

    monkeypatch.setattr(RayExecutor, "__call__", crash)
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["check", "--no-cache", "--executor", "ray", str(tmp_path)], stdout, stderr)
    assert code == 2
    [line] = stderr.getvalue().splitlines()
    assert line.startswith("ray-lint: internal error: IndexError: list index out of range (at test_ray_executor.py:")
    assert "Traceback" not in stderr.getvalue() + stdout.getvalue()
