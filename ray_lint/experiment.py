"""What a rule's experiment is: two variants of code to run on the cluster, and how to judge them.

A rule declares `experiment = SomeExperiment()` next to its detection code. The experiment plans
two variants for one finding: A, the code as the rule flagged it, and B, the fixed code (or, for
rules without a fix, the comparison the rule's docs recommend). The verifier runs them, interleaved,
in their own processes, and hands the runs back to the experiment to judge.

Three kinds of plan, always named in the verdict:
- "measured": the user's own file, run from its entry point, as written and with the fix;
- "modelled": the flagged shape replayed with calibrated tasks, when the code cannot run as is;
- "evidence": what Ray does to the task (environment, GPUs, thread pools), not a timing.

Nothing here imports Ray: rule modules import this on the lint path.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import libcst as cst

from ray_lint.diagnostics import Diagnostic, apply_edits
from ray_lint.model import SemanticModel
from ray_lint.syntax import parses

Mode = Literal["measured", "modelled", "evidence"]
Facts = TypeVar("Facts")
Status = Literal["confirmed", "not reproduced", "inconclusive"]


@dataclass(frozen=True)
class Variant:
    label: str
    source: str  # a Python module, run as `__main__` in a process connected to the cluster


@dataclass(frozen=True)
class Plan:
    a: Variant  # the code as flagged
    b: Variant  # the fixed code, or the comparison
    mode: Mode
    shape: str  # what is run, in words (for modelled plans, the shape replayed)
    fallback: Plan | None = None  # a model to run instead when the code cannot run as is


@dataclass
class Run:
    """One run of one variant."""

    ok: bool
    error: str | None
    wall_s: float
    window: tuple[float, float] = (0.0, 0.0)
    value: str | None = None
    evidence: Any = None
    timed_out: bool = False
    output_tail: str = ""
    tasks: int = 0  # task executions Ray recorded in the run's window
    parallelism: float | None = None  # summed task time over the span the tasks covered
    peak: int = 0  # most tasks running at once
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, worker) per task
    ray_warnings: list[str] = field(default_factory=list)  # what Ray itself warned about during the run


@dataclass
class Verdict:
    path: str
    line: int
    code: str
    status: Status
    mode: Mode | None
    summary: str
    shape: str = ""
    labels: tuple[str, str] = ("A", "B")
    ratio: float | None = None
    runs: tuple[list[Run], list[Run]] = field(default_factory=lambda: ([], []))
    same_results: bool | None = None

    def to_json(self) -> dict[str, Any]:
        def side(runs: list[Run]) -> dict[str, Any]:
            walls = [r.wall_s for r in runs if r.ok]
            pars = [r.parallelism for r in runs if r.parallelism is not None]
            return {
                "wall_s": walls,
                "median_wall_s": statistics.median(walls) if walls else None,
                "parallelism": statistics.median(pars) if pars else None,
                "peak_concurrent_tasks": max((r.peak for r in runs), default=0),
                "tasks_per_run": [r.tasks for r in runs],
                "evidence": next((r.evidence for r in runs if r.evidence is not None), None),
                "ray_warnings": sorted({w for r in runs for w in r.ray_warnings}),
                "errors": [r.error for r in runs if r.error],
            }

        return {
            "path": self.path,
            "line": self.line,
            "code": self.code,
            "status": self.status,
            "mode": self.mode,
            "summary": self.summary,
            "shape": self.shape,
            "ratio": self.ratio,
            "same_results": self.same_results,
            "variants": {self.labels[0]: side(self.runs[0]), self.labels[1]: side(self.runs[1])},
        }


@dataclass
class Subject:
    """One finding to verify, with its file and what the run can offer."""

    path: str
    text: str
    diagnostic: Diagnostic
    cluster_cpus: float
    cluster_gpus: float

    def fixed_text(self) -> str | None:
        """The file with this finding's fix applied, if it has one and the result parses."""
        if self.diagnostic.fix is None:
            return None
        fixed = apply_edits(self.text, list(self.diagnostic.fix.edits))
        return fixed if parses(fixed, self.text) else None

    def has_entry_point(self) -> bool:
        """Whether running the file as a script reaches the finding: an `if __name__ == "__main__":`
        block, or a finding in the module's own top-level code."""
        module = cst.parse_module(self.text)
        if any(_is_main_guard(statement) for statement in module.body):
            return True
        return not _functions_holding(module, self.diagnostic.start.line)

    def instrumented(self, text: str) -> str:
        """`text` with the innermost (non-async) function that holds the finding decorated with the
        probe's timer, so that the verdict times that function and compares its return values."""
        holders = [
            (start, node)
            for start, node in _functions_holding(cst.parse_module(text), self.diagnostic.start.line)
            if node.asynchronous is None
        ]
        if not holders:
            return text
        start = max(holders, key=lambda item: item[0])[0]
        lines = text.splitlines(keepends=True)
        indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
        lines.insert(start - 1, f"{indent}@__ray_lint_timer__\n")
        return "".join(lines)


def _functions_holding(module: cst.Module, line: int) -> list[tuple[int, cst.FunctionDef]]:
    """(first line, node) of every function whose code spans `line`."""
    model = SemanticModel(module)
    spans = [(model.position(info.node), info.node) for info in model.functions]
    return [(span.start.line, node) for span, node in spans if span.start.line <= line <= span.end.line]


def _is_main_guard(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.If) or not isinstance(statement.test, cst.Comparison):
        return False
    code = cst.Module([]).code_for_node(statement.test).replace("'", '"').replace(" ", "")
    return code in ('__name__=="__main__"', '"__main__"==__name__')


class Experiment(Generic[Facts]):
    """Base class: plans the variants for a finding and judges their runs by wall time and by the
    parallelism Ray's timeline shows. `facts_type` is the value the rule hands over with each finding
    (a frozen dataclass declared beside the experiment): what the rule measured statically."""

    threshold = 1.3  # the catalogue's "confirmed" ratio
    facts_type: type[Facts]

    def facts(self, subject: Subject) -> Facts:
        """The facts the rule reported with this finding."""
        facts = subject.diagnostic.facts
        if not isinstance(facts, self.facts_type):
            raise TypeError(f"{subject.diagnostic.code} handed over {type(facts).__name__}, not {self.facts_type.__name__}")
        return facts

    def plan(self, subject: Subject) -> Plan | str:
        """The variants to run, or the reason the finding cannot be verified here."""
        raise NotImplementedError

    def judge(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """Inconclusive when a run failed; otherwise `judge_runs` decides."""
        verdict = Verdict(
            subject.path, subject.diagnostic.start.line, subject.diagnostic.code, "inconclusive", plan.mode, "",
            plan.shape, (plan.a.label, plan.b.label), runs=(a, b),
        )
        failed = [r for r in (*a, *b) if not r.ok]
        if failed:
            first = failed[0]
            reason = "timed out" if first.timed_out else f"raised: {_last_line(first.error)}"
            verdict.summary = f"the code could not run here ({reason})"
            return verdict
        return self.judge_runs(verdict, subject, plan, a, b)

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """By wall time, when Ray's timeline agrees that B runs more tasks at once."""
        if plan.mode == "measured" and max(r.tasks for r in a) < 2:
            verdict.summary = "the script's entry point ran fewer than 2 tasks: it does not reach the flagged code"
            return verdict
        verdict.ratio = statistics.median(x.wall_s / y.wall_s for x, y in zip(a, b) if y.wall_s > 0)
        verdict.same_results = _same_results(a, b)
        par_a, par_b = _median_parallelism(a), _median_parallelism(b)
        numbers = f"{plan.a.label} {_median_wall(a):.2f} s vs {plan.b.label} {_median_wall(b):.2f} s ({verdict.ratio:.2f}×)"
        if par_a is not None and par_b is not None:
            numbers += f"; parallelism {par_a:.1f} vs {par_b:.1f}, peak {max(r.peak for r in a)} vs {max(r.peak for r in b)} tasks at once"
        evidence_agrees = par_a is None or par_b is None or par_b >= par_a * 1.2
        warned = sorted({w for r in a for w in r.ray_warnings} - {w for r in b for w in r.ray_warnings})
        if warned:
            numbers += f"; Ray itself warned in {plan.a.label}: {warned[0]}"
        if verdict.ratio >= self.threshold and evidence_agrees:
            verdict.status, verdict.summary = "confirmed", numbers
        elif verdict.ratio >= self.threshold:
            verdict.status = "not reproduced"
            verdict.summary = numbers + f": faster, but Ray's timeline shows no more tasks running at once in {plan.b.label}"
        else:
            verdict.status = "not reproduced"
            verdict.summary = numbers + self.why_not(subject, plan, a, b)
        return verdict

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        """A hint, after the numbers, on why the slowdown did not show."""
        return f": below the {self.threshold:.1f}× threshold"


class EvidenceExperiment(Experiment[Facts]):
    """An experiment judged on what Ray hands the task, read inside it (its GPUs, thread pools,
    environment), not on timing: `read` turns the two variants' evidence into a verdict."""

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        verdict.status, verdict.summary = self.read(subject, a[0].evidence, b[0].evidence)
        return verdict

    def read(self, subject: Subject, flagged: Any, compared: Any) -> tuple[Status, str]:
        raise NotImplementedError


def _last_line(error: str | None) -> str:
    lines = (error or "").strip().splitlines()
    return lines[-1] if lines else "unknown error"


def _median_wall(runs: list[Run]) -> float:
    return statistics.median(r.wall_s for r in runs)


def _median_parallelism(runs: list[Run]) -> float | None:
    values = [r.parallelism for r in runs if r.parallelism is not None]
    return statistics.median(values) if values else None


def _same_results(a: list[Run], b: list[Run]) -> bool | None:
    values_a = {r.value for r in a if r.value is not None}
    values_b = {r.value for r in b if r.value is not None}
    if not values_a or not values_b:
        return None
    return values_a == values_b


def script(body: str) -> str:
    """A modelled variant: the standard imports, then `body` (dedented)."""
    return "import os\nimport time\n\nimport ray\n\n" + textwrap.dedent(body).strip() + "\n"


def timed(body: str) -> str:
    """Wrap `body` so that only it is timed (set-up such as creating actors stays out of the ratio)."""
    indented = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return (
        "__ray_lint_start__ = (time.time(), time.perf_counter())\n"
        "def __ray_lint_body__():\n"
        f"{indented}\n"
        "__ray_lint_result__ = __ray_lint_body__()\n"
        "__ray_lint_timed__ = (__ray_lint_start__[0], time.time(), time.perf_counter() - __ray_lint_start__[1])\n"
    )
