"""The one door every front-end goes through: lint text, files and trees, fix, add noqa, and decide
findings that depend on the rest of the project.

The command line (`cli.py`), the flake8 plugin (`flake8_plugin.py`), the language server (`lsp.py`)
and the verifier (`verify/`) translate their input into these calls and their output from
`FileResult`s; they hold no lint logic. Which call fits:
- `lint_paths`: files and trees, with the cache, parallel jobs and project facts (the CLI);
- `lint_stdin`: text from standard input, in the project of the path it claims;
- `lint_document`: an editor's document, with its project's facts read once per process;
- `lint_in_project`: one file's text for flake8, which reads `# noqa` comments itself;
- `lint_file`, `lint_data`, `lint_source`: one file, without project facts (executors, the verifier);
- `resolve`: drop the findings that the project's facts contradict.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray_lint import noqa
from ray_lint.cache import ResultCache, content_digest
from ray_lint.config import Resolver, Settings
from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Diagnostic, Timings, file_error
from ray_lint.files import Skipped, discover
from ray_lint.notebook import CellsChanged
from ray_lint.project import (
    LONE_FILE,
    SUMMARISED,
    PackageFinder,
    ProjectFacts,
    defines,
    facts_of,
    from_own_code,
    project_root,
    summaries_needed,
    undecided,
)
from ray_lint.results import FileResult
from ray_lint.source import Source, SourceError, decode, read_bytes

if TYPE_CHECKING:
    from ray_lint.rule import Rule

PARALLEL_MIN_FILES_PER_JOB = 4


@dataclass(frozen=True)
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    write: bool = True  # False for --diff: compute fixes, keep files as they are
    add_noqa: bool = False
    timings: bool = False  # collect each phase's and rule's time (`--timings`)
    noqa_comments: noqa.Handling = "honour"  # "honour-only": leave `Diagnostic.noqa_line` unset (a tokenize pass)


def lint_source(
    source: Source,
    path: str,
    settings: Settings,
    options: RunOptions = RunOptions(),
    timings: Timings | None = None,
    project: ProjectFacts | None = None,
) -> FileResult:
    """Lint (and, as asked, fix or annotate) one file's decoded text. Never raises. Without `project` (the
    facts of the project's other files), a finding that depends on other files keeps its conditions
    (`unless`, `requires`), and its fix is not applied."""
    from ray_lint import engine  # loaded only when a file must be linted: a full cache hit never imports libcst
    from ray_lint.syntax import parses

    result = FileResult(path=path, source=source.text, notebook=source.notebook, encoding=source.encoding, timings=timings)
    notebook = source.notebook
    try:
        rules = settings.rules_for(Path(path), notebook.declared_ray if notebook is not None else None)
        text = source.text
        if options.fix:
            describer = notebook.describer if notebook is not None else None
            outcome = engine.fix_text(text, rules, options.unsafe_fixes, describer, timings, project)
            result.diagnostics = outcome.diagnostics
            result.fixes_applied = dict(outcome.applied)
            result.refused_fixes = outcome.refused
            if outcome.text != text:
                result.fixed_source = outcome.text
                if notebook is not None:  # what is left is located in the fixed cells
                    result.fixed_notebook = notebook.after(outcome.text)
        elif options.add_noqa:
            diagnostics = [d for d in engine.lint_text(text, rules, timings=timings, project=project) if not d.conditional]
            lines: dict[int, set[str]] = {}
            for diagnostic in diagnostics:
                if diagnostic.code != FILE_ERROR_CODE and diagnostic.noqa_line is not None:
                    lines.setdefault(diagnostic.noqa_line, set()).add(diagnostic.code)
            annotated, changed = noqa.add_noqa(text, lines)
            result.diagnostics = [d for d in diagnostics if d.code == FILE_ERROR_CODE]
            result.noqa_added = changed
            if changed and parses(annotated, text):
                result.fixed_source = annotated
                if notebook is not None:
                    result.fixed_notebook = notebook.after(annotated)
        else:
            describe_line = notebook.describe_line if notebook is not None else None
            provides: set[str] = set()
            result.diagnostics = engine.lint_text(
                text,
                rules,
                describe_line=describe_line,
                timings=timings,
                noqa_comments=options.noqa_comments,
                project=project,
                provides=provides,
            )
            result.provides = frozenset(provides)
    except CellsChanged as error:
        result.diagnostics.append(file_error(f"fixes not applied: {error}"))
        result.fixed_source = result.fixed_notebook = None
        result.fixes_applied = {}
    except Exception as error:  # a bug in ray-lint must not lose other files' results
        result.diagnostics = [file_error(f"internal error: {type(error).__name__}: {error}")]
        result.fixed_source = result.fixed_notebook = None
    return result


def lint_data(
    data: bytes, path: Path, settings: Settings, options: RunOptions = RunOptions(), project: ProjectFacts | None = None
) -> FileResult:
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
    result = lint_source(source, str(path), settings, options, timings, project)
    result.digest = content_digest(data)
    return result


def _unreadable(path: str, settings: Settings, error: SourceError) -> FileResult:
    result = FileResult(path=path)
    if FILE_ERROR_CODE in settings.codes_for(Path(path)):
        result.diagnostics = [file_error(error.message, error.line, error.column)]
    return result


def lint_file(
    path: Path, settings: Settings, options: RunOptions = RunOptions(), project: ProjectFacts | None = None
) -> FileResult:
    try:
        data = read_bytes(path)
    except SourceError as error:
        return _unreadable(str(path), settings, error)
    result = lint_data(data, path, settings, options, project)
    if options.write:
        write_fixes(path, result)
    return result


def lint_stdin(
    data: bytes, path: str, settings: Settings, resolver: Resolver, options: RunOptions = RunOptions()
) -> FileResult:
    """Lint text that did not come from a file (standard input). Where a finding depends on the rest of the
    project, the project of `path` is read (none for "-": a lone file)."""
    def facts(needed: set[str]) -> ProjectFacts:
        if path == "-":
            return LONE_FILE
        known = project_facts([Path(path)], resolver)
        needed = from_own_code(data.decode("utf-8", "replace"), needed, known) if needed else needed
        return known | _summaries(_project_files([Path(path)], resolver), needed) if needed else known

    return _alone(lambda project: lint_data(data, Path(path), settings, options, project), facts, options)


def lint_document(source: Source, path: Path, settings: Settings, resolver: Resolver, options: RunOptions) -> FileResult:
    """Lint an editor's document: its project's facts are read once (see `known_project_facts`), and only
    when a finding depends on them."""
    return _alone(
        lambda project: lint_source(source, str(path), settings, options, project=project),
        lambda needed: known_project_facts(path, resolver, needed),
        options,
    )


def _alone(
    lint: Callable[[ProjectFacts | None], FileResult], facts: Callable[[set[str]], ProjectFacts], options: RunOptions
) -> FileResult:
    """Lint one file without its project's facts, then drop the findings they contradict, asking for them
    (and for the function summaries the findings need) only when a finding depends on them; a run that
    writes fixes or `# noqa` lints again with them."""
    result = lint(None)
    if not any(d.conditional for d in result.diagnostics):
        return result
    known = facts({fact for d in result.diagnostics for fact in summaries_needed(d.requires, LONE_FILE)})
    if options.fix or options.add_noqa:  # fixes of findings that depended on the facts were held back
        return lint(known)
    result.diagnostics = [d for d in result.diagnostics if known.keeps(d.unless, d.requires)]
    return result


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
    project: ProjectFacts | None = None  # known before linting when fixes or `# noqa` comments are written


class ExecutorError(Exception):
    """An executor could not lint at all (a cluster that cannot be reached, for instance)."""


Executor = Callable[[list[Task]], Iterable[FileResult]]  # lints tasks, giving one result per task, in order


def _lint_task(task: Task) -> FileResult:
    return lint_file(task.path, task.settings, task.options, task.project)


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
    not linted again; the others go to `executor` (default: this process).

    Project facts (`ray_lint.project`) come from every linted file and, where a finding still depends
    on them, from the rest of its project. A check gathers them while it lints and drops the findings
    they contradict at the end; a run that writes fixes or `# noqa` comments gathers them first."""
    tasks: list[Task] = []
    for found in discover(paths, resolver, force_exclude):
        if isinstance(found, Skipped):
            yield found
        else:
            tasks.append(Task(found, resolver.settings_for(found.parent), options))
    tasks.sort(key=lambda task: str(task.path))
    packages = PackageFinder()
    if options.fix or options.add_noqa:
        known = project_facts([task.path for task in tasks], resolver, packages)
        tasks = [dataclasses.replace(task, project=known) for task in tasks]
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
    done: list[FileResult] = []
    for task, result in zip(tasks, results):
        if result is None:
            result = next(linted)
            if cache is not None and task.project is None and _cacheable(result, task.options):  # keyed on this file alone
                assert result.digest is not None
                key = cache.key(result.digest, task.path, task.settings)
                cache.store(task.settings, key, result.diagnostics, result.provides)
        done.append(result)
    yield from resolve(done, resolver, packages)


_KNOWN_PROJECTS: dict[Path, ProjectFacts] = {}  # by project root, for front-ends that see one file at a time
_SOUGHT_SUMMARIES: dict[Path, set[str]] = {}  # the function summaries already looked for, by project root


def known_project_facts(path: Path, resolver: Resolver, needed: Iterable[str] = ()) -> ProjectFacts:
    """The facts of `path`'s project, read once per process (flake8, the language server), with the
    function summaries in `needed` (each looked for once per process); a file outside any project is a
    lone file."""
    root = project_root(path.absolute())
    if root is None:
        return LONE_FILE
    if root not in _KNOWN_PROJECTS:
        _KNOWN_PROJECTS[root] = project_facts([path.absolute()], resolver)
    sought = _SOUGHT_SUMMARIES.setdefault(root, set())
    new = set(needed) - sought
    new = _from_own_code(path, new, _KNOWN_PROJECTS[root]) if new else new
    if new:
        sought |= new
        _KNOWN_PROJECTS[root] |= _summaries(_project_files([path.absolute()], resolver), new)
    return _KNOWN_PROJECTS[root]


def forget_project_facts(path: Path) -> None:
    """Read `path`'s project again next time (a file of it was saved)."""
    root = project_root(path.absolute())
    _KNOWN_PROJECTS.pop(root, None)  # type: ignore[arg-type]
    _SOUGHT_SUMMARIES.pop(root, None)  # type: ignore[arg-type]


def lint_in_project(
    text: str, path: Path, rules: list[Rule], resolver: Resolver, cache: ResultCache | None = None, **engine_options: Any,
) -> list[Diagnostic]:
    """Lint one file's text for a front-end that sees one file at a time (flake8): its project's facts are
    read only when a finding depends on them. `engine_options` go to `engine.lint_text`. With a `cache`,
    what the engine found is kept per text, settings and rules; the project's facts, which other files
    give, are applied afresh on every run."""
    diagnostics = _engine_findings(text, path, rules, resolver, cache, engine_options)
    if not any(d.conditional for d in diagnostics):
        return diagnostics
    facts = known_project_facts(path, resolver, {fact for d in diagnostics for fact in summaries_needed(d.requires, LONE_FILE)})
    return [d for d in diagnostics if facts.keeps(d.unless, d.requires)]


def _engine_findings(
    text: str, path: Path, rules: list[Rule], resolver: Resolver, cache: ResultCache | None, engine_options: dict[str, Any],
) -> list[Diagnostic]:
    from ray_lint import engine

    if cache is None:
        return engine.lint_text(text, rules, project=None, **engine_options)
    if not engine.wanted(text, rules):  # no findings, and the text scan is cheaper than a cache entry's hash, read and write
        return []
    settings = resolver.settings_for(path.absolute())
    # The rules that run (a flake8 `--select` may leave some out) and how `# noqa` is read change the findings.
    variant = repr((sorted(rule.code for rule in rules), engine_options.get("noqa_comments")))
    key = cache.key(content_digest(text.encode("utf-8", "surrogatepass")), path, settings, variant)
    entry = cache.load(settings, key)
    if entry is not None:
        return entry[0]
    diagnostics = engine.lint_text(text, rules, project=None, **engine_options)
    cache.admit(settings)
    cache.store(settings, key, diagnostics, frozenset())
    return diagnostics


def project_facts(paths: Iterable[Path], resolver: Resolver, packages: PackageFinder | None = None) -> ProjectFacts:
    """The facts `paths` give, and the rest of each one's project, read with CPython's parser."""
    paths = list(paths)
    return _read_facts([*paths, *_rest_of_projects(paths, resolver)], packages or PackageFinder())


def _read_facts(paths: Iterable[Path], packages: PackageFinder) -> ProjectFacts:
    facts: set[str] = set()
    for path in paths:
        facts |= packages.facts_of(path)
        try:
            facts |= facts_of(decode(read_bytes(path), path).text)
        except SourceError:
            continue
    return ProjectFacts(frozenset(facts))


def _from_own_code(path: Path, needed: set[str], known: ProjectFacts) -> set[str]:
    try:
        return from_own_code(decode(read_bytes(path), path).text, needed, known)
    except SourceError:
        return set()


def _summaries(paths: Iterable[Path], needed: set[str]) -> ProjectFacts:
    """The function summaries of the modules among `paths` that may define a function in `needed`,
    from ray-lint's own model (CPython's parse, which `_read_facts` uses, does not give them)."""
    from ray_lint import engine

    facts: set[str] = set()
    for path in paths:
        try:
            text = decode(read_bytes(path), path).text
        except SourceError:
            continue
        if any(defines(text, fact) for fact in needed):
            facts |= engine.summary_facts(text)
    return ProjectFacts(frozenset(facts))


def _project_files(paths: list[Path], resolver: Resolver) -> list[Path]:
    """`paths` and the rest of their projects."""
    return [*paths, *_rest_of_projects(paths, resolver)]


def _rest_of_projects(paths: list[Path], resolver: Resolver) -> Iterator[Path]:
    """The other files of the projects `paths` belong to (as `discover` finds them)."""
    seen = {path.absolute() for path in paths}
    known: dict[Path, Path | None] = {}
    roots = {root for root in (project_root(path, known) for path in paths) if root is not None}
    for found in discover(sorted(roots), resolver):
        if not isinstance(found, Skipped) and found.absolute() not in seen:
            seen.add(found.absolute())
            yield found


def resolve(results: list[FileResult], resolver: Resolver, packages: PackageFinder | None = None) -> list[FileResult]:
    """Drop the findings that project facts contradict (those linted without `project`): the facts the
    results give first, and the rest of their projects only when a finding still depends on them; then
    the function summaries still needed, from the modules that may define them."""
    if not any(d.conditional for result in results for d in result.diagnostics):
        return results
    packages = packages or PackageFinder()
    paths = [Path(result.path) for result in results]
    facts = ProjectFacts(frozenset().union(*(result.provides for result in results), *map(packages.facts_of, paths)))
    if any(d.conditional and undecided(d.unless, d.requires, facts) for result in results for d in result.diagnostics):
        facts = ProjectFacts(facts.facts | _read_facts(_rest_of_projects(paths, resolver), packages).facts)
    if any(summaries_needed(d.requires, facts) for result in results for d in result.diagnostics):
        # Which imports come from the project's own code: its packages, from the directories alone.
        facts = ProjectFacts(facts.facts.union(*map(packages.facts_of, _rest_of_projects(paths, resolver))))
    needed: set[str] = set()
    for result in results:
        wanted = {fact for d in result.diagnostics for fact in summaries_needed(d.requires, facts)}
        if wanted:  # only functions the module imports from the project's own code have summaries to find
            needed |= _from_own_code(Path(result.path), wanted, facts)
    if needed:  # modules no rule parsed (a helper without Ray tokens) may define them
        parsed = {Path(result.path) for result in results if SUMMARISED in result.provides}
        facts = facts | _summaries([p for p in _project_files(paths, resolver) if p not in parsed], needed)
    for result in results:
        result.diagnostics = [d for d in result.diagnostics if facts.keeps(d.unless, d.requires)]
    return results


def _cached(cache: ResultCache, task: Task) -> FileResult | None:
    """The file's result from the cache, when the cache has it and it is all the run needs."""
    try:
        data = read_bytes(task.path)
    except SourceError:
        return None
    digest = content_digest(data)
    entry = cache.load(task.settings, cache.key(digest, task.path, task.settings))
    if entry is None or not _served_by_cache(entry[0], task.options):
        return None
    diagnostics, provides = entry
    result = FileResult(path=str(task.path), diagnostics=diagnostics, digest=digest, provides=provides)
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
