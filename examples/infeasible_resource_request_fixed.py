"""The same work asking for no more than the node has: ray-lint reports nothing here."""

import time

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_cpus=1)
def simulate(seed: int) -> float:
    time.sleep(0.1)  # stands in for a simulation step
    return seed * 0.5


@ray.remote(resources={"licence": 1})
def solve(problem: str) -> int:
    return len(problem)


def run() -> tuple[list[float], int]:
    pg = placement_group([{"CPU": 0.5}, {"CPU": 0.5}], strategy="PACK")
    ray.get(pg.ready(), timeout=2)
    results = ray.get([simulate.remote(seed) for seed in range(4)], timeout=2)
    return results, ray.get(solve.remote("lp-42"), timeout=2)


if __name__ == "__main__":
    ray.init(num_cpus=2, resources={"licence": 1})
    print(run())
