"""Every finding ray-lint makes on a fixed set of inputs, for checking that a refactor changes nothing.

    python benchmarks/findings.py snapshot OUT.json [--ray-tree PATH]   # write this tree's findings
    python benchmarks/findings.py compare BEFORE.json AFTER.json        # per-rule counts and differences

The inputs are every rule's VALID and INVALID examples (each linted with every rule, preview rules
included), the eval files under `tests/eval/`, `examples/`, and optionally a copy of Ray's installed
package tree. A finding is (input, line, column, code, message); `compare` exits 1 when any differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
Finding = tuple[str, int, int, str, str]


def _examples() -> list[Finding]:
    from ray_lint.engine import lint_text
    from ray_lint.rule import Invalid, all_rules, iter_examples

    rules = [rule() for rule in all_rules()]
    found: list[Finding] = []
    counters: Counter[str] = Counter()
    for rule, example in iter_examples():
        kind = "invalid" if isinstance(example, Invalid) else "valid"
        name = f"example:{rule.code}-{kind}-{counters[rule.code + kind]}"
        counters[rule.code + kind] += 1
        for d in lint_text(example.code, rules):
            found.append((name, d.start.line, d.start.column, d.code, d.message))
    return found


def _check(path: Path, label: str) -> list[Finding]:
    command = [
        sys.executable, "-m", "ray_lint", "check", "--isolated", "--no-cache", "--preview", "--select", "RAY",
        "--exit-zero", "--output-format", "json", str(path),
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=path if path.is_dir() else None).stdout
    found = []
    for d in json.loads(output):
        name = (path if path.is_dir() else path.parent) / d["filename"]
        relative = name.resolve().relative_to(path.resolve()) if path.is_dir() else Path(name.name)
        found.append((f"{label}:{relative}", d["location"]["row"], d["location"]["column"], d["code"], d["message"]))
    return found


def snapshot(out: Path, ray_tree: Path | None) -> None:
    found = _examples() + _check(ROOT / "tests" / "eval", "eval") + _check(ROOT / "examples", "examples")
    if ray_tree is not None:
        found += _check(ray_tree, "ray")
    out.write_text(json.dumps(sorted(found), indent=0), encoding="utf-8")
    print(f"{len(found)} findings written to {out}")


def compare(before_path: Path, after_path: Path) -> int:
    before = {tuple(f) for f in json.loads(before_path.read_text(encoding="utf-8"))}
    after = {tuple(f) for f in json.loads(after_path.read_text(encoding="utf-8"))}
    codes = sorted({f[3] for f in before | after})
    print(f"{'rule':8} {'before':>7} {'after':>7} {'lost':>5} {'new':>5}")
    for code in codes:
        b = {f for f in before if f[3] == code}
        a = {f for f in after if f[3] == code}
        print(f"{code:8} {len(b):7} {len(a):7} {len(b - a):5} {len(a - b):5}")
    print(f"{'all':8} {len(before):7} {len(after):7} {len(before - after):5} {len(after - before):5}")
    for f in sorted(before - after):
        print("lost:", *f)
    for f in sorted(after - before):
        print("new: ", *f)
    return 0 if before == after else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("snapshot")
    take.add_argument("out", type=Path)
    take.add_argument("--ray-tree", type=Path)
    check = commands.add_parser("compare")
    check.add_argument("before", type=Path)
    check.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "snapshot":
        snapshot(args.out, args.ray_tree)
    else:
        raise SystemExit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
