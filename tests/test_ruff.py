"""ray-lint next to ruff: `lint.external = ["RAY"]` is what keeps ruff from deleting the
`# noqa: RAY001` comments ray-lint reads.

Runs the real ruff. Ruff reports a `# noqa` code it does not know as RUF102 (invalid-rule-code)
in current versions and as RUF100 (unused-noqa, "unknown: RAY001") in older ones (before RUF102
existed); both fixes delete the comment, after which ray-lint reports the line again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUFF = [sys.executable, "-m", "ruff"]

# RAY001 on line 2 without the comment; the comment silences it for ray-lint.
CODE = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]"
SUPPRESSED = f"{CODE}  # noqa: RAY001\n"
BARE = f"{CODE}\n"


@pytest.fixture
def ruff(run):
    """`ruff(args, cwd)`: the real ruff, via conftest's runner (no colours, fixed environment)."""

    def _ruff(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return run(args, cwd, env={"RUFF_NO_CACHE": "true"}, program=RUFF)

    return _ruff


@pytest.fixture
def noqa_rules(ruff, tmp_path) -> list[str]:
    """The rules that police `# noqa` comments in this ruff: RUF100, and RUF102 where it exists
    (ruff rejects a configuration that selects a code it does not know)."""
    known = ruff(["rule", "RUF102"], tmp_path).returncode == 0
    return ["RUF100", "RUF102"] if known else ["RUF100"]


def pyproject(rules: list[str], external: bool) -> str:
    """One pyproject.toml for both tools, as a project would have it."""
    lines = ["[tool.ruff.lint]", f"select = {json.dumps(rules)}"]
    if external:
        lines.append('external = ["RAY"]')
    lines += ["", "[tool.ray-lint]", 'select = ["RAY"]', ""]
    return "\n".join(lines)


def ray_lint_findings(run, cwd: Path) -> list[tuple[str, int]]:
    proc = run(["check", "--jobs", "1", "--output-format", "json", "x.py"], cwd)
    assert proc.returncode in (0, 1), proc.stderr
    return [(d["code"], d["location"]["row"]) for d in json.loads(proc.stdout)]


def test_the_comment_is_what_silences_ray_lint(run, tmp_path):
    """The premise of the other tests: the line is reported, and the comment suppresses it."""
    (tmp_path / "pyproject.toml").write_text(pyproject(["RUF100"], external=True), encoding="utf-8")
    (tmp_path / "x.py").write_text(BARE, encoding="utf-8")
    assert ray_lint_findings(run, tmp_path) == [("RAY001", 2)]
    (tmp_path / "x.py").write_text(SUPPRESSED, encoding="utf-8")
    assert ray_lint_findings(run, tmp_path) == []


def test_external_keeps_ray_noqa_comments(run, ruff, noqa_rules, tmp_path):
    (tmp_path / "pyproject.toml").write_text(pyproject(noqa_rules, external=True), encoding="utf-8")
    source = tmp_path / "x.py"
    source.write_text(SUPPRESSED, encoding="utf-8")

    check = ruff(["check", "--output-format", "concise", "x.py"], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "All checks passed!" in check.stdout

    fix = ruff(["check", "--fix", "--output-format", "concise", "x.py"], tmp_path)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert source.read_text(encoding="utf-8") == SUPPRESSED

    assert ray_lint_findings(run, tmp_path) == []


def test_without_external_ruff_deletes_ray_noqa_comments(run, ruff, noqa_rules, tmp_path):
    (tmp_path / "pyproject.toml").write_text(pyproject(noqa_rules, external=False), encoding="utf-8")
    source = tmp_path / "x.py"
    source.write_text(SUPPRESSED, encoding="utf-8")

    check = ruff(["check", "--output-format", "concise", "x.py"], tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    flagged = [line for line in check.stdout.splitlines() if line.startswith("x.py:2:") and "RAY001" in line]
    assert flagged, check.stdout
    assert all(" RUF100 " in line or " RUF102 " in line for line in flagged), check.stdout

    diff = ruff(["check", "--diff", "x.py"], tmp_path)
    assert diff.returncode == 1
    assert "-results = [ray.get(f.remote(x)) for x in xs]  # noqa: RAY001" in diff.stdout
    assert source.read_text(encoding="utf-8") == SUPPRESSED  # --diff writes nothing

    fix = ruff(["check", "--fix", "x.py"], tmp_path)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert source.read_text(encoding="utf-8") == BARE

    assert ray_lint_findings(run, tmp_path) == [("RAY001", 2)]  # the suppression is gone
