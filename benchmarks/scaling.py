"""ray-lint's cost against a file's size and its number of findings.

One generated module of N copies of a 7-line block (a remote function and a comprehension that calls
`ray.get` on each submission: one RAY001 finding per copy), linted at 1,000, 4,000 and 20,000 copies by
`ray-lint check --no-cache --isolated` in its own process, the findings written as JSON (or another
format) to a file: parsing, the model, the rules, positions, `# noqa` lines and the output all count.
Per-line time and peak RSS show whether anything grows faster than the file: the goals are a
per-line time at the largest size at most 1.5 times that at the smallest, and a peak under 500 MB.
`--shape one-loop` puts every finding in one loop instead: a `for` loop whose body is N lines
`rN = ray.get(f.remote(i + N))`, the case where a rule's per-finding work could scan the loop again.
A benchmark, not a test: run it on a quiet machine.

    python benchmarks/scaling.py [--copies 1000 4000 20000] [--output-format json] [--shape blocks|one-loop]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from bench import measure_once  # bench.py's probe: wall time and the peak RSS of the command alone
from rich.console import Console
from rich.table import Table

HEADER = "import ray\n\n\n"
BLOCK = "@ray.remote\ndef f(x):\n    return x\n\nresults = [ray.get(f.remote(i)) for i in range(10)]\n\n\n"
LOOP = "@ray.remote\ndef f(x):\n    return x\n\nfor i in range(10):\n"
MAX_RATIO = 1.5
MAX_PEAK_MB = 500
_TEXT_FINDING = re.compile(r":\d+:\d+: RAY001 ")


def findings_in(output: str, output_format: str) -> int:
    """The RAY001 findings a report holds."""
    if output_format == "json":
        return sum(1 for finding in json.loads(output) if finding["code"] == "RAY001")
    return len(_TEXT_FINDING.findall(output))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1_000, 4_000, 20_000])
    parser.add_argument("--output-format", default="json", choices=("json", "concise", "full"))
    parser.add_argument("--shape", default="blocks", choices=("blocks", "one-loop"))
    args = parser.parse_args()
    assert BLOCK.count("\n") == 7
    console = Console()
    table = Table("copies", "lines", "findings", "wall (s)", "µs/line", "peak RSS (MB)")
    per_line: list[float] = []
    peaks: list[float] = []
    wrong = False
    with tempfile.TemporaryDirectory(prefix="ray-lint-scaling-") as scratch:
        for copies in args.copies:
            if args.shape == "blocks":
                text = HEADER + BLOCK * copies
            else:
                text = HEADER + LOOP + "".join(f"    r{n} = ray.get(f.remote(i + {n}))\n" for n in range(copies))
            module, report = Path(scratch) / f"copies_{copies}.py", Path(scratch) / f"report_{copies}"
            module.write_text(text, encoding="utf-8")
            command = [
                sys.executable, "-m", "ray_lint", "check", "--no-cache", "--isolated",
                "--output-format", args.output_format, "--output-file", str(report), str(module),
            ]
            wall, peak = measure_once(command)
            found = findings_in(report.read_text(encoding="utf-8"), args.output_format)
            wrong |= found != copies
            lines = text.count("\n")
            per_line.append(wall / lines)
            peaks.append(peak)
            counted = f"{found:,}" if found == copies else f"[red]{found:,}[/]"
            table.add_row(f"{copies:,}", f"{lines:,}", counted, f"{wall:.2f}", f"{wall / lines * 1e6:.1f}", f"{peak:.0f}")
            console.print(f"  measured {copies:,} copies", style="dim")
    console.print(f"ray-lint check --no-cache --isolated --output-format {args.output_format}, {args.shape}: one finding per copy")
    console.print(table)
    ratio = per_line[-1] / per_line[0]
    console.print(f"per-line time at {args.copies[-1]:,} copies / at {args.copies[0]:,}: {ratio:.2f} (goal ≤ {MAX_RATIO})")
    console.print(f"peak RSS at {args.copies[-1]:,} copies: {peaks[-1]:.0f} MB (goal < {MAX_PEAK_MB} MB)")
    if wrong:
        raise SystemExit("a run did not report one finding per copy")


if __name__ == "__main__":
    main()
