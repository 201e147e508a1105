"""`ray-lint check --executor ray`: the same results as a local run, from tasks on a real Ray cluster
(the session's local cluster, named with `--address`, as a user names theirs); fixes are written by
the driver and the cache applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Runner

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
