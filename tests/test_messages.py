"""Every finding message is one short sentence: it names the thing, and the rule's docs explain it.

Messages show in the concise output, GitHub annotations, flake8 `--statistics` and editor hovers, so
each is at most 100 characters after formatting with the real names and counts, with no newline and
at most one sentence-ending period. Checked on every rule's INVALID examples, the eval files and the
bundled examples (all rules, preview included), and on each rule's summary `message`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ray_lint.engine import lint_text
from ray_lint.rule import MAX_MESSAGE, Invalid, Rule, all_rules, iter_examples
from ray_lint.source import decode

ROOT = Path(__file__).parent.parent
EVAL_FILES = sorted((ROOT / "tests" / "eval").glob("*.py"))
EXAMPLE_FILES = sorted(p for p in (ROOT / "examples").iterdir() if p.suffix in (".py", ".ipynb"))
_CODE = re.compile(r"`[^`]*`")
_NUMBER = re.compile(r"\d\.\d")
_SENTENCE_END = re.compile(r"\.(\s|$)")


def problem(message: str) -> str | None:
    """Why `message` is not one short sentence, or None when it is."""
    if len(message) > MAX_MESSAGE:
        return f"{len(message)} characters (at most {MAX_MESSAGE})"
    if "\n" in message or "\r" in message:
        return "a newline"
    prose = _NUMBER.sub("0", _CODE.sub("``", message))
    ends = len(_SENTENCE_END.findall(prose))
    if ends > 1 or (ends == 1 and not prose.rstrip().endswith(".")):
        return "more than one sentence"
    return None


def _all_rules() -> list[Rule]:
    return [rule() for rule in all_rules()]


def _failures(found: list[tuple[str, str, str]]) -> list[str]:
    """`where: CODE: why: message` for each (where, code, message) that is not one short sentence."""
    failures = []
    for where, code, message in found:
        why = problem(message)
        if why is not None:
            failures.append(f"{where}: {code}: {why}: {message!r}")
    return failures


def test_problem_spots_long_and_multi_sentence_messages() -> None:
    assert problem("`ray.get` in a loop waits for each task in turn") is None
    assert problem("`np.float64` of 1.5 GB is captured by `f`") is None
    assert problem("x" * (MAX_MESSAGE + 1)) is not None
    assert problem("one sentence. Another sentence") is not None
    assert problem("first line\nsecond line") is not None


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_summary_message(rule: type[Rule]) -> None:
    why = problem(rule.message)
    assert why is None, f"{rule.code} summary: {why}: {rule.message!r}"


def test_invalid_example_messages() -> None:
    rules = _all_rules()
    found = []
    for rule, example in iter_examples():
        if isinstance(example, Invalid):
            index = rule.INVALID.index(example)
            where = f"{rule.code} INVALID[{index}]"
            found += [(where, d.code, d.message) for d in lint_text(example.code, rules)]
    assert found
    failures = _failures(found)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("path", EVAL_FILES + EXAMPLE_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_file_messages(path: Path) -> None:
    source = decode(path.read_bytes(), path)
    describe_line = source.notebook.describe_line if source.notebook is not None else None
    found = [(f"{path.name}:{d.start.line}", d.code, d.message) for d in lint_text(source.text, _all_rules(), describe_line)]
    failures = _failures(found)
    assert not failures, "\n".join(failures)
