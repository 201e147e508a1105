"""`ray-lint verify`: starts the cluster, shows progress, prints the verdicts. No experiment logic here."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ray_lint.config import Resolver
from ray_lint.experiment import PROBLEM_SHOWN, Verdict, tally
from ray_lint.output.machine import workflow_command
from ray_lint.output.text import make_console
from ray_lint.verify.report import render_html

if TYPE_CHECKING:  # Ray is imported only once the command knows it has work for a cluster
    from ray_lint.verify.cluster import Cluster
    from ray_lint.verify.runner import Linted

EXIT_OK, EXIT_CONFIRMED, EXIT_ERROR = 0, 1, 2
STYLES = {
    "confirmed on your code": "bold red", "pattern confirmed (model)": "red", "reproduced": "bold red",
    "not reproduced": "green", "inconclusive": "yellow", "no experiment": "dim",
}


def run_verify(args: argparse.Namespace, resolver: Resolver, stdout: TextIO, stderr: TextIO) -> int:
    err = make_console(stderr, args.color)
    if args.repeat < 1 or args.timeout <= 0:
        err.print("ray-lint: error: --repeat must be at least 1 and --timeout positive")
        return EXIT_ERROR
    try:
        import psutil  # noqa: F401  (the cluster's clean-up needs it)
        import ray  # noqa: F401
    except ImportError:
        err.print("ray-lint: error: `ray-lint verify` needs Ray: install ray-lint with its verify extra, `pip install '/path/to/ray-lint[verify]'`", markup=False)
        return EXIT_ERROR
    from ray_lint.verify.cluster import Cluster
    from ray_lint.verify.runner import lint_for_verify

    paths = args.paths or [Path(".")]
    linted = lint_for_verify(paths, resolver, args.tests, args.arguments)  # before any cluster: bad input costs no start-up
    problems = linted.problems()
    if problems:
        for problem in problems:
            err.print(f"ray-lint: error: {problem}", markup=False)
        err.print("ray-lint: error: nothing was run; fix these files first", markup=False)
        return EXIT_ERROR
    if not linted.verifiable():  # nothing to run: no cluster
        return _print(linted.without_experiment(), args, stdout)

    err.print("[bold]ray-lint verify runs the flagged code and its fixed form; this executes the code in these files.[/]")
    # What Ray's driver prints while connected ("(raylet) WARNING: 8 PYTHON worker processes...") goes to
    # stderr: stdout holds only the verdicts, which a JSON or GitHub reader parses.
    with contextlib.redirect_stdout(stderr):
        with err.status("starting a local Ray cluster" if args.address is None else f"connecting to {escape(args.address)}"):
            cluster = Cluster.start(args.num_cpus, args.address)
        verdicts = _run(args, resolver, cluster, err, paths, linted)
    if args.report is not None:
        args.report.write_text(render_html(verdicts), encoding="utf-8")
        err.print(f"report: {args.report}", markup=False)
    return _print(verdicts, args, stdout)


def _run(args: argparse.Namespace, resolver: Resolver, cluster: Cluster, err: Console, paths: list[Path], linted: Linted) -> list[Verdict]:
    """Every experiment on `cluster`, with a progress bar; the cluster is stopped after, whatever happens."""
    from ray_lint.verify.runner import verify

    try:
        where = "local cluster" if cluster.owned else f"cluster at {args.address}"
        gpus = f", {cluster.num_gpus:g} {'logical ' if cluster.gpus_are_logical else ''}GPUs" if cluster.num_gpus else ""
        err.print(f"{where}: {cluster.num_cpus:g} CPUs{gpus}")
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err, transient=True,
        ) as progress:
            bar = progress.add_task("experiments", total=None)

            def advance(path: str, total: int) -> None:
                progress.update(bar, total=total, advance=1, description=escape(Path(path).name))

            return verify(paths, resolver, cluster, args.repeat, args.timeout, advance, args.trace_dir, linted)
    finally:
        cluster.stop()


def _print(verdicts: list[Verdict], args: argparse.Namespace, stdout: TextIO) -> int:
    """The verdicts in the chosen format; exit 1 when one of them shows a problem."""
    if args.output_format == "json":
        stdout.write(json.dumps([v.to_json() for v in verdicts], indent=2) + "\n")
    elif args.output_format == "github":
        stdout.write("".join(github_annotation(v) + "\n" for v in verdicts))
    else:
        console = make_console(stdout, args.color)
        if not console.is_terminal:
            console.width = 140  # a log or a pipe: wide rows rather than folded ones
        render(verdicts, console)
    return EXIT_CONFIRMED if any(v.status in PROBLEM_SHOWN for v in verdicts) else EXIT_OK


def github_annotation(verdict: Verdict) -> str:
    """One GitHub Actions workflow command per verdict: an error where the problem was shown."""
    level = "error" if verdict.status in PROBLEM_SHOWN else "notice"
    summary = verdict.summary + (f"; {verdict.results}" if verdict.results else "")
    return workflow_command(
        level,
        {"title": f"ray-lint verify ({verdict.code}): {verdict.status}", "file": verdict.path, "line": verdict.line},
        f"{verdict.location}: {verdict.code} {verdict.status} ({verdict.ran}): {summary}",
    )


def render(verdicts: list[Verdict], console: Console) -> None:
    if not verdicts:
        console.print("No findings.")
        return
    table = Table(show_lines=True)
    for column in ("Finding", "Verdict", "How", "Numbers and evidence"):
        table.add_column(column, overflow="fold")
    rows: dict[tuple[str, str, str, str], list[str]] = {}  # findings whose verdicts read the same share a row
    for verdict in verdicts:
        how = f"{verdict.ran}, {verdict.mode}" if verdict.mode else "-"
        if verdict.shape:
            how += f": {verdict.shape}"
        summary = escape(verdict.summary)
        if verdict.results:
            summary += "; " + (escape(verdict.results) if verdict.same_results else f"[bold red]{escape(verdict.results)}[/]")
        rows.setdefault((verdict.code, f"[{STYLES[verdict.status]}]{verdict.status}[/]", escape(how), summary), []).append(verdict.location)
    for (code, status, how, summary), locations in rows.items():
        table.add_row(escape("\n".join(locations) + f" {code}"), status, how, summary)
    console.print(table)
    console.print(tally(verdicts))
