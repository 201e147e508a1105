"""ray-lint's speed on a big tree, against references measured in the same run.

By default the tree is the installed `ray` package (found without importing Ray), copied outside any
git repository. Each command runs in its own process; the table gives wall time, files/s, lines/s,
the peak RSS of the largest process, and the ratio to `flake8 --jobs N` (flake8's default checks) on
the same tree. ray-lint runs cold (`--no-cache`), warm (cache filled, nothing changed) and with one
file changed before each run. ruff (cold) is measured when installed, and Fixit when installed or
named with `--fixit` (once: it takes minutes). Then one module's per-line cost at 1x and 100x its size shows whether cost grows
linearly, and a last table checks each goal of issue 7. A benchmark, not a test: run it on a quiet
machine.

    python benchmarks/bench.py [--path DIR] [--jobs 2] [--repeat 3] [--fixit PATH/TO/fixit]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table


@dataclass
class Measurement:
    name: str
    command: list[str]
    walls: list[float]
    peak_rss_mb: float

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)


def installed_ray() -> Path:
    spec = importlib.util.find_spec("ray")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the `ray` package is not installed here; pass --path DIR")
    return Path(next(iter(spec.submodule_search_locations)))


def measure_once(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of the command's largest process, measured in a child of ours
    so that the peak belongs to this command alone."""
    probe = (
        "import json, resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "wall = time.perf_counter() - start\n"
        "print(json.dumps([wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, done.returncode, done.stderr[-2000:]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True)
    wall, rss, returncode, stderr = json.loads(out.stdout)
    if returncode not in (0, 1):  # a run that failed measures nothing
        raise SystemExit(f"{' '.join(command[:4])} ... exited {returncode}:\n{stderr}")
    return wall, rss


def measure(name: str, command: list[str], repeat: int, before: Callable[[int], None] | None = None) -> Measurement:
    """`before(i)`, when given, runs ahead of the i-th run, untimed (to change a file, say)."""
    walls, peak = [], 0.0
    for index in range(repeat):
        if before is not None:
            before(index)
        wall, rss = measure_once(command)
        walls.append(wall)
        peak = max(peak, rss)
    return Measurement(name, command, walls, peak)


def python_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*.py") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, help="tree to lint (default: the installed ray package)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is shown")
    parser.add_argument("--fixit", type=Path, help="a `fixit` executable (in another virtualenv, say) to compare with")
    parser.add_argument("--copies", type=int, default=100, help="the size multiple of the linearity check")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ray-lint-bench-") as scratch:
        # A copy of the Python files, outside any git repository: an installed package usually sits in
        # a .gitignored virtualenv, which ray-lint (rightly) skips but flake8 does not.
        source = (args.path or installed_ray()).resolve()
        root = Path(scratch) / "tree"
        shutil.copytree(source, root, ignore=_not_python)
        run_all(source, root, Path(scratch) / "cache", args)


def _not_python(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if not name.endswith(".py") and not (Path(directory) / name).is_dir()]


def _tool(name: str, bin_dir: Path) -> str | None:
    return shutil.which(name, path=str(bin_dir)) or shutil.which(name)


def run_all(source: Path, root: Path, cache_dir: Path, args: argparse.Namespace) -> None:
    files = python_files(root)
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    jobs = str(args.jobs)
    bin_dir = Path(sys.executable).parent
    ray_lint = [str(bin_dir / "ray-lint"), "check", "--jobs", jobs, "--exit-zero", "--output-format", "concise"]
    cached = [*ray_lint, "--cache-dir", str(cache_dir), str(root)]
    flake8 = [sys.executable, "-m", "flake8", "--jobs", jobs, "--exit-zero"]
    plugin_cached = [*flake8, "--ray-lint-cache-dir", str(cache_dir.with_name("plugin-cache")), str(root)]
    runs: list[tuple[str, list[str], Callable[[int], None] | None]] = [
        ("ray-lint check (cold)", [*ray_lint, "--no-cache", str(root)], None),
        ("ray-lint check (warm)", cached, lambda index: _fill_cache(cached, index)),
        ("ray-lint check (one file changed)", cached, lambda index: _change_one_file(files, index)),
        ("flake8 (default checks)", [*flake8, "--extend-ignore", "RAY", str(root)], None),
        ("flake8 + ray-lint plugin (no cache)", [*flake8, "--ray-lint-no-cache", str(root)], None),
        ("flake8 + ray-lint plugin (warm)", plugin_cached, lambda index: _fill_cache(plugin_cached, index)),
        (
            "libcst parse only (1 core)",
            [
                sys.executable, "-c",
                "import pathlib, sys, libcst\n"
                "for p in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n"
                "    try: libcst.parse_module(p.read_text(encoding='utf-8', errors='replace'))\n"
                "    except Exception: pass\n",
                str(root),
            ],
            None,
        ),
    ]
    ruff = _tool("ruff", bin_dir)
    if ruff is not None:
        runs.append(("ruff (cold)", [ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", str(root)], None))
    fixit = str(args.fixit) if args.fixit else _tool("fixit", bin_dir)
    if fixit is not None:
        runs.append(("Fixit (default rules)", [fixit, "lint", str(root)], None))
    console = Console()
    console.print(f"{source} (copied): {len(files)} files, {lines:,} lines; --jobs {jobs}; median of {args.repeat} runs")
    results: dict[str, Measurement] = {}
    for name, command, before in runs:
        started = time.perf_counter()
        repeat = 1 if name.startswith("Fixit") else args.repeat  # Fixit takes minutes: it runs once
        results[name] = measure(name, command, repeat, before)
        console.print(f"  measured {name} in {time.perf_counter() - started:.1f} s", style="dim")
    reference = results["flake8 (default checks)"]
    table = Table("command", "wall (s)", "files/s", "lines/s", "peak RSS (MB)", "× flake8")
    for m in results.values():
        table.add_row(
            m.name, f"{m.wall:.2f}", f"{len(files) / m.wall:,.0f}", f"{lines / m.wall:,.0f}", f"{m.peak_rss_mb:.0f}",
            f"{m.wall / reference.wall:.2f}",
        )
    console.print(table)
    scaling = measure_scaling(files, args.copies)
    console.print(
        f"Per-line cost of one module ({scaling['lines']} lines, in-process, all default rules): "
        f"{scaling['small_us']:.1f} µs/line at 1x, {scaling['large_us']:.1f} µs/line at {args.copies}x "
        f"({scaling['lines'] * args.copies:,} lines; peak RSS {scaling['rss_mb']:.0f} MB)"
    )
    console.print(goals(results, scaling))


def _fill_cache(command: list[str], index: int) -> None:
    """Before the first warm run: one run fills the cache."""
    if index == 0:
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)


def _change_one_file(files: list[Path], index: int) -> None:
    """A different file each run, as an edit between two runs would."""
    target = files[(index * 997) % len(files)]
    with target.open("a", encoding="utf-8") as handle:
        handle.write(f"\n# edited by the benchmark, run {index}\n")


SCALING_PROBE = """
import gc, json, resource, sys, time
from ray_lint.engine import lint_text
from ray_lint.rule import all_rules
rules = [rule() for rule in all_rules() if not rule.preview]
small = open(sys.argv[1], encoding="utf-8").read()
copies = int(sys.argv[2])
large = small * copies
lint_text(small, rules)
start = time.perf_counter()
for _ in range(copies):
    lint_text(small, rules)
small_s = time.perf_counter() - start
gc.collect()
start = time.perf_counter()
lint_text(large, rules)
large_s = time.perf_counter() - start
print(json.dumps([small_s, large_s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))
"""


def measure_scaling(files: list[Path], copies: int) -> dict[str, float]:
    """Lint one module that uses Ray (near 200 lines) `copies` times, then that module repeated
    `copies` times as one file: equal per-line costs mean cost grows linearly with size."""
    candidates = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if ".remote(" in text and "ray.get" in text:
            candidates.append((abs(text.count("\n") - 200), str(path), text))
    if not candidates:
        candidates = [(0, "", "import ray\n" + "results = [ray.get(f.remote(x)) for x in xs]\n" * 199)]
    _, _, text = min(candidates)
    text = text if text.endswith("\n") else text + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8", delete=False) as handle:
        handle.write(text)
    try:
        out = subprocess.run([sys.executable, "-c", SCALING_PROBE, handle.name, str(copies)], capture_output=True, text=True, check=True)
    finally:
        Path(handle.name).unlink()
    small_s, large_s, rss = json.loads(out.stdout)
    count = text.count("\n")
    return {
        "lines": count,
        "copies": copies,
        "small_us": small_s / (count * copies) * 1e6,
        "large_us": large_s / (count * copies) * 1e6,
        "rss_mb": rss,
    }


def goals(results: dict[str, Measurement], scaling: dict[str, float]) -> Table:
    """The speed goals (issue 7's, and the plugin's 1.3 × flake8) against this run's figures."""
    table = Table("goal", "measured", "met")
    cold, flake8 = results["ray-lint check (cold)"].wall, results["flake8 (default checks)"].wall
    rows = [("cold run ≤ 0.4 × flake8", f"{cold / flake8:.2f} ×", cold <= 0.4 * flake8)]
    for kind in ("no cache", "warm"):
        plugin = results[f"flake8 + ray-lint plugin ({kind})"].wall
        rows.append((f"flake8 with the plugin ({kind}) ≤ 1.3 × flake8", f"{plugin / flake8:.2f} ×", plugin <= 1.3 * flake8))
    if "Fixit (default rules)" in results:
        fixit = results["Fixit (default rules)"].wall
        rows.append(("cold run ≥ 5 × faster than Fixit", f"{fixit / cold:.1f} × faster", fixit >= 5 * cold))
    warm = results["ray-lint check (warm)"].wall
    if "ruff (cold)" in results:
        ruff = results["ruff (cold)"].wall
        rows.append(("warm run ≤ ruff's cold run", f"{warm:.2f} s vs {ruff:.2f} s", warm <= ruff))
    changed = results["ray-lint check (one file changed)"].wall
    rows.append(("one file changed < 1.5 s", f"{changed:.2f} s", changed < 1.5))
    peak = max(results[name].peak_rss_mb for name in results if name.startswith("ray-lint"))
    peak = max(peak, scaling["rss_mb"])
    rows.append(("peak memory < 300 MB per process", f"{peak:.0f} MB", peak < 300))
    ratio = scaling["large_us"] / scaling["small_us"]
    rows.append((f"per-line cost at {scaling['copies']}x ≤ at 1x (within 10%)", f"{ratio:.2f} ×", ratio <= 1.1))
    for goal, measured, met in rows:
        table.add_row(goal, measured, "yes" if met else "[bold red]no[/]")
    return table


if __name__ == "__main__":
    main()
