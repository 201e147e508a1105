"""The same guards with `ray.is_initialized()` called: they test whether Ray runs, and ray-lint
reports nothing here."""

import time

import ray


def connect(num_cpus: int = 2) -> None:
    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus, namespace="reports")


def disconnect() -> None:
    if ray.is_initialized():
        ray.shutdown()


@ray.remote
def summarize(rows: list[int]) -> int:
    time.sleep(0.1)  # stands for the real aggregation
    return sum(rows)


if __name__ == "__main__":
    connect()  # the script's ray.init(), behind the guard
    print(ray.get([summarize.remote([1, 2, 3]), summarize.remote([4, 5])]))
    disconnect()
