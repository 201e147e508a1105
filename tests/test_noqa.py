"""`# noqa` handling in process (`ray_lint.noqa`, and the engine's use of it): which physical lines flake8
joins into one for a comment, what a comment's codes cover, the file-level comment, and how
`--add-noqa` and the editor's "disable for this line" write comments. The command-line tests go
through subprocesses; these are fast enough for `make check`."""

from __future__ import annotations

import pytest

from ray_lint.diagnostics import Diagnostic, Position, Severity
from ray_lint.engine import lint_text
from ray_lint.noqa import NoqaMap, add_noqa, disable_for_line, file_suppression, file_suppresses, has_inline_noqa
from ray_lint.rule import Rule, rule_by_code_or_name

# A `ray.get` in a loop (RAY001) whose call runs over three lines through a triple-quoted string.
IN_STRING = 'import ray\nfor x in xs:\n    print(ray.get(f.remote("""\nmulti\n""")))\n'


def get_in_loop() -> Rule:
    rule = rule_by_code_or_name("RAY001")
    assert rule is not None
    return rule()


def diagnostic(line: int, code: str = "RAY001", noqa_line: int | None = None) -> Diagnostic:
    return Diagnostic(code, "get-in-loop", "message", Severity.WARNING, Position(line, 1), Position(line, 2), noqa_line=noqa_line)


# ---------------------------------------------------------------------------- which lines count as one


@pytest.mark.parametrize(
    "text, line, governing",
    [
        ('x = """\none\ntwo\n"""\ny = 1\n', 1, 4),  # a multi-line string joins its lines
        ('x = """\none\ntwo\n"""\ny = 1\n', 3, 4),
        ('x = """\none\ntwo\n"""\ny = 1\n', 5, 5),
        ("x = 1 + \\\n    2\ny = 3\n", 1, 2),  # so does a backslash continuation
        ("x = f(\n    1,\n)\n", 1, 1),  # brackets do not: each line ends with an NL token
        ("x = f(\n    1,\n)\n", 2, 2),
        ("x = 1\r\ny = '''\r\n'''\r\n", 2, 3),  # CRLF line ends
        ("x = (\n", 1, 1),  # a file tokenize gives up on keeps each line as its own
        ("x = 1\n", 7, 7),  # a line past the end maps to itself
    ],
)
def test_noqa_line_is_the_last_of_the_joined_lines(text: str, line: int, governing: int) -> None:
    assert NoqaMap.build(text).noqa_line(line) == governing


def test_a_comment_on_any_joined_line_covers_all_of_them() -> None:
    lines = NoqaMap.build('x = f("""  # noqa: RAY001\n""")\ny = 1\n')
    assert lines.suppresses(1, "RAY001") and lines.suppresses(2, "RAY001")
    assert not lines.suppresses(3, "RAY001")


@pytest.mark.parametrize(
    "comment, code, suppressed",
    [
        ("# noqa", "RAY001", True),
        ("# noqa: RAY001", "RAY001", True),
        ("# noqa:RAY001,RAY010", "RAY010", True),
        ("# NOQA: RAY001", "RAY001", True),  # the word is case-insensitive
        ("# noqa: RAY0", "RAY001", True),  # codes are prefixes
        ("# noqa: E501, RAY0", "RAY042", True),
        ("# noqa: RAY002", "RAY001", False),
        ("# noqa: RAY0011", "RAY001", False),
        ("# noqa: ray001", "RAY001", False),  # the codes are case-sensitive, as in flake8
        ("# noqa: E501", "RAY001", False),
        ("# noqa:E501 trailing words", "RAY001", False),
        ("# not a noqa", "RAY001", False),
    ],
)
def test_what_an_inline_comment_covers(comment: str, code: str, suppressed: bool) -> None:
    text = f"value = compute()  {comment}\n"
    assert NoqaMap.build(text).suppresses(1, code) is suppressed
    assert has_inline_noqa(text) is ("noqa" in comment.lower() and "not a" not in comment)


@pytest.mark.parametrize(
    "text, everything, codes",
    [
        ("# ray-lint: noqa\nx = 1\n", True, frozenset()),
        ("x = 1\n  #  Ray-Lint : NOQA\n", True, frozenset()),
        ("x = 1\n# ray-lint: noqa: RAY001, RAY010\n", False, frozenset({"RAY001", "RAY010"})),
        ("# ray-lint: noqa: RAY001\n# ray-lint: noqa: RAY02\n", False, frozenset({"RAY001", "RAY02"})),
        ("x = 1  # ray-lint: noqa\n", False, frozenset()),  # only on a line of its own
        ("# ray-lint: noqa is broken here\n", False, frozenset()),
    ],
)
def test_file_level_comment(text: str, everything: bool, codes: frozenset[str]) -> None:
    assert file_suppression(text) == (everything, codes)


def test_file_level_codes_are_prefixes() -> None:
    suppression = file_suppression("# ray-lint: noqa: RAY02\n")
    assert file_suppresses(suppression, "RAY020") and file_suppresses(suppression, "RAY021")
    assert not file_suppresses(suppression, "RAY001")


# ---------------------------------------------------------------------------- through the engine


def test_engine_gives_each_finding_its_noqa_line_and_honours_the_comment() -> None:
    [finding] = lint_text(IN_STRING, [get_in_loop()])
    assert (finding.code, finding.start.line, finding.noqa_line) == ("RAY001", 3, 5)
    silenced = IN_STRING.replace('""")))\n', '""")))  # noqa: RAY001\n')
    assert lint_text(silenced, [get_in_loop()]) == []
    assert len(lint_text(silenced.replace("RAY001", "RAY002"), [get_in_loop()])) == 1


def test_engine_leaves_comments_to_a_caller_that_reads_them_itself() -> None:
    silenced = IN_STRING.replace('""")))\n', '""")))  # noqa\n')
    [kept] = lint_text(silenced, [get_in_loop()], noqa_comments="caller")
    assert kept.start.line == 3
    assert lint_text(silenced, [get_in_loop()], noqa_comments="honour-only") == []
    [unmapped] = lint_text(IN_STRING, [get_in_loop()], noqa_comments="honour-only")
    assert unmapped.noqa_line is None


def test_engine_honours_the_file_level_comment() -> None:
    assert lint_text("# ray-lint: noqa: RAY0\n" + IN_STRING, [get_in_loop()]) == []
    assert len(lint_text("# ray-lint: noqa: RAY1\n" + IN_STRING, [get_in_loop()])) == 1


# ---------------------------------------------------------------------------- writing comments


def test_add_noqa_adds_extends_and_leaves_alone() -> None:
    text = (
        "a = 1\n"
        "b = 2  # keep me\n"
        "c = 3  # noqa: E501\n"
        "d = 4  # noqa\n"
        "e = 5  # noqa: RAY0\n"
        "f = 6 + \\\n"
        "    7\n"
    )
    annotated, changed = add_noqa(text, {1: {"RAY010", "RAY001"}, 2: {"RAY001"}, 3: {"RAY001"}, 4: {"RAY001"}, 5: {"RAY001"}, 6: {"RAY001"}, 99: {"RAY001"}})
    assert changed == 3
    assert annotated == (
        "a = 1  # noqa: RAY001, RAY010\n"
        "b = 2  # keep me  # noqa: RAY001\n"
        "c = 3  # noqa: E501, RAY001\n"
        "d = 4  # noqa\n"  # a bare noqa already covers everything
        "e = 5  # noqa: RAY0\n"  # covered by the prefix
        "f = 6 + \\\n"  # a comment after a continuation would break the code
        "    7\n"
    )
    assert add_noqa(annotated, {1: {"RAY001"}, 2: {"RAY001"}}) == (annotated, 0)


def test_add_noqa_keeps_line_ends_and_a_missing_final_newline() -> None:
    annotated, changed = add_noqa("a = 1\r\nb = 2\rc = 3", {1: {"RAY001"}, 3: {"RAY002"}})
    assert (annotated, changed) == ("a = 1  # noqa: RAY001\r\nb = 2\rc = 3  # noqa: RAY002", 2)


def test_disable_for_line_edits_the_governing_line() -> None:
    edit = disable_for_line(IN_STRING, diagnostic(3))
    assert edit is not None
    assert (edit.start, edit.end) == (Position(5, 1), Position(5, len('""")))') + 1))
    assert edit.content == '""")))  # noqa: RAY001'
    assert disable_for_line(IN_STRING.replace('""")))\n', '""")))  # noqa\n'), diagnostic(3)) is None
    explicit = disable_for_line("a = 1\nb = 2\n", diagnostic(1, noqa_line=2))
    assert explicit is not None and explicit.content == "b = 2  # noqa: RAY001"
