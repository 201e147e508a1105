"""Runs experiments: lint, plan each verifiable finding, run the variants A B A B on the shared
cluster (each in its own process, with a time limit), read Ray's timeline, judge.

This executes the user's code. Only `ray-lint verify` calls it.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ray_lint.api import RunOptions, lint_file, resolve
from ray_lint.diagnostics import FILE_ERROR_CODE
from ray_lint.engine import lint_text
from ray_lint.config import Resolver
from ray_lint.experiment import (
    PROBLEM_SHOWN, Experiment, JointPart, Plan, ReproductionExperiment, Run, Runner, Subject, Variant, Verdict, file_of_tests,
    last_line,
)
from ray_lint.files import Skipped, discover
from ray_lint.results import FileResult
from ray_lint.rule import Rule, all_rules, rule_by_code_or_name
from ray_lint.verify.cluster import Cluster

OUTPUT_TAIL_BYTES = 4000
BESIDE_JOBS = 3  # models that may run beside others: how many jobs at once (each runs its A and B side by side)
MODEL_FILENAME = "<ray-lint model>"
ERROR_WORD = re.compile(r"(?i)\berror\b")  # a line of output that says why the code exited
# Ray's own run-time warnings about the anti-patterns (text as Ray 2.60 prints it), kept as evidence.
RAY_WARNINGS = re.compile(
    r"(remote function \S+ is very large|More than \d+ tasks are pending submission to actor|"
    r"Using blocking ray\.get inside async actor|PYTHON worker processes have been started)[^\n]*"
)


@dataclass
class Job:
    subject: Subject
    experiment: Experiment
    plan: Plan
    a: list[Run] = field(default_factory=list)
    b: list[Run] = field(default_factory=list)


def verify(
    paths: list[Path],
    resolver: Resolver,
    cluster: Cluster,
    repeat: int = 3,
    timeout: float = 60.0,
    progress: Callable[[str, int], None] = lambda path, total: None,
    trace_dir: Path | None = None,
    linted: Linted | None = None,
    tests: list[Path] | None = None,
) -> list[Verdict]:
    """Lint `paths` (unless `linted` already holds their results), run an experiment for every finding of a
    rule that has one, return the verdicts (in file and line order). `progress(path, total)` is called
    after each experiment; `tests` are those --tests names."""
    linted = linted if linted is not None else lint_for_verify(paths, resolver, tests)
    jobs, verdicts = plan_findings(linted, cluster)
    verdicts += run_jobs(jobs, cluster, repeat, timeout, lambda path: progress(path, len(jobs)), trace_dir)
    linted.locate_in_cells(verdicts)
    return sorted(verdicts, key=lambda v: (v.path, v.cell or 0, v.line, v.code))


@dataclass
class Linted:
    """What `verify` lints before it needs a cluster: each file's result, and the named paths that do not exist."""

    results: list[tuple[Path, FileResult]]
    missing: list[Path]
    tests: dict[Path, tuple[str, ...] | None] = field(default_factory=dict)  # per file: the tests it may run (None: search)
    arguments: dict[Path, tuple[str, ...]] = field(default_factory=dict)  # per file: its entry point's command line
    config_problems: list[str] = field(default_factory=list)  # what the configuration names that is not there

    def problems(self) -> list[str]:
        """Why the code cannot run as it is: a named path that does not exist, a file Python cannot compile
        (Python's own error, whether or not a rule read the file), or one ray-lint cannot read (RAY000)."""
        found = [f"{path}: no such file or directory" for path in self.missing] + self.config_problems
        for path, result in self.results:
            error = _syntax_error(result)
            if error is not None:
                found.append(f"{path}:{error.lineno}:{error.offset}: {type(error).__name__}: {error.msg}")
                continue
            found += [f"{path}:{d.start.line}:{d.start.column}: {d.message}" for d in result.diagnostics if d.code == FILE_ERROR_CODE]
        return found

    def locate_in_cells(self, verdicts: list[Verdict]) -> None:
        """Give the verdicts of a notebook's findings their cell, and their line within it, as `check` does."""
        notebooks = {str(path): result.notebook for path, result in self.results if result.notebook is not None}
        for verdict in verdicts:
            notebook = notebooks.get(verdict.path)
            located = notebook.locate(verdict.line) if notebook is not None else None
            if located is not None:
                verdict.cell, verdict.line = located[0].index, located[1]

    def verifiable(self) -> int:
        """How many findings belong to a rule with an experiment."""
        return sum(1 for _, result in self.results for d in result.diagnostics if _experiment_of(d.code) is not None)

    def without_experiment(self) -> list[Verdict]:
        """A "no experiment" verdict for each finding of a rule that has none: listed, never dropped."""
        return [
            Verdict(str(path), d.start.line, d.code, "no experiment", None, f"{d.code} has no experiment ({_why_none(d.code)}): {d.message}")
            for path, result in self.results
            for d in result.diagnostics
            if d.code != FILE_ERROR_CODE and _experiment_of(d.code) is None
        ]


def lint_for_verify(
    paths: list[Path], resolver: Resolver, tests: list[Path] | None = None, arguments: Sequence[str] | None = None,
) -> Linted:
    """Lint what `verify` would run, with the project's facts. A notebook's findings get the rule's model
    only: its cells expect a kernel's state and order. `tests` (from --tests) replaces the tests the
    config names; with neither, each finding's project is searched for tests. `arguments` (from --args)
    is the command line of each entry point that runs; without it, each file's is the one the config gives it."""
    found = list(discover(paths, resolver))
    files = [item for item in found if isinstance(item, Path)]
    missing = [item.path for item in found if isinstance(item, Skipped) and not item.path.exists()]
    missing += [test for test in tests or () if not file_of_tests(test).exists()]
    settings = {path: resolver.settings_for(path) for path in files}
    results = resolve([lint_file(path, settings[path], RunOptions(write=False)) for path in files], resolver)
    named = {path: tests if tests is not None else settings[path].verify_tests for path in files}
    if arguments is not None:
        given, unknown = {path: tuple(arguments) for path in files}, []
    else:
        given = {path: settings[path].verify_arguments(path) for path in files}
        configs = {id(each): each for each in settings.values()}.values()  # one check per config, not per file
        unknown = sorted({problem for each in configs for problem in each.missing_scripts()})
    return Linted(list(zip(files, results)), missing, {path: _strings(value) for path, value in named.items()}, given, unknown)


def _strings(paths: Sequence[Path] | None) -> tuple[str, ...] | None:
    return tuple(str(path.resolve()) for path in paths) if paths is not None else None


def _syntax_error(result: FileResult) -> SyntaxError | None:
    if result.source is None:
        return None
    try:
        compile(result.source, result.path, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        return error
    except (ValueError, RecursionError, MemoryError):
        return None  # a NUL byte or a nesting too deep: RAY000 says so
    return None


def _still_fails(text: str) -> bool:
    """Whether `text` has a finding of a rule whose experiment reproduces a failure."""
    return bool(lint_text(text, [rule() for rule in _reproducing_rules()]))


@functools.cache
def _reproducing_rules() -> tuple[type[Rule], ...]:
    return tuple(rule for rule in all_rules() if isinstance(rule.experiment, ReproductionExperiment))


def _experiment_of(code: str) -> Experiment | None:
    rule = rule_by_code_or_name(code)
    return rule.experiment if rule is not None else None


def _why_none(code: str) -> str:
    rule = rule_by_code_or_name(code)
    return rule.no_experiment if rule is not None and rule.no_experiment else "none yet"


def plan_findings(linted: Linted, cluster: Cluster) -> tuple[list[Job], list[Verdict]]:
    """Plan an experiment for each finding whose rule has one; the others are listed as having none."""
    jobs, verdicts = [], linted.without_experiment()
    for path, result in linted.results:
        for diagnostic in result.diagnostics:
            experiment = _experiment_of(diagnostic.code)
            if experiment is None or result.source is None:
                continue
            subject = Subject(
                str(path), result.source, diagnostic, cluster.num_cpus, cluster.num_gpus, linted.tests.get(path), _still_fails,
                notebook=result.notebook is not None, arguments=linted.arguments.get(path, ()),
            )
            try:
                plan = experiment.planned(subject)
            except Exception as error:  # a bug in one experiment must not stop the others
                plan = f"could not plan the experiment: {type(error).__name__}: {error}"
            if isinstance(plan, str):
                verdicts.append(Verdict(subject.path, diagnostic.start.line, diagnostic.code, "inconclusive", None, plan))
            else:
                jobs.append(Job(subject, experiment, plan))
    return jobs, verdicts


def run_jobs(
    jobs: list[Job],
    cluster: Cluster,
    repeat: int,
    timeout: float,
    progress: Callable[[str], None] = lambda path: None,
    trace_dir: Path | None = None,
) -> list[Verdict]:
    """Run every job's variants interleaved A B A B, then judge them against Ray's timeline. Findings
    whose plans are the same (a model replayed with the same counts) share one set of runs. The models
    that may share a driver (`Experiment.shares_driver`) share one, but for timed ones: a driver each.
    Last, the models that may run beside others (`Experiment.beside_others`) run `BESIDE_JOBS` at a time;
    one that shows no problem that way runs again alone."""
    twins: dict[tuple[type[Experiment], Plan], list[Job]] = {}
    for job in jobs:
        twins.setdefault((type(job.experiment), job.plan), []).append(job)
    runs_for = {id(same[0]): same for same in twins.values()}  # the job that runs, and those that share its runs

    def done(job: Job) -> None:
        for twin in runs_for[id(job)]:
            twin.plan, twin.a, twin.b = job.plan, job.a, job.b
            progress(twin.subject.path)

    with tempfile.TemporaryDirectory(prefix="ray-lint-verify-") as scratch:
        shared = SharedDriver(cluster, Path(scratch))
        try:
            in_turn: list[Job] = []
            beside: list[Job] = []
            for same in twins.values():
                (beside if _runs_beside(same[0]) else in_turn).append(same[0])
            served = _run_parts(in_turn, cluster, timeout, Path(scratch))
            for job in in_turn:
                if id(job) not in served:
                    _run_in_turn(job, cluster, repeat, timeout, Path(scratch), shared)
                done(job)
            shared.close()
            again = _run_beside(beside, cluster, repeat, timeout, Path(scratch), done)
            for job in again:  # alone now: another job's load may have hidden the problem
                run_job(job, cluster, repeat, timeout, Path(scratch))
                done(job)
        finally:
            shared.close()
    events = cluster.timeline()
    verdicts = []
    for number, job in enumerate(jobs):
        for runs in (job.a, job.b):
            for run in runs:
                attach_timeline(run, events)
        if trace_dir is not None:
            write_traces(trace_dir, number, job, events)
        verdicts.append(job.experiment.judge(job.subject, job.plan, job.a, job.b))
    return verdicts


def _run_parts(jobs: list[Job], cluster: Cluster, timeout: float, scratch: Path) -> set[int]:
    """Run the models that may share one program (`Plan.part`), where two or more have the same, in that
    program: one start of their library serves them all. Returns the ids of the jobs it served. The others
    run on their own, and so do all of a program that fails: one model's fault must not cost the others
    their verdicts, only the time of the shared run."""
    kinds: dict[Callable[[tuple[str, ...]], Variant], list[tuple[Job, JointPart]]] = {}
    for job in jobs:
        part = job.plan.part
        if part is not None and not job.plan.runs_user_code and not job.experiment.timed:
            kinds.setdefault(part.program, []).append((job, part))
    served: set[int] = set()
    for program, group in kinds.items():
        if len(group) < 2:
            continue
        first, what = group[0][0], group[0][1].what
        limit = max(timeout, *(job.experiment.least_timeout_s for job, _ in group))
        run = run_variant(cluster, program(tuple(part.text for _, part in group)), first.subject.path, limit, scratch, user_code=False, timed=False)
        if not run.ok:
            continue
        for index, (job, _) in enumerate(group):
            own = run.part(index)
            job.a, job.b = [own.form("a")], [own.form("b")]
            job.plan = replace(job.plan, shape=f"{job.plan.shape}; {what} served the models of {len(group)} findings")
            served.add(id(job))
    return served


def _run_beside(
    jobs: list[Job], cluster: Cluster, repeat: int, timeout: float, scratch: Path, done: Callable[[Job], None],
) -> list[Job]:
    """Run `jobs` `BESIDE_JOBS` at a time. Those that show no problem (and did not time out) are returned
    as they were planned, for a run alone."""
    again: set[int] = set()  # the jobs' ids

    def run(job: Job) -> None:
        planned = job.plan  # a rerun starts from this plan, not from its fallback
        run_job(job, cluster, repeat, timeout, scratch)
        shown = job.experiment.judge(job.subject, job.plan, job.a, job.b).status in PROBLEM_SHOWN
        if shown or any(each.timed_out for each in (*job.a, *job.b)):  # a variant that timed out is not run again
            done(job)
        else:
            job.plan, job.a, job.b = planned, [], []
            again.add(id(job))

    with ThreadPoolExecutor(max_workers=BESIDE_JOBS) as pool:
        list(pool.map(run, jobs))
    return [job for job in jobs if id(job) in again]


def _runs_beside(job: Job) -> bool:
    """Whether the job may run at the same time as others: an untimed model that says so; never the user's code."""
    return job.experiment.beside_others and not job.experiment.timed and not job.plan.runs_user_code


def _run_in_turn(job: Job, cluster: Cluster, repeat: int, timeout: float, scratch: Path, shared: SharedDriver) -> None:
    """The job alone on the cluster. A timed model's variants share a driver of their own: what other
    models' runs leave to Ray (idle workers it stops, objects it frees) would slow one of them and not the other."""
    driver = SharedDriver(cluster, scratch) if job.experiment.timed else shared
    try:
        run_job(job, cluster, repeat, timeout, scratch, driver)
    finally:
        if driver is not shared:
            driver.close()


def run_job(job: Job, cluster: Cluster, repeat: int, timeout: float, scratch: Path, shared: SharedDriver | None = None) -> None:
    """A B pairs: the experiment's `rounds` (else `repeat`), fewer when the first settles the verdict, or until
    a run fails; untimed pairs run side by side. A variant that times out is not
    run again, and its fixed form is not run after it. When the code cannot run as is (its first run
    raises, exits or times out), the next plan (its tests, then the rule's model) takes its place and says why.
    A model whose experiment `shares_driver` runs in the `shared` driver, its variants one after the other
    (a timed one's first pair B A); a plan with a `joint` program runs that once for both."""

    timed = job.experiment.timed
    limit = max(timeout, job.experiment.least_timeout_s)

    def in_shared() -> bool:
        return shared is not None and job.experiment.shares_driver and not job.plan.runs_user_code

    def run(variant: Variant) -> Run:
        plan = job.plan
        driver = shared if in_shared() else None
        return run_variant(cluster, variant, job.subject.path, limit, scratch, plan.runner, plan.runs_user_code, timed, driver)

    def pair() -> bool:
        if job.plan.program is not None:  # one program runs both forms: one start of the library, not two
            both = run(job.plan.program)
            job.a.append(both.form("a"))
            job.b.append(both.form("b"))
        elif not timed and job.experiment.side_by_side and not in_shared():  # A and B run at once: a hang costs one time limit for both
            with ThreadPoolExecutor(max_workers=2) as pool:
                a, b = pool.map(run, (job.plan.a, job.plan.b))
            job.a.append(a)
            job.b.append(b)
        elif timed and in_shared() and not job.a:
            # The fixed form first: what a job does once (an import, a library's lazy set-up) then slows the
            # fix, not the flagged form, and the ratio errs low.
            job.b.append(run(job.plan.b))
            job.a.append(run(job.plan.a))
        else:
            job.a.append(run(job.plan.a))
            if job.a[-1].timed_out:  # the fixed form would most likely hang the same way (a driver stuck before
                return False         # the flagged code): one time limit spent, not two
            job.b.append(run(job.plan.b))
        return job.experiment.ran_as_planned(job.a[-1]) and job.b[-1].ok

    succeeded, failures = pair(), []
    while not job.experiment.ran_as_planned(job.a[0]) and job.plan.fallback is not None:
        first = job.a[0]
        # The user's code that outlasts the limit (a long job, a server, a hang) gets its next plan too: the
        # tests or the model are other programs, which need not hang the same way.
        failed = f"did not finish within {limit:g} s" if first.timed_out else f"could not run ({last_line(first.error)})"
        failures.append(f"{job.plan.runner.what} {failed}")
        job.plan = replace(job.plan.fallback, shape="; ".join([job.plan.fallback.shape, *failures]))
        job.a.clear()
        job.b.clear()
        succeeded = pair()
    rounds = job.experiment.rounds or repeat
    while succeeded and len(job.a) < rounds and not job.experiment.settled(job.a, job.b, rounds):
        succeeded = pair()


def run_variant(
    cluster: Cluster, variant: Variant, path: str, timeout: float, scratch: Path, runner: Runner = Runner(), user_code: bool = True,
    timed: bool = True, shared: SharedDriver | None = None,
) -> Run:
    """One variant, in its own process (in its own session, so that everything it starts can be killed),
    or in the `shared` driver; output goes to a file of which only the tail is kept."""
    handle, spec_path = tempfile.mkstemp(suffix=".json", dir=scratch)
    os.close(handle)
    result_path, output_path = spec_path + ".result", spec_path + ".out"
    directory = runner.cwd or str(Path(path).resolve().parent)
    spec = {
        "address": cluster.address, "source": variant.source, "path": str(Path(path).resolve()), "result": result_path,
        "output": output_path, "cwd": directory,
        "filename": str(Path(path).resolve()) if user_code else MODEL_FILENAME,  # a model's traceback quotes no line of the user's file
        # A timed run starts its workers before the clock and leaves its task events time to reach the timeline.
        "workers": int(cluster.num_cpus) if timed else 0, "flush_s": cluster.event_flush_s if timed else 0,
        "runner": runner.kind, "module": runner.module, "tests": list(runner.tests), "function": runner.function, "what": runner.what,
        "arguments": list(runner.arguments),
        "basetemp": spec_path + ".pytest",  # the tests' tmp_path folders: in the scratch folder, removed with it
    }
    Path(spec_path).write_text(json.dumps(spec), encoding="utf-8")
    if shared is not None:
        timed_out, status = shared.run(spec_path, timeout)
    else:
        timed_out, status = _run_alone(cluster, scratch, spec_path, output_path, directory, runner, timeout)
    tail, warnings = _tail(output_path), _ray_warnings(output_path)
    if timed_out:
        return Run(False, f"timed out after {timeout:g} s", timeout, timed_out=True, output_tail=tail)
    try:
        data: dict[str, Any] = json.loads(Path(result_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        # The status goes last: verdicts quote an error's last line, which must not be a line of output.
        error = f"{tail[-300:].rstrip()}\nthe variant's process exited with status {status}".lstrip()
        return Run(False, error, 0.0, output_tail=tail)
    error = data["error"]
    if error and error.startswith("SystemExit(") and (said := _last_error_line(tail)):
        error = f"{error}: {said}"  # what the code printed before it exited: argparse's "error: …", say
    return Run(
        data["ok"], error, data["wall_s"], tuple(data["window"]), evidence=data["evidence"],
        output_tail=tail, ray_warnings=warnings, calls=tuple((digest, shown) for digest, shown in data["calls"]),
        forms=data.get("forms", {}),
    )


def _run_alone(
    cluster: Cluster, scratch: Path, spec_path: str, output_path: str, directory: str, runner: Runner, timeout: float,
) -> tuple[bool, int | None]:
    """The variant in a process of its own: whether it timed out, and its exit status."""
    env = _environment(cluster, scratch)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [runner.path_entry or directory, env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the user's project is left as it was: no new __pycache__ (a script's imports too)
    with open(output_path, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "ray_lint.verify.probe", spec_path],
            cwd=directory, env=env, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            process.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(process)
    return timed_out, process.returncode


def _environment(cluster: Cluster, scratch: Path) -> dict[str, str]:
    """A variant's environment: the cluster's, with the temporary folders its code makes (`tempfile`) in the
    scratch folder, removed with it: a model or a test that leaves one behind leaves nothing in /tmp."""
    env = cluster.environment()
    folder = scratch / "tmp"
    folder.mkdir(exist_ok=True)
    env["TMPDIR"] = str(folder)
    return env


class SharedDriver:
    """One probe process that runs variants one after another in one Ray job (`probe.serve`). A model that
    leaves nothing behind then costs no process start, no connection and no new workers: about a second
    and a half each. A variant that times out or ends the process takes it down; the next one starts
    another."""

    def __init__(self, cluster: Cluster, scratch: Path) -> None:
        self.cluster, self.scratch = cluster, scratch
        self.process: subprocess.Popen[bytes] | None = None

    def run(self, spec_path: str, timeout: float) -> tuple[bool, int | None]:
        """Run the variant of `spec_path`: whether it timed out, and the exit status if the process ended."""
        process = self.process = self.process or self._start()
        assert process.stdin is not None and process.stdout is not None
        with suppress(BrokenPipeError):
            process.stdin.write(spec_path.encode() + b"\n")
            process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.close(wait_s=0)
                return True, None
            line = process.stdout.readline()
            if line in (b"done\n", b"done, restart\n"):
                if line != b"done\n":  # the variant left CPUs or GPUs taken: its job ends with it
                    self.close()
                return False, None
            if not line:  # the variant ended the process
                self.close(wait_s=10)
                return False, process.returncode

    def _start(self) -> subprocess.Popen[bytes]:
        with open(self.scratch / "shared-driver.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "ray_lint.verify.probe", "--serve", self.cluster.address, str(self.cluster.event_flush_s)],
                cwd=self.scratch, env=_environment(self.cluster, self.scratch), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, start_new_session=True, bufsize=0,
            )

    def close(self, wait_s: float = 30.0) -> None:
        """End the job (its workers' last task events sent first), and kill whatever is left of it."""
        process, self.process = self.process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        with suppress(BrokenPipeError):
            process.stdin.close()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait_s)
        _kill_group(process)
        process.stdout.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the variant and everything it started (it runs in its own session)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _tail(path: str) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - OUTPUT_TAIL_BYTES))
        return handle.read().decode("utf-8", "replace")


def _last_error_line(output: str) -> str | None:
    """The last line of a run's output that says "error" (a command line parser's message), if any."""
    lines = [line.strip() for line in output.splitlines() if ERROR_WORD.search(line)]
    return lines[-1][:200] if lines else None


def _ray_warnings(path: str, limit: int = 5) -> list[str]:
    """Ray's warnings about the anti-patterns in a variant's whole output, read line by line."""
    found: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = RAY_WARNINGS.search(line)
            if match and match.group(0).strip() not in found:
                found.append(match.group(0).strip()[:200])
                if len(found) >= limit:
                    break
    return found


def task_events(events: list[dict[str, Any]], window: tuple[float, float]) -> list[tuple[float, float, str]]:
    """(start, end, worker) in seconds of the tasks and actor calls that ran inside `window`."""
    start, end = window[0] * 1e6, window[1] * 1e6
    found = []
    for event in events:
        if not str(event.get("cat", "")).startswith("task::") or "dur" not in event:
            continue
        begin = float(event["ts"])
        if start <= begin <= end and not str(event.get("name", "")).endswith("__init__"):
            found.append((begin / 1e6, (begin + float(event["dur"])) / 1e6, str(event.get("tid", ""))))
    return found


def attach_timeline(run: Run, events: list[dict[str, Any]]) -> None:
    """Achieved parallelism and peak concurrency of the run, from Ray's own task timeline."""
    tasks = task_events(events, run.window)
    run.tasks, run.timeline = len(tasks), tasks
    if not tasks:
        return
    span = max(end for _, end, _ in tasks) - min(begin for begin, _, _ in tasks)
    busy = sum(end - begin for begin, end, _ in tasks)
    run.parallelism = busy / span if span > 0 else 1.0
    points = sorted([(begin, 1) for begin, _, _ in tasks] + [(end, -1) for _, end, _ in tasks])
    running = 0
    for _, change in points:
        running += change
        run.peak = max(run.peak, running)


def write_traces(trace_dir: Path, number: int, job: Job, events: list[dict[str, Any]]) -> None:
    """Each variant's first run as a Chrome trace (open it in Perfetto or chrome://tracing)."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{number:02d}-{Path(job.subject.path).stem}-{job.subject.diagnostic.code}-L{job.subject.diagnostic.start.line}"
    for side, runs in (("a", job.a), ("b", job.b)):
        if runs:
            start, end = runs[0].window[0] * 1e6, runs[0].window[1] * 1e6
            selected = [e for e in events if start <= float(e.get("ts", 0)) <= end]
            (trace_dir / f"{stem}-{side}.json").write_text(json.dumps(selected), encoding="utf-8")
