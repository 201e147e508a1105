"""`ray.get` called with arguments Ray rejects or mishandles: `ray-lint check examples/` reports each
RAY070 below, and `ray-lint verify examples/get_api_misuse.py` makes the same calls on small tasks."""

import time

import ray


@ray.remote
def load(path: str) -> int:
    time.sleep(0.1)  # stands for reading a shard
    return len(path)


@ray.remote
def shards(n: int):
    for i in range(n):
        yield i * 10


def load_pair(path_a: str, path_b: str) -> int:
    refs = (load.remote(path_a), load.remote(path_b))
    a, b = ray.get(refs)  # RAY070: a tuple, not a list
    return a + b


def load_with_limit(path: str) -> int:
    return ray.get(load.remote(path), 30)  # RAY070: `timeout` is keyword-only


def load_blocking(path: str) -> int:
    return ray.get(load.remote(path), timeout=-5)  # RAY070: only -1 means "no limit"; this aborts the driver


def all_shards(n: int) -> list[int]:
    return ray.get(shards.remote(n))  # RAY070: returns the ObjectRefGenerator itself


if __name__ == "__main__":
    ray.init()
    print(load_pair("a.csv", "bb.csv"), load_with_limit("c.csv"), load_blocking("d.csv"), all_shards(3))
