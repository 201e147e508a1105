"""Keyword options misspelt as `resources=` keys: `ray-lint check examples/` reports each RAY081 below, and
`ray-lint verify examples/resource_name_typo.py` shows the work pending (or refused), and the keyword form running."""

import time

import ray
from ray.util.placement_group import placement_group


@ray.remote(resources={"num_gpus": 1})  # RAY081: a custom resource no node has: the task never starts
def fine_tune(shard: int) -> float:
    time.sleep(0.2)  # stands in for a training step on the GPU
    return 1.0 / (shard + 1)


@ray.remote
def load(path: str) -> int:
    return len(path)


def run(shards: int) -> tuple[list[float], int]:
    pg = placement_group([{"cpu": 1}])  # RAY081: the bundle asks for "cpu", not "CPU": never placed
    ray.get(pg.ready(), timeout=2)
    losses = ray.get([fine_tune.remote(i) for i in range(shards)], timeout=2)
    size = ray.get(load.options(resources={"memory": 200_000_000}).remote("data.bin"))  # RAY081: refused
    return losses, size


if __name__ == "__main__":
    ray.init()
    print(run(2))
