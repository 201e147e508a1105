"""Precision and recall of ray-lint on real code: extract the pinned corpus, lint it, score every
finding against the judgements kept beside this script, and print per-rule precision; then per-rule
recall over the known problems: the findings judged right plus the problems marked by hand in
`marks.tsv` (found by reading the code, not the linter's output).

    python benchmarks/real/evaluate.py --mirrors DIR           # default rules
    python benchmarks/real/evaluate.py --mirrors DIR --preview # preview rules too
    python benchmarks/real/evaluate.py --mirrors DIR --unjudged > new.tsv

`--mirrors` holds one git directory per project, named `owner+name/repo` (a bare repository or a
clone); each project is exported at its pinned commit with `git archive`, so nothing is fetched.
A project's optional `mirror` names the snapshot that holds its commit when the project's own is
missing (a fork), `include` keeps only the named folders and `skip` leaves folders out.
A finding is matched to a judgement by project, path, line and code. Debatable counts as not
right. Judged-right findings that are no longer reported are listed as lost. A hand mark is found
when a finding of its code in its file lies within `MARK_LINES` lines of it (a mark names the call,
a finding may name the statement or decorator around it); a mark that is also a judged-right finding
counts once. Marks of codes no rule has yet count as missed, under "no rule".
This is a benchmark, not a test: it needs the corpus and takes a minute or two.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ray_lint.declarations import may_declare

HERE = Path(__file__).resolve().parent
VERDICTS = ("right", "wrong", "debatable")
COLUMNS = ("repo", "path", "line", "code", "verdict", "reason")
MARK_LINES = 3
# What ray-lint reads: sources, notebooks, what decides which of them it skips, and the files that
# declare the Ray a project runs (`ray_lint.declarations.may_declare`).
KEPT_SUFFIXES = (".py", ".pyi", ".ipynb", ".gitignore", "pyproject.toml")


@dataclass(frozen=True)
class Key:
    repo: str
    path: str  # "pkg/mod.py", or "nb.ipynb:cell 3" for a notebook cell
    line: int
    code: str


def load_corpus() -> list[dict]:
    return tomllib.loads((HERE / "corpus.toml").read_text(encoding="utf-8"))["project"]


def load_judgements() -> dict[Key, tuple[str, str]]:
    judged: dict[Key, tuple[str, str]] = {}
    with open(HERE / "judgements.tsv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["verdict"] not in VERDICTS:
                sys.exit(f"judgements.tsv: unknown verdict {row['verdict']!r} for {row['path']}:{row['line']}")
            judged[Key(row["repo"], row["path"], int(row["line"]), row["code"])] = (row["verdict"], row["reason"])
    return judged


def load_marks() -> list[Key]:
    with open(HERE / "marks.tsv", encoding="utf-8", newline="") as handle:
        return [Key(row["repo"], row["path"], int(row["line"]), row["code"]) for row in csv.DictReader(handle, delimiter="\t")]


def git_dir(mirrors: Path, repo: str) -> Path:
    base = mirrors / repo.replace("/", "+") / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def exported(project: dict, path: str) -> bool:
    """Whether the project's `include` (folders to keep; all when absent) and `skip` (folders to leave
    out, e.g. a copy of a held-out project) keep this path."""
    if "include" in project and not any(path.startswith(f"{folder}/") for folder in project["include"]):
        return False
    return not any(path.startswith(f"{folder}/") for folder in project.get("skip", ()))


def extract(mirrors: Path, work: Path, project: dict) -> Path:
    """The project's lintable files at its pinned commit, exported once into `work` (snapshots may
    lack large blobs, so files are read one by one and missing ones skipped). The folder's name
    carries the commit and a digest of the files kept, so an edited entry, or a change in what is kept
    (`KEPT_SUFFIXES`, `may_declare`), is exported afresh."""
    git = ["git", "--git-dir", str(git_dir(mirrors, project.get("mirror", project["repo"])))]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", project["commit"]], check=True, capture_output=True).stdout
    wanted = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, blob = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if not exported(project, path):
            continue
        if kind == b"blob" and mode != b"120000" and (path.endswith(KEPT_SUFFIXES) or may_declare(path.rsplit("/", 1)[-1])):
            wanted.append((blob.decode(), path))
    digest = hashlib.sha1("\n".join(f"{blob} {path}" for blob, path in wanted).encode("utf-8", "surrogateescape")).hexdigest()[:8]
    target = work / project["repo"].replace("/", "+") / f"{project['commit'][:12]}-{digest}"
    if (target / ".extracted").exists():
        return target
    batch = subprocess.run(
        [*git, "cat-file", "--batch"], input="".join(f"{blob}\n" for blob, _ in wanted).encode(), check=True, capture_output=True
    ).stdout
    offset = 0
    for _, path in wanted:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(batch[offset : offset + size])
        offset += size + 1
    target.mkdir(parents=True, exist_ok=True)  # a project that keeps no file still gets its (empty) tree
    (target / ".extracted").touch()
    return target


def lint(tree: Path, preview: bool) -> list[dict]:
    """ray-lint's JSON findings on the tree, with its own defaults (the project's config is ignored)."""
    command = [sys.executable, "-m", "ray_lint", "check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json"]
    result = subprocess.run([*command, *(["--preview"] if preview else []), "."], cwd=tree, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"ray-lint failed on {tree}:\n{result.stderr}")
    return json.loads(result.stdout)


def key_of(repo: str, finding: dict) -> Key:
    path = Path(finding["filename"]).as_posix()
    if finding.get("cell") is not None:
        path += f":cell {finding['cell']}"
    return Key(repo, path, finding["location"]["row"], finding["code"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=Path(os.environ.get("RAY_LINT_MIRRORS", "/work/.mirror")))
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "ray-lint-corpus")
    parser.add_argument("--preview", action="store_true", help="enable preview rules too")
    parser.add_argument("--unjudged", action="store_true", help="print unjudged findings as judgement rows to fill in")
    parser.add_argument("--only", action="append", default=[], help="lint only this project (repeatable)")
    parser.add_argument("--missed", action="store_true", help="list the hand marks that no finding matches")
    args = parser.parse_args()

    judged = load_judgements()
    found: dict[Key, dict] = {}
    files = 0
    projects = [p for p in load_corpus() if not args.only or p["repo"] in args.only]
    for project in projects:
        tree = extract(args.mirrors, args.work, project)
        files += sum(1 for _ in tree.rglob("*.py"))
        for finding in lint(tree, args.preview):
            found[key_of(project["repo"], finding)] = finding

    if args.unjudged:
        writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
        for key, finding in sorted(found.items(), key=lambda item: (item[0].repo, item[0].path, item[0].line)):
            if key not in judged:
                writer.writerow((key.repo, key.path, key.line, key.code, "", finding["message"]))
        return

    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for key in found:
        counts[key.code][judged.get(key, ("unjudged", ""))[0]] += 1
    print(f"{len(projects)} projects, {files:,} Python files, {len(found)} findings{' (preview on)' if args.preview else ''}\n")
    print(f"{'rule':<8} {'findings':>8} {'right':>6} {'wrong':>6} {'debatable':>9} {'unjudged':>8} {'precision':>9}")
    total: Counter[str] = Counter()
    for code in sorted(counts):
        row = counts[code]
        total.update(row)
        print(_row(code, row))
    print(_row("all", total))

    linted = {p["repo"] for p in projects}
    preview = set() if args.preview else preview_codes()
    print_recall(found, judged, [mark for mark in load_marks() if mark.repo in linted], preview, all_codes(), args.missed)
    lost = [key for key, (verdict, _) in judged.items() if verdict == "right" and key.repo in linted and key not in found]
    print(f"\njudged right but no longer reported: {len(lost)}")
    for key in sorted(lost, key=lambda k: (k.code, k.repo, k.path, k.line)):
        why = " (now a preview rule)" if key.code in preview else ""
        print(f"  {key.code}{why} {key.repo} {key.path}:{key.line}  {judged[key][1]}")


def print_recall(
    found: dict[Key, dict], judged: dict[Key, tuple[str, str]], marks: list[Key], preview: set[str], codes: set[str], missed: bool = False
) -> None:
    """Per-rule recall over the known problems: judged-right findings, and hand marks (found or not);
    with `missed`, the hand marks of rules that exist that no finding matches."""
    by_file: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for key in found:
        by_file[(key.repo, key.path, key.code)].append(key.line)
    right = [key for key, (verdict, _) in judged.items() if verdict == "right" and key.repo in {m.repo for m in marks} | {k.repo for k in found}]

    def near(key: Key, lines: Iterable[int]) -> bool:
        return any(abs(line - key.line) <= MARK_LINES for line in lines)

    problems: dict[str, Counter[str]] = defaultdict(Counter)
    for key in right:
        problems[key.code]["known"] += 1
        problems[key.code]["found"] += key in found
    marked: Counter[str] = Counter()  # every hand mark, whichever rule it names (or none)
    for mark in marks:
        hit = near(mark, by_file.get((mark.repo, mark.path, mark.code), ()))
        status = "no rule" if mark.code not in codes else "preview" if mark.code in preview else "default"
        marked[status] += 1
        marked[f"{status} found"] += hit
        if near(mark, (k.line for k in right if (k.repo, k.path, k.code) == (mark.repo, mark.path, mark.code))):
            continue  # the same problem as a judged-right finding
        problems[mark.code]["known"] += 1
        problems[mark.code]["found"] += hit
        problems[mark.code]["marked"] += 1
        problems[mark.code]["marked found"] += hit
    print(f"\nrecall over known problems (judged-right findings + {len(marks)} hand marks, within {MARK_LINES} lines)")
    print(f"{'rule':<8} {'status':<8} {'problems':>8} {'found':>6} {'recall':>7} {'marked':>7} {'found':>6}")
    total: Counter[str] = Counter()
    for code in sorted(problems):
        row = problems[code]
        status = "no rule" if code not in codes else "preview" if code in preview else "default"
        if status == "default":
            total.update(row)
        print(_recall_row(code, status, row))
    print(_recall_row("default", "", total))
    print("\nhand marks found (read from the code, whether or not the linter also found them):")
    for status in ("default", "preview", "no rule"):
        if marked[status]:
            print(f"  {status:<8} {marked[f'{status} found']:>3} of {marked[status]:>3} ({marked[f'{status} found'] / marked[status]:.0%})")
    every = sum(marked[s] for s in ("default", "preview", "no rule"))
    hits = sum(marked[f"{s} found"] for s in ("default", "preview", "no rule"))
    print(f"  {'all':<8} {hits:>3} of {every:>3} ({hits / every:.0%})" if every else "")
    if missed:
        print("\nhand marks not found:")
        for mark in sorted(marks, key=lambda m: (m.code, m.repo, m.path, m.line)):
            if mark.code in codes and not near(mark, by_file.get((mark.repo, mark.path, mark.code), ())):
                print(f"  {mark.code}{' (preview)' if mark.code in preview else ''} {mark.repo} {mark.path}:{mark.line}")


def _recall_row(code: str, status: str, row: Counter[str]) -> str:
    recall = f"{row['found'] / row['known']:.0%}" if row["known"] else "-"
    return f"{code:<8} {status:<8} {row['known']:>8} {row['found']:>6} {recall:>7} {row['marked']:>7} {row['marked found']:>6}"


def _rules() -> list[dict]:
    listing = subprocess.run(
        [sys.executable, "-m", "ray_lint", "rule", "--all", "--output-format", "json"], capture_output=True, text=True, check=True
    )
    return json.loads(listing.stdout)


def preview_codes() -> set[str]:
    return {rule["code"] for rule in _rules() if rule["preview"]}


def all_codes() -> set[str]:
    return {rule["code"] for rule in _rules()}


def _row(code: str, row: Counter[str]) -> str:
    findings = sum(row.values())
    judged = findings - row["unjudged"]
    precision = f"{row['right'] / judged:.0%}" if judged else "-"
    return (
        f"{code:<8} {findings:>8} {row['right']:>6} {row['wrong']:>6} {row['debatable']:>9} {row['unjudged']:>8} {precision:>9}"
    )


if __name__ == "__main__":
    main()
