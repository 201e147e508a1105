"""`ray-lint verify examples/` as a user runs it, timed, with one row per verdict.

Issue 20's acceptance: every default rule's example gets a verdict (confirmed or reproduced for the
bad form), the fixed forms give no finding, and the whole run takes at most 3 minutes on 2 cores,
cluster start included. This runs the command once (its own local cluster), checks the fixed
examples with `ray-lint check`, and prints a Markdown table: rule, what ran, mode, verdict, ratio or
error, and the median wall time of each variant. A benchmark, not a test: run it on a quiet machine.

    python benchmarks/verify_examples.py [--num-cpus 2] [--out benchmarks/verify-examples.md]
    python benchmarks/verify_examples.py --libraries [--out benchmarks/verify-examples-libraries.md]

`--libraries` runs the examples of the Ray Data, Train, Tune and Serve rules (issue 21), in
`examples/libraries/`, each library rule selected by its code so that the preview rules' examples get
a verdict too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def default_rules(libraries: bool, preview: bool = False) -> set[str]:
    """The codes of the default rules (and of the preview ones with `preview`; RAY000, the file-error report,
    aside), from `ray-lint rule --all`: Ray Core's (below RAY100) or the libraries'."""
    out = subprocess.run(
        [sys.executable, "-m", "ray_lint", "rule", "--all", "--output-format", "json"], capture_output=True, text=True, check=True,
    ).stdout
    return {
        rule["code"] for rule in json.loads(out)
        if (preview or not rule["preview"]) and rule["code"] != "RAY000" and (int(rule["code"][3:]) >= 100) == libraries
    }


def numbers(verdict: dict[str, Any]) -> str:
    if verdict["ratio"] is not None:
        return f"{verdict['ratio']:.2f}×"
    return verdict["summary"].replace("|", "\\|")[:140]


def median_walls(verdict: dict[str, Any]) -> str:
    walls = [side["median_wall_s"] for side in verdict["variants"].values()]
    return " / ".join(f"{w:.2f} s" if w is not None else "-" for w in walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    parser.add_argument("--libraries", action="store_true", help="the library rules' examples, in examples/libraries/")
    args = parser.parse_args()
    folder = EXAMPLES / "libraries" if args.libraries else EXAMPLES
    bad = sorted(p for p in folder.glob("*.py") if not p.stem.endswith("_fixed"))
    fixed = sorted(folder.glob("*_fixed.py"))
    # verify runs a preview rule when it is selected by its code: every library rule, for its example
    libraries = sorted(code for code in default_rules(True, preview=True))
    selection = ["--select", ",".join(libraries)] if args.libraries else []
    began = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "ray_lint", "verify", "--isolated", *selection, "--num-cpus", str(args.num_cpus), "--output-format", "json",
         *map(str, bad), *map(str, fixed)],
        capture_output=True, text=True, cwd=ROOT,
    )
    wall = time.perf_counter() - began
    if run.returncode not in (0, 1):
        print(run.stderr, file=sys.stderr)
        return 2
    verdicts = json.loads(run.stdout)
    check = subprocess.run(
        [sys.executable, "-m", "ray_lint", "check", "--isolated", "--no-cache", *selection, "--output-format", "json", *map(str, fixed)],
        capture_output=True, text=True, cwd=ROOT,
    )
    fixed_findings = json.loads(check.stdout) if check.stdout.strip() else []
    lines = [
        f"`ray-lint verify {'--select <every library rule> ' if args.libraries else ''}--num-cpus {args.num_cpus}` on {len(bad)} examples and {len(fixed)} fixed forms: "
        f"{wall:.0f} s wall, cluster start included; {len(verdicts)} verdicts; "
        f"findings in the fixed forms: {len(fixed_findings)}.",
        "",
        "| Rule | Example line | Ran | Mode | Verdict | Ratio or evidence | Wall A / B (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for verdict in verdicts:
        where = f"{Path(verdict['path']).name}:{verdict['line']}"
        lines.append(
            f"| {verdict['code']} | {where} | {verdict['ran']} | {verdict['mode'] or '-'} | {verdict['status']} | "
            f"{numbers(verdict)} | {median_walls(verdict)} |"
        )
    shown = {v["code"] for v in verdicts if v["status"] in ("confirmed on your code", "pattern confirmed (model)", "reproduced")}
    missing = sorted(default_rules(args.libraries) - shown)
    lines += ["", f"Default rules without a verdict that shows the problem: {', '.join(missing) or 'none'}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
