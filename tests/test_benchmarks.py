"""The benchmark scripts run end to end on tiny inputs, so they cannot rot. Their timings are not
checked: speed is measured by running them, not by tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_bench_measures_every_command_on_a_tiny_tree(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("print('no ray here')\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench.py"), "--path", str(tmp_path), "--repeat", "2", "--jobs", "1", "--copies", "3"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 files, 3 lines" in proc.stdout
    rows = ("ray-lint check (cold)", "ray-lint check (warm)", "ray-lint check (one file changed)", "flake8 (default checks)")
    goals = ("one file changed < 1.5 s", "flake8 with the plugin (no cache) ≤ 1.3 × flake8", "flake8 with the plugin (warm) ≤ 1.3")
    for row in (*rows, "flake8 + ray-lint plugin (no cache)", "flake8 + ray-lint plugin (warm)", "libcst parse only", "ruff (cold)", "µs/line at 3x", *goals):
        assert row in proc.stdout
    assert "edited by the benchmark, run 1" not in (tmp_path / "a.py").read_text(), "the benchmark edits a copy, never the tree"


def test_lsp_latency_runs_against_the_real_server(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "lsp_latency.py"), "--lines", "40", "--edits", "2", "--debounce", "0"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "debounce   0 ms: didChange -> publishDiagnostics median" in proc.stdout


def test_scaling_counts_one_finding_per_copy() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "scaling.py"), "--copies", "2", "5"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "per-line time at 5 copies / at 2:" in proc.stdout
    assert "peak RSS at 5 copies:" in proc.stdout
