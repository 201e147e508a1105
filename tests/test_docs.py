"""docs/rules/ is generated from the rule modules and must be current. The tests write only under their
own tmp_path: the pages are generated there and compared with the checkout's, and `python -m
ray_lint.docs` (`make docs`) is exercised on a copy of the source tree."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ray_lint.diagnostics import FILE_ERROR_CODE
from ray_lint.docs import DOCS_DIR, write_pages
from ray_lint.rule import all_rules, rule_by_code_or_name

REPO = DOCS_DIR.parent.parent


def digests(directory: Path) -> dict[str, str]:
    return {page.name: hashlib.sha256(page.read_bytes()).hexdigest() for page in sorted(directory.glob("*.md"))}


def test_generated_rule_docs_are_current(tmp_path: Path) -> None:
    write_pages(tmp_path)
    generated, committed = digests(tmp_path), digests(DOCS_DIR)
    stale = sorted(name for name in generated.keys() | committed.keys() if generated.get(name) != committed.get(name))
    assert stale == [], "run `python -m ray_lint.docs` (or `make docs`) and commit docs/rules"


def source_tree_copy(root: Path) -> Path:
    """The package, its rules and its docs/rules, laid out as in the checkout (`ray_lint.docs` writes
    to the docs/rules beside the package it is imported from)."""
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("ray_lint", "rules"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    shutil.copytree(DOCS_DIR, root / "docs" / "rules")
    return root


def run_docs(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["PYTHONPATH"] = str(tree)
    return subprocess.run(
        [sys.executable, "-m", "ray_lint.docs", *args], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )


def test_make_docs_regenerates_and_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    before = digests(DOCS_DIR)
    tree = source_tree_copy(tmp_path / "tree")
    pages = tree / "docs" / "rules"
    generated = run_docs(tree)  # what `make docs` runs: the copy's pages are current from here on
    assert generated.returncode == 0, generated.stderr
    fresh = digests(pages)
    assert fresh.keys() == {f"{rule.code}.md" for rule in all_rules()} | {"index.md"}
    current = run_docs(tree, "--check")
    assert current.returncode == 0, current.stderr

    original = (pages / "RAY001.md").read_text(encoding="utf-8")
    (pages / "RAY001.md").write_text(original + "\nedited by hand\n", encoding="utf-8")
    (pages / "RAY999.md").write_text("a rule that was removed\n", encoding="utf-8")
    (pages / "RAY010.md").unlink()
    stale = run_docs(tree, "--check")
    assert stale.returncode == 1, stale.stderr
    assert "RAY001.md, RAY010.md, RAY999.md" in stale.stderr

    regenerated = run_docs(tree)
    assert regenerated.returncode == 0, regenerated.stderr
    assert (pages / "RAY001.md").read_text(encoding="utf-8") == original
    assert digests(pages) == fresh
    assert digests(DOCS_DIR) == before, "the test changed the checkout's docs/rules"


def test_readme_counts_the_rules() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rules = [rule for rule in all_rules() if rule.code != FILE_ERROR_CODE]
    preview = [rule for rule in rules if rule.preview]
    assert f"\n{len(rules)} rules, each with a page" in readme
    assert f"Preview rules ({len(preview)} of them;" in readme
    verified = [rule for rule in preview if rule.experiment is not None]
    assert f"Of the {len(preview)} preview rules, {len(verified)}\nhave one; the other {len(preview) - len(verified)} have" in readme
    for code in re.findall(r"\[(RAY\d{3})\]\(docs/rules/", readme):
        assert rule_by_code_or_name(code) is not None, code
