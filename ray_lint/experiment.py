"""What a rule's experiment is: two variants of code to run on the cluster, and how to judge them.

A rule declares `experiment = SomeExperiment()` next to its detection code. The experiment plans
two variants for one finding: A, the code as the rule flagged it, and B, the fixed code (or, for
rules without a fix, the comparison the rule's docs recommend). The verifier runs them, interleaved,
in their own processes (a model that leaves nothing behind in a driver it shares: `shares_driver`;
one whose failure no load can fake at the same time as another: `beside_others`), and hands the
runs back to the experiment to judge.

Three kinds of plan, always named in the verdict:
- "measured": the user's own code (its entry point, or its tests), as written and with the fix;
- "modelled": the flagged shape replayed with calibrated tasks, when the code cannot run as is;
- "evidence": what Ray does to the task (environment, GPUs, thread pools), not a timing.

Two kinds of experiment: performance rules time A against B (`Experiment`, `EvidenceExperiment`);
correctness rules reproduce the failure, Ray's own error or a wrong result in A and none in B
(`ReproductionExperiment`). The verdict's words say which, and what ran: "confirmed on your code",
"pattern confirmed (model)", "reproduced", "not reproduced", "inconclusive", and "no experiment"
for a finding of a rule that has none.

Nothing here imports Ray: rule modules import this on the lint path.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shlex
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import libcst as cst

from ray_lint.diagnostics import Diagnostic, apply_edits
from ray_lint.model import SemanticModel
from ray_lint.project import project_root
from ray_lint.syntax import parses

Mode = Literal["measured", "modelled", "evidence"]
Facts = TypeVar("Facts")
Planned = TypeVar("Planned", "Plan", "Plan | str")
REPLAYED_PER_CPU, REPLAYED_AT_LEAST = 4, 16  # see `replayed`
NOTEBOOK_NOT_RUN = "a notebook's cells are not run (they expect a kernel's state and order)"
# How long a model waits on work that can never be scheduled (an infeasible or pinned request) before
# it calls it pending: Ray would schedule feasible work on an idle cluster in milliseconds.
PENDING_S = 2
# How long a model waits for feasible work, the fixed form's, before it calls it pending: a worker starts in
# about a second on an idle machine, several on a loaded one, and `ray.wait` returns as soon as it is ready.
SCHEDULED_S = 30

# What an experiment decides; the verdict then says what ran (see `Verdict.status`).
Outcome = Literal["confirmed", "reproduced", "not reproduced", "inconclusive"]
Status = Literal[
    "confirmed on your code", "pattern confirmed (model)", "reproduced", "not reproduced", "inconclusive", "no experiment"
]
STATUSES: tuple[Status, ...] = (
    "confirmed on your code", "pattern confirmed (model)", "reproduced", "not reproduced", "inconclusive", "no experiment"
)
PROBLEM_SHOWN: frozenset[Status] = frozenset({"confirmed on your code", "pattern confirmed (model)", "reproduced"})


@dataclass(frozen=True)
class Variant:
    label: str
    source: str  # a Python module, run as `__main__` in a process connected to the cluster


@dataclass(frozen=True)
class Runner:
    """How a plan's variants run. "script": the source exec'd as `__main__` (a model, or a file run
    from its entry point). "module": `python -m <module>` from the project root, so that relative
    imports work. "tests": pytest on `tests`. For the last two the variant's source stands in for
    the file at `path` wherever it is imported."""

    kind: Literal["script", "module", "tests"] = "script"
    cwd: str = ""  # the working directory (the project root); "" for the file's own folder
    path_entry: str = ""  # put first on sys.path: the folder that holds the top package
    module: str = ""
    tests: tuple[str, ...] = ()
    function: str = ""  # the instrumented function, named in messages
    arguments: tuple[str, ...] = ()  # the entry point's command line (`verify --args`), after the file's name

    @property
    def what(self) -> str:
        """What runs, in a few words, for the verdict's notes."""
        if self.kind == "tests":
            return "the tests"
        return f"`python -m {self.module}`" if self.kind == "module" else "the script"


@dataclass(frozen=True)
class JointPart:
    """A joint model whose program other findings' models may share (`Plan.part`): parts with the same
    `program` run in one program, one start of their library (Ray Train's workers and process group) for all."""

    text: str  # this model's share of the program
    # The one program for the given parts' texts, each part's forms in turn. Its evidence: with one part,
    # `{"a": ..., "b": ...}` (as `Plan.joint`'s); with more, `{"parts": [that, per part, in order]}` (`Run.part`).
    program: Callable[[tuple[str, ...]], Variant]
    what: str  # the library started once, in words: "one Ray Train run"


@dataclass(frozen=True)
class Plan:
    a: Variant  # the code as flagged
    b: Variant  # the fixed code, or the comparison
    mode: Mode
    shape: str  # what is run, in words (for modelled plans, the shape replayed)
    fallback: Plan | None = None  # what to run instead when this cannot run as is (a chain: entry point, tests, model)
    runner: Runner = Runner()
    # One program that runs both forms in turn, for a model whose library costs more to start than the forms
    # take to run (a Ray Train run: its controller, workers and process group; Ray Serve). It leaves each form's
    # evidence, `__ray_lint_evidence__ = {"a": ..., "b": ...}`, and a timed model each form's times and result
    # (`timed_forms`); the verifier runs it instead of A and B, which then only name the forms (`Run.form`).
    joint: Variant | None = None
    why_not_yours: str = ""  # for a model: why the user's code does not run instead (`model_instead`)
    part: JointPart | None = None  # a joint model that may share its program with other findings' (runs as `program`)

    @property
    def runs_user_code(self) -> bool:
        return self.mode == "measured"

    @property
    def program(self) -> Variant | None:
        """The one program that runs both forms, if any: `joint`, or this part's program for it alone."""
        return self.part.program((self.part.text,)) if self.part is not None else self.joint


@dataclass
class Run:
    """One run of one variant."""

    ok: bool
    error: str | None
    wall_s: float
    window: tuple[float, float] = (0.0, 0.0)
    evidence: Any = None
    timed_out: bool = False
    output_tail: str = ""
    tasks: int = 0  # task executions Ray recorded in the run's window
    parallelism: float | None = None  # summed task time over the span the tasks covered
    peak: int = 0  # most tasks running at once
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, worker) per task
    ray_warnings: list[str] = field(default_factory=list)  # what Ray itself warned about during the run
    calls: tuple[tuple[str, str], ...] = ()  # each call's return value: (digest, a short repr to show)
    forms: dict[str, Any] = field(default_factory=dict)  # a joint run's own times and result per form (`timed_forms`)

    @property
    def returned(self) -> tuple[str, ...] | None:
        """What the run returned, to compare: each call's digest; None when nothing returned."""
        return tuple(digest for digest, _ in self.calls) or None

    def part(self, index: int) -> Run:
        """One part's share of a program that several findings' models shared (`JointPart`): its evidence."""
        parts = self.evidence.get("parts") if isinstance(self.evidence, dict) else None
        evidence = parts[index] if isinstance(parts, list) and index < len(parts) else None
        return replace(self, evidence=evidence)

    def form(self, side: Literal["a", "b"]) -> Run:
        """One form's share of a joint run (`Plan.joint`): its evidence, the run's outcome, and the form's own
        times and result where the program timed each form (`timed_forms`), else the run's times."""
        evidence = self.evidence.get(side) if isinstance(self.evidence, dict) else None
        own = self.forms.get(side)
        if own is None:
            return replace(self, calls=(), evidence=evidence, forms={})
        calls = tuple((digest, shown) for digest, shown in own["calls"])
        return replace(self, wall_s=own["wall_s"], window=tuple(own["window"]), calls=calls, evidence=evidence, forms={})


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
    difference: str | None = None  # where the results differ: the first call whose return values differ
    cell: int | None = None  # in a notebook: the cell (1-based, as `check` counts them), and `line` within it

    @property
    def location(self) -> str:
        """Where the finding is, as `check` names it: `path:line`, or `path:cell N:line` in a notebook."""
        return f"{self.path}:cell {self.cell}:{self.line}" if self.cell is not None else f"{self.path}:{self.line}"

    @property
    def results(self) -> str | None:
        """Whether the two forms returned the same, in words, for the summary; None when not compared."""
        if self.same_results is None:
            return None
        if self.same_results:
            return "same results"
        return "results differ" + (f": {self.difference}" if self.difference else "")

    @property
    def ran(self) -> str:
        """What ran, in words: the verdict says it so that a model is never taken for the user's code."""
        if self.mode is None:
            return "nothing"
        return "your code" if self.mode == "measured" else "the rule's model"

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
            "cell": self.cell,
            "line": self.line,
            "code": self.code,
            "status": self.status,
            "mode": self.mode,
            "ran": self.ran,
            "summary": self.summary,
            "shape": self.shape,
            "ratio": self.ratio,
            "same_results": self.same_results,
            "difference": self.difference,
            "variants": {self.labels[0]: side(self.runs[0]), self.labels[1]: side(self.runs[1])},
        }


def tally(verdicts: list[Verdict]) -> str:
    """How many verdicts of each kind (the kinds that occur, in a fixed order): the summary line."""
    counts = {status: sum(v.status == status for v in verdicts) for status in STATUSES}
    return ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no findings"


@dataclass
class Subject:
    """One finding to verify, with its file and what the run can offer."""

    path: str
    text: str
    diagnostic: Diagnostic
    cluster_cpus: float
    cluster_gpus: float
    tests: tuple[str, ...] | None = None  # test files or folders named by --tests or the config; None: search
    # Whether a text still has a finding of a rule that reproduces failures (the verifier lints it).
    still_fails: Callable[[str], bool] = lambda text: False
    notebook: bool = False  # `text` is a notebook's code cells: the experiments plan the rule's model only
    arguments: tuple[str, ...] = ()  # the command line an entry point runs with (`verify --args`)

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

    def flagged_function(self) -> str | None:
        """The name of the innermost (non-async) function that holds the finding: the one timed."""
        holders = _functions_holding(cst.parse_module(self.text), self.diagnostic.start.line, timeable=True)
        return max(holders, key=lambda item: item[0])[1].name.value if holders else None

    def instrumented(self, text: str) -> str:
        """`text` with the innermost (non-async) function that holds the finding decorated with the
        probe's timer, so that the verdict times that function and compares its return values."""
        holders = _functions_holding(cst.parse_module(text), self.diagnostic.start.line, timeable=True)
        if not holders:
            return text
        start = max(holders, key=lambda item: item[0])[0]
        lines = text.splitlines(keepends=True)
        indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
        lines.insert(start - 1, f"{indent}@__ray_lint_timer__\n")
        return "".join(lines)

    def on_user_code(self, a: Variant, b: Variant, what: str, model: Plan | None, tests: bool = True) -> Plan | None:
        """Plans that run the user's own code, in the order of preference: the module's entry point
        (as a script, or with `python -m` inside a package), then (with `tests`) the tests that call the
        flagged function; each falls back to the next, and the last to `model`. None when neither exists.
        `what` is "timing" when the flagged function is timed."""
        plans: list[tuple[str, Runner]] = []
        function = (self.flagged_function() or "") if what == "timing" else ""  # only a timed function must be called
        package = _package_of(Path(self.path))
        root = str(project_root(Path(self.path)) or Path(self.path).resolve().parent)
        if self.has_entry_point():
            given = f" with `{shlex.join(self.arguments)}`" if self.arguments else ""
            if package is None:
                plans.append((f"the script run from its entry point{given}", Runner("script", function=function, arguments=self.arguments)))
            else:
                entry, module = package
                shown = f"`python -m {module}`{given} from the project root"
                plans.append((shown, Runner("module", root, entry, module, function=function, arguments=self.arguments)))
        found = self.tests_calling(function, Path(root)) if function and tests else []
        if found:
            entry = package[0] if package is not None else str(Path(self.path).resolve().parent)
            named = ", ".join(os.path.relpath(test, root) for test in found[:3])
            more = f" and {len(found) - 3} more" if len(found) > 3 else ""
            plans.append((f"pytest {named}{more}", Runner("tests", root, entry, tests=tuple(found), function=function)))
        plan = model
        for shown, runner in reversed(plans):
            timing = f", timing `{function}`" if function and what == "timing" else ""
            plan = Plan(a, b, "measured", f"{shown}{timing}", fallback=plan, runner=runner)
        return plan if plans else None

    def not_run_because(self, what: str, tests: bool = True) -> str:
        """Why `on_user_code(…, what, …, tests)` found nothing of the user's to run: the verdict, which says
        what ran, says why the model ran instead."""
        why = "the file has no `__main__` block"
        if what != "timing" or not tests:
            return why
        function = self.flagged_function()
        if function is None:
            return f"{why}, and the finding is in no plain (non-async) function to time"
        where = "the tests named" if self.tests is not None else "the project"
        return f"{why}, and no test in {where} calls `{function}`"

    def no_fixed_form(self) -> str:
        """Why there is no fixed form of the user's code to run (when `fixed_text` is None, or in a notebook)."""
        if self.notebook:
            return NOTEBOOK_NOT_RUN
        return "the finding has no automatic fix" if self.diagnostic.fix is None else "its fix does not apply cleanly here"

    def tests_calling(self, function: str, root: Path) -> list[str]:
        """The tests to run, as pytest node ids, from the test files that mention `function` and the flagged
        module: those named by --tests or the config, else those under the project root (`test_*.py`,
        `*_test.py`). In each file, the tests whose own code mentions `function`; the whole file where none
        does (they reach it through a helper or a fixture): a file's other tests would only cost time."""
        places = list(self.tests) if self.tests is not None else [str(root)]
        stem = Path(self.path).stem
        found: list[str] = []
        for place in places:
            _, named, node = place.partition("::")  # a pytest node id names its test
            files = [
                (file, text) for file, text in _test_texts(file_of_tests(place))
                if re.search(rf"\b{re.escape(function)}\b", text) and re.search(rf"\b{re.escape(stem)}\b", text)
            ]  # fmt: skip
            for file, text in files[:MAX_TEST_FILES - len(found)]:
                path = str(file.resolve())
                if named:
                    found.append(f"{path}::{node}")
                else:
                    found += [f"{path}::{test}" for test in _tests_mentioning(text, function)] or [path]
        return found


MAX_TEST_FILES = 20
_SKIPPED_FOLDERS = frozenset({".git", ".venv", "venv", "node_modules", "site-packages", "build", "dist", "__pycache__", ".tox", ".nox"})


@functools.lru_cache(maxsize=8)
def _test_texts(place: Path) -> tuple[tuple[Path, str], ...]:
    """The test file `place`, or the `test_*.py` and `*_test.py` files under it (outside virtual
    environments and build output), with their text: read once per verify run, not once per finding."""
    files = [place]
    if not place.is_file():
        files = []
        for directory, subfolders, names in os.walk(place):
            subfolders[:] = sorted(s for s in subfolders if s not in _SKIPPED_FOLDERS and not s.startswith("."))
            files += [Path(directory, n) for n in sorted(names) if n.endswith(".py") and (n.startswith("test_") or n.endswith("_test.py"))]
    texts = []
    for file in files:
        try:
            texts.append((file, file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return tuple(texts)


def file_of_tests(place: str | Path) -> Path:
    """The file or folder of a place to look for tests: a path, or a pytest node id (`tests/test_a.py::test_b`)."""
    return Path(str(place).partition("::")[0])


def _tests_mentioning(text: str, function: str) -> list[str]:
    """The tests of a test file (`test*` functions, and their methods in `Test*` classes and in subclasses of
    `unittest.TestCase`, which pytest collects whatever their name) whose code names `function`, as the node
    ids pytest gives them within the file."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    candidates: list[tuple[str, ast.AST]] = []
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            candidates.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or any(_is_named(base, "TestCase") for base in node.bases)):
            candidates += [
                (f"{node.name}::{item.name}", item) for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
            ]  # fmt: skip
    return [name for name, test in candidates if any(_is_named(inner, function) for inner in ast.walk(test))]


def _is_named(node: ast.AST, function: str) -> bool:
    """Whether `node` is `function` or `something.function`."""
    return (isinstance(node, ast.Name) and node.id == function) or (isinstance(node, ast.Attribute) and node.attr == function)


def _package_of(path: Path) -> tuple[str, str] | None:
    """(the folder to put on sys.path, the dotted module name) when `path` is a module of a package."""
    path = path.resolve()
    folder, parts = path.parent, [path.stem]
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return (str(folder), ".".join(parts)) if len(parts) > 1 else None


def _functions_holding(module: cst.Module, line: int, timeable: bool = False) -> list[tuple[int, cst.FunctionDef]]:
    """(first line, node) of every function whose code spans `line`; with `timeable`, only those the
    probe's timer can time: sync, and run by the driver (a remote function's or actor method's body
    runs in a worker, where the timer never sees it)."""
    model = SemanticModel(module)
    found = []
    for info in model.functions:
        span = model.position(info.node)
        if not span.start.line <= line <= span.end.line:
            continue
        if timeable and (info.node.asynchronous is not None or model.remote_of_scope(info.scope) is not None):
            continue
        found.append((span.start.line, info.node))
    return found


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
    rounds: int | None = None  # A B rounds to run; None: the verifier's --repeat (timings vary by run)
    # Whether the fix works by running more tasks at once, so that Ray's timeline must agree; False for
    # fixes that save overhead (fewer tasks, fewer copies), where parallelism has nothing to show.
    more_parallelism = True
    shows = "times the flagged form against the fixed one"  # in the rule's docs
    timed = True  # whether the runs are timed: the workers are started before the clock, the timeline read after
    clear_margin = 1.35  # a first round at `clear_margin` × the threshold (or at no gain) settles the verdict
    # Whether an untimed experiment's A and B may run at the same time: not where both would start the one
    # instance of a library a cluster holds (Serve's controller).
    side_by_side = True
    # The time limit a variant gets at least, whatever `--timeout` says: a Ray Train or Tune run starts its
    # own workers and coordinator before the flagged code runs.
    least_timeout_s = 0.0
    # Whether the model's variants may run one after another in one shared driver (one Ray job) rather than
    # each in a process of its own: for a model that changes nothing in the driver or its workers and leaves
    # no task, actor or placement group running behind it. The user's code always runs alone.
    shares_driver = False
    # Whether an untimed model's job may run at the same time as another such job: for a model whose
    # failure no other job's load can fake (an error at decoration, a request no node can ever meet).
    # A job that shows no problem that way runs again alone, so a load that hides the failure costs a rerun.
    # Not for Ray Data: its executor sizes its work to the free CPUs and waits while another job holds them.
    beside_others = False
    # Why the experiment runs its model, not the user's code, for a finding that has a fix: said in the verdict.
    model_only = "this rule's experiment runs only its model"
    facts_type: type[Facts]

    def planned(self, subject: Subject) -> Plan | str:
        """`plan`, whose model says why the user's code does not run instead (`model_instead`): the finding has
        no fix to run, or `model_only`; unless the plan said why already."""
        plan = self.plan(subject)
        if isinstance(plan, Plan) and plan.mode == "modelled" and not plan.why_not_yours:
            fixed = subject.fixed_text() is not None and not subject.notebook
            return model_instead(plan, self.model_only if fixed else subject.no_fixed_form())
        return plan

    def facts(self, subject: Subject) -> Facts:
        """The facts the rule reported with this finding."""
        facts = subject.diagnostic.facts
        if not isinstance(facts, self.facts_type):
            raise TypeError(f"{subject.diagnostic.code} handed over {type(facts).__name__}, not {self.facts_type.__name__}")
        return facts

    def plan(self, subject: Subject) -> Plan | str:
        """The variants to run, or the reason the finding cannot be verified here."""
        raise NotImplementedError

    def on_user_code_or(self, subject: Subject, model: Plan) -> Plan:
        """The user's code as written and with the finding's fix, timing the flagged function (its entry
        point, else its tests: `Subject.on_user_code`), falling back to `model`; the model alone when
        the rule has no fix to apply."""
        fixed = subject.fixed_text()
        if fixed is None or subject.notebook:
            return model_instead(model, subject.no_fixed_form())
        written, corrected = Variant("as written", subject.instrumented(subject.text)), Variant("fixed", subject.instrumented(fixed))
        own = subject.on_user_code(written, corrected, "timing", model)
        return own or model_instead(model, subject.not_run_because("timing"))

    def ran_as_planned(self, run: Run) -> bool:
        """Whether a run of A did what the plan needs (a script that raises cannot be timed)."""
        return run.ok

    def settled(self, a: list[Run], b: list[Run], rounds: int) -> bool:
        """Whether the rounds so far already decide: every pair far past the threshold, or none faster; or
        more than half of all `rounds` on one side of the threshold, which the median of all of them can no
        longer cross (above it, only where the ratio alone decides: no timeline and no `evidence` of the
        experiment's own, whose medians could still change). More rounds only matter near the threshold,
        where a median of several is worth its time."""
        ratios = [x.wall_s / y.wall_s for x, y in zip(a, b) if y.wall_s > 0]
        if not ratios:
            return False
        if min(ratios) >= self.threshold * self.clear_margin or max(ratios) <= 1.0:
            return True
        majority = rounds // 2 + 1
        above = sum(ratio >= self.threshold for ratio in ratios)
        ratio_alone = not self.more_parallelism and type(self).evidence is Experiment.evidence
        return len(ratios) - above >= majority or (above >= majority and ratio_alone)

    def judge(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """Inconclusive when a run failed; otherwise `judge_runs` decides."""
        verdict = _blank_verdict(subject, plan, a, b)
        failed = [r for r in (*a, *b) if not r.ok]
        if failed:
            first = failed[0]
            reason = "timed out" if first.timed_out else f"raised: {last_line(first.error)}"
            verdict.summary = f"the code could not run here ({reason})"
            return verdict
        return self.judge_runs(verdict, subject, plan, a, b)

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """By wall time, when the evidence agrees (`evidence`: by default, more tasks at once in B)."""
        if plan.mode == "measured" and max(r.tasks for r in a) < 2:
            runner = plan.runner
            if runner.function:  # it was called (else the run failed): with work for one task at most
                verdict.summary = f"{runner.what} ran fewer than 2 tasks in `{runner.function}`: too few to compare"
            else:
                verdict.summary = f"{runner.what} ran fewer than 2 tasks: it may not reach the flagged code"
            return verdict
        verdict.ratio = statistics.median(x.wall_s / y.wall_s for x, y in zip(a, b) if y.wall_s > 0)
        verdict.same_results = _same_results(a, b)
        if verdict.same_results is False:
            verdict.difference = _first_difference(plan, a, b)
        rounds = f"median of {len(a)} rounds" if len(a) > 1 else "1 round, clear-cut"
        numbers = f"{plan.a.label} {_median_wall(a):.2f} s vs {plan.b.label} {_median_wall(b):.2f} s ({verdict.ratio:.2f}×, {rounds})"
        shown, agrees, disagreement = self.evidence(plan, a, b)
        numbers += shown
        warned = sorted({w for r in a for w in r.ray_warnings} - {w for r in b for w in r.ray_warnings})
        if warned:
            numbers += f"; Ray itself warned in {plan.a.label}: {warned[0]}"
        if verdict.ratio >= self.threshold and agrees:
            verdict.status, verdict.summary = confirmed(plan), numbers
        elif verdict.ratio >= self.threshold:
            verdict.status = "not reproduced"
            verdict.summary = numbers + f": faster, but {disagreement}"
        else:
            verdict.status = "not reproduced"
            verdict.summary = numbers + self.why_not(subject, plan, a, b)
        return verdict

    def evidence(self, plan: Plan, a: list[Run], b: list[Run]) -> tuple[str, bool, str]:
        """What besides wall time says that B does better: words for the summary, whether it agrees, and
        what to say when it does not. By default Ray's timeline, for fixes that run more at once."""
        par_a, par_b = _median_parallelism(a), _median_parallelism(b)
        if not self.more_parallelism or par_a is None or par_b is None:
            return "", True, ""
        shown = f"; parallelism {par_a:.1f} vs {par_b:.1f}, peak {max(r.peak for r in a)} vs {max(r.peak for r in b)} tasks at once"
        return shown, par_b >= par_a * 1.2, f"Ray's timeline shows no more tasks running at once in {plan.b.label}"

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        """A hint, after the numbers, on why the slowdown did not show."""
        return f": below the {self.threshold:.1f}× threshold"


# A stand-in for a numpy array in models (numpy may not be installed): its buffer is pickled out of
# band, as numpy's is, so Ray stores it without a copy into the pickle.
OUT_OF_BAND_ARRAY = """import pickle

class Array:
    def __init__(self, buffer):
        self.buffer = buffer

    def __reduce_ex__(self, protocol):
        return Array, (pickle.PickleBuffer(self.buffer),)

"""

# For models of a ref's lifetime: the driver's (the owner's) reference count of an object, polled until it
# is gone or `seconds` passed (Ray 2.60's core worker; None once nothing counts the object).
REFERENCE_COUNT = """
def counted(key, seconds):
    core = ray._private.worker.global_worker.core_worker
    deadline = time.time() + seconds
    while key.encode() in core.get_all_reference_counts() and time.time() < deadline:
        time.sleep(0.1)
    return core.get_all_reference_counts().get(key.encode())
"""

# A method for a modelled async actor whose calls append their (start, end) to `self.spans`.
MOST_AT_ONCE = """\
    async def most_at_once(self):
        edges = sorted([(start, 1) for start, _ in self.spans] + [(end, -1) for _, end in self.spans])
        running = peak = 0
        for _, step in edges:
            running += step
            peak = max(peak, running)
        return peak
"""


class AsyncActorExperiment(Experiment[Facts]):
    """Concurrent calls into an async actor, judged by wall time and by how many calls the actor saw
    running at once: its model records each call's span and sets `__ray_lint_evidence__ =
    {"at_once": <most_at_once()>}` (see `MOST_AT_ONCE`). Only the model runs."""

    model_only = "the finding is in an async method, whose cost is how few of its calls overlap: only the model counts them"

    def evidence(self, plan: Plan, a: list[Run], b: list[Run]) -> tuple[str, bool, str]:
        """Ray's timeline counts calls queued behind a blocked event loop as running: the calls' own
        starts and ends inside the actor say how many really overlapped."""
        at_once_a, at_once_b = _most_at_once(a), _most_at_once(b)
        shown = f"; calls running at once in the actor: {at_once_a} vs {at_once_b}"
        return shown, at_once_b > at_once_a, f"the calls overlapped no more in {plan.b.label}"


def _most_at_once(runs: list[Run]) -> int:
    return max((r.evidence.get("at_once", 0) for r in runs if isinstance(r.evidence, dict)), default=0)


class EvidenceExperiment(Experiment[Facts]):
    """An experiment judged on what Ray hands the task, read inside it (its GPUs, thread pools,
    environment), not on timing: `read` turns the two variants' evidence into a verdict."""

    rounds = 1  # what Ray hands a task does not vary by run
    timed = False
    shows = "reads what Ray hands the task"

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        outcome, verdict.summary = self.read(subject, a[0].evidence, b[0].evidence)
        verdict.status = confirmed(plan) if outcome == "confirmed" else outcome
        return verdict

    def read(self, subject: Subject, flagged: Any, compared: Any) -> tuple[Outcome, str]:
        raise NotImplementedError


class GpuVisibilityExperiment(EvidenceExperiment[None]):
    """What code that Ray runs sees of the node's GPUs without `num_gpus` and with it: `probe` (a model
    whose `{options}` the request fills) leaves `{"CUDA_VISIBLE_DEVICES": ..., "gpu_ids": [...]}`. On a
    machine without GPUs the verifier's cluster has logical ones, which is enough to show Ray's isolation
    (or its absence). It needs nothing of the finding: the probe is the same for every one."""

    facts_type = type(None)
    probe: str
    request: str  # the options text that asks for one GPU, put in the probe's `{options}`
    shape: str
    not_shown: str  # the verdict's words when Ray isolates the code after all

    def plan(self, subject: Subject) -> Plan | str:
        if subject.cluster_gpus < 1:
            return "the cluster has no GPUs, real or logical: run on one that has (--address)"
        return Plan(
            Variant("no num_gpus", script(self.probe.format(options=""))),
            Variant("num_gpus=1", script(self.probe.format(options=self.request))),
            "evidence",
            self.shape,
        )

    def read(self, subject: Subject, flagged: Any, compared: Any) -> tuple[Outcome, str]:
        seen = flagged["CUDA_VISIBLE_DEVICES"]
        isolated = compared["gpu_ids"] and compared["CUDA_VISIBLE_DEVICES"] == ",".join(compared["gpu_ids"])
        numbers = (
            f"without num_gpus: ray.get_gpu_ids()={flagged['gpu_ids']}, CUDA_VISIBLE_DEVICES={seen!r}; "
            f"with num_gpus=1: {compared['gpu_ids']}, {compared['CUDA_VISIBLE_DEVICES']!r}"
        )
        shown = self.exposure(seen) if not flagged["gpu_ids"] and isolated else None
        return ("confirmed", f"{shown} ({numbers})") if shown else ("not reproduced", f"{self.not_shown} ({numbers})")

    def exposure(self, seen: str | None) -> str | None:
        """What it means that code given no GPU sees `seen`, or None when that shows nothing wrong."""
        raise NotImplementedError


class ReproductionExperiment(Experiment[Facts]):
    """A correctness or API-misuse rule's experiment: A, the flagged form, shows the failure and B,
    the fixed form, does not. A shows it by raising an error whose text matches `expected` (Ray's own
    message), or by leaving `__ray_lint_evidence__ = {"wrong": "what went wrong, in words"}`.

    The user's script runs, as written and with the finding's fix, when it has an entry point and the
    rule a fix; otherwise, or when the script fails some other way, `model` runs: the flagged shape
    in a few lines of Ray code."""

    rounds = 1  # an error either shows or it does not
    timed = False
    shows = "reproduces the failure"
    expected = r"$^"  # a regular expression searched in A's error text

    def plan(self, subject: Subject) -> Plan | str:
        model = self.model(subject)
        fixed = subject.fixed_text()
        if fixed is None or subject.notebook:
            return model_instead(model, subject.no_fixed_form())
        if subject.still_fails(fixed):  # Ray stops at the first refused call: the fixed script would fail too
            return model_instead(model, "with this fix the file would still fail at another finding")
        # An error shows in the script's own run; a test that fails on it says less, so no tests here.
        fallback = model if isinstance(model, Plan) else None
        own = subject.on_user_code(Variant("as written", subject.text), Variant("fixed", fixed), "error", fallback, tests=False)
        return own or model_instead(model, subject.not_run_because("error", tests=False))

    def model(self, subject: Subject) -> Plan | str:
        """The flagged shape and its fix as two small programs (see `script`), or why there is none."""
        raise NotImplementedError

    def shown(self, run: Run) -> str | None:
        """What the run shows wrong: the expected error's line, or the evidence's words."""
        if not run.ok and run.error and re.search(self.expected, run.error):
            return _error_line(run.error, self.expected)
        if run.ok and isinstance(run.evidence, dict) and run.evidence.get("wrong"):
            return str(run.evidence["wrong"])
        return None

    def ran_as_planned(self, run: Run) -> bool:
        return run.ok or self.shown(run) is not None

    def judge(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        verdict = _blank_verdict(subject, plan, a, b)
        flagged = a[0]
        if flagged.timed_out:
            verdict.summary = f"{plan.a.label} timed out before it showed anything"
            return verdict
        problem = self.shown(flagged)
        if problem is None:
            if not flagged.ok:
                verdict.summary = f"{plan.a.label} failed some other way: {last_line(flagged.error)}"
            else:
                verdict.status = "not reproduced"
                verdict.summary = f"{plan.a.label} ran without the failure" + _said(flagged)
            return verdict
        if not b:
            verdict.summary = f"{plan.a.label}: {problem}; {plan.b.label} did not run"
            return verdict
        fixed = b[0]
        if not fixed.ok or self.shown(fixed) is not None:
            what = self.shown(fixed) or ("timed out" if fixed.timed_out else last_line(fixed.error))
            verdict.summary = f"{plan.a.label}: {problem}; but {plan.b.label} fails too: {what}"
            return verdict
        verdict.status = "reproduced"
        verdict.summary = f"{plan.a.label}: {problem}; {plan.b.label}: no error{_said(fixed)}"
        return verdict


def _said(run: Run) -> str:
    """What a run reported as right, when it says (`__ray_lint_evidence__ = {"right": ...}`)."""
    if isinstance(run.evidence, dict) and run.evidence.get("right"):
        return f" ({run.evidence['right']})"
    return ""


def _error_line(error: str, pattern: str) -> str:
    """The line of the error text that matches: Ray's message rather than the traceback's last frame."""
    for line in reversed(error.strip().splitlines()):
        if re.search(pattern, line):
            return line.strip()[:300]
    return last_line(error)


def model_instead(model: Planned, why: str) -> Planned:
    """`model` (a plan, or why there is none), its shape saying why the user's code does not run instead."""
    return replace(model, shape=f"{model.shape}; your code was not run: {why}", why_not_yours=why) if isinstance(model, Plan) else model


def _blank_verdict(subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
    return Verdict(
        subject.path, subject.diagnostic.start.line, subject.diagnostic.code, "inconclusive", plan.mode, "",
        plan.shape, (plan.a.label, plan.b.label), runs=(a, b),
    )


def confirmed(plan: Plan) -> Status:
    """The word for a shown slowdown or misuse: on the user's code, or only on the rule's model."""
    return "confirmed on your code" if plan.runs_user_code else "pattern confirmed (model)"


def last_line(error: str | None) -> str:
    lines = (error or "").strip().splitlines()
    return lines[-1] if lines else "unknown error"


def _first_difference(plan: Plan, a: list[Run], b: list[Run]) -> str | None:
    """The first call whose return value differs between the forms' first runs that returned any, in words;
    None when those runs agree (the results differ in another round)."""
    calls_a = next((run.calls for run in a if run.calls), ())
    calls_b = next((run.calls for run in b if run.calls), ())
    if not calls_a or not calls_b:
        return None
    for number, ((digest_a, shown_a), (digest_b, shown_b)) in enumerate(zip(calls_a, calls_b), start=1):
        if digest_a != digest_b:
            which = f"call {number} of {len(calls_a)} returned " if len(calls_a) > 1 else ""
            return f"{which}{shown_a} {plan.a.label}, {shown_b} {plan.b.label}"
    if len(calls_a) != len(calls_b):
        return f"{len(calls_a)} calls {plan.a.label}, {len(calls_b)} {plan.b.label}"
    return None


def _median_wall(runs: list[Run]) -> float:
    return statistics.median(r.wall_s for r in runs)


def _median_parallelism(runs: list[Run]) -> float | None:
    values = [r.parallelism for r in runs if r.parallelism is not None]
    return statistics.median(values) if values else None


def _same_results(a: list[Run], b: list[Run]) -> bool | None:
    values_a = {r.returned for r in a if r.returned is not None}
    values_b = {r.returned for r in b if r.returned is not None}
    if not values_a or not values_b:
        return None
    return values_a == values_b


def script(body: str, libraries: tuple[str, ...] = ()) -> str:
    """A modelled variant: the standard imports, the Ray libraries it uses (`"train.torch"` gives
    `import ray.train.torch` and binds `train`), then `body` (dedented). The libraries are named here, not
    in the model's text, so that no line of a module on the lint path reads as an import of Ray."""
    imported = "".join(f"import ray.{library}\nfrom ray import {library.split('.')[0]}\n" for library in libraries)
    return "import os\nimport time\n\nimport ray\n" + imported + "\n" + textwrap.dedent(body).strip() + "\n"


def replayed(known: int | None, assumed: int, cpus: float, unit: str) -> tuple[int, str]:
    """How many iterations, calls or refs a model replays, and the words for it: the count in the code
    (else `assumed`), but no more than `REPLAYED_AT_LEAST`, or `REPLAYED_PER_CPU` per CPU where that is
    more, saying so. A count of thousands would outlast the time limit, and past that both forms grow
    alike: a loop run one task at a time against `cpus` at once keeps the CPU count as its ratio."""
    if known is None:
        return assumed, f"{assumed} {unit} (count not in the code: {assumed} assumed)"
    count = min(known, max(REPLAYED_AT_LEAST, REPLAYED_PER_CPU * int(cpus)))
    return count, f"{count:,} {unit}" + ("" if count == known else f" (of the {known:,} in the code)")


def timed(body: str) -> str:
    """Wrap `body` so that only it is timed (set-up such as creating actors stays out of the ratio)."""
    return _timed_section(body, "__ray_lint_result__", "__ray_lint_timed__")


def timed_forms(flagged: str, fixed: str) -> str:
    """Both forms' bodies for a joint program (`Plan.joint`), each timed on its own, the fixed form first:
    what a program does once (a library's lazy set-up) then slows the fix, and the ratio errs low. They
    leave `__ray_lint_forms__ = {"a": (result, (start, end, seconds)), "b": ...}`, which the probe reports."""
    sections = [_timed_section(body, f"__ray_lint_{side}_result__", f"__ray_lint_{side}_timed__") for side, body in (("b", fixed), ("a", flagged))]
    forms = "{" + ", ".join(f'"{side}": (__ray_lint_{side}_result__, __ray_lint_{side}_timed__)' for side in "ab") + "}"
    return "".join(sections) + f"__ray_lint_forms__ = {forms}\n"


def _timed_section(body: str, result: str, times: str) -> str:
    indented = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return (
        "__ray_lint_start__ = (time.time(), time.perf_counter())\n"
        "def __ray_lint_body__():\n"
        f"{indented}\n"
        f"{result} = __ray_lint_body__()\n"
        f"{times} = (__ray_lint_start__[0], time.time(), time.perf_counter() - __ray_lint_start__[1])\n"
    )
