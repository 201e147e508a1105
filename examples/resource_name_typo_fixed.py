"""The same work with the keyword options, and a bundle keyed "CPU": ray-lint reports nothing here."""

import time

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_gpus=1)
def fine_tune(shard: int) -> float:
    time.sleep(0.2)  # stands in for a training step on the GPU
    return 1.0 / (shard + 1)


@ray.remote
def load(path: str) -> int:
    return len(path)


def run(shards: int) -> tuple[list[float], int]:
    pg = placement_group([{"CPU": 1}])
    ray.get(pg.ready(), timeout=2)
    losses = ray.get([fine_tune.remote(i) for i in range(shards)], timeout=2)
    size = ray.get(load.options(memory=200_000_000).remote("data.bin"))
    return losses, size


if __name__ == "__main__":
    ray.init()
    print(run(2))
