"""`ray-lint check --executor ray`: the same per-file work, in batches, as tasks on a Ray cluster.

Imported only when asked for: the lint path never imports Ray. The driver reads the files and ships
their bytes (a cluster's nodes need not share its filesystem), the tasks lint them, and the driver
writes any fixes and the cache. Every node needs the same version of ray-lint installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from ray_lint import __version__
from ray_lint.api import ExecutorError, RunOptions, Task, lint_data, lint_file, write_fixes
from ray_lint.config import Settings
from ray_lint.results import FileResult
from ray_lint.source import SourceError, read_bytes
from ray_lint.verify.cluster import Cluster, TaskFailed

BATCH_BYTES = 1 << 20  # about a megabyte of source per task: big enough to hide a task's overhead


Batch = list[tuple[str, bytes, Settings, RunOptions]]


def lint_batch(version: str, batch: Batch) -> tuple[str, list[FileResult]]:
    """Runs on the cluster. Returns this node's ray-lint version so the driver can refuse a mismatch."""
    if version != __version__:
        return __version__, []
    return __version__, [lint_data(data, Path(path), settings, options) for path, data, settings, options in batch]


class RayExecutor:
    """Lints on the cluster at `address`, or on a local one started (and stopped) for the run."""

    def __init__(self, address: str | None = None) -> None:
        if importlib.util.find_spec("ray") is None or importlib.util.find_spec("psutil") is None:
            raise ExecutorError("--executor ray needs Ray: install ray-lint with its verify extra, `pip install '/path/to/ray-lint[verify]'`")
        self.address = address

    def __call__(self, tasks: list[Task]) -> Iterator[FileResult]:
        if not tasks:
            return
        unreadable: dict[int, FileResult] = {}
        batches: list[tuple[list[int], Batch]] = []
        size = 0
        for index, task in enumerate(tasks):
            try:
                data = read_bytes(task.path)
            except SourceError:  # reported as on one machine
                unreadable[index] = lint_file(task.path, task.settings, task.options)
                continue
            if not batches or size + len(data) > BATCH_BYTES:  # empty files too need a batch to join
                batches.append(([], []))
                size = 0
            size += len(data)
            batches[-1][0].append(index)
            batches[-1][1].append((str(task.path), data, task.settings, replace(task.options, write=False)))
        linted = dict(unreadable)
        answers = self._run([batch for _, batch in batches]) if batches else []  # no cluster when nothing is readable
        for (indices, _), results in zip(batches, answers):
            linted.update(zip(indices, results))
        for index, task in enumerate(tasks):
            result = linted[index]
            if task.options.write and index not in unreadable:
                write_fixes(task.path, result)
            yield result

    def _run(self, batches: list[Batch]) -> list[list[FileResult]]:
        try:
            cluster = Cluster.start(address=self.address)
        except Exception as error:
            raise ExecutorError(f"cannot start or reach a Ray cluster: {type(error).__name__}: {error}") from None
        try:
            answers = cluster.run_tasks(lint_batch, [(__version__, batch) for batch in batches])
        except TaskFailed as error:
            raise ExecutorError(f"linting failed on the cluster (is ray-lint {__version__} installed on every node?): {error}") from None
        finally:
            cluster.stop()
        for version, _ in answers:
            if version != __version__:
                raise ExecutorError(f"the cluster runs ray-lint {version}, this is {__version__}; install the same version")
        return [results for _, results in answers]
