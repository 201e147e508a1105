"""Realistic code with inline expectations, in the style of flake8-bugbear's eval files.

Every file in `tests/eval/` is linted with the default rules (plus any preview rule it names). A
line that must be reported ends with `# expect: RAY001` (several codes: `# expect: RAY001, RAY010`);
every other line must be silent. So each file checks both what a rule finds and that no rule cries
wolf on the correct code around it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ray_lint.engine import lint_text
from ray_lint.rule import all_rules

EVAL_DIR = Path(__file__).parent / "eval"
EXPECT = re.compile(r"#\s*expect:\s*(RAY\d{3}(?:\s*,\s*RAY\d{3})*)")
FILES = sorted(EVAL_DIR.glob("*.py"))


def expectations(text: str) -> set[tuple[int, str]]:
    expected = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            expected |= {(number, code.strip()) for code in match.group(1).split(",")}
    return expected


def test_there_are_eval_files() -> None:
    assert len(FILES) >= 8


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_eval_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    expected = expectations(text)
    named = {code for _, code in expected}
    rules = [rule() for rule in all_rules() if not rule.preview or rule.code in named]
    found = {(d.start.line, d.code) for d in lint_text(text, rules)}
    missed = sorted(expected - found)
    unexpected = sorted(found - expected)
    assert not missed and not unexpected, f"{path.name}: missed {missed}, unexpected {unexpected}"
