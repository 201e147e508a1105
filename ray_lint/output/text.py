"""Human-readable formats, laid out like ruff's: `full` shows the source with a caret under the span.

User text (paths, messages, source lines) never goes through rich markup: it is either escaped or
printed as a `Text`, so that `[brackets]` in it are shown, not taken for styles."""

from __future__ import annotations

import difflib
from collections import Counter
from functools import lru_cache
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ray_lint.diagnostics import Diagnostic, Timings, apply_edits
from ray_lint.noqa import LINE_SPLIT
from ray_lint.output import Finding, RunReport
from ray_lint.rule import rule_by_code_or_name

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}


def make_console(stream: TextIO, color: str) -> Console:
    """A console for `--color auto|always|never`. `always` and `never` win over the environment; with
    `auto`, rich reads it: FORCE_COLOR (or TTY_COMPATIBLE) makes any stream a terminal, a non-empty
    NO_COLOR drops the colours, and otherwise colours go to terminals only."""
    force = {"always": True, "never": False}.get(color)
    no_color = None if force is None else not force
    return Console(file=stream, force_terminal=force, no_color=no_color, highlight=False, soft_wrap=True)


def _header(report: RunReport, finding: Finding) -> Text:
    d = finding.diagnostic
    location = [piece for part in finding.location.split(":") for piece in ((part, "bold"), (":", "cyan"))]
    marker = [("[*]", "cyan"), " "] if report.fix_is_available(d) else []
    return Text.assemble(*location, " ", (d.code, _SEVERITY_STYLE[d.severity.value]), " ", *marker, d.message)


def render_concise(report: RunReport, console: Console) -> None:
    for finding in report.findings:
        console.print(_header(report, finding), soft_wrap=True)


def _caret_prefix(line: str, column: int) -> str:
    """Whitespace that lines a caret up under `column`, keeping the line's own tabs."""
    return "".join("\t" if ch == "\t" else " " for ch in line[: column - 1])


def render_full(report: RunReport, console: Console) -> None:
    split = lru_cache(maxsize=1)(LINE_SPLIT.split)  # findings come file by file: each file's text is split once
    for finding in report.findings:
        d = finding.diagnostic
        console.print(_header(report, finding), soft_wrap=True)
        lines = split(finding.source or "")
        if 0 < d.start.line <= len(lines) and finding.source:
            first, last = max(1, d.start.line - 1), min(len(lines), d.start.line + 1)
            width = len(str(last))
            gutter = " " * width
            console.print(f"[blue]{gutter} |[/]", soft_wrap=True)
            for number in range(first, last + 1):
                # A Text, not markup: markup escaping would show a line's final backslash twice.
                console.print(Text.assemble((f"{number:>{width}} |", "blue"), " ", lines[number - 1]), soft_wrap=True)
                if number == d.start.line:
                    line = lines[number - 1]
                    end = d.end.column if d.end.line == d.start.line else len(line) + 1
                    carets = "^" * max(1, end - d.start.column)
                    style = _SEVERITY_STYLE[d.severity.value]
                    console.print(
                        f"[blue]{gutter} |[/] {_caret_prefix(line, d.start.column)}[{style}]{carets} {d.code}[/]",
                        soft_wrap=True,
                    )
            console.print(f"[blue]{gutter} |[/]", soft_wrap=True)
            if d.fix is not None:
                console.print(f"{gutter} [bold cyan]= help[/]: {escape(d.fix.message)}", soft_wrap=True)
                if report.show_fixes:
                    _print_fix_diff(console, finding.source, d)
        console.print()


def _print_fix_diff(console: Console, source: str, diagnostic: Diagnostic) -> None:
    assert diagnostic.fix is not None
    fixed = apply_edits(source, list(diagnostic.fix.edits))
    label = "unsafe fix" if diagnostic.fix.applicability.value == "unsafe" else "safe fix"
    console.print(f"  [bold]{label}[/]:", soft_wrap=True)
    for line in difflib.unified_diff(source.splitlines(), fixed.splitlines(), lineterm="", n=1):
        if line.startswith(("---", "+++", "@@")):
            continue
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        console.print(Text.assemble("  ", (line, style)), soft_wrap=True)


def render_statistics(report: RunReport, console: Console) -> None:
    counts = Counter(f.diagnostic.code for f in report.findings)
    names = {f.diagnostic.code: f.diagnostic.name for f in report.findings}
    fixable = {f.diagnostic.code for f in report.findings if report.fix_is_available(f.diagnostic)}
    table = Table(box=None, show_header=False, pad_edge=False)
    for _ in range(3):
        table.add_column()
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*] " if code in fixable else ""
        table.add_row(str(count), code, escape(marker + names[code]))
    console.print(table)


def _fixes(count: int) -> str:
    return "fix" if count == 1 else "fixes"


def summary(report: RunReport, fixed: int) -> str:
    """The closing lines: how many problems, how many fixed, and what the fix options would do (worded
    as ruff words them, with "problems" for its "errors")."""
    remaining = len(report.findings)
    available, hidden = report.fixable, report.hidden_fixes
    noun = "problem" if remaining + fixed == 1 else "problems"
    if remaining == 0 and fixed == 0:
        return "All checks passed!"
    lines = []
    if fixed:
        lines.append(f"Found {remaining + fixed} {noun} ({fixed} fixed, {remaining} remaining).")
    else:
        lines.append(f"Found {remaining} {noun}.")
    unsafe = f"{hidden} hidden {_fixes(hidden)} can be enabled with the `--unsafe-fixes` option"
    if available and not report.fixing:
        option = "--fix --unsafe-fixes" if report.unsafe_fixes else "--fix"
        lines.append(f"[*] {available} fixable with the `{option}` option" + (f" ({unsafe})." if hidden else "."))
    elif hidden:
        lines.append(f"No fixes available ({unsafe}).")
    return "\n".join(lines)


def fix_summary(report: RunReport, fixed: int, diff: bool) -> str | None:
    """What `--diff` would fix or `--fix-only` fixed, and what `--unsafe-fixes` would add, as ruff puts
    it; None when nothing was or could be fixed."""
    hidden = report.hidden_fixes
    if not fixed and not hidden:
        return None
    if not fixed:
        return f"No problems {'would be fixed' if diff else 'fixed'} ({hidden} {_fixes(hidden)} available with `--unsafe-fixes`)."
    done = f"{'Would fix' if diff else 'Fixed'} {fixed} problem{'s' if fixed != 1 else ''}"
    return done + (f" ({hidden} additional {_fixes(hidden)} available with `--unsafe-fixes`)." if hidden else ".")


_PHASES = ("decode", "pre-filter", "parse", "semantic model")
_LATE_PHASES = ("positions and fixes", "noqa comments")


def render_timings(timings: Timings, files: int, from_cache: int, console: Console) -> None:
    """Where linting spent its time: shared phases in pipeline order, then each rule, slowest first.
    Times are summed over the files (and over worker processes, so they can exceed the wall time)."""
    total = sum(timings.seconds.values())
    table = Table(title="Time per phase and rule (summed over files)", box=None, pad_edge=False, title_justify="left")
    for header, justify in (("phase or rule", "left"), ("files", "right"), ("seconds", "right"), ("share", "right")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    rules = sorted((k for k in timings.seconds if k not in _PHASES + _LATE_PHASES), key=lambda k: -timings.seconds[k])
    for key in [*(p for p in _PHASES if p in timings.seconds), *rules, *(p for p in _LATE_PHASES if p in timings.seconds)]:
        rule = rule_by_code_or_name(key) if key in rules else None
        label = f"{key} {rule.name}" if rule is not None else key
        seconds = timings.seconds[key]
        table.add_row(escape(label), str(timings.files[key]), f"{seconds:.3f}", f"{seconds / total:.0%}" if total else "-")
    table.add_row("[bold]total[/]", "", f"[bold]{total:.3f}[/]", "")
    console.print(table)
    cached = f"; {from_cache} from the cache, not timed (--no-cache times every file)" if from_cache else ""
    console.print(f"{files} files{cached}.", markup=False)
