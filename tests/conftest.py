"""Shared helpers for the end-to-end tests: every test drives the real `ray-lint` command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ray_lint.verify.cluster import Cluster

# Variables that change how the command prints (colours, width, default format); the tests set
# the ones they need explicitly.
_UNSET = ("RAY_LINT_OUTPUT_FORMAT", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def run() -> Runner:
    """`run(args, cwd, stdin=None, env=None, program=None)`: run `python -m ray_lint ARGS` (or
    `program ARGS`) in `cwd` and return the CompletedProcess, output as text."""

    def _run(
        args: Sequence[str | os.PathLike[str]],
        cwd: Path,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        program: Sequence[str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        environment = {key: value for key, value in os.environ.items() if key not in _UNSET}
        environment["PYTHONIOENCODING"] = "utf-8"
        environment.update(env or {})
        command = list(program) if program is not None else [sys.executable, "-m", "ray_lint"]
        return subprocess.run(
            [*command, *map(str, args)],
            cwd=cwd,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=environment,
            timeout=60,
        )

    return _run


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The test session's one local Ray cluster (starting one costs seconds), started and stopped by
    the verifier's own `Cluster`."""
    started = Cluster.start(num_cpus=2)
    yield started
    started.stop()
