"""Every rule's fix, applied to all of its invalid examples, every eval file and `examples/`, must leave
code a reviewer would accept: it parses, pyflakes finds no new undefined or unused name, the finding
it fixes is gone, no other finding appears, and a second `--fix` changes nothing.

The rule examples (tests/test_rule_examples.py) pin each fix's exact text; this harness checks the
properties every fix owes, on code the examples' authors did not shape for the fix.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from pyflakes import checker, messages

from ray_lint.diagnostics import Applicability
from ray_lint.engine import fix_text, lint_text
from ray_lint.rule import Rule, all_rules

ROOT = Path(__file__).parent.parent
# What pyflakes says that a fix must never add: a name it leaves undefined or unused.
NAME_PROBLEMS = (
    messages.UndefinedName,
    messages.UndefinedLocal,
    messages.UnusedVariable,
    messages.UnusedImport,
    messages.RedefinedWhileUnused,
)
FIXABLE = [rule for rule in all_rules() if rule.fixable]


def _name_problems(text: str) -> Counter[tuple[str, tuple[object, ...]]]:
    tree = ast.parse(text)
    found = checker.Checker(tree, filename="<fix>").messages
    return Counter((type(m).__name__, m.message_args) for m in found if isinstance(m, NAME_PROBLEMS))


def _rules() -> list[Rule]:
    """The default rules and every fixable one: a fix must not add a finding of any of them. (Preview
    rules that fix nothing are left out: RAY077 reports any discarded `.remote()` result, and a fix
    that turns a direct call into `.remote(...)` makes one where the call's value was unused.)"""
    return [rule() for rule in all_rules() if not rule.preview or rule.fixable]


def _sources() -> list[tuple[str, str]]:
    """(id, code) of every piece of code the harness fixes: those with a finding that offers a fix."""
    sources = []
    for rule in FIXABLE:
        sources += [(f"{rule.code}-invalid-{i}", example.code) for i, example in enumerate(rule.INVALID)]
    for folder in (ROOT / "tests" / "eval", ROOT / "examples", ROOT / "examples" / "libraries"):
        sources += [(f"{folder.name}/{path.name}", path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.py"))]
    rules = _rules()
    return [(name, code) for name, code in sources if any(d.fix is not None for d in lint_text(code, rules))]


SOURCES = _sources()


def test_the_harness_covers_every_fixable_rule() -> None:
    fixed_somewhere = {rule.code for rule in FIXABLE if any(example.fixed for example in rule.INVALID)}
    assert fixed_somewhere == {rule.code for rule in FIXABLE}
    assert len(SOURCES) > 50
    assert {name.split("-")[0] for name, _ in SOURCES if name.startswith("RAY")} == {rule.code for rule in FIXABLE}


@pytest.mark.parametrize(("name", "code"), SOURCES, ids=[name for name, _ in SOURCES])
def test_fixes_keep_the_code_sound(name: str, code: str) -> None:
    rules = _rules()
    before = lint_text(code, rules)
    fixable = [d for d in before if d.fix is not None]
    outcome = fix_text(code, rules, unsafe=True)
    assert outcome.applied, f"no fix applied of {[d.code for d in fixable]}; refused: {outcome.refused}"
    ast.parse(outcome.text)
    added = _name_problems(outcome.text) - _name_problems(code)
    assert not added, f"the fixes left names undefined or unused: {dict(added)}\n{outcome.text}"
    codes_before = Counter(d.code for d in before)
    codes_after = Counter(d.code for d in outcome.diagnostics)
    assert not codes_after - codes_before, f"the fixes added findings: {dict(codes_after - codes_before)}\n{outcome.text}"
    for code_fixed, count in outcome.applied.items():
        assert codes_after[code_fixed] <= codes_before[code_fixed] - count, f"{code_fixed}'s finding is still there"
    again = fix_text(outcome.text, rules, unsafe=True)
    assert again.text == outcome.text, "a second --fix must change nothing"


def test_a_fix_that_would_leave_a_name_undefined_is_not_offered() -> None:
    code = "import ray\nfor cfg in configs:\n    results.append(ray.get(train.remote(cfg)))\nprint(cfg)\n"
    (finding,) = [d for d in lint_text(code, _rules()) if d.code == "RAY001"]
    assert finding.fix is None
    assert fix_text(code, _rules(), unsafe=True).text == code


def test_a_fix_that_would_drop_a_comment_is_not_offered() -> None:
    code = "import ray\nray.init(\n    num_cpus=1,\n    local_mode=True,  # debug\n)\n"
    (finding,) = [d for d in lint_text(code, _rules()) if d.code == "RAY091"]
    assert finding.fix is None


def test_edits_cover_only_what_changes() -> None:
    code = "import ray\n@ray.remote(num_cpus=1, max_reconstructions=3)\nclass A:\n    pass\n"
    (finding,) = [d for d in lint_text(code, _rules()) if d.code == "RAY094"]
    assert finding.fix is not None
    (edit,) = finding.fix.edits
    assert (edit.start.line, edit.end.line) == (2, 2)
    line = code.splitlines()[1]
    assert (line[edit.start.column - 1 : edit.end.column - 1], edit.content) == ("construction", "start")
    assert fix_text(code, _rules(), unsafe=False).text == code.replace("max_reconstructions", "max_restarts")


def test_renamed_options_are_fixed_safely_and_guesses_are_not() -> None:
    renamed = "import ray\n@ray.remote(max_reconstructions=3)\nclass A:\n    pass\n"
    guessed = "import ray\n@ray.remote(num_cpu=2)\ndef f():\n    pass\n"
    (by_ray,) = [d for d in lint_text(renamed, _rules()) if d.code == "RAY094"]
    (by_guess,) = [d for d in lint_text(guessed, _rules()) if d.code == "RAY094"]
    assert by_ray.fix is not None and by_ray.fix.applicability is Applicability.SAFE
    assert by_guess.fix is not None and by_guess.fix.applicability is Applicability.UNSAFE


def test_a_loop_variable_bound_again_by_a_later_loop_does_not_block_the_fix() -> None:
    code = (
        "import ray\nfor x in xs:\n    out.append(ray.get(f.remote(x)))\n"
        "if ys:\n    for x in ys:\n        print(x)\n"
    )
    (finding,) = [d for d in lint_text(code, _rules()) if d.code == "RAY001"]
    assert finding.fix is not None
    assert fix_text(code, _rules(), unsafe=True).text.startswith("import ray\nout.extend(ray.get([f.remote(x) for x in xs]))\n")


def test_a_read_before_the_loop_in_an_outer_loop_blocks_the_fix() -> None:
    code = "import ray\nwhile pending:\n    log(x)\n    for x in xs:\n        out.append(ray.get(f.remote(x)))\n"
    (finding,) = [d for d in lint_text(code, _rules()) if d.code == "RAY001"]
    assert finding.fix is None
