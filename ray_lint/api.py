"""The engine's public entry points for front-ends: lint text, files and trees, fix, add noqa.

Front-ends (the command line, and later the flake8 plugin and the language server) translate their
input into these calls and their output from `FileResult`s; they hold no lint logic.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from ray_lint import noqa
from ray_lint.cache import ResultCache, content_digest
from ray_lint.config import Resolver, Settings
from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Diagnostic, FileResult, Timings, file_error
from ray_lint.files import Skipped, discover
from ray_lint.notebook import CellsChanged
from ray_lint.source import Source, SourceError, decode, read_bytes

PARALLEL_MIN_FILES_PER_JOB = 4


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    write: bool = True  # False for --diff: compute fixes, keep files as they are
    add_noqa: bool = False
    timings: bool = False  # collect each phase's and rule's time (`--timings`)
    noqa_lines: bool = True  # False: leave `Diagnostic.noqa_line` unset (it costs a tokenize pass)


def lint_source(
    source: Source, path: str, settings: Settings, options: RunOptions = RunOptions(), timings: Timings | None = None
) -> FileResult:
    """Lint (and, as asked, fix or annotate) one file's decoded text. Never raises."""
    from ray_lint import engine  # loaded only when a file must be linted: a full cache hit never imports libcst

    result = FileResult(path=path, source=source.text, notebook=source.notebook, encoding=source.encoding, timings=timings)
    notebook = source.notebook
    try:
        rules = settings.rules_for(Path(path))
        text = source.text
        if options.fix:
            describer = notebook.describer if notebook is not None else None
            outcome = engine.fix_text(text, rules, options.unsafe_fixes, describer, timings)
            result.diagnostics = outcome.diagnostics
            result.fixes_applied = dict(outcome.applied)
            result.refused_fixes = outcome.refused
            if outcome.text != text:
                result.fixed_source = outcome.text
                if notebook is not None:  # what is left is located in the fixed cells
                    result.fixed_notebook = notebook.after(outcome.text)
        elif options.add_noqa:
            diagnostics = engine.lint_text(text, rules, timings=timings)
            lines: dict[int, set[str]] = {}
            for diagnostic in diagnostics:
                if diagnostic.code != FILE_ERROR_CODE and diagnostic.noqa_line is not None:
                    lines.setdefault(diagnostic.noqa_line, set()).add(diagnostic.code)
            annotated, changed = noqa.add_noqa(text, lines)
            result.diagnostics = [d for d in diagnostics if d.code == FILE_ERROR_CODE]
            result.noqa_added = changed
            if changed and engine.parses(annotated, text):
                result.fixed_source = annotated
                if notebook is not None:
                    result.fixed_notebook = notebook.after(annotated)
        else:
            describe_line = notebook.describe_line if notebook is not None else None
            result.diagnostics = engine.lint_text(
                text, rules, describe_line=describe_line, timings=timings, noqa_lines=options.noqa_lines
            )
    except CellsChanged as error:
        result.diagnostics.append(file_error(f"fixes not applied: {error}"))
        result.fixed_source = result.fixed_notebook = None
        result.fixes_applied = {}
    except Exception as error:  # a bug in ray-lint must not lose other files' results
        result.diagnostics = [file_error(f"internal error: {type(error).__name__}: {error}")]
        result.fixed_source = result.fixed_notebook = None
    return result


def lint_data(data: bytes, path: Path, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    """Lint a file's bytes (read here, on standard input, or on another machine); writes nothing."""
    timings = Timings() if options.timings else None
    try:
        if timings is not None:
            with timings.measure("decode"):
                source = decode(data, path)
        else:
            source = decode(data, path)
    except SourceError as error:
        return _unreadable(str(path), settings, error)
    result = lint_source(source, str(path), settings, options, timings)
    result.digest = content_digest(data)
    return result


def _unreadable(path: str, settings: Settings, error: SourceError) -> FileResult:
    result = FileResult(path=path)
    if FILE_ERROR_CODE in settings.codes_for(Path(path)):
        result.diagnostics = [file_error(error.message, error.line, error.column)]
    return result


def lint_file(path: Path, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    try:
        data = read_bytes(path)
    except SourceError as error:
        return _unreadable(str(path), settings, error)
    result = lint_data(data, path, settings, options)
    if options.write:
        write_fixes(path, result)
    return result


def lint_bytes(data: bytes, path: str, settings: Settings, options: RunOptions = RunOptions()) -> FileResult:
    """Lint text that did not come from a file (standard input)."""
    return lint_data(data, Path(path), settings, options)


def write_fixes(path: Path, result: FileResult) -> None:
    """Write a result's fixed text (if any) over the file; a failure becomes a RAY000 finding."""
    fixed = result.file_text()
    if fixed is None:
        return
    try:
        write_atomically(path, fixed, result.encoding)
    except OSError as error:
        result.diagnostics.append(file_error(f"fixes could not be written: {error.strerror or error}"))


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


@dataclass(frozen=True)
class Task:
    """One file to lint, with its settings."""

    path: Path
    settings: Settings
    options: RunOptions


class ExecutorError(Exception):
    """An executor could not lint at all (a cluster that cannot be reached, for instance)."""


Executor = Callable[[list[Task]], Iterable[FileResult]]  # lints tasks, giving one result per task, in order


def _lint_task(task: Task) -> FileResult:
    return lint_file(task.path, task.settings, task.options)


def local_executor(jobs: int) -> Executor:
    """In this process for `jobs == 1` or few files; otherwise a process pool. A worker that dies
    takes no results with it: its files are linted again here."""

    def run(tasks: list[Task]) -> Iterator[FileResult]:
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

    return run


def lint_paths(
    paths: list[Path],
    resolver: Resolver,
    options: RunOptions = RunOptions(),
    executor: Executor | None = None,
    force_exclude: bool = False,
    cache: ResultCache | None = None,
) -> Iterator[FileResult | Skipped]:
    """Lint every Python file under `paths`, in path order. Files whose findings are in `cache` are
    not linted again; the others go to `executor` (default: this process)."""
    tasks: list[Task] = []
    for found in discover(paths, resolver, force_exclude):
        if isinstance(found, Skipped):
            yield found
        else:
            tasks.append(Task(found, resolver.settings_for(found.parent), options))
    tasks.sort(key=lambda task: str(task.path))
    new: set[str] = set()  # settings the cache has no entries for: their files are not looked up
    for settings in resolver.all_settings():  # a cache made with these settings vouches for them
        if cache is None or not cache.knows(settings):
            settings.validate()
            new.add(settings.fingerprint)
            if cache is not None:
                cache.admit(settings)
    results: list[FileResult | None] = [
        _cached(cache, task) if cache is not None and task.settings.fingerprint not in new else None for task in tasks
    ]
    misses = [task for task, result in zip(tasks, results) if result is None]
    linted = iter((executor or local_executor(1))(misses))
    for task, result in zip(tasks, results):
        if result is None:
            result = next(linted)
            if cache is not None and _cacheable(result, task.options):
                assert result.digest is not None
                cache.store(task.settings, cache.key(result.digest, task.path, task.settings), result.diagnostics)
        yield result


def _cached(cache: ResultCache, task: Task) -> FileResult | None:
    """The file's result from the cache, when the cache has it and it is all the run needs."""
    try:
        data = read_bytes(task.path)
    except SourceError:
        return None
    digest = content_digest(data)
    diagnostics = cache.load(task.settings, cache.key(digest, task.path, task.settings))
    if diagnostics is None or not _served_by_cache(diagnostics, task.options):
        return None
    result = FileResult(path=str(task.path), diagnostics=diagnostics, digest=digest)
    if diagnostics:  # the text is shown with the findings (and a notebook's cells locate them)
        try:
            source = decode(data, task.path)
        except SourceError:
            return None
        result.source, result.notebook, result.encoding = source.text, source.notebook, source.encoding
    return result


def _served_by_cache(diagnostics: list[Diagnostic], options: RunOptions) -> bool:
    """Whether checking findings are all this run needs: nothing to fix, or no line to add `# noqa` to."""
    if options.add_noqa:
        return all(d.code == FILE_ERROR_CODE for d in diagnostics)
    if options.fix:
        return not any(
            d.fix is not None and (d.fix.applicability is Applicability.SAFE or options.unsafe_fixes) for d in diagnostics
        )
    return True


def _cacheable(result: FileResult, options: RunOptions) -> bool:
    """Only a plain check's findings are stored: after a fix or `--add-noqa` they describe other text."""
    return result.digest is not None and result.fixed_source is None and not options.add_noqa
