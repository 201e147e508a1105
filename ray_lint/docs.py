"""Generates docs/rules/ from the rule modules: one page per rule and an index.

Run `python -m ray_lint.docs` to write the pages, `python -m ray_lint.docs --check` to fail when they
are stale (a test does this too).

A rule's `category` is a short id (`perf`); what people read (these pages, `ray-lint rule`) shows its
title (`Performance`, `category_title`), and what programs read (JSON, SARIF) keeps the id.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ray_lint.rule import Rule, all_rules

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs" / "rules"


def render_rule(rule: type[Rule]) -> str:
    status = "preview (off unless selected by code or `--preview`)" if rule.preview else "on by default"
    fix = "available (see Fix safety)" if rule.fixable else "none"
    lines = [
        f"# {rule.name} ({rule.code})",
        "",
        f"Severity: {rule.severity.value} · Category: {category_title(rule.category)} · Status: {status} · Fix: {fix}",
        "",
        f"> {rule.message}",
        "",
        rule.docs.strip(),
        "",
    ]
    if rule.experiment is not None:
        lines += ["## Verification", "", f"`ray-lint verify` {verification(rule)}: {_paragraph(type(rule.experiment).__doc__)}", ""]
    elif rule.no_experiment:
        lines += ["## Verification", "", f"`ray-lint verify` lists the finding without running anything: {rule.no_experiment}.", ""]
    return "\n".join(lines)


def verification(rule: type[Rule]) -> str:
    """What the rule's experiment shows, in a few words ("" without one)."""
    return rule.experiment.shows if rule.experiment is not None else ""


def _paragraph(text: str | None) -> str:
    """A docstring's first paragraph on one line."""
    return " ".join((text or "").strip().split("\n\n")[0].split())


CATEGORY_TITLES = {
    "perf": "Performance",
    "resource": "Resources",
    "correctness": "Correctness",
    "fault-tolerance": "Fault tolerance",
    "api-misuse": "API misuse",
    "deprecation": "Deprecation",
    "file": "Files",
}


def category_title(category: str) -> str:
    return CATEGORY_TITLES.get(category, category)


def render_index() -> str:
    """One table per category, in the order of each category's first code."""
    lines = ["# Rules", "", "Generated from the rule modules by `python -m ray_lint.docs`; do not edit by hand."]
    by_category: dict[str, list[type[Rule]]] = {}
    for rule in all_rules():
        by_category.setdefault(rule.category, []).append(rule)
    for category, rules in by_category.items():
        lines += ["", f"## {category_title(category)}", "", "| Code | Name | Severity | Status | Fix | Verify | Message |", "|---|---|---|---|---|---|---|"]
        for rule in rules:
            status = "preview" if rule.preview else "default"
            fix = "yes" if rule.fixable else ""
            row = f"| [{rule.code}]({rule.code}.md) | `{rule.name}` | {rule.severity.value} | {status} | {fix} | {verification(rule)} | {rule.message} |"
            lines.append(row)
    return "\n".join(lines) + "\n"


def expected_pages() -> dict[str, str]:
    pages = {f"{rule.code}.md": render_rule(rule) for rule in all_rules()}
    pages["index.md"] = render_index()
    return pages


def stale_pages(directory: Path = DOCS_DIR) -> list[str]:
    """Pages that are missing, different from what the rules say, or left over from a removed rule."""
    expected = expected_pages()
    stale = [name for name, text in expected.items() if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
    stale += [p.name for p in directory.glob("*.md") if p.name not in expected] if directory.is_dir() else []
    return sorted(stale)


def write_pages(directory: Path = DOCS_DIR) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    expected = expected_pages()
    for page in directory.glob("*.md"):
        if page.name not in expected:
            page.unlink()
    for name, text in expected.items():
        (directory / name).write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ray_lint.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/rules is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages()
        if stale:
            print(f"docs/rules is stale: {', '.join(stale)}; run `python -m ray_lint.docs`", file=sys.stderr)
            return 1
        return 0
    write_pages()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
