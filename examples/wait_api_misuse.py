"""`ray.wait` called with arguments Ray rejects: `ray-lint check examples/` reports each RAY069
below, and `ray-lint verify examples/wait_api_misuse.py` makes the same calls and shows Ray's errors."""

import time

import ray


@ray.remote
def preprocess(batch: list[int]) -> list[int]:
    time.sleep(0.1)  # stands for real work
    return [x * 2 for x in batch]


def first_ready(batches: list[list[int]]) -> list[int]:
    a = preprocess.remote(batches[0])
    b = preprocess.remote(batches[1])
    done, _ = ray.wait([a, b], num_returns=3)  # RAY069: more than the 2 refs in the list
    return ray.get(done[0])


def poll(batch: list[int]) -> bool:
    ref = preprocess.remote(batch)
    ready, _ = ray.wait(ref, timeout=1)  # RAY069: a single ref, not a list
    return bool(ready)


def wait_all(batches: list[list[int]]) -> int:
    refs = [preprocess.remote(batch) for batch in batches]
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=-1)  # RAY069: -1 is not "forever" here
    return len(done)


if __name__ == "__main__":
    ray.init()
    batches = [[1, 2], [3, 4], [5, 6]]
    print(first_ready(batches), poll(batches[0]), wait_all(batches))
