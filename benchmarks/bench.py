"""ray-lint's speed on a big tree, against references measured in the same run.

By default the tree is the installed `ray` package (found without importing Ray). Each command runs
in its own process; the table gives wall time, files/s, lines/s, the peak RSS of the largest
process, and the ratio to `flake8 --jobs N` (flake8's default checks) on the same tree. Fixit is
measured too when it is installed. A benchmark, not a test: run it on a quiet machine.

    python benchmarks/bench.py [--path DIR] [--jobs 2] [--repeat 3]
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


def measure(name: str, command: list[str], repeat: int) -> Measurement:
    walls, peak = [], 0.0
    for _ in range(repeat):
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ray-lint-bench-") as scratch:
        # A copy of the Python files, outside any git repository: an installed package usually sits in
        # a .gitignored virtualenv, which ray-lint (rightly) skips but flake8 does not.
        source = (args.path or installed_ray()).resolve()
        root = Path(scratch) / "tree"
        shutil.copytree(source, root, ignore=_not_python)
        run_all(source, root, args)


def _not_python(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if not name.endswith(".py") and not (Path(directory) / name).is_dir()]


def run_all(source: Path, root: Path, args: argparse.Namespace) -> None:
    files = python_files(root)
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    jobs = str(args.jobs)
    bin_dir = Path(sys.executable).parent
    commands = {
        "ray-lint check (cold)": [
            str(bin_dir / "ray-lint"), "check", "--no-cache", "--jobs", jobs, "--exit-zero", "--output-format", "concise", str(root),
        ],
        "flake8 (default checks)": [sys.executable, "-m", "flake8", "--jobs", jobs, "--extend-ignore", "RAY", "--exit-zero", str(root)],
        "flake8 + ray-lint plugin": [sys.executable, "-m", "flake8", "--jobs", jobs, "--exit-zero", str(root)],
        "libcst parse only (1 core)": [
            sys.executable, "-c",
            "import pathlib, sys, libcst\n"
            "for p in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n"
            "    try: libcst.parse_module(p.read_text(encoding='utf-8', errors='replace'))\n"
            "    except Exception: pass\n",
            str(root),
        ],
    }
    if shutil.which("fixit", path=str(bin_dir)) is not None:
        commands["Fixit (default rules)"] = [str(bin_dir / "fixit"), "lint", str(root)]
    console = Console()
    console.print(f"{source} (copied): {len(files)} files, {lines:,} lines; --jobs {jobs}; median of {args.repeat} runs")
    results = []
    for name, command in commands.items():
        started = time.perf_counter()
        results.append(measure(name, command, args.repeat))
        console.print(f"  measured {name} in {time.perf_counter() - started:.1f} s", style="dim")
    reference = next(m for m in results if m.name.startswith("flake8 (default"))
    table = Table("command", "wall (s)", "files/s", "lines/s", "peak RSS (MB)", "× flake8")
    for m in results:
        table.add_row(
            m.name, f"{m.wall:.2f}", f"{len(files) / m.wall:,.0f}", f"{lines / m.wall:,.0f}", f"{m.peak_rss_mb:.0f}",
            f"{m.wall / reference.wall:.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
