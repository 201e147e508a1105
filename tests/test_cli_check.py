"""End-to-end tests of `ray-lint check`, `ray-lint config` and `ray-lint rule`: exit codes, file
discovery, rule selection, configuration, suppressions, fixes, standard input and parallel runs."""

from __future__ import annotations

import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ray_lint.rule import all_rules, rule_by_code_or_name

# One RAY001 finding on line 2, column 12 (`ray.get` after "results = ["); its fix is unsafe.
SNIPPET = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
FIXED = "import ray\nresults = ray.get([f.remote(x) for x in xs])\n"
# Ray code without findings: every task is submitted before the one `ray.get`.
CLEAN = "import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n"
# A syntax error in a file the pre-filter lets through (it contains `.remote(`): RAY000 on line 2.
BROKEN = "import ray\nref = f.remote(\n"
# RAY094 on line 3 (`ray.remote()` with empty parentheses), whose fix is safe.
SAFE_FIX = "import ray\n\n@ray.remote()\ndef f(x):\n    return x\n"
SAFE_FIXED = "import ray\n\n@ray.remote\ndef f(x):\n    return x\n"

MESSAGE = "`ray.get` in a loop waits for each task in turn"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def found(proc: subprocess.CompletedProcess[str]) -> set[tuple[str, str, int]]:
    """(filename, code, row) of each finding in a JSON report."""
    return {(d["filename"], d["code"], d["location"]["row"]) for d in json.loads(proc.stdout)}


def check_json(run, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["check", "--jobs", "1", "--output-format", "json", *args], cwd)


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- exit codes


def test_exit_codes(run, tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    write(tmp_path / "bad.py", SNIPPET)

    clean = run(["check", "--jobs", "1", "clean.py"], tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.strip() == "All checks passed!"

    dirty = run(["check", "--jobs", "1", "--output-format", "concise", "clean.py", "bad.py"], tmp_path)
    assert dirty.returncode == 1
    assert f"bad.py:2:12: RAY001 {MESSAGE}" in dirty.stdout.splitlines()
    assert "clean.py" not in dirty.stdout

    zero = run(["check", "--jobs", "1", "--output-format", "concise", "--exit-zero", "bad.py"], tmp_path)
    assert zero.returncode == 0
    assert f"bad.py:2:12: RAY001 {MESSAGE}" in zero.stdout.splitlines()

    jobs = run(["check", "--jobs", "0", "bad.py"], tmp_path)
    assert jobs.returncode == 2
    assert "--jobs must be at least 1" in jobs.stderr

    bad_format = run(["check", "--output-format", "xml", "bad.py"], tmp_path)
    assert bad_format.returncode == 2
    assert "xml" in bad_format.stderr

    both = run(["check", "--add-noqa", "--fix", "bad.py"], tmp_path)
    assert both.returncode == 2
    assert "--add-noqa cannot be combined with --fix" in both.stderr
    assert (tmp_path / "bad.py").read_text(encoding="utf-8") == SNIPPET

    for proc in (clean, dirty, zero, jobs, bad_format, both):
        assert_no_traceback(proc)


# ---------------------------------------------------------------------------- discovery


def test_directory_recursion_gitignore_and_excludes(run, tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, timeout=60)
    write(tmp_path / ".gitignore", "ignored/\ngen_*.py\n")
    write(tmp_path / "pkg" / "sub" / "deep.py", SNIPPET)
    write(tmp_path / "pkg" / "gen_code.py", SNIPPET)  # ignored by the root .gitignore
    write(tmp_path / "ignored" / "x.py", SNIPPET)
    write(tmp_path / "pkg" / "local" / ".gitignore", "skip.py\n")  # a nested .gitignore
    write(tmp_path / "pkg" / "local" / "skip.py", SNIPPET)
    write(tmp_path / "pkg" / "local" / "keep.py", SNIPPET)
    write(tmp_path / "extras" / "third.py", SNIPPET)
    write(tmp_path / "top.py", SNIPPET)
    write(tmp_path / "third_party" / "lib.py", SNIPPET)  # vendored code is excluded by default
    write(tmp_path / "src" / "_vendor" / "lib.py", SNIPPET)
    write(tmp_path / "notes.txt", SNIPPET)  # not a Python file

    everything = check_json(run, tmp_path, ".")
    assert everything.returncode == 1, everything.stderr
    assert found(everything) == {
        ("pkg/sub/deep.py", "RAY001", 2),
        ("pkg/local/keep.py", "RAY001", 2),
        ("extras/third.py", "RAY001", 2),
        ("top.py", "RAY001", 2),
    }

    # No path means the current directory.
    default = check_json(run, tmp_path)
    assert found(default) == found(everything)

    extended = check_json(run, tmp_path, "--extend-exclude", "extras,top.py", ".")
    assert found(extended) == {("pkg/sub/deep.py", "RAY001", 2), ("pkg/local/keep.py", "RAY001", 2)}

    # A file named on the command line is linted even though .gitignore or an exclusion skips it...
    named = check_json(run, tmp_path, "--extend-exclude", "extras", "ignored/x.py", "pkg/gen_code.py", "extras/third.py")
    assert found(named) == {
        ("ignored/x.py", "RAY001", 2),
        ("pkg/gen_code.py", "RAY001", 2),
        ("extras/third.py", "RAY001", 2),
    }
    # ...unless --force-exclude.
    forced = check_json(run, tmp_path, "--force-exclude", "--extend-exclude", "extras", "extras/third.py", "top.py")
    assert found(forced) == {("top.py", "RAY001", 2)}

    for proc in (everything, default, extended, named, forced):
        assert_no_traceback(proc)


def test_gitignore_applies_only_inside_a_git_repository(run, tmp_path):
    write(tmp_path / ".gitignore", "ignored/\n")
    write(tmp_path / "ignored" / "x.py", SNIPPET)
    proc = check_json(run, tmp_path, ".")
    assert found(proc) == {("ignored/x.py", "RAY001", 2)}


def test_exclude_in_config(run, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nexclude = ["legacy", "*_pb2.py"]\n')
    write(tmp_path / "legacy" / "old.py", SNIPPET)
    write(tmp_path / "src" / "thing_pb2.py", SNIPPET)
    write(tmp_path / "src" / "new.py", SNIPPET)

    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert found(proc) == {("src/new.py", "RAY001", 2)}

    named = check_json(run, tmp_path, "legacy/old.py")
    assert found(named) == {("legacy/old.py", "RAY001", 2)}


# ---------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {"RAY000", "RAY001"}),
        (["--select", "RAY001"], {"RAY001"}),
        (["--select", "RAY000"], {"RAY000"}),
        (["--select", "RAY0"], {"RAY000", "RAY001"}),
        (["--select", "get-in-loop"], {"RAY001"}),
        (["--ignore", "RAY001"], {"RAY000"}),
        (["--ignore", "get-in-loop"], {"RAY000"}),
        (["--ignore", "RAY0"], set()),
        (["--select", "RAY000", "--extend-select", "get-in-loop"], {"RAY000", "RAY001"}),
        (["--select", "file-error", "--extend-select", "RAY001"], {"RAY000", "RAY001"}),
        # Within one layer the more specific selector wins...
        (["--ignore", "RAY0", "--extend-select", "RAY001"], {"RAY001"}),
        # ...and on a tie `ignore` wins.
        (["--select", "get-in-loop", "--ignore", "RAY001"], set()),
    ],
)
def test_select_ignore_extend_select(run, tmp_path, args, expected):
    write(tmp_path / "good.py", SNIPPET)
    write(tmp_path / "broken.py", BROKEN)
    proc = check_json(run, tmp_path, *args, ".")
    assert proc.returncode == (1 if expected else 0), proc.stderr
    codes = {code for _, code, _ in found(proc)}
    assert codes == expected
    if "RAY001" in expected:
        assert ("good.py", "RAY001", 2) in found(proc)
    if "RAY000" in expected:
        assert ("broken.py", "RAY000", 2) in found(proc)


# A coordinator actor with no `num_cpus`: RAY044 `actor-default-num-cpus`, a preview rule.
PREVIEW_SNIPPET = "import ray\n\n@ray.remote\nclass Tracker:\n    def mark(self, key):\n        return key\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], set()),
        (["--preview"], {"RAY044"}),
        (["--select", "RAY044"], {"RAY044"}),
        (["--select", "actor-default-num-cpus"], {"RAY044"}),
        (["--select", "RAY0"], set()),  # a prefix does not turn a preview rule on...
        (["--select", "RAY0", "--preview"], {"RAY044"}),  # ...unless preview mode is on
        (["--preview", "--ignore", "RAY044"], set()),
    ],
)
def test_preview_rules(run, tmp_path, args, expected):
    assert rule_by_code_or_name("RAY044").preview  # type: ignore[union-attr]
    write(tmp_path / "tracker.py", PREVIEW_SNIPPET)
    proc = check_json(run, tmp_path, *args, ".")
    assert {code for _, code, _ in found(proc)} == expected, proc.stderr


def test_command_line_selection_overrides_config(run, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nignore = ["RAY001"]\n')
    write(tmp_path / "good.py", SNIPPET)
    assert found(check_json(run, tmp_path, ".")) == set()
    assert found(check_json(run, tmp_path, "--extend-select", "RAY001", ".")) == {("good.py", "RAY001", 2)}
    assert found(check_json(run, tmp_path, "--select", "RAY001", ".")) == {("good.py", "RAY001", 2)}


@pytest.mark.parametrize(
    ("option", "selector", "suggestion"),
    [
        ("--select", "RAY999", None),
        ("--select", "get-in-lop", "get-in-loop"),
        ("--ignore", "get_in_loop", "get-in-loop"),
        ("--extend-select", "get-in-lop", "get-in-loop"),
        ("--extend-ignore", "get-in-lop", "get-in-loop"),
    ],
)
def test_unknown_selector(run, tmp_path, option, selector, suggestion):
    write(tmp_path / "good.py", SNIPPET)
    proc = run(["check", "--jobs", "1", option, selector, "good.py"], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"`{selector}`" in proc.stderr
    assert "unknown rule selector" in proc.stderr
    if suggestion:
        assert f"did you mean `{suggestion}`?" in proc.stderr
    assert_no_traceback(proc)


def test_extend_ignore(run, tmp_path):
    """`--extend-ignore` and the config's `extend-ignore` disable rules on top of `ignore`, as in ruff."""
    write(tmp_path / "good.py", SNIPPET)
    write(tmp_path / "broken.py", BROKEN)
    config = write(tmp_path / "ray-lint.toml", 'ignore = ["RAY000"]\n')
    assert found(check_json(run, tmp_path, ".")) == {("good.py", "RAY001", 2)}
    assert found(check_json(run, tmp_path, "--extend-ignore", "get-in-loop", ".")) == set()
    assert found(check_json(run, tmp_path, "--ignore", "RAY001", "--extend-ignore", "RAY000", "--isolated", ".")) == set()

    config.write_text('extend-ignore = ["RAY001"]\n', encoding="utf-8")
    assert found(check_json(run, tmp_path, ".")) == {("broken.py", "RAY000", 2)}
    shown = json.loads(run(["config", "--output-format", "json"], tmp_path).stdout)
    assert shown["extend-ignore"]["value"] == ["RAY001"]
    assert "RAY001" not in shown["enabled rules"]["value"]


# ---------------------------------------------------------------------------- configuration


def test_pyproject_and_ray_lint_toml(run, tmp_path):
    one = tmp_path / "one"
    write(one / "pyproject.toml", '[project]\nname = "one"\n\n[tool.ray-lint]\nignore = ["RAY001"]\n')
    write(one / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "."], one)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "All checks passed!"

    two = tmp_path / "two"
    write(two / "ray-lint.toml", 'ignore = ["get-in-loop"]\n')
    write(two / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "."], two)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "All checks passed!"

    # --isolated ignores the config files.
    isolated = check_json(run, two, "--isolated", ".")
    assert found(isolated) == {("a.py", "RAY001", 2)}

    # A pyproject.toml without [tool.ray-lint] is not a config file: the one above it applies.
    write(one / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')
    write(one / "sub" / "b.py", SNIPPET)
    proc = check_json(run, one, ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert found(proc) == set()


def test_config_option(run, tmp_path):
    write(tmp_path / "settings" / "custom.toml", 'ignore = ["RAY001"]\n')
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY001"]\n')
    write(tmp_path / "a.py", SNIPPET)

    assert found(check_json(run, tmp_path, "a.py")) == {("a.py", "RAY001", 2)}
    chosen = check_json(run, tmp_path, "--config", "settings/custom.toml", "a.py")
    assert chosen.returncode == 0, chosen.stderr
    assert found(chosen) == set()

    missing = run(["check", "--jobs", "1", "--config", "nope.toml", "a.py"], tmp_path)
    assert missing.returncode == 2
    assert "nope.toml" in missing.stderr
    assert "not found" in missing.stderr
    assert_no_traceback(missing)


def test_nearest_config_wins(run, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nignore = ["RAY001"]\n')
    write(tmp_path / "top.py", SNIPPET)
    write(tmp_path / "sub" / "ray-lint.toml", 'select = ["RAY001"]\n')
    write(tmp_path / "sub" / "inner.py", SNIPPET)
    write(tmp_path / "sub" / "deeper" / "leaf.py", SNIPPET)

    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert found(proc) == {("sub/inner.py", "RAY001", 2), ("sub/deeper/leaf.py", "RAY001", 2)}

    # The same when the files are named one by one, and when running from the subdirectory.
    named = check_json(run, tmp_path, "top.py", "sub/inner.py")
    assert found(named) == {("sub/inner.py", "RAY001", 2)}
    inside = check_json(run, tmp_path / "sub", "inner.py", "../top.py")
    assert found(inside) == {("inner.py", "RAY001", 2)}


def test_unknown_config_key(run, tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselct = ["RAY001"]\n')
    write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "."], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "`selct`" in proc.stderr
    assert str(pyproject.resolve()) in proc.stderr
    assert "did you mean `select`?" in proc.stderr
    assert_no_traceback(proc)

    write(tmp_path / "ray-lint.toml", 'ignroe = ["RAY001"]\n')
    proc = run(["check", "--jobs", "1", "."], tmp_path)
    assert proc.returncode == 2
    assert "`ignroe`" in proc.stderr
    assert str((tmp_path / "ray-lint.toml").resolve()) in proc.stderr
    assert "did you mean `ignore`?" in proc.stderr
    assert_no_traceback(proc)


def test_unknown_rule_option(run, tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.ray-lint.rules.get-in-loop]\nextra-get-functoins = ["mypkg.fetch"]\n',
    )
    write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "."], tmp_path)
    assert proc.returncode == 2
    assert "`extra-get-functoins`" in proc.stderr
    assert "get-in-loop" in proc.stderr
    assert "did you mean `extra-get-functions`?" in proc.stderr
    assert str((tmp_path / "pyproject.toml").resolve()) in proc.stderr
    assert_no_traceback(proc)


def test_rule_option_is_used(run, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ray-lint.rules.get-in-loop]\nextra-get-functions = ["mypkg.fetch"]\n')
    write(tmp_path / "a.py", "import ray\nfrom mypkg import fetch\nfor x in xs:\n    print(fetch(f.remote(x)))\n")
    proc = check_json(run, tmp_path, "a.py")
    assert found(proc) == {("a.py", "RAY001", 4)}
    isolated = check_json(run, tmp_path, "--isolated", "a.py")
    assert found(isolated) == set()


@pytest.mark.parametrize("name", ["pyproject.toml", "ray-lint.toml"])
def test_invalid_toml(run, tmp_path, name):
    config = write(tmp_path / name, '[tool.ray-lint]\nselect = ["RAY001"\n')
    write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "."], tmp_path)
    assert proc.returncode == 2
    assert str(config.resolve()) in proc.stderr
    assert "TOML" in proc.stderr
    assert_no_traceback(proc)


def test_per_file_ignores(run, tmp_path):
    write(tmp_path / "tests" / "test_a.py", SNIPPET)
    write(tmp_path / "src" / "a.py", SNIPPET)

    from_cli = check_json(run, tmp_path, "--per-file-ignores", "tests/*:RAY001", ".")
    assert found(from_cli) == {("src/a.py", "RAY001", 2)}

    write(tmp_path / "pyproject.toml", '[tool.ray-lint.per-file-ignores]\n"tests/*" = ["get-in-loop"]\n')
    from_config = check_json(run, tmp_path, ".")
    assert found(from_config) == {("src/a.py", "RAY001", 2)}

    both = check_json(run, tmp_path, "--per-file-ignores", "src/*:RAY0", ".")
    assert both.returncode == 0, both.stderr
    assert found(both) == set()

    malformed = run(["check", "--jobs", "1", "--per-file-ignores", "tests/*", "."], tmp_path)
    assert malformed.returncode == 2
    assert "--per-file-ignores" in malformed.stderr
    assert_no_traceback(malformed)


# ---------------------------------------------------------------------------- ray-lint config


# Every rule that is not in preview is on by default.
DEFAULT_CODES = [rule.code for rule in all_rules() if not rule.preview]
CONFIG_WITH_OPTION = '[tool.ray-lint]\nignore = ["RAY001"]\n\n[tool.ray-lint.rules.get-in-loop]\nextra-get-functions = ["mypkg.fetch"]\n'


def test_config_command_json(run, tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", CONFIG_WITH_OPTION)
    proc = run(["config", "--output-format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    settings = json.loads(proc.stdout)
    origin = f"{pyproject.resolve()} [tool.ray-lint]"
    assert settings["ignore"] == {"value": ["RAY001"], "source": origin}
    assert settings["rules.get-in-loop.extra-get-functions"] == {"value": ["mypkg.fetch"], "source": origin}
    assert settings["enabled rules"]["value"] == [c for c in DEFAULT_CODES if c != "RAY001"]
    assert settings["select"] == {"value": [], "source": "default"}
    assert settings["preview"] == {"value": False, "source": "default"}
    assert settings["extend-exclude"] == {"value": [], "source": "default"}
    assert settings["exclude"]["source"] == "default"
    assert ".venv" in settings["exclude"]["value"]

    isolated = json.loads(run(["config", "--isolated", "--output-format", "json"], tmp_path).stdout)
    assert isolated["ignore"] == {"value": [], "source": "default"}
    assert isolated["enabled rules"]["value"] == DEFAULT_CODES
    assert isolated["rules.get-in-loop.extra-get-functions"] == {"value": [], "source": "default"}

    # For a path in a directory with its own config file, that file's settings.
    sub = write(tmp_path / "sub" / "ray-lint.toml", 'extend-select = ["RAY0"]\n')
    nested = json.loads(run(["config", "sub", "--output-format", "json"], tmp_path).stdout)
    assert nested["extend-select"] == {"value": ["RAY0"], "source": str(sub.resolve())}
    assert nested["ignore"] == {"value": [], "source": "default"}


def test_config_command_text(run, tmp_path):
    pyproject = write(tmp_path / "pyproject.toml", CONFIG_WITH_OPTION)
    proc = run(["config"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    origin = f"{pyproject.resolve()} [tool.ray-lint]"
    assert f'ignore = ["RAY001"]  # from {origin}' in lines
    assert f'rules.get-in-loop.extra-get-functions = ["mypkg.fetch"]  # from {origin}' in lines
    enabled = ", ".join(f'"{c}"' for c in DEFAULT_CODES if c != "RAY001")
    assert f"enabled rules = [{enabled}]  # from default" in lines
    assert "select = []  # from default" in lines
    assert "preview = false  # from default" in lines
    assert "extend-exclude = []  # from default" in lines
    assert "verify.tests = []  # from default" in lines
    assert "verify.args = {}  # from default" in lines
    assert 'ray-version = "any"  # from default' in lines  # the project declares no Ray
    keys = [line.split(" = ", 1)[0] for line in lines]
    settings = [
        "enabled rules", "select", "extend-select", "ignore", "extend-ignore", "preview", "per-file-ignores", "exclude",
        "extend-exclude", "test-files", "all-rules-in-tests", "docs-url", "verify.tests", "verify.args", "ray-version",
    ]
    assert keys[: len(settings)] == settings
    assert 'test-files = ["tests/", "test/", "test_*.py", "*_test.py", "conftest.py"]  # from default' in lines
    assert sorted(keys[len(settings) :]) == sorted(f"rules.{rule.name}.{option.name}" for rule in all_rules() for option in rule.options)


def test_config_command_errors(run, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselct = ["RAY001"]\n')
    proc = run(["config"], tmp_path)
    assert proc.returncode == 2
    assert "`selct`" in proc.stderr and "did you mean `select`?" in proc.stderr
    assert_no_traceback(proc)


# ---------------------------------------------------------------------------- ray-lint rule


def test_rule_docs(run, tmp_path):
    by_code = run(["rule", "RAY001"], tmp_path)
    by_name = run(["rule", "get-in-loop"], tmp_path)
    for proc in (by_code, by_name):
        assert proc.returncode == 0, proc.stderr
        assert "## What it does" in proc.stdout
        assert "get-in-loop (RAY001)" in proc.stdout
        assert "## Fix safety" in proc.stdout
    assert by_code.stdout == by_name.stdout

    file_error = run(["rule", "RAY000"], tmp_path)
    assert file_error.returncode == 0
    assert "file-error (RAY000)" in file_error.stdout
    assert "## What it does" in file_error.stdout

    # One category name for people (the rule's page and the listing), the id for programs (JSON).
    assert "Category: Performance" in by_code.stdout

    one = json.loads(run(["rule", "get-in-loop", "--output-format", "json"], tmp_path).stdout)
    assert one["code"] == "RAY001"
    assert one["category"] == "perf"
    assert one["docs"].startswith("## What it does")
    assert one["options"]["extra-get-functions"]["default"] == []


def test_rule_all_json(run, tmp_path):
    proc = run(["rule", "--all", "--output-format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rules = json.loads(proc.stdout)
    assert isinstance(rules, list)
    by_code = {rule["code"]: rule for rule in rules}
    assert {k: by_code["RAY000"][k] for k in ("code", "name", "severity", "preview", "fixable")} == {
        "code": "RAY000", "name": "file-error", "severity": "error", "preview": False, "fixable": False,
    }
    assert {k: by_code["RAY001"][k] for k in ("code", "name", "severity", "preview", "fixable")} == {
        "code": "RAY001", "name": "get-in-loop", "severity": "warning", "preview": False, "fixable": True,
    }
    assert [rule["code"] for rule in rules] == sorted(by_code)

    text = run(["rule", "--all"], tmp_path, env={"COLUMNS": "200"})
    assert text.returncode == 0
    rows = {line.split()[0]: line.split() for line in text.stdout.splitlines()[1:] if line.strip()}
    assert list(rows) == [rule["code"] for rule in rules], "one row per rule, in code order"
    assert rows["RAY001"] == ["RAY001", "get-in-loop", "Performance", "warning", "default", "yes"]
    assert rows["RAY000"] == ["RAY000", "file-error", "Files", "error", "default", "-"]


def test_rule_unknown(run, tmp_path):
    unknown = run(["rule", "RAY999"], tmp_path)
    assert unknown.returncode == 2
    assert "`RAY999`" in unknown.stderr
    typo = run(["rule", "get-in-lop"], tmp_path)
    assert typo.returncode == 2
    assert "did you mean `get-in-loop`?" in typo.stderr
    nothing = run(["rule"], tmp_path)
    assert nothing.returncode == 2
    for proc in (unknown, typo, nothing):
        assert proc.stdout == ""
        assert_no_traceback(proc)


# ---------------------------------------------------------------------------- suppressions


def test_noqa_comments(run, tmp_path):
    write(
        tmp_path / "lines.py",
        "import ray\n"
        "a = [ray.get(f.remote(x)) for x in xs]  # noqa\n"  # 2: suppressed
        "b = [ray.get(f.remote(x)) for x in xs]  # noqa: RAY001\n"  # 3: suppressed
        "c = [ray.get(f.remote(x)) for x in xs]  # noqa: RAY002\n"  # 4: reported
        "d = [ray.get(f.remote(x)) for x in xs]  # NOQA:RAY001\n"  # 5: suppressed
        "e = [ray.get(f.remote(x)) for x in xs]\n"  # 6: reported
        "g = [ray.get(f.remote(x)) for x in xs]  # noqa: E501, RAY0\n"  # 7: suppressed (prefix)
        "h = [ray.get(f.remote(x)) for x in xs]  # noqa: E501\n",  # 8: reported
    )
    write(tmp_path / "whole.py", "# ray-lint: noqa\n" + SNIPPET)
    write(tmp_path / "codes.py", SNIPPET + "# ray-lint: noqa: RAY001\n")
    write(tmp_path / "other.py", "# ray-lint: noqa: RAY002\n" + SNIPPET)  # reported on line 3
    write(tmp_path / "whole_broken.py", "# ray-lint: noqa\n" + BROKEN)
    proc = check_json(run, tmp_path, ".")
    assert proc.returncode == 1, proc.stderr
    assert found(proc) == {
        ("lines.py", "RAY001", 4),
        ("lines.py", "RAY001", 6),
        ("lines.py", "RAY001", 8),
        ("other.py", "RAY001", 3),
    }


def test_noqa_on_multiline_call(run, tmp_path):
    multi = (
        "import ray\n"
        "for x in xs:\n"
        "    print(ray.get(\n"
        "        f.remote(x)\n"
        "    ))\n"
    )
    write(tmp_path / "plain.py", multi)
    write(tmp_path / "noqa.py", multi.replace("ray.get(\n", "ray.get(  # noqa: RAY001\n"))
    proc = check_json(run, tmp_path, ".")
    report = json.loads(proc.stdout)
    assert found(proc) == {("plain.py", "RAY001", 3)}
    (finding,) = report
    assert finding["location"] == {"row": 3, "column": 11}
    assert finding["end_location"] == {"row": 5, "column": 6}
    assert finding["noqa_row"] == 3


def test_add_noqa(run, tmp_path):
    source = (
        "import ray\n"
        "a = [ray.get(f.remote(x)) for x in xs]\n"
        "b = [ray.get(f.remote(x)) for x in xs]  # keep me\n"
        "c = [ray.get(f.remote(x)) for x in xs]  # noqa: E501\n"
        "d = [ray.get(f.remote(x)) for x in xs]  # noqa\n"
        "e = [ray.get(f.remote(x)) for x in xs]  # noqa: E501  # why\n"
    )
    target = write(tmp_path / "a.py", source)
    added = run(["check", "--jobs", "1", "--add-noqa", "."], tmp_path)
    assert added.returncode == 0, added.stderr
    assert "Added 4 noqa directives." in added.stderr
    assert target.read_text(encoding="utf-8") == (
        "import ray\n"
        "a = [ray.get(f.remote(x)) for x in xs]  # noqa: RAY001\n"
        "b = [ray.get(f.remote(x)) for x in xs]  # keep me  # noqa: RAY001\n"
        "c = [ray.get(f.remote(x)) for x in xs]  # noqa: E501, RAY001\n"
        "d = [ray.get(f.remote(x)) for x in xs]  # noqa\n"
        "e = [ray.get(f.remote(x)) for x in xs]  # noqa: E501, RAY001  # why\n"
    )
    after = run(["check", "--jobs", "1", "."], tmp_path)
    assert after.returncode == 0, after.stdout
    assert after.stdout.strip() == "All checks passed!"

    again = run(["check", "--jobs", "1", "--add-noqa", "."], tmp_path)
    assert again.returncode == 0
    assert "Added 0 noqa directives." in again.stderr


# ---------------------------------------------------------------------------- fixes


def test_fix_without_unsafe_changes_nothing(run, tmp_path):
    target = write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "--fix", "a.py"], tmp_path)
    assert proc.returncode == 1
    assert target.read_text(encoding="utf-8") == SNIPPET
    assert "Found 1 problem." in proc.stdout
    assert "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in proc.stdout


def test_fix_unsafe_rewrites_keeping_mode_and_line_endings(run, tmp_path):
    lf = write(tmp_path / "lf.py", SNIPPET)
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(SNIPPET.replace("\n", "\r\n").encode())
    os.chmod(crlf, 0o640)
    os.chmod(lf, 0o640)

    proc = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "--show-fixes", "."], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lf.read_bytes() == FIXED.encode()
    assert crlf.read_bytes() == FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(lf.stat().st_mode) == 0o640
    assert stat.S_IMODE(crlf.stat().st_mode) == 0o640
    assert "Found 2 problems (2 fixed, 0 remaining)." in proc.stdout
    assert "Fixed 1 × RAY001 in crlf.py" in proc.stderr
    assert "Fixed 1 × RAY001 in lf.py" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ray_lint_cache", "crlf.py", "lf.py"]  # no temporary files left

    after = run(["check", "--jobs", "1", "."], tmp_path)
    assert after.returncode == 0
    assert after.stdout.strip() == "All checks passed!"


def test_fix_for_loop_append(run, tmp_path):
    target = write(tmp_path / "a.py", "import ray\nresults = []\nfor x in xs:\n    results.append(ray.get(f.remote(x)))\nprint(results)\n")
    proc = run(["check", "--jobs", "1", "--fix", "--unsafe-fixes", "a.py"], tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert target.read_text(encoding="utf-8") == (
        "import ray\nresults = []\nresults.extend(ray.get([f.remote(x) for x in xs]))\nprint(results)\n"
    )


def test_diff(run, tmp_path):
    target = write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "--diff", "--unsafe-fixes", "a.py"], tmp_path)
    assert proc.returncode == 1
    assert target.read_text(encoding="utf-8") == SNIPPET
    lines = proc.stdout.splitlines()
    assert "--- a/a.py" in lines
    assert "+++ b/a.py" in lines
    assert "-results = [ray.get(f.remote(x)) for x in xs]" in lines
    assert "+results = ray.get([f.remote(x) for x in xs])" in lines
    assert " import ray" in lines
    assert lines.index("-results = [ray.get(f.remote(x)) for x in xs]") < lines.index(
        "+results = ray.get([f.remote(x) for x in xs])"
    )
    assert proc.stderr.splitlines() == ["Would fix 1 problem."]  # standard output stays a patch

    # The only fix is unsafe: no diff, but the hint (as ruff words it), and the exit status of a diff.
    nothing = run(["check", "--jobs", "1", "--diff", "a.py"], tmp_path)
    assert nothing.returncode == 0
    assert nothing.stdout == ""
    assert nothing.stderr.splitlines() == ["No problems would be fixed (1 fix available with `--unsafe-fixes`)."]
    assert target.read_text(encoding="utf-8") == SNIPPET

    quiet = run(["check", "--jobs", "1", "--diff", "--quiet", "a.py"], tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_show_fixes_in_full_output(run, tmp_path):
    target = write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "--show-fixes", "--unsafe-fixes", "a.py"], tmp_path)
    assert proc.returncode == 1
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "unsafe fix:" in lines
    assert "-results = [ray.get(f.remote(x)) for x in xs]" in lines
    assert "+results = ray.get([f.remote(x) for x in xs])" in lines
    assert "= help: Submit all tasks first, then call `ray.get` once" in lines
    assert "[*] 1 fixable with the `--fix --unsafe-fixes` option." in lines
    assert target.read_text(encoding="utf-8") == SNIPPET

    plain = run(["check", "--jobs", "1", "--unsafe-fixes", "a.py"], tmp_path)
    assert "+results = ray.get([f.remote(x) for x in xs])" not in plain.stdout


def test_fix_only(run, tmp_path):
    """`--fix-only` applies fixes and reports what it fixed, not what is left; it exits 0 unless
    `--exit-non-zero-on-fix` and a fix was applied (ruff's summary, with "problems" for "errors")."""
    safe = write(tmp_path / "safe.py", SAFE_FIX)
    unsafe = write(tmp_path / "unsafe.py", SNIPPET)
    write(tmp_path / "broken.py", BROKEN)  # a finding without a fix: not reported
    proc = run(["check", "--jobs", "1", "--fix-only", "."], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["Fixed 1 problem (1 additional fix available with `--unsafe-fixes`)."]
    assert safe.read_text(encoding="utf-8") == SAFE_FIXED
    assert unsafe.read_text(encoding="utf-8") == SNIPPET

    hint = run(["check", "--jobs", "1", "--fix-only", "."], tmp_path)
    assert (hint.returncode, hint.stdout) == (0, "No problems fixed (1 fix available with `--unsafe-fixes`).\n")

    flagged = run(["check", "--jobs", "1", "--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix", "."], tmp_path)
    assert flagged.returncode == 1, flagged.stderr
    assert flagged.stdout.splitlines() == ["Fixed 1 problem."]
    assert unsafe.read_text(encoding="utf-8") == FIXED

    nothing = run(["check", "--jobs", "1", "--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix", "."], tmp_path)
    assert (nothing.returncode, nothing.stdout) == (0, "")

    write(tmp_path / "safe.py", SAFE_FIX)
    machine = run(["check", "--jobs", "1", "--fix-only", "--output-format", "json", "."], tmp_path)
    assert (machine.returncode, machine.stdout) == (0, "")  # as ruff: the machine formats report nothing
    assert safe.read_text(encoding="utf-8") == SAFE_FIXED

    both = run(["check", "--add-noqa", "--fix-only", "."], tmp_path)
    assert both.returncode == 2 and "--add-noqa cannot be combined with --fix-only" in both.stderr


def test_exit_non_zero_on_fix(run, tmp_path):
    target = write(tmp_path / "a.py", SAFE_FIX)
    proc = run(["check", "--jobs", "1", "--fix", "--exit-non-zero-on-fix", "a.py"], tmp_path)
    assert proc.returncode == 1, proc.stderr  # no problem is left, but one was fixed
    assert "Found 1 problem (1 fixed, 0 remaining)." in proc.stdout.splitlines()
    assert target.read_text(encoding="utf-8") == SAFE_FIXED
    again = run(["check", "--jobs", "1", "--fix", "--exit-non-zero-on-fix", "a.py"], tmp_path)
    assert (again.returncode, again.stdout) == (0, "All checks passed!\n")

    write(tmp_path / "a.py", SAFE_FIX)
    zero = run(["check", "--jobs", "1", "--fix", "--exit-non-zero-on-fix", "--exit-zero", "a.py"], tmp_path)
    assert zero.returncode == 0
    write(tmp_path / "a.py", SAFE_FIX)
    plain = run(["check", "--jobs", "1", "--fix", "a.py"], tmp_path)
    assert plain.returncode == 0


# ---------------------------------------------------------------------------- quiet, files, watch


def test_quiet(run, tmp_path):
    """`--quiet` prints the findings and nothing else: no summary, hints, fix counts or warnings."""
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "clean.py", CLEAN)
    proc = run(["check", "--jobs", "1", "-q", "--output-format", "concise", "a.py"], tmp_path)
    assert proc.returncode == 1
    assert [line.split(" ", 2)[:2] for line in proc.stdout.splitlines()] == [["a.py:2:12:", "RAY001"]]
    assert proc.stderr == ""

    clean = run(["check", "--jobs", "1", "--quiet", "clean.py"], tmp_path)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")

    statistics = run(["check", "--jobs", "1", "--quiet", "--statistics", "a.py"], tmp_path)
    assert [line.split() for line in statistics.stdout.splitlines() if line.strip()] == [["1", "RAY001", "get-in-loop"]]

    fixed = run(["check", "--jobs", "1", "-q", "--fix", "--unsafe-fixes", "--show-fixes", "a.py"], tmp_path)
    assert (fixed.returncode, fixed.stdout, fixed.stderr) == (0, "", "")
    noqa = run(["check", "--jobs", "1", "-q", "--add-noqa", "a.py"], tmp_path)
    assert (noqa.returncode, noqa.stdout, noqa.stderr) == (0, "", "")


def test_show_files(run, tmp_path):
    """`--show-files` lists what a check would lint, as ruff does: absolute paths, sorted, exit 0."""
    write(tmp_path / "b.py", SNIPPET)
    write(tmp_path / "a.py", BROKEN)
    write(tmp_path / "pkg" / "nb.ipynb", "{}")
    write(tmp_path / "pkg" / "notes.txt", "not Python")
    write(tmp_path / "build" / "gen.py", SNIPPET)  # excluded by default
    write(tmp_path / "legacy" / "old.py", SNIPPET)
    write(tmp_path / "ray-lint.toml", 'extend-exclude = ["legacy"]\n')
    proc = run(["check", "--show-files"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(tmp_path / "a.py"), str(tmp_path / "b.py"), str(tmp_path / "pkg" / "nb.ipynb")]

    named = run(["check", "--show-files", "b.py", "missing.py", "pkg"], tmp_path)
    assert named.returncode == 0
    assert named.stdout.splitlines() == [str(tmp_path / "b.py"), str(tmp_path / "pkg" / "nb.ipynb")]
    assert "missing.py: no such file or directory" in named.stderr
    assert not (tmp_path / ".ray_lint_cache").exists()  # nothing was linted

    stdin = run(["check", "--show-files", "-"], tmp_path, stdin=SNIPPET)
    assert stdin.returncode == 2 and "--show-files needs files or directories" in stdin.stderr


def _lines(stream, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _until(lines: queue.Queue[str], text: str, seconds: float = 60) -> str:
    """What the process printed up to and including a line containing `text`."""
    deadline, seen = time.monotonic() + seconds, []
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            break
        if text in seen[-1]:
            return "".join(seen)
    raise AssertionError(f"no line with {text!r} in {seconds} s; got:\n{''.join(seen)}")


def test_watch(tmp_path):
    """`--watch` checks, then checks again when a file changes, re-linting only that file (the cache
    serves the other); Ctrl-C ends it with status 0."""
    target = write(tmp_path / "a.py", CLEAN)
    write(tmp_path / "b.py", CLEAN)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "RAY_LINT_OUTPUT_FORMAT", "TTY_COMPATIBLE")}
    command = [sys.executable, "-m", "ray_lint", "check", "--watch", "--jobs", "1", "--timings", "--output-format", "concise", "."]
    # Ctrl-C must reach it however this test was launched: a background job inherits SIGINT ignored.
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        first = _until(lines, "Watching for file changes.")
        assert "Starting linter in watch mode..." in first
        assert "All checks passed!" in first

        target.write_text(SNIPPET, encoding="utf-8")
        second = _until(lines, "Watching for file changes.")
        assert "File change detected..." in second
        assert "a.py:2:12: RAY001 " in second
        assert "Found 1 problem." in second
        assert "2 files; 1 from the cache" in second  # b.py was not linted again
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_watch_refuses_standard_input(run, tmp_path):
    proc = run(["check", "--watch", "-"], tmp_path, stdin=SNIPPET)
    assert proc.returncode == 2 and "--watch needs files or directories" in proc.stderr


# ---------------------------------------------------------------------------- standard input


def test_stdin(run, tmp_path):
    proc = run(["check", "--jobs", "1", "--output-format", "json", "-", "--stdin-filename", "x.py"], tmp_path, stdin=SNIPPET)
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)
    assert (finding["filename"], finding["code"], finding["location"], finding["end_location"]) == (
        "x.py", "RAY001", {"row": 2, "column": 12}, {"row": 2, "column": 32},
    )
    assert list(tmp_path.iterdir()) == []  # nothing written for standard input

    concise = run(["check", "--output-format", "concise", "-", "--stdin-filename", "x.py"], tmp_path, stdin=SNIPPET)
    assert f"x.py:2:12: RAY001 {MESSAGE}" in concise.stdout.splitlines()

    fixed = run(["check", "--fix", "--unsafe-fixes", "-", "--stdin-filename", "x.py"], tmp_path, stdin=SNIPPET)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == FIXED
    assert list(tmp_path.iterdir()) == []

    # Nothing to fix: the source comes back as it was.
    unchanged = run(["check", "--fix", "-", "--stdin-filename", "x.py"], tmp_path, stdin=CLEAN)
    assert unchanged.returncode == 0
    assert unchanged.stdout == CLEAN

    # The file name is matched against the configuration.
    ignored = run(
        ["check", "--output-format", "json", "--per-file-ignores", "tests/*:RAY001", "-", "--stdin-filename", "tests/x.py"],
        tmp_path,
        stdin=SNIPPET,
    )
    assert ignored.returncode == 0, ignored.stderr
    assert json.loads(ignored.stdout) == []

    broken = run(["check", "--output-format", "json", "-", "--stdin-filename", "x.py"], tmp_path, stdin=BROKEN)
    assert broken.returncode == 1
    assert found(broken) == {("x.py", "RAY000", 2)}
    for p in (proc, concise, fixed, unchanged, ignored, broken):
        assert_no_traceback(p)


# ---------------------------------------------------------------------------- jobs, cache, entry points


def test_jobs_give_the_same_report(run, tmp_path):
    for index in range(12):
        padding = "\n" * (index % 5)
        body = SNIPPET if index % 3 else CLEAN
        write(tmp_path / f"pkg{index % 3}" / f"mod_{index:02d}.py", "import ray\n" + padding + body.split("\n", 1)[1])
    write(tmp_path / "pkg0" / "broken.py", BROKEN)
    one = run(["check", "--jobs", "1", "--output-format", "json", "."], tmp_path)
    two = run(["check", "--jobs", "2", "--output-format", "json", "."], tmp_path)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    report = json.loads(one.stdout)
    expected = {
        (f"pkg{i % 3}/mod_{i:02d}.py", "RAY001", 2 + i % 5) for i in range(12) if i % 3
    } | {("pkg0/broken.py", "RAY000", 2)}
    assert {(d["filename"], d["code"], d["location"]["row"]) for d in report} == expected
    assert [d["filename"] for d in report] == sorted(d["filename"] for d in report)


def test_no_cache_is_accepted(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    cached = check_json(run, tmp_path, "a.py")
    uncached = check_json(run, tmp_path, "--no-cache", "a.py")
    assert uncached.returncode == 1, uncached.stderr
    assert uncached.stdout == cached.stdout
    assert found(uncached) == {("a.py", "RAY001", 2)}


def test_console_script_matches_python_m(run, tmp_path):
    script = Path(sys.executable).parent / "ray-lint"
    assert script.is_file()
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "b.py", BROKEN)
    args = ["check", "--jobs", "1", "--output-format", "concise", "."]
    module = run(args, tmp_path)
    console = run(args, tmp_path, program=[str(script)])
    assert console.returncode == module.returncode == 1
    assert console.stdout == module.stdout
    assert console.stderr == module.stderr
    assert f"a.py:2:12: RAY001 {MESSAGE}" in console.stdout.splitlines()

    version = run(["--version"], tmp_path, program=[str(script)])
    assert version.returncode == 0
    assert version.stdout.startswith("ray-lint ")


def test_jobs_with_spawned_workers_give_the_same_results(run, tmp_path):
    """macOS and Windows start workers with `spawn`: nothing a worker needs may rely on `fork`."""
    for index in range(12):
        (tmp_path / f"m{index}.py").write_text(
            f"import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nfor i in range({index + 2}):\n    ray.get(f.remote(i))\n",
            encoding="utf-8",
        )
    one = run(["check", "--no-cache", "--jobs", "1", "--output-format", "json", "."], tmp_path)
    spawn = "import multiprocessing as m, sys; m.set_start_method('spawn', force=True); from ray_lint.cli import main; sys.exit(main())"
    spawned = run(["check", "--no-cache", "--jobs", "2", "--output-format", "json", "."], tmp_path, program=[sys.executable, "-c", spawn])
    assert spawned.returncode == one.returncode == 1, spawned.stderr
    assert spawned.stdout == one.stdout and len(json.loads(one.stdout)) == 12
