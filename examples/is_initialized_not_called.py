"""`ray.is_initialized` tested without calling it: `ray-lint check examples/` reports each RAY080
below, and `ray-lint verify examples/is_initialized_not_called.py` replays the guard in a new process.

A function object is always true: the guard never calls `ray.init(...)` with its arguments, so the
first `.remote()` starts a default local cluster instead, and the teardown always runs.
"""

import time

import ray


def connect(num_cpus: int = 2) -> None:
    if not ray.is_initialized:  # RAY080: always true, so ray.init below never runs
        ray.init(num_cpus=num_cpus, namespace="reports")


def disconnect() -> None:
    if ray.is_initialized:  # RAY080: always true, whether or not Ray runs
        ray.shutdown()


@ray.remote
def summarize(rows: list[int]) -> int:
    time.sleep(0.1)  # stands for the real aggregation
    return sum(rows)


if __name__ == "__main__":
    connect()  # the script's ray.init(), behind the guard
    print(ray.get([summarize.remote([1, 2, 3]), summarize.remote([4, 5])]))
    disconnect()
