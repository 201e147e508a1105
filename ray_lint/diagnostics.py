"""The values every front-end prints: diagnostics, fixes and per-file results."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_lint.notebook import Notebook

DOCS_BASE_URL = "https://github.com/ray-lint/ray-lint/blob/main/docs/rules"


def docs_url(code: str) -> str:
    return f"{DOCS_BASE_URL}/{code}.md"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Applicability(str, enum.Enum):
    """How sure a fix is to keep behaviour: `safe` ones apply with --fix, `unsafe` need --unsafe-fixes."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Position:
    """1-based line and column; columns count Unicode code points."""

    line: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between `start` and `end` with `content`."""

    start: Position
    end: Position
    content: str


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    severity: Severity
    start: Position
    end: Position
    fix: Fix | None = None
    noqa_line: int | None = None
    # What the rule measured statically (loop counts, thread counts, options), for the verifier.
    facts: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def url(self) -> str:
        return docs_url(self.code)


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
