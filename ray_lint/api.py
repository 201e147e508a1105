"""The engine's public entry points for front-ends: lint text, files and trees, fix, add noqa.

Front-ends (the command line, and later the flake8 plugin and the language server) translate their
input into these calls and their output from `FileResult`s; they hold no lint logic.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from ray_lint import engine, noqa
from ray_lint.config import Resolver, Settings
from ray_lint.diagnostics import FileResult
from ray_lint.files import Skipped, discover
from ray_lint.notebook import CellsChanged
from ray_lint.source import Source, SourceError, decode, read_path

PARALLEL_MIN_FILES_PER_JOB = 4


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    write: bool = True  # False for --diff: compute fixes, keep files as they are
    add_noqa: bool = False


def lint_source(source: Source, path: str, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    """Lint (and, as asked, fix or annotate) one file's decoded text. Never raises."""
    result = FileResult(path=path, source=source.text, notebook=source.notebook)
    notebook = source.notebook
    try:
        rules = settings.rules_for(Path(path))
        text = source.text
        if options.fix:
            describer = notebook.describer if notebook is not None else None
            outcome = engine.fix_text(text, rules, options.unsafe_fixes, describer)
            result.diagnostics = outcome.diagnostics
            result.fixes_applied = dict(outcome.applied)
            result.refused_fixes = outcome.refused
            if outcome.text != text:
                result.fixed_source = outcome.text
                if notebook is not None:  # what is left is located in the fixed cells
                    result.fixed_notebook = notebook.after(outcome.text)
        elif options.add_noqa:
            diagnostics = engine.lint_text(text, rules)
            lines: dict[int, set[str]] = {}
            for diagnostic in diagnostics:
                if diagnostic.code != engine.FILE_ERROR_CODE and diagnostic.noqa_line is not None:
                    lines.setdefault(diagnostic.noqa_line, set()).add(diagnostic.code)
            annotated, changed = noqa.add_noqa(text, lines)
            result.diagnostics = [d for d in diagnostics if d.code == engine.FILE_ERROR_CODE]
            result.noqa_added = changed
            if changed and engine.parses(annotated, text):
                result.fixed_source = annotated
                if notebook is not None:
                    result.fixed_notebook = notebook.after(annotated)
        else:
            describe_line = notebook.describe_line if notebook is not None else None
            result.diagnostics = engine.lint_text(text, rules, describe_line=describe_line)
    except CellsChanged as error:
        result.diagnostics.append(engine.file_error(f"fixes not applied: {error}"))
        result.fixed_source = result.fixed_notebook = None
        result.fixes_applied = {}
    except Exception as error:  # a bug in ray-lint must not lose other files' results
        result.diagnostics = [engine.file_error(f"internal error: {type(error).__name__}: {error}")]
        result.fixed_source = result.fixed_notebook = None
    return result


def lint_file(path: Path, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    try:
        source = read_path(path)
    except SourceError as error:
        result = FileResult(path=str(path))
        if engine.FILE_ERROR_CODE in settings.codes_for(path):
            result.diagnostics = [engine.file_error(error.message, error.line, error.column)]
        return result
    result = lint_source(source, str(path), settings, options)
    fixed = result.file_text()
    if fixed is not None and options.write:
        try:
            write_atomically(path, fixed, source.encoding)
        except OSError as error:
            result.diagnostics.append(engine.file_error(f"fixes could not be written: {error.strerror or error}"))
    return result


def lint_bytes(data: bytes, path: str, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    """Lint text that did not come from a file (standard input)."""
    try:
        source = decode(data, Path(path))
    except SourceError as error:
        result = FileResult(path=path)
        if engine.FILE_ERROR_CODE in settings.codes_for(Path(path)):
            result.diagnostics = [engine.file_error(error.message, error.line, error.column)]
        return result
    return lint_source(source, path, settings, options)


def write_atomically(path: Path, text: str, encoding: str) -> None:
    """Write through a temporary file and a rename, keeping the file's mode."""
    mode = path.stat().st_mode & 0o7777
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode(encoding))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _lint_task(task: tuple[Path, Settings, RunOptions]) -> FileResult:
    return lint_file(*task)


def lint_paths(
    paths: list[Path],
    resolver: Resolver,
    options: RunOptions = RunOptions(),
    jobs: int = 1,
    force_exclude: bool = False,
) -> Iterator[FileResult | Skipped]:
    """Lint every Python file under `paths`, in path order; with `jobs > 1` files are spread over
    worker processes. A worker that dies takes no results with it: its files are linted again here."""
    tasks: list[tuple[Path, Settings, RunOptions]] = []
    for found in discover(paths, resolver, force_exclude):
        if isinstance(found, Skipped):
            yield found
        else:
            tasks.append((found, resolver.settings_for(found), options))
    tasks.sort(key=lambda task: str(task[0]))
    workers = min(jobs, len(tasks) // PARALLEL_MIN_FILES_PER_JOB)
    if workers <= 1:
        yield from map(_lint_task, tasks)
        return
    done = 0
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunk = max(1, len(tasks) // (workers * 8))
            for result in pool.map(_lint_task, tasks, chunksize=chunk):
                done += 1
                yield result
    except BrokenProcessPool:
        yield from map(_lint_task, tasks[done:])
