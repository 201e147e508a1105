"""Every rule's VALID and INVALID examples, run through the real engine, plus checks on rule metadata."""

from __future__ import annotations

import re

import libcst as cst
import pytest

from ray_lint.engine import fix_text, lint_text
from ray_lint.rule import CODE_PATTERN, DOC_SECTIONS, NAME_PATTERN, Invalid, Rule, Valid, all_rules, iter_examples


def _rules_for(rule: type[Rule]) -> list[Rule]:
    """The default rules plus `rule` itself (it may be in preview): examples must hold beside the others."""
    return [r() for r in all_rules() if not r.preview or r is rule]


def _example_id(item: tuple[type[Rule], Valid | Invalid]) -> str:
    rule, example = item
    kind = "invalid" if isinstance(example, Invalid) else "valid"
    index = (rule.INVALID if kind == "invalid" else rule.VALID).index(example)  # type: ignore[arg-type]
    return f"{rule.code}-{kind}-{index}"


EXAMPLES = list(iter_examples())


@pytest.mark.parametrize("item", EXAMPLES, ids=[_example_id(item) for item in EXAMPLES])
def test_example(item: tuple[type[Rule], Valid | Invalid]) -> None:
    rule, example = item
    found = [d for d in lint_text(example.code, _rules_for(rule)) if d.code == rule.code]
    if isinstance(example, Valid):
        assert found == [], f"{rule.code} must not fire ({example.note}):\n{example.code}"
        return
    assert [d.start.line for d in found] == [example.line], f"{rule.code} should fire once on line {example.line}:\n{example.code}"
    diagnostic = found[0]
    if example.fixed is None:
        assert diagnostic.fix is None, "the rule offers a fix here: state the fixed source in the example"
        return
    assert diagnostic.fix is not None, "the example expects a fix"
    outcome = fix_text(example.code, [rule()], unsafe=True)
    assert outcome.text == example.fixed
    assert not [d for d in outcome.diagnostics if d.code == rule.code], "the fix must remove the finding"
    cst.parse_module(outcome.text)
    again = fix_text(outcome.text, _rules_for(rule), unsafe=True)
    assert again.text == outcome.text, "a second --fix, with every default rule, must change nothing"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_metadata(rule: type[Rule]) -> None:
    assert CODE_PATTERN.fullmatch(rule.code)
    assert NAME_PATTERN.fullmatch(rule.name)
    assert rule.message and not rule.message.endswith(".")
    headings = re.findall(r"^## (.+)$", rule.docs, flags=re.MULTILINE)
    expected = [section for section in DOC_SECTIONS if section in headings]
    assert expected == list(DOC_SECTIONS), f"docs need the sections {DOC_SECTIONS}, have {headings}"
    assert [h for h in headings if h in DOC_SECTIONS] == list(DOC_SECTIONS), "sections out of order"
    assert rule.VALID and rule.INVALID
    if rule.code != "RAY000":  # the engine's own file errors: two of each say all there is
        assert len(rule.VALID) >= 5 and len(rule.INVALID) >= 5, "at least five examples of each kind"
    if rule.fixable:
        assert any(example.fixed for example in rule.INVALID), "a fixable rule shows its fix in an example"


def test_codes_and_names_are_unique() -> None:
    rules = all_rules()
    assert len({r.code for r in rules}) == len(rules)
    assert len({r.name for r in rules}) == len(rules)
