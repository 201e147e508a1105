"""Machine-readable formats: ruff-compatible JSON and JSON lines, and GitHub workflow annotations."""

from __future__ import annotations

import json
from typing import Any

from ray_lint.diagnostics import Position, Severity, docs_url
from ray_lint.output import Finding, RunReport


def _location(position: Position) -> dict[str, int]:
    return {"row": position.line, "column": position.column}


def to_json_object(finding: Finding, docs_base: str | None = None) -> dict[str, Any]:
    diagnostic = finding.diagnostic
    fix = None
    if diagnostic.fix is not None:
        fix = {
            "applicability": diagnostic.fix.applicability.value,
            "message": diagnostic.fix.message,
            "edits": [
                {"content": e.content, "location": _location(e.start), "end_location": _location(e.end)}
                for e in diagnostic.fix.edits
            ],
        }
    return {
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": diagnostic.message,
        "severity": diagnostic.severity.value,
        "filename": finding.path,
        "cell": finding.cell,
        "location": _location(diagnostic.start),
        "end_location": _location(diagnostic.end),
        "fix": fix,
        "noqa_row": diagnostic.noqa_line,
        "url": docs_url(diagnostic.code, docs_base),
    }


def render_json(report: RunReport) -> str:
    return json.dumps([to_json_object(f, report.docs_url) for f in report.findings], indent=2) + "\n"


def render_json_lines(report: RunReport) -> str:
    return "".join(json.dumps(to_json_object(f, report.docs_url)) + "\n" for f in report.findings)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def github_annotation(finding: Finding) -> str:
    path, diagnostic = finding.path, finding.diagnostic
    properties = {
        "title": f"ray-lint ({diagnostic.code})",
        "file": path,
        "line": diagnostic.start.line,
        "col": diagnostic.start.column,
        "endLine": diagnostic.end.line,
        "endColumn": diagnostic.end.column,
    }
    message = f"{finding.location}: {diagnostic.code} {diagnostic.message}"
    return workflow_command(_GITHUB_LEVEL[diagnostic.severity], properties, message)


def workflow_command(level: str, properties: dict[str, object], message: str) -> str:
    """A GitHub Actions annotation (`::warning file=…,line=…::message`), escaped as GitHub asks."""
    joined = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
    return f"::{level} {joined}::{_escape_data(message)}"


def render_github(report: RunReport) -> str:
    return "".join(github_annotation(f) + "\n" for f in report.findings)
