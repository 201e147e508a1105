"""Runs one variant of an experiment in its own process, `python -m ray_lint.verify.probe SPEC.json`, or
many one after another in one (`--serve ADDRESS FLUSH_S`, the spec paths on stdin; see `serve`).

It connects to the verifier's cluster, makes the code's own `ray.init()` and `ray.shutdown()` calls
harmless (the cluster is shared), runs the code, and writes what happened to the result file named
in the spec: wall time, the wall-clock window, whether it raised, and what the code left in
`__ray_lint_result__`, `__ray_lint_evidence__` and `__ray_lint_timed__` (set by modelled variants;
see `experiment.timed`), and a joint program's `__ray_lint_forms__` (`experiment.timed_forms`).

The code runs as the plan's `Runner` says: exec'd as `__main__` (a script), with `runpy` as
`python -m module`, or through pytest on the user's tests. In the last two the variant's source
stands in for the user's file wherever it is imported (`SourceOverride`), so the file on disk is
never changed.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import hashlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import re
import runpy
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the task name in a task's error
PYTEST_ERROR_MARK = re.compile(r"^E\s+")  # pytest's mark on each line of an error
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(\([\w.]*\))?: ")  # `ValueError: …`, `ray.exceptions.RayTaskError(E): …`
MAX_VALUES = 1000  # return values kept per run, to compare the variants call by call
SHOWN_CHARS = 120  # of a return value's repr, in a verdict that says where the variants' results differ
# What makes a Ray job what it is: the code's `ray.init()` with one of these connects again, with them.
JOB_OPTIONS = ("runtime_env", "namespace", "job_config")
RELEASE_S = 5.0  # how long a shared driver waits for what a variant's actors held to be free again


class Timer:
    """`@__ray_lint_timer__`, put on the function that holds the finding: its total time, the
    wall-clock window of its calls, and each call's return value."""

    def __init__(self) -> None:
        self.calls, self.seconds = 0, 0.0
        self.window: list[float] = []
        self.values: list[str] = []  # the repr of each call's return value

    def __call__(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            begin_epoch, begin = time.time(), time.perf_counter()
            try:
                value = function(*args, **kwargs)
            finally:
                self.calls += 1
                self.seconds += time.perf_counter() - begin
                self.window = [self.window[0] if self.window else begin_epoch, time.time()]
            if len(self.values) < MAX_VALUES:
                self.values.append(repr(value))
            return value

        return timed

    def each_call(self) -> list[list[str]]:
        """Each call's return value, to find the first call where the variants differ (`call_value`)."""
        return [call_value(value) for value in self.values]


def call_value(value: str) -> list[str]:
    """A return value's repr as [digest, what to show]: the digest compares it whole, the shown part is short."""
    shown = value if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS - 20]}… ({len(value):,} characters)"
    return [hashlib.sha256(value.encode()).hexdigest()[:16], shown]


class SourceOverride(importlib.abc.MetaPathFinder):
    """Loads the file at `path` from `source` whatever name it is imported under: the variant stands
    in for the user's module. Every other import is left to the finders behind it."""

    def __init__(self, path: str, source: str) -> None:
        self.path, self.source = os.path.realpath(path), source

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is None:
                continue
            if spec.origin and os.path.realpath(spec.origin) == self.path:
                spec.loader = _VariantLoader(fullname, spec.origin, self.source)
            return spec
        return None


class _VariantLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_code(self, fullname: str) -> Any:
        return compile(self.source, self.path, "exec", dont_inherit=True)

    def get_source(self, fullname: str) -> str:
        return self.source


def run_code(spec: dict[str, Any], timer: Timer) -> dict[str, Any]:
    """Run the variant as its runner says; the namespace it left (for a script), else an empty one."""
    runner = spec.get("runner", "script")
    if runner != "tests":  # the code's own command line, not the probe's (its spec file): argparse reads it
        sys.argv = [spec["path"], *spec.get("arguments", ())]
    if runner == "script":
        namespace: dict[str, Any] = {"__name__": "__main__", "__file__": spec["path"], "__ray_lint_timer__": timer}
        exec(compile(spec["source"], spec.get("filename", spec["path"]), "exec"), namespace)
        return namespace
    sys.meta_path.insert(0, SourceOverride(spec["path"], spec["source"]))
    if runner == "module":
        return runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
    import pytest

    # Plugins that reorder or spread the tests over processes would hide the calls from the timer.
    options = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", f"--basetemp={spec['basetemp']}"]
    failure, errors = FirstFailure(), io.StringIO()
    with contextlib.redirect_stderr(errors):  # where pytest says why it could not start
        code = pytest.main([*spec["tests"], *options], plugins=[failure])
    sys.stderr.write(errors.getvalue())
    if code != 0:
        raise TestsFailed(pytest_failure(int(code), failure.text, errors.getvalue()))
    return {}


class TestsFailed(Exception):
    """The user's tests did not pass as they are: the message says why, with no traceback of ours."""


def pytest_failure(code: int, first_failure: str | None, stderr: str) -> str:
    """Why pytest exited with `code`, in one line: the first test that failed, else pytest's own error
    (an option it does not know, a conftest that does not import)."""
    if first_failure is not None:
        return f"pytest exit status {code}; first failure: {first_failure}"
    if code == 5:
        return "pytest collected no tests (exit status 5)"
    lines = [line.strip() for line in ANSI_ESCAPE.sub("", stderr).splitlines()]
    said = [PYTEST_ERROR_MARK.sub("", line) for line in lines if PYTEST_ERROR_MARK.match(line) or "error: " in line]
    return f"pytest could not start them (exit status {code}{': ' + said[-1] if said else ''})"


class FirstFailure:
    """A pytest plugin that keeps the first test (or test module) that failed, with the line of its error
    that says what went wrong: what the user needs to know why their tests could not time the function."""

    def __init__(self) -> None:
        self.text: str | None = None

    def pytest_collectreport(self, report: Any) -> None:
        self.keep(report)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.keep(report)

    def keep(self, report: Any) -> None:
        if not report.failed or self.text is not None:
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        message = ANSI_ESCAPE.sub("", crash.message if crash is not None else str(report.longrepr))
        lines = [PYTEST_ERROR_MARK.sub("", line).strip() for line in message.splitlines() if line.strip()]
        # The innermost exception (a Ray task's error ends with its cause), else the first line (`assert x == y`).
        raised = [line for line in lines if EXCEPTION_LINE.match(line)]
        if raised:
            said = raised[-1]
        else:
            said = lines[0] if lines else "no message"
        self.text = f"{report.nodeid}: {said}"


def warm_up(ray: Any, workers: int) -> None:
    """Start this job's worker processes before the clock starts: Ray starts workers per job, on
    demand, and a second of start-up would otherwise blur every comparison."""

    @ray.remote
    def idle() -> None:
        time.sleep(0.2)

    ray.get([idle.remote() for _ in range(max(1, workers))])


class Driver:
    """This process's connection to the verifier's cluster: one Ray job, in which the code's own
    `ray.init()` and `ray.shutdown()` calls are harmless (the cluster is shared). A `ray.init()` that
    asks for a job of its own kind (`JOB_OPTIONS`: a `runtime_env`, a namespace) gets one: the driver
    connects again with those options, and starts the job's workers again."""

    def __init__(self, address: str) -> None:
        os.environ.pop("RAY_ADDRESS", None)
        import ray

        ray.init(address=address, log_to_driver=True)  # Ray's warnings from workers reach the output
        self.ray = ray
        self.connect, self.disconnect = ray.init, ray.shutdown
        self.job: dict[str, Any] = {}  # the job options of the connection
        self.workers = 0  # the workers a timed run starts before the clock

        def shared_init(*args: Any, **kwargs: Any) -> Any:
            job = {key: kwargs[key] for key in JOB_OPTIONS if kwargs.get(key) is not None}
            if job and job != self.job:
                self.disconnect()
                self.connect(address=address, log_to_driver=True, **job)
                self.job = job
                if self.workers:
                    warm_up(ray, self.workers)
            return ray.get_runtime_context()

        ray.init, ray.shutdown = shared_init, lambda *args, **kwargs: None  # type: ignore[assignment]

    def run(self, spec: dict[str, Any], release: bool = False) -> dict[str, Any]:
        """Run one variant and say what happened (see the module's docstring). With `release`, what the
        variant defined is dropped after it (for the next variant in this job)."""
        self.workers = int(spec.get("workers") or 0)
        if self.workers:  # every time: Ray stops idle workers beyond one per CPU within a second or so
            warm_up(self.ray, self.workers)
        timer = Timer()
        builtins.__ray_lint_timer__ = timer  # type: ignore[attr-defined]  # for a module imported by name
        namespace: dict[str, Any] = {}
        result: dict[str, Any] = {"ok": True, "error": None}
        start_epoch, start = time.time(), time.perf_counter()
        try:
            namespace = run_code(spec, timer)
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                result.update(ok=False, error=f"SystemExit({exit_.code!r})")
        except TestsFailed as failed:
            result.update(ok=False, error=str(failed))
        except BaseException:  # the code under test may raise anything; report it
            result.update(ok=False, error=traceback.format_exc(limit=-3)[-2000:])
        result["wall_s"] = time.perf_counter() - start
        result["window"] = [start_epoch, time.time()]
        if "__ray_lint_timed__" in namespace:  # a modelled variant timed its own critical section
            begin, end, seconds = namespace["__ray_lint_timed__"]
            result["wall_s"], result["window"] = seconds, [begin, end]
        result["calls"] = [call_value(repr(namespace["__ray_lint_result__"]))] if "__ray_lint_result__" in namespace else []
        result["forms"] = {  # a joint program's forms, each timed on its own
            side: {"wall_s": seconds, "window": [begin, end], "calls": [call_value(repr(value))]}
            for side, (value, (begin, end, seconds)) in namespace.get("__ray_lint_forms__", {}).items()
        }
        if timer.calls:  # the function that holds the finding was instrumented and ran
            result["wall_s"], result["window"], result["calls"] = timer.seconds, timer.window, timer.each_call()
        elif spec.get("function") and result["ok"]:
            result.update(ok=False, error=f"{spec['what']} never called `{spec['function']}`")
        result["evidence"] = namespace.get("__ray_lint_evidence__")
        if release:
            # Ray keeps the variant's remote functions and actor classes, and with them the globals they were
            # defined in: emptied, those release the variant's actors and objects.
            namespace.clear()
        return result

    def close(self, flush_s: float) -> None:
        time.sleep(flush_s)  # let the workers send their last task events before the job ends
        self.ray.init, self.ray.shutdown = self.connect, self.disconnect  # type: ignore[assignment]
        self.disconnect()


def run(spec: dict[str, Any]) -> None:
    """One variant in a process of its own: its own Ray job. The result is written before the job ends: a
    thread the code left running may end the process once Ray is shut down."""
    driver = Driver(spec["address"])
    _write(spec["result"], driver.run(spec))
    driver.close(spec.get("flush_s", 0))


def serve(address: str, flush_s: float) -> None:
    """Run the variants whose spec paths arrive on stdin, one by one, in one Ray job: a model that leaves
    nothing behind needs no process and no workers of its own. Each variant's output goes to its spec's
    "output" file; "done" on the original stdout says its result file is written. The environment, the
    working directory, `sys.path` and the warning filters are restored after each variant. A variant whose
    actors or placement groups still hold CPUs or GPUs `RELEASE_S` after it ends ends the job ("done,
    restart"): the next variant gets the cluster as free as this one found it."""
    control = os.fdopen(os.dup(1), "w", buffering=1)
    driver: Driver | None = None
    for line in sys.stdin:
        with open(line.strip(), encoding="utf-8") as handle:
            spec = json.load(handle)
        _redirect_output(spec["output"])
        if driver is None:
            driver = Driver(address)
        environment, directory, path, argv = dict(os.environ), os.getcwd(), list(sys.path), list(sys.argv)
        free = _free(driver.ray)
        with warnings.catch_warnings():  # a warning shown once per place shows again to the next variant
            os.chdir(spec["cwd"])
            sys.path.insert(0, spec["cwd"])
            result = driver.run(spec, release=True)
        os.environ.clear()
        os.environ.update(environment)
        os.chdir(directory)
        sys.path[:], sys.argv[:] = path, argv
        gc.collect()  # the variant's actors and objects go with its last references
        released = _released(driver.ray, free)
        _write(spec["result"], result)
        control.write("done\n" if released else "done, restart\n")
        if not released:
            break
    if driver is not None:
        driver.close(flush_s)


def _write(path: str, result: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(result, handle, default=repr)


def _free(ray: Any) -> dict[str, float]:
    """The cluster's free CPUs and GPUs."""
    available = ray.available_resources()
    return {name: available.get(name, 0.0) for name in ("CPU", "GPU")}


def _released(ray: Any, free: dict[str, float]) -> bool:
    """Whether the cluster is back to `free` (Ray stops a dropped actor shortly after its last handle goes)."""
    deadline = time.monotonic() + RELEASE_S
    while True:
        now = _free(ray)
        if all(now[name] >= amount - 1e-6 for name, amount in free.items()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _redirect_output(path: str) -> None:
    """Send this process's stdout and stderr (Python's and the file descriptors') to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def main() -> None:
    if sys.argv[1] == "--serve":
        serve(sys.argv[2], float(sys.argv[3]))
        return
    with open(sys.argv[1], encoding="utf-8") as handle:
        run(json.load(handle))


if __name__ == "__main__":
    main()
