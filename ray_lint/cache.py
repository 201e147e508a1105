"""The result cache: what linting a file found, keyed by the file's content, ray-lint's own code and
the resolved settings, so that a run over unchanged files neither imports libcst nor parses.

Layout, under `.ray_lint_cache/` in the project root (or `--cache-dir`):

    <tool>/<settings>/<ab>/<key>.json

`<tool>` digests ray-lint's version and source files, libcst's version and Python's: a cache is never
trusted across versions (a new one removes the others). `<settings>` digests every config layer; the
directory exists only once those settings passed validation, so a full hit can skip loading the rule
registry. `<key>` digests the file's bytes, its path and the per-file-ignores that match it. Entries
are written to a temporary file and renamed, so concurrent runs never see half an entry; a cache
that cannot be written (a read-only checkout) is silently not used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from ray_lint import __version__
from ray_lint.config import Settings
from ray_lint.diagnostics import Applicability, Diagnostic, Edit, Fix, Position, Severity
from ray_lint.project import project_root

CACHE_DIR_NAME = ".ray_lint_cache"
CACHE_DIR_ENV = "RAY_LINT_CACHE_DIR"
_TOOL_DIR = re.compile(r"[0-9a-f]{24}")  # what tool_fingerprint() names; nothing else is ever removed
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is ray-lint's cache; see https://bford.info/cachedir/\n"


def default_directory(linted: Path) -> Path:
    """`$RAY_LINT_CACHE_DIR`, or `.ray_lint_cache` in the root of the project `linted` (the first path a run
    lints) is in (`ray_lint.project.project_root`), so that linting a project from elsewhere still
    fills its own cache; the working directory when `linted` is in no project."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    return (project_root(linted.absolute()) or Path.cwd()) / CACHE_DIR_NAME


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


@cache
def tool_fingerprint() -> str:
    """ray-lint's version, the size and mtime of each of its source files (an edited checkout is a new
    version), libcst's version file and Python's version. Costs stat calls, not imports."""
    parts = [__version__, sys.version]
    folders = {Path(__file__).parent}
    rules = importlib.util.find_spec("ray_lint.rules")  # installed from rules/, which an editable install keeps apart
    if rules is not None:
        folders.update(Path(location) for location in rules.submodule_search_locations or ())
    for folder in sorted(folders):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    stat = os.stat(os.path.join(dirpath, name))
                    parts.append(f"{dirpath}/{name}:{stat.st_size}:{stat.st_mtime_ns}")
    libcst = importlib.util.find_spec("libcst")
    if libcst is not None and libcst.origin:
        version_file = Path(libcst.origin).with_name("_version.py")
        parts.append(version_file.read_text() if version_file.exists() else libcst.origin)
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=12).hexdigest()


class ResultCache:
    """Findings per file, read and written by the process that runs the command (workers only lint)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.absolute()
        self.project = self.directory.parent
        self.usable = True  # turned off by the first write that fails
        self._tool = self.directory / tool_fingerprint()
        self._made: set[Path] = set()
        self.hits = 0

    def _namespace(self, settings: Settings) -> Path:
        return self._tool / settings.fingerprint

    def knows(self, settings: Settings) -> bool:
        """Whether these settings were validated by an earlier run of this ray-lint."""
        return self._namespace(settings).is_dir()

    def admit(self, settings: Settings) -> None:
        """Record that `settings` passed validation (call only after `settings.validate()`)."""
        if not self.usable or self.knows(settings):
            return
        try:
            if not self._tool.is_dir():
                self._start_version()
            self._namespace(settings).mkdir(parents=True, exist_ok=True)
        except OSError:
            self.usable = False

    def _start_version(self) -> None:
        """Create the cache for this version of ray-lint, removing those of other versions."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", _TAG), (".gitignore", "# created by ray-lint\n*\n")):
            if not (self.directory / name).exists():
                (self.directory / name).write_text(text)
        for other in self.directory.iterdir():
            if other.is_dir() and other != self._tool and _TOOL_DIR.fullmatch(other.name):
                shutil.rmtree(other, ignore_errors=True)

    def key(self, digest: str, path: Path, settings: Settings, variant: str = "") -> str:
        """The entry for a file with content digest `digest` at `path`; `variant` tells apart front-ends
        whose findings for the same file differ (the flake8 plugin's rules and `# noqa` handling)."""
        relative = os.path.relpath(os.path.abspath(path), self.project)  # paths as strings: pathlib costs more here
        ignored = repr(settings.ignored_for(path))
        test = settings.is_test_file(path)
        return hashlib.blake2b(f"{digest}\0{relative}\0{ignored}\0{test}\0{variant}".encode(), digest_size=20).hexdigest()

    def _entry(self, settings: Settings, key: str) -> Path:
        return self._namespace(settings) / key[:2] / f"{key}.json"

    def load(self, settings: Settings, key: str) -> tuple[list[Diagnostic], frozenset[str]] | None:
        """The cached findings and the project facts the file gives, or None when there are none (or the
        entry is unreadable)."""
        try:
            data = json.loads(self._entry(settings, key).read_bytes())
            diagnostics = [_decode(item) for item in data["diagnostics"]]
            provides = frozenset(data["provides"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.hits += 1
        return diagnostics, provides

    def store(self, settings: Settings, key: str, diagnostics: list[Diagnostic], provides: frozenset[str]) -> None:
        if not self.usable:
            return
        try:
            entry_data = {"diagnostics": [_encode(d) for d in diagnostics], "provides": sorted(provides)}
            payload = json.dumps(entry_data, separators=(",", ":"))
        except (TypeError, ValueError):  # text JSON cannot hold: not cached
            return
        entry = self._entry(settings, key)
        try:
            if entry.parent not in self._made:
                entry.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(entry.parent)
            handle, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".", suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(payload)
            os.replace(temporary, entry)
        except OSError:
            self.usable = False


class NotACache(Exception):
    """A directory named as the cache that ray-lint did not create: it is never removed."""


def clean(directory: Path) -> bool:
    """Remove a cache directory; False when there was none."""
    if not directory.exists():
        return False
    if not (directory / "CACHEDIR.TAG").is_file():
        raise NotACache(f"{directory} is not a ray-lint cache (it has no CACHEDIR.TAG); not removed")
    shutil.rmtree(directory)
    return True


def _position(position: Position) -> list[int]:
    return [position.line, position.column]


def _encode(diagnostic: Diagnostic) -> dict[str, Any]:
    fix = diagnostic.fix
    return {
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": diagnostic.message,
        "severity": diagnostic.severity.value,
        "start": _position(diagnostic.start),
        "end": _position(diagnostic.end),
        "noqa_line": diagnostic.noqa_line,
        "unless": list(diagnostic.unless),
        "requires": list(diagnostic.requires),
        "fix": None
        if fix is None
        else {
            "message": fix.message,
            "applicability": fix.applicability.value,
            "edits": [[*_position(e.start), *_position(e.end), e.content] for e in fix.edits],
        },
    }


def _decode(item: dict[str, Any]) -> Diagnostic:
    fix = item["fix"]
    return Diagnostic(
        code=item["code"],
        name=item["name"],
        message=item["message"],
        severity=Severity(item["severity"]),
        start=Position(*item["start"]),
        end=Position(*item["end"]),
        noqa_line=item["noqa_line"],
        unless=tuple(item["unless"]),
        requires=tuple(item["requires"]),
        fix=None
        if fix is None
        else Fix(
            fix["message"],
            tuple(Edit(Position(a, b), Position(c, d), content) for a, b, c, d, content in fix["edits"]),
            Applicability(fix["applicability"]),
        ),
    )
