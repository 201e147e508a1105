"""The same gets with arguments Ray accepts: ray-lint reports nothing here."""

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
    refs = [load.remote(path_a), load.remote(path_b)]
    a, b = ray.get(refs)
    return a + b


def load_with_limit(path: str) -> int:
    return ray.get(load.remote(path), timeout=30)


def load_blocking(path: str) -> int:
    return ray.get(load.remote(path), timeout=None)


def all_shards(n: int) -> list[int]:
    return ray.get(list(shards.remote(n)))


if __name__ == "__main__":
    ray.init()
    print(load_pair("a.csv", "bb.csv"), load_with_limit("c.csv"), load_blocking("d.csv"), all_shards(3))
