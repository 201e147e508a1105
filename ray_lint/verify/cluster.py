"""The one Ray cluster a verify run uses: started here (or named by `--address`), shared by every
experiment, and torn down at the end whatever happened. `ray-lint check --executor ray` runs its
tasks on one too.

Ray is imported only in this module and in `probe.py`, which run only under `ray-lint verify` and
`--executor ray`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

Result = TypeVar("Result")

EVENT_INTERVAL_MS = 100  # how often workers of an owned cluster send task events (Ray's default: 1000)
LOGICAL_GPUS = 2  # a CPU-only machine gets logical GPUs, so GPU rules can show what tasks see
TIMELINE_SETTLE_S = 1.5  # Ray flushes task events about once a second


class TaskFailed(Exception):
    """A task run by `Cluster.run_tasks` raised, or its worker died."""


@dataclass
class Cluster:
    """A connection to a Ray cluster; `owned` when ray-lint started it (and must stop it)."""

    address: str
    num_cpus: float
    num_gpus: float
    owned: bool
    temp_dir: str | None = None
    gpus_are_logical: bool = False

    @classmethod
    def start(cls, num_cpus: int | None = None, address: str | None = None) -> Cluster:
        """Start a local cluster (no dashboard, its own temp dir) or connect to `address`. An inherited
        `RAY_ADDRESS` is ignored: only `address` selects an existing cluster."""
        os.environ.pop("RAY_ADDRESS", None)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        import ray

        logging.getLogger("ray").setLevel(logging.ERROR)  # ray-lint reports what matters itself
        if address is not None:
            context = ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            resources = ray.cluster_resources()
            return cls(address, resources.get("CPU", 0), resources.get("GPU", 0), owned=False)
        temp_dir = tempfile.mkdtemp(prefix="rl-")  # short: Ray's socket paths must fit in 108 bytes
        logical = shutil.which("nvidia-smi") is None  # no NVIDIA driver: give the cluster logical GPUs
        settings = {
            "RAY_task_events_report_interval_ms": str(EVENT_INTERVAL_MS),
            # Workers import the user's modules too (functions travel by reference): they must not leave a
            # __pycache__ in the project any more than the variant's own process does.
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if logical:
            settings["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(LOGICAL_GPUS))
        with _environment(settings):  # the cluster's processes inherit these; this process keeps its own
            context = ray.init(
                num_cpus=num_cpus or os.cpu_count() or 1,
                num_gpus=LOGICAL_GPUS if logical else None,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
                _temp_dir=temp_dir,
            )
        resources = ray.cluster_resources()
        return cls(
            context.address_info["gcs_address"],
            resources.get("CPU", 0),
            resources.get("GPU", 0),
            owned=True,
            temp_dir=temp_dir,
            gpus_are_logical=logical,
        )

    def run_tasks(self, function: Callable[..., Result], calls: list[tuple[Any, ...]]) -> list[Result]:
        """`function(*arguments)` for each of `calls`, as one-CPU tasks on this cluster; the results in
        order. A task that fails raises TaskFailed with Ray's message."""
        import ray

        remote = ray.remote(num_cpus=1)(function)
        try:
            return ray.get([remote.remote(*arguments) for arguments in calls])
        except ray.exceptions.RayError as error:
            raise TaskFailed(str(error)) from None

    def timeline(self, settle_s: float = TIMELINE_SETTLE_S) -> list[dict[str, Any]]:
        """Every task event the cluster recorded, after giving the last ones time to arrive."""
        import ray

        previous, deadline = -1, time.monotonic() + 4 * settle_s
        events: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            events = ray.timeline()
            if len(events) == previous:
                break
            previous = len(events)
            time.sleep(settle_s)
        return events

    def stop(self) -> None:
        """Disconnect; for a cluster ray-lint started, stop it and kill anything it left behind."""
        import ray

        # The process tree is read before the shutdown, while workers still hang under their raylet.
        started = _processes_under(self.temp_dir) if self.owned and self.temp_dir is not None else set()
        try:
            ray.shutdown()
        finally:
            if self.owned and self.temp_dir is not None:
                for pid in started | _processes_under(self.temp_dir):
                    _kill(pid)
                shutil.rmtree(self.temp_dir, ignore_errors=True)

    @property
    def event_flush_s(self) -> float:
        """How long a variant waits before it exits so that its workers' last task events reach Ray
        (workers are stopped with their job, and unsent events die with them)."""
        return 3 * EVENT_INTERVAL_MS / 1000 if self.owned else 1.5

    def environment(self) -> dict[str, str]:
        """The environment for a variant's subprocess: connects to this cluster and nothing else."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env["RAY_AUTH_MODE"] = env.get("RAY_AUTH_MODE", "disabled")
        return env


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _processes_under(temp_dir: str) -> set[int]:
    """Ray processes of this cluster: those whose command lines name its temp dir, and their children
    (workers rename themselves to `ray::...`)."""
    import psutil

    found = set()
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(temp_dir in part for part in process.info["cmdline"] or ()):
                found.add(process.info["pid"])
                found.update(child.pid for child in process.children(recursive=True))
        except (psutil.Error, TypeError):
            continue
    return found


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
