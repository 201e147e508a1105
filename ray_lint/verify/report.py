"""`--report FILE.html`: one self-contained page with, per finding, the code, the verdict, the numbers
and a timeline of both variants (tasks as bars on worker rows, on one time scale), which shows a
serialization at a glance. No scripts, no external files."""

from __future__ import annotations

import html
from pathlib import Path

from ray_lint.experiment import Run, Verdict, tally
from ray_lint.source import SourceError, decode, read_bytes

ROW_HEIGHT, BAR_HEIGHT, WIDTH, LABEL_WIDTH = 22, 16, 720, 90
COLOURS = {
    "confirmed on your code": "#c62828", "pattern confirmed (model)": "#c62828", "reproduced": "#c62828",
    "not reproduced": "#2e7d32", "inconclusive": "#b26a00", "no experiment": "#757575",
}
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.1em; margin: 0; }
section { border: 1px solid #ddd; border-radius: 6px; padding: 1em 1.2em; margin: 1.2em 0; }
.badge { color: #fff; border-radius: 3px; padding: 0.1em 0.5em; font-size: 0.85em; margin-left: 0.5em; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; font-size: 12px; }
pre .hit { background: #ffe0e0; display: inline-block; width: 100%; }
.numbers { margin: 0.5em 0; } .how { color: #555; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


def render_html(verdicts: list[Verdict]) -> str:
    counts = tally(verdicts)
    sections = "\n".join(_section(v) for v in verdicts) or "<p>No findings.</p>"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>ray-lint verify</title>"
        f"<style>{STYLE}</style></head><body>\n<h1>ray-lint verify</h1>\n<p>{html.escape(counts)}</p>\n"
        f"{sections}\n</body></html>\n"
    )


def _section(verdict: Verdict) -> str:
    how = html.escape(f"{verdict.ran}, {verdict.mode or '-'}" + (f": {verdict.shape}" if verdict.shape else ""))
    summary = verdict.summary + (f"; {verdict.results}" if verdict.results else "")
    parts = [
        f"<section><h2>{html.escape(verdict.location)} {html.escape(verdict.code)}"
        f"<span class='badge' style='background:{COLOURS[verdict.status]}'>{html.escape(verdict.status)}</span></h2>",
        f"<p class='how'>{how}</p>",
        f"<p class='numbers'>{html.escape(summary)}</p>",
        _excerpt(verdict.path, verdict.line, verdict.cell),
    ]
    runs = [(label, runs[0]) for label, runs in zip(verdict.labels, verdict.runs) if runs and runs[0].timeline]
    if runs:
        parts.append(_timeline(runs))
    parts.append("</section>")
    return "\n".join(parts)


def _excerpt(path: str, line: int, cell: int | None = None, around: int = 4) -> str:
    """The lines around `line` of the file, or of its `cell` in a notebook."""
    try:
        if cell is None:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        else:
            notebook = decode(read_bytes(Path(path)), Path(path)).notebook
            texts = {c.index: c.text for c in notebook.cells} if notebook is not None else {}
            lines = texts.get(cell, "").splitlines()
    except (OSError, UnicodeDecodeError, SourceError):
        return ""
    first, last = max(1, line - around), min(len(lines), line + around)
    rows = []
    for number in range(first, last + 1):
        text = html.escape(f"{number:>5}  {lines[number - 1]}")
        rows.append(f"<span class='hit'>{text}</span>" if number == line else text)
    return "<pre>" + "\n".join(rows) + "</pre>"


def _timeline(runs: list[tuple[str, Run]]) -> str:
    """Both variants on one time scale: a block of worker rows each, one bar per task."""
    span = max(max(end for _, end, _ in run.timeline) - min(start for start, _, _ in run.timeline) for _, run in runs)
    scale = (WIDTH - LABEL_WIDTH - 10) / span if span > 0 else 1.0
    shapes, y = [], 0
    for label, run in runs:
        origin = min(start for start, _, _ in run.timeline)
        workers = sorted({worker for _, _, worker in run.timeline})
        shapes.append(f"<text x='0' y='{y + 14}' font-weight='bold'>{html.escape(label)}</text>")
        y += ROW_HEIGHT
        for row, worker in enumerate(workers):
            top = y + row * ROW_HEIGHT
            shapes.append(f"<text x='4' y='{top + 12}'>worker {row + 1}</text>")
            for start, end, who in run.timeline:
                if who == worker:
                    x = LABEL_WIDTH + (start - origin) * scale
                    width = max(1.5, (end - start) * scale)
                    shapes.append(
                        f"<rect x='{x:.1f}' y='{top}' width='{width:.1f}' height='{BAR_HEIGHT}' rx='2' fill='#4a78c2'>"
                        f"<title>{end - start:.3f} s</title></rect>"
                    )
        y += len(workers) * ROW_HEIGHT + 8
    axis = f"<text x='{LABEL_WIDTH}' y='{y + 12}'>0 s</text><text x='{WIDTH - 60}' y='{y + 12}'>{span:.2f} s</text>"
    return f"<svg width='{WIDTH}' height='{y + 20}' role='img' aria-label='task timeline'>{''.join(shapes)}{axis}</svg>"
