"""Runs one variant of an experiment in its own process: `python -m ray_lint.verify.probe SPEC.json`.

It connects to the verifier's cluster, makes the code's own `ray.init()` and `ray.shutdown()` calls
harmless (the cluster is shared), runs the code as `__main__`, and writes what happened to the
result file named in the spec: wall time, the wall-clock window, whether it raised, and what the
code left in `__ray_lint_result__`, `__ray_lint_evidence__` and `__ray_lint_timed__` (set by
modelled variants; see `experiment.timed`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


class Timer:
    """`@__ray_lint_timer__`, put on the function that holds the finding: its total time, the
    wall-clock window of its calls, and its last return value."""

    def __init__(self) -> None:
        self.calls, self.seconds, self.value = 0, 0.0, None
        self.window: list[float] = []

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
            self.value = value
            return value

        return timed


def warm_up(ray: Any, workers: int) -> None:
    """Start this job's worker processes before the clock starts: Ray starts workers per job, on
    demand, and a second of start-up would otherwise blur every comparison."""

    @ray.remote
    def idle() -> None:
        time.sleep(0.2)

    ray.get([idle.remote() for _ in range(max(1, workers))])


def run(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.pop("RAY_ADDRESS", None)
    import ray

    ray.init(address=spec["address"], log_to_driver=True)  # Ray's warnings from workers reach the output
    warm_up(ray, int(spec.get("workers", 1)))
    connect, disconnect = ray.init, ray.shutdown

    def shared_init(*args: Any, **kwargs: Any) -> Any:
        return ray.get_runtime_context()

    ray.init, ray.shutdown = shared_init, lambda *args, **kwargs: None  # type: ignore[assignment]
    timer = Timer()
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": spec["path"], "__ray_lint_timer__": timer}
    result: dict[str, Any] = {"ok": True, "error": None}
    start_epoch, start = time.time(), time.perf_counter()
    try:
        exec(compile(spec["source"], spec["path"], "exec"), namespace)
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            result.update(ok=False, error=f"SystemExit({exit_.code!r})")
    except BaseException:  # the code under test may raise anything; report it
        result.update(ok=False, error=traceback.format_exc(limit=-3)[-2000:])
    result["wall_s"] = time.perf_counter() - start
    result["window"] = [start_epoch, time.time()]
    if "__ray_lint_timed__" in namespace:  # a modelled variant timed its own critical section
        begin, end, seconds = namespace["__ray_lint_timed__"]
        result["wall_s"], result["window"] = seconds, [begin, end]
    result["value"] = repr(namespace["__ray_lint_result__"])[:2000] if "__ray_lint_result__" in namespace else None
    if timer.calls:  # the function that holds the finding was instrumented and ran
        result["wall_s"], result["window"], result["value"] = timer.seconds, timer.window, repr(timer.value)[:2000]
    result["evidence"] = namespace.get("__ray_lint_evidence__")
    time.sleep(spec.get("flush_s", 0))  # let the workers send their last task events before the job ends
    ray.init, ray.shutdown = connect, disconnect  # type: ignore[assignment]
    disconnect()
    return result


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    result = run(spec)
    with open(spec["result"], "w", encoding="utf-8") as handle:
        json.dump(result, handle, default=repr)


if __name__ == "__main__":
    main()
