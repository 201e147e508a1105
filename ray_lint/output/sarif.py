"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ray_lint import __version__
from ray_lint.diagnostics import Severity, docs_url
from ray_lint.output import Finding, RunReport
from ray_lint.rule import all_rules

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_descriptors(docs_base: str | None) -> list[dict[str, Any]]:
    return [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.message},
            "fullDescription": {"text": rule.docs.strip(), "markdown": rule.docs.strip()},
            "helpUri": docs_url(rule.code, docs_base),
            "help": {"text": rule.docs.strip(), "markdown": rule.docs.strip()},
            "defaultConfiguration": {"level": _LEVEL[rule.severity], "enabled": not rule.preview},
            "properties": {"category": rule.category, "preview": rule.preview, "tags": [rule.category]},
        }
        for rule in all_rules()
    ]


def _line_text(finding: Finding, split: Callable[[str], list[str]]) -> str:
    lines = split(finding.source or "")
    line = finding.diagnostic.start.line
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _fingerprint(key: tuple[str, str, str], occurrence: int) -> str:
    """Stable across edits elsewhere in the file: code, path, the reported line's text and which
    occurrence of that (code, path, text) triple it is; not the line number."""
    return hashlib.sha256("\0".join([*key, str(occurrence)]).encode()).hexdigest()[:32]


def render_sarif(report: RunReport) -> str:
    rules = _rule_descriptors(report.docs_url)
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    seen: Counter[tuple[str, str, str]] = Counter()
    split = lru_cache(maxsize=1)(str.splitlines)  # findings come file by file: each file's text is split once
    results = []
    for finding in report.findings:
        diagnostic = finding.diagnostic
        key = (diagnostic.code, finding.path, _line_text(finding, split))
        seen[key] += 1
        results.append(
            {
                "ruleId": diagnostic.code,
                "ruleIndex": index[diagnostic.code],
                "level": _LEVEL[diagnostic.severity],
                "message": {"text": diagnostic.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": finding.path, "uriBaseId": "%SRCROOT%"},
                            "region": {
                                "startLine": diagnostic.start.line,
                                "startColumn": diagnostic.start.column,
                                "endLine": diagnostic.end.line,
                                "endColumn": diagnostic.end.column,
                            },
                        }
                    }
                ],
                "partialFingerprints": {"rayLint/v1": _fingerprint(key, seen[key])},
                **({"properties": {"notebookCell": finding.cell}} if finding.cell is not None else {}),
            }
        )
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ray-lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The directory ray-lint ran in."}}},
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
