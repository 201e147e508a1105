"""The values every front-end prints: diagnostics and their fixes."""

from __future__ import annotations

import enum
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_ERROR_CODE = "RAY000"  # a file that cannot be read, parsed or linted
FILE_ERROR_NAME = "file-error"
_NEWLINE = re.compile(r"\r\n?|\n")
DOCS_URL_ENV = "RAY_LINT_DOCS_URL"
_PACKAGE_DIR = Path(__file__).resolve().parent


def rule_docs_dir() -> Path:
    """The folder of rule pages (`<CODE>.md`, written by `ray_lint.docs`) of this installation: a wheel
    ships docs/rules/ as `ray_lint/rule_docs/` (pyproject.toml's package-dir); a source tree, editable
    install included, has them in its own docs/rules/."""
    packaged = _PACKAGE_DIR / "rule_docs"
    return packaged if packaged.is_dir() else _PACKAGE_DIR.parent / "docs" / "rules"


def docs_url(code: str, configured: str | None = None) -> str:
    """Where rule `code`'s page is: `<base>/<code>.md` under `$RAY_LINT_DOCS_URL` or else the configured
    `docs-url`; without either, a file:// URI of the page installed with ray-lint (the project has no
    public address to point at)."""
    base = os.environ.get(DOCS_URL_ENV) or configured
    if base:
        return f"{base.rstrip('/')}/{code}.md"
    return (rule_docs_dir() / f"{code}.md").as_uri()


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
    # What the rule measured statically (loop counts, thread counts, options), for its experiment: a value
    # of the type the experiment declares (`Experiment.facts_type`); None for rules without one.
    facts: Any = field(default=None, compare=False, hash=False)
    # Project facts (`ray_lint.project`) any one of which makes the finding wrong: set while the rule
    # could not see the rest of the project; the front-end drops the finding when one holds.
    unless: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # ... and facts one of which must hold for it to be right

    @property
    def conditional(self) -> bool:
        """Whether the finding waits for project facts (see `ray_lint.project.ProjectFacts.keeps`)."""
        return bool(self.unless or self.requires)


def file_error(message: str, line: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic(
        code=FILE_ERROR_CODE,
        name=FILE_ERROR_NAME,
        message=message,
        severity=Severity.ERROR,
        start=Position(line, column),
        end=Position(line, column),
        noqa_line=line,
    )


def line_offsets(text: str) -> list[int]:
    """Offset of the start of each line (index 0 is line 1), splitting lines as libcst does."""
    return [0, *(match.end() for match in _NEWLINE.finditer(text))]


def apply_edits(text: str, edits: list[Edit]) -> str:
    offsets = line_offsets(text)

    def offset(position: Position) -> int:
        return offsets[position.line - 1] + position.column - 1

    result = text
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        result = result[: offset(edit.start)] + edit.content + result[offset(edit.end) :]
    return result


@dataclass
class Timings:
    """Seconds spent per phase (`parse`, ...) and per rule code, and how many files each one saw."""

    seconds: dict[str, float] = field(default_factory=dict)
    files: Counter[str] = field(default_factory=Counter)

    @contextmanager
    def measure(self, key: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start
            self.files[key] += 1

    def merge(self, other: Timings) -> None:
        for key, seconds in other.seconds.items():
            self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        self.files.update(other.files)
