"""Output formats. Each takes the run's results and writes text; none of them lints anything."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ray_lint.diagnostics import Applicability, Diagnostic
from ray_lint.results import FileResult

FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github")


@dataclass(frozen=True)
class Finding:
    """A diagnostic with the file it is in, as every format needs both. In a notebook, `cell` is the
    1-based cell and the diagnostic's rows count from the cell's first line, as ruff reports them."""

    path: str
    diagnostic: Diagnostic
    result: FileResult
    cell: int | None = None
    source: str | None = None  # the text the rows refer to: the file's, or the cell's

    @property
    def location(self) -> str:
        """`path:row:column`, or `path:cell N:row:column` in a notebook."""
        cell = f":cell {self.cell}" if self.cell is not None else ""
        return f"{self.path}{cell}:{self.diagnostic.start.line}:{self.diagnostic.start.column}"


@dataclass(frozen=True)
class RunReport:
    """Everything one `ray-lint check` run shows: the findings in display order, each file's result, the
    flags that decide how fixes are described, and the configured base of the rule pages' URLs."""

    findings: list[Finding]
    results: list[FileResult]
    unsafe_fixes: bool
    show_fixes: bool
    fixing: bool
    docs_url: str | None = None  # `docs-url` (`ray_lint.diagnostics.docs_url`)

    def fix_is_available(self, diagnostic: Diagnostic) -> bool:
        fix = diagnostic.fix
        return fix is not None and (fix.applicability is Applicability.SAFE or self.unsafe_fixes)

    @property
    def fixable(self) -> int:
        """Findings whose fix the fix options in force would apply."""
        return sum(1 for f in self.findings if self.fix_is_available(f.diagnostic))

    @property
    def hidden_fixes(self) -> int:
        """Findings whose fix is unsafe and so held back without `--unsafe-fixes`."""
        return sum(1 for f in self.findings if f.diagnostic.fix is not None and not self.fix_is_available(f.diagnostic))


def display_path(path: str) -> str:
    """The path relative to the working directory when it is below it, with forward slashes."""
    absolute = Path(path).absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return Path(path).as_posix() if not os.path.isabs(path) else absolute.as_posix()


def collect(results: list[FileResult]) -> list[Finding]:
    findings = [_finding(display_path(r.path), d, r) for r in results for d in r.diagnostics]
    findings.sort(key=lambda f: (f.path, f.cell or 0, f.diagnostic.start, f.diagnostic.code))
    return findings


def _finding(path: str, diagnostic: Diagnostic, result: FileResult) -> Finding:
    notebook = result.reported_notebook
    located = notebook.in_cell(diagnostic) if notebook is not None else None
    if located is None:
        return Finding(path, diagnostic, result, source=result.reported_text)
    cell, in_cell = located
    return Finding(path, in_cell, result, cell=cell.index, source=cell.text)
