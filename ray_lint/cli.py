"""The `ray-lint` command: parses arguments, calls the API, prints results. No lint logic lives here."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

from rich.table import Table
from rich.text import Text

from ray_lint import __version__
from ray_lint.api import Executor, ExecutorError, RunOptions, lint_paths, lint_stdin, local_executor
from ray_lint.cache import CACHE_DIR_ENV, CACHE_DIR_NAME, NotACache, ResultCache, clean, default_directory
from ray_lint.config import CONFIG_FILES, ConfigError, Layer, Resolver, parse_layer
from ray_lint.diagnostics import Timings, file_error
from ray_lint.docs import category_title, render_rule
from ray_lint.files import Skipped, discover
from ray_lint.output import FORMATS, RunReport, collect
from ray_lint.output.machine import render_github, render_json, render_json_lines
from ray_lint.output.sarif import render_sarif
from ray_lint.output.text import fix_summary, make_console, render_concise, render_full, render_statistics, render_timings, summary
from ray_lint.results import FileResult
from ray_lint.rule import all_rules, rule_by_code_or_name

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
WATCH_INTERVAL = 0.5  # seconds between two looks at the files under --watch


class UsageError(Exception):
    pass


def _codes(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _command_line(value: str) -> list[str]:
    """An entry point's arguments, written as in a shell: `--args="--count 6 --name 'a b'"`."""
    try:
        return shlex.split(value)
    except ValueError as error:  # an unclosed quote
        raise argparse.ArgumentTypeError(f"{error}: {value}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ray-lint",
        description="Find performance and correctness anti-patterns in Python code that uses Ray.",
    )
    parser.add_argument("--version", action="version", version=f"ray-lint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="lint files and directories")
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or directories ('-' for standard input; default: .)")
    check.add_argument("--config", type=Path, help="use this config file instead of the nearest one")
    check.add_argument("--isolated", action="store_true", help="ignore all config files")
    check.add_argument("--select", type=_codes, help="rules to enable (codes, prefixes such as RAY0, or names); replaces the config's")
    check.add_argument("--extend-select", type=_codes, default=[], help="rules to enable in addition")
    check.add_argument("--ignore", type=_codes, default=[], help="rules to disable")
    check.add_argument("--extend-ignore", type=_codes, default=[], help="rules to disable in addition to --ignore and the config's")
    check.add_argument("--per-file-ignores", action="append", default=[], metavar="PATTERN:CODES", help="disable rules for files matching a pattern (repeatable)")
    check.add_argument("--extend-exclude", type=_codes, default=[], help="more path patterns to skip")
    check.add_argument("--force-exclude", action="store_true", help="apply exclusions to files named on the command line too")
    check.add_argument("--preview", action="store_true", default=None, help="enable preview rules")
    check.add_argument("--stdin-filename", help="the file name to report (and match config against) for standard input")
    check.add_argument("--output-format", choices=FORMATS, default=os.environ.get("RAY_LINT_OUTPUT_FORMAT", "full"))
    check.add_argument("--output-file", type=Path, help="write the report here instead of standard output")
    check.add_argument("--statistics", action="store_true", help="show counts per rule instead of each finding")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even if problems are found")
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--fix-only", action="store_true", help="apply fixes and report only what was fixed, not the problems left")
    check.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when a fix was applied, even if no problems remain")
    check.add_argument("--unsafe-fixes", action="store_true", help="also apply (with --fix) or show unsafe fixes")
    check.add_argument("--diff", action="store_true", help="print the fixes as a diff instead of writing them")
    check.add_argument("--show-fixes", action="store_true", help="show each fix as a diff in the full format")
    check.add_argument("--add-noqa", action="store_true", help="add `# noqa` comments for every current finding")
    check.add_argument("--show-files", action="store_true", help="list the files that would be checked, one a line, and exit")
    check.add_argument("--watch", "-w", action="store_true", help="check again whenever a file changes, until Ctrl-C")
    check.add_argument("--quiet", "-q", action="store_true", help="print the findings only: no summary, hints or warnings")
    check.add_argument("--timings", action="store_true", help="also show the time each phase and rule took (on standard error)")
    check.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    check.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where files are linted: this machine's processes, or tasks on a Ray cluster (needs ray-lint[verify])",
    )
    check.add_argument("--address", help="with --executor ray: the cluster to use (default: start a local one)")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--cache-dir", type=Path, help=f"the cache directory (default: ${CACHE_DIR_ENV}, or {CACHE_DIR_NAME} in the project root)")
    check.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("rule", nargs="?", metavar="CODE|NAME")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.add_argument("--output-format", choices=("text", "json"), default="text")

    verify = commands.add_parser(
        "verify",
        help="run flagged code on a local Ray cluster and measure whether the slowdown is real (EXECUTES YOUR CODE)",
        description=(
            "Lint the paths, then for every finding of a rule with an experiment run the flagged code and its fixed "
            "form on a Ray cluster and report whether the problem is real, with numbers. This EXECUTES the code in the "
            "files (each run in its own process, with a time limit): only verify code you trust. ray-lint starts a "
            "local cluster and stops it at the end; an inherited RAY_ADDRESS is ignored unless --address names it."
        ),
    )
    verify.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or directories (default: .)")
    verify.add_argument("--config", type=Path, help="use this config file instead of the nearest one")
    verify.add_argument("--isolated", action="store_true", help="ignore all config files")
    verify.add_argument("--select", type=_codes, help="rules to verify (codes, prefixes or names)")
    verify.add_argument("--num-cpus", type=int, help="CPUs of the local cluster (default: all cores)")
    verify.add_argument("--address", help="run on this existing cluster instead of starting one")
    verify.add_argument("--timeout", type=float, default=60.0, help="seconds each run may take (default: 60)")
    verify.add_argument("--repeat", type=int, default=3, help="rounds of A B runs per finding (default: 3)")
    verify.add_argument(
        "--tests", type=Path, action="append", metavar="PATH",
        help="test files, folders or pytest node ids (file::test) that call the flagged code (default: [tool.ray-lint.verify] tests, else the project's)",
    )
    verify.add_argument(
        "--args", dest="arguments", type=_command_line, metavar="ARGS",
        help='the command line of each entry point that runs, as in a shell: --args="--count 6" (default: [tool.ray-lint.verify] args)',
    )
    verify.add_argument("--output-format", choices=("full", "json", "github"), default="full")
    verify.add_argument("--report", type=Path, metavar="FILE.html", help="also write an HTML report with timelines")
    verify.add_argument("--trace-dir", type=Path, help="write each variant's Chrome trace (Perfetto) here")
    verify.add_argument("--color", choices=("auto", "always", "never"), default="auto")

    lsp = commands.add_parser(
        "server", help="run the language server (for editors)", description="Run ray-lint's language server, on stdio by default."
    )
    lsp.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead of stdio (for debugging)")

    clean_command = commands.add_parser("clean", help="remove the cache")
    clean_command.add_argument("--cache-dir", type=Path, help="the cache directory (default: as for check)")

    config = commands.add_parser("config", help="show the resolved configuration for a path")
    config.add_argument("path", nargs="?", type=Path, default=Path("."))
    config.add_argument("--config", type=Path)
    config.add_argument("--isolated", action="store_true")
    config.add_argument("--output-format", choices=("text", "json"), default="text")
    return parser


def _cli_layer(args: argparse.Namespace) -> Layer:
    per_file: dict[str, list[str]] = {}
    for entry in getattr(args, "per_file_ignores", []):
        pattern, separator, codes = entry.rpartition(":")
        if not separator or not pattern or not codes:
            raise UsageError(f"--per-file-ignores expects PATTERN:CODES, got `{entry}`")
        per_file.setdefault(pattern, []).extend(_codes(codes))
    data: dict[str, object] = {}
    if getattr(args, "select", None) is not None:
        data["select"] = args.select
    for key in ("extend_select", "ignore", "extend_ignore", "extend_exclude"):
        if getattr(args, key, None):
            data[key.replace("_", "-")] = getattr(args, key)
    if per_file:
        data["per-file-ignores"] = per_file
    if getattr(args, "preview", None):
        data["preview"] = True
    return parse_layer(data, "command line", Path.cwd())


def _resolver(args: argparse.Namespace, validate: bool = True) -> Resolver:
    if args.config is not None and not args.config.is_file():
        raise ConfigError(f"{args.config}: config file not found")
    return Resolver(_cli_layer(args), config_path=args.config, isolated=args.isolated, validate=validate)


def run_check(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.add_noqa and (args.fix or args.fix_only):
        raise UsageError(f"--add-noqa cannot be combined with {'--fix' if args.fix else '--fix-only'}")
    if args.address and args.executor != "ray":
        raise UsageError("--address needs --executor ray")
    paths = args.paths or [Path(".")]
    from_stdin = [str(p) for p in paths] == ["-"]
    if from_stdin and (args.show_files or args.watch):
        raise UsageError(f"{'--show-files' if args.show_files else '--watch'} needs files or directories, not standard input")
    if args.show_files:
        return _show_files(args, paths, stdout, stderr)
    if args.watch:
        return _watch(args, paths, stdout, stderr)
    return _check(args, paths, from_stdin, stdout, stderr)


def _check(args: argparse.Namespace, paths: list[Path], from_stdin: bool, stdout: TextIO, stderr: TextIO) -> int:
    fixing = args.fix or args.fix_only
    options = RunOptions(
        fix=fixing or args.diff,
        unsafe_fixes=args.unsafe_fixes,
        write=not args.diff,
        add_noqa=args.add_noqa,
        timings=args.timings,
    )
    err = make_console(stderr, args.color)
    results: list[FileResult] = []
    cache = None if args.no_cache or from_stdin else ResultCache(args.cache_dir or default_directory(paths[0]))
    resolver = _resolver(args, validate=cache is None)  # with a cache, lint_paths validates what the cache does not vouch for
    if from_stdin:
        name = args.stdin_filename or "-"
        settings = resolver.settings_for(Path(name).absolute())
        data = sys.stdin.buffer.read()
        result = lint_stdin(data, name, settings, resolver, options)
        if fixing and not args.diff:  # the input comes back, fixed or as it was, even if unreadable
            fixed_text = result.file_text()
            if fixed_text is not None:
                stdout.write(fixed_text)
            elif hasattr(stdout, "buffer"):
                stdout.flush()
                stdout.buffer.write(data)
            else:
                stdout.write(data.decode("utf-8", "replace"))
            stdout = stderr  # the fixed source owns standard output
        results.append(result)
    else:
        for item in lint_paths(paths, resolver, options, _executor(args), args.force_exclude, cache):
            if isinstance(item, Skipped):
                results.append(FileResult(path=str(item.path), diagnostics=[file_error(item.reason)]))
            else:
                results.append(item)
    for result in results if not args.quiet else ():
        for refused in result.refused_fixes:
            where = result.notebook.describe_line(refused.start.line) if result.notebook else f"line {refused.start.line}"
            message = f": {result.path}, {where}: the {refused.code} fix would leave code that does not parse; not applied"
            err.print(Text.assemble(("warning", "yellow"), message))

    fixed = sum(sum(r.fixes_applied.values()) for r in results)
    docs_base = resolver.settings_for((Path(args.stdin_filename or "-") if from_stdin else paths[0]).absolute()).docs_url
    report = RunReport(collect(results), results, args.unsafe_fixes, args.show_fixes, fixing=fixing, docs_url=docs_base)
    if args.diff:
        changed = _print_diff(results, stdout)
        would = fix_summary(report, fixed, diff=True)
        if would is not None and not args.quiet:  # on standard error: standard output stays a patch
            err.print(would, markup=False)
        return EXIT_OK if not changed or args.exit_zero else EXIT_FINDINGS
    if args.add_noqa:
        added = sum(r.noqa_added for r in results)
        if not args.quiet:
            err.print(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
        return EXIT_OK

    output = args.output_file.open("w", encoding="utf-8") if args.output_file else stdout
    try:
        _render(report, args, output, fixed)
    finally:
        if args.output_file:
            output.close()
    if fixing and args.show_fixes and fixed and not args.quiet:
        for result in results:
            for code, count in sorted(result.fixes_applied.items()):
                err.print(f"Fixed {count} × {code} in {result.path}", markup=False)
    if args.timings:
        timings = Timings()
        for result in results:
            if result.timings is not None:
                timings.merge(result.timings)
        render_timings(timings, len(results), cache.hits if cache is not None else 0, err)
    if args.exit_zero:
        return EXIT_OK
    if args.exit_non_zero_on_fix and fixed:
        return EXIT_FINDINGS
    return EXIT_OK if args.fix_only or not report.findings else EXIT_FINDINGS


def _show_files(args: argparse.Namespace, paths: list[Path], stdout: TextIO, stderr: TextIO) -> int:
    """`--show-files`: the files a check would lint, as ruff lists them: absolute paths, sorted."""
    files = []
    for item in discover(paths, _resolver(args), args.force_exclude):
        if isinstance(item, Skipped):
            if not args.quiet:
                stderr.write(f"ray-lint: warning: {item.path}: {item.reason}\n")
        else:
            files.append(item.absolute())
    stdout.writelines(f"{path}\n" for path in sorted(files))
    return EXIT_OK


def _watch(args: argparse.Namespace, paths: list[Path], stdout: TextIO, stderr: TextIO) -> int:
    """`--watch`: check, then check again whenever a file to lint or a config file changes, until Ctrl-C.
    The files are polled (no dependency, no OS-specific watcher); the cache re-lints only those that changed."""
    console = make_console(stdout, args.color)

    def say(message: str) -> None:
        if not args.quiet:
            console.print(f"[{time.strftime('%H:%M:%S')}] {message}", markup=False)

    seen: dict[Path, tuple[int, int] | None] | None = None
    try:
        while True:
            state = _watched(args, paths)
            if state != seen:  # what a round's own fixes change starts one more round, which finds nothing to fix
                console.clear()
                say("Starting linter in watch mode..." if seen is None else "File change detected...")
                seen = state
                try:
                    _check(args, paths, False, stdout, stderr)
                except (ConfigError, UsageError, ExecutorError) as error:
                    stderr.write(f"ray-lint: error: {error}\n")
                say("Watching for file changes.")
                stdout.flush()
            time.sleep(WATCH_INTERVAL)
    except KeyboardInterrupt:
        return EXIT_OK


def _watched(args: argparse.Namespace, paths: list[Path]) -> dict[Path, tuple[int, int] | None]:
    """The modification time and size (None: absent) of each file a check would lint and of each config
    file that could apply to them: `--watch` checks again when any of these changes."""
    try:
        files = [item for item in discover(paths, _resolver(args, validate=False), args.force_exclude) if not isinstance(item, Skipped)]
    except ConfigError:  # a config file that does not parse: the check reports it; the config files are still watched
        files = []
    directories: set[Path] = set()
    for path in (*paths, *files):
        directory = path.absolute() if path.is_dir() else path.absolute().parent
        directories.update((directory, *directory.parents))
    configs = [directory / name for directory in directories for name in CONFIG_FILES] + ([args.config] if args.config else [])
    return {path: _stamp(path) for path in (*files, *configs)}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _executor(args: argparse.Namespace) -> Executor:
    if args.executor == "ray":
        from ray_lint.ray_executor import RayExecutor  # Ray is imported only when asked for

        return RayExecutor(args.address)
    return local_executor(args.jobs)


def _render(report: RunReport, args: argparse.Namespace, output: TextIO, fixed: int) -> None:
    fmt = args.output_format
    if fmt in ("full", "concise"):
        console = make_console(output, "never" if args.output_file else args.color)
        if args.fix_only:  # what was fixed, not what is left
            fixes = fix_summary(report, fixed, diff=False)
            if fixes is not None and not args.quiet:
                console.print(fixes, markup=False)
            return
        if args.statistics:
            render_statistics(report, console)
        elif fmt == "full":
            render_full(report, console)
        else:
            render_concise(report, console)
        if not args.quiet:
            console.print(summary(report, fixed), markup=False)
        return
    if args.fix_only:  # as ruff: the machine formats report nothing under --fix-only
        return
    renderers = {"json": render_json, "json-lines": render_json_lines, "sarif": render_sarif, "github": render_github}
    output.write(renderers[fmt](report))


def _print_diff(results: list[FileResult], stdout: TextIO) -> bool:
    changed = False
    for result in results:
        if result.fixed_source is None or result.source is None:
            continue
        changed = True
        if result.notebook is not None:
            pairs = [
                (f"{result.path}:cell {cell.index}", cell.text, text)
                for cell, text in result.notebook.changed_cells(result.fixed_source)
            ]
        else:
            pairs = [(result.path, result.source, result.fixed_source)]
        for label, before, after in pairs:
            old, new = (text if text.endswith("\n") else text + "\n" for text in (before, after))  # cells often lack one
            stdout.writelines(
                difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=f"a/{label}", tofile=f"b/{label}")
            )
    return changed


def run_rule(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.all:
        rules = list(all_rules())
    elif args.rule:
        found = rule_by_code_or_name(args.rule)
        if found is None:
            known = [r.code for r in all_rules()] + [r.name for r in all_rules()]
            close = difflib.get_close_matches(args.rule, known, n=1)
            raise UsageError(f"unknown rule `{args.rule}`" + (f"; did you mean `{close[0]}`?" if close else ""))
        rules = [found]
    else:
        raise UsageError("name a rule (code or name), or pass --all")
    if args.output_format == "json":
        payload = [dict(rule.summary(), docs=rule.docs.strip()) for rule in rules]
        stdout.write(json.dumps(payload if args.all else payload[0], indent=2) + "\n")
        return EXIT_OK
    from rich.markdown import Markdown  # only here: it costs a tenth of a second to import

    console = make_console(stdout, "auto")
    if args.all:  # a listing; `ray-lint rule CODE` shows one rule's page
        table = Table("code", "name", "category", "severity", "status", "fix", box=None, pad_edge=False)
        for rule in rules:
            status = "preview" if rule.preview else "default"
            table.add_row(rule.code, rule.name, category_title(rule.category), rule.severity.value, status, "yes" if rule.fixable else "-")
        console.print(table)
        return EXIT_OK
    for rule in rules:
        text = render_rule(rule)
        console.print(Markdown(text) if console.is_terminal else text, markup=False)
    return EXIT_OK


def run_config(args: argparse.Namespace, stdout: TextIO) -> int:
    args.select, args.extend_select, args.ignore, args.preview = None, [], [], None
    resolver = _resolver(args)
    settings = resolver.settings_for(args.path.absolute())
    rows = settings.describe()
    if args.output_format == "json":
        stdout.write(json.dumps({key: {"value": value, "source": source} for key, value, source in rows}, indent=2) + "\n")
        return EXIT_OK
    for key, value, source in rows:
        stdout.write(f"{key} = {json.dumps(value)}  # from {source}\n")
    return EXIT_OK


def run_clean(args: argparse.Namespace, stdout: TextIO) -> int:
    directory = args.cache_dir or default_directory(Path.cwd())
    try:
        removed = clean(directory)
    except NotACache as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"{directory}: cannot be removed: {error.strerror or error}") from None
    stdout.write(f"Removed {directory}\n" if removed else f"No cache at {directory}\n")
    return EXIT_OK


def run_server(args: argparse.Namespace, stderr: TextIO) -> int:
    try:
        from ray_lint import lsp  # pygls is an extra: the command line does not need it
    except ImportError as error:
        stderr.write(f"ray-lint: error: the language server needs pygls and lsprotocol: install ray-lint with its lsp extra, `pip install '/path/to/ray-lint[lsp]'` ({error})\n")
        return EXIT_ERROR
    return lsp.main(args.tcp)


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return run_check(args, stdout, stderr)
        if args.command == "rule":
            return run_rule(args, stdout)
        if args.command == "config":
            return run_config(args, stdout)
        if args.command == "clean":
            return run_clean(args, stdout)
        if args.command == "verify":
            from ray_lint.verify.cli import run_verify  # imports the verifier only when asked

            return run_verify(args, _resolver(args), stdout, stderr)
        if args.command == "server":
            return run_server(args, stderr)
        parser.print_help(stdout)
        return EXIT_ERROR
    except (ConfigError, UsageError, ExecutorError) as error:
        stderr.write(f"ray-lint: error: {error}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("ray-lint: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as error:  # a bug in ray-lint: one line and exit 2, as the README promises, not a traceback
        where = traceback.extract_tb(error.__traceback__)[-1]
        stderr.write(
            f"ray-lint: internal error: {type(error).__name__}: {error} (at {Path(where.filename).name}:{where.lineno}); please report it\n"
        )
        return EXIT_ERROR
