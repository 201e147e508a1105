"""docs/rules/ is generated from the rule modules and must be current."""

from __future__ import annotations

import re
import subprocess
import sys

from ray_lint.diagnostics import FILE_ERROR_CODE
from ray_lint.docs import DOCS_DIR, stale_pages
from ray_lint.rule import all_rules, rule_by_code_or_name


def test_generated_rule_docs_are_current() -> None:
    assert stale_pages() == [], "run `python -m ray_lint.docs` (or `make docs`) and commit docs/rules"


def test_check_mode_fails_on_a_stale_page(tmp_path) -> None:
    page = DOCS_DIR / "RAY001.md"
    original = page.read_text(encoding="utf-8")
    try:
        page.write_text(original + "\nedited by hand\n", encoding="utf-8")
        result = subprocess.run([sys.executable, "-m", "ray_lint.docs", "--check"], capture_output=True, text=True)
        assert result.returncode == 1
        assert "RAY001.md" in result.stderr
    finally:
        page.write_text(original, encoding="utf-8")


def test_readme_counts_the_rules() -> None:
    readme = (DOCS_DIR.parent.parent / "README.md").read_text(encoding="utf-8")
    rules = [rule for rule in all_rules() if rule.code != FILE_ERROR_CODE]
    preview = [rule for rule in rules if rule.preview]
    assert f"\n{len(rules)} rules, each with a page" in readme
    assert f"Preview rules ({len(preview)} of them;" in readme
    for code in re.findall(r"\[(RAY\d{3})\]\(docs/rules/", readme):
        assert rule_by_code_or_name(code) is not None, code
