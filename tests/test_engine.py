"""The engine's handling of a rule that crashes: the other rules' findings stay, and the crash is shown."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Severity
from ray_lint.engine import fix_text, lint_text
from ray_lint.rule import Context, FixPlan, Rule, rule_by_code_or_name

SOURCE = "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nfor i in range(3):\n    ray.get(f.remote(i))\n"


class CrashingRule(Rule):
    code = "RAY999"
    name = "crashing-rule"
    message = "never reports"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("ray",)
    docs = ""

    def check(self, ctx: Context) -> None:
        raise ZeroDivisionError("a bug in a rule")


def test_a_crashing_rule_is_reported_even_when_ray000_is_not_selected() -> None:
    get_in_loop = rule_by_code_or_name("RAY001")
    assert get_in_loop is not None
    found = lint_text(SOURCE, [CrashingRule(), get_in_loop()])
    assert [d.code for d in found] == [FILE_ERROR_CODE, "RAY001"]
    assert found[0].message == "internal error in rule RAY999 (crashing-rule): ZeroDivisionError: a bug in a rule"


def test_a_syntax_error_follows_the_selection() -> None:
    get_in_loop = rule_by_code_or_name("RAY001")
    assert get_in_loop is not None
    assert lint_text("import ray\nray.get(\n", [get_in_loop()]) == []


def test_remote_imported_beside_other_names_passes_the_pre_filter() -> None:
    async_task = rule_by_code_or_name("RAY065")
    assert async_task is not None
    for imports in ("from ray import get, remote", "from ray import (remote, get)", "from ray import (\n    get,\n    remote,\n)"):
        source = f"{imports}\n\n@remote\nasync def fetch(url):\n    return url\n"
        assert [d.code for d in lint_text(source, [async_task()])] == ["RAY065"], imports


class SyntaxBreakingRule(Rule):
    """Reports every `x = ...` with a safe fix whose result does not parse."""

    code = "RAY998"
    name = "syntax-breaking-rule"
    message = "a fix that breaks the file"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = ("x =",)
    docs = ""

    def check(self, ctx: Context) -> None:
        for statement in ctx.model.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
                ctx.report(statement.body[0], self.message, FixPlan("break it", ((statement.body[0], "def ("),), Applicability.SAFE))


def test_a_fix_that_would_not_parse_is_refused_and_named() -> None:
    source = "x = 1\n"
    outcome = fix_text(source, [SyntaxBreakingRule()], unsafe=False)
    assert outcome.text == source
    assert [d.code for d in outcome.refused] == ["RAY998"]
    assert not outcome.applied
