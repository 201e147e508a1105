"""What linting one file produced, as every front-end receives it: its diagnostics, its text before
and after fixes, and, for a notebook, the cells that text came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from ray_lint.diagnostics import Diagnostic, Timings
from ray_lint.notebook import Notebook


@dataclass
class FileResult:
    """What linting one file produced. `source` is kept for front-ends that show lines or fixes."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: str | None = None
    fixed_source: str | None = None
    fixes_applied: dict[str, int] = field(default_factory=dict)
    refused_fixes: list[Diagnostic] = field(default_factory=list)  # fixes not applied: they would not parse
    noqa_added: int = 0
    notebook: Notebook | None = None  # for a notebook: positions above are in its cells' joint Python text
    fixed_notebook: Notebook | None = None  # the notebook as fixed: diagnostics then refer to it
    encoding: str = "utf-8"  # the file's, kept when fixes are written
    digest: str | None = None  # of the bytes that were linted, for the cache
    timings: Timings | None = None  # when asked for (`--timings`)
    provides: frozenset[str] = frozenset()  # the project facts this file gives (`ray_lint.project`)

    @property
    def reported_text(self) -> str | None:
        """The text the diagnostics' positions refer to: after fixes, the fixed text."""
        return self.fixed_source if self.fixed_source is not None else self.source

    @property
    def reported_notebook(self) -> Notebook | None:
        return self.fixed_notebook if self.fixed_notebook is not None else self.notebook

    def file_text(self) -> str | None:
        """The file's content with the fixes applied (for a notebook, its JSON); None without fixes."""
        if self.fixed_source is None:
            return None
        return self.notebook.render(self.fixed_source) if self.notebook is not None else self.fixed_source
