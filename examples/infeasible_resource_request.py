"""Requests that the one node `ray.init(num_cpus=2, ...)` starts can never meet: `ray-lint check examples/` reports
each RAY050 below, and `ray-lint verify examples/infeasible_resource_request.py` shows such work stay pending."""

import time

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_cpus=4)  # RAY050: the node has 2 CPUs, so this task waits forever
def simulate(seed: int) -> float:
    time.sleep(0.1)  # stands in for a simulation step
    return seed * 0.5


@ray.remote(resources={"licence": 2})  # RAY050: ray.init declares one licence
def solve(problem: str) -> int:
    return len(problem)


def run() -> tuple[list[float], int]:
    pg = placement_group([{"CPU": 0.5}, {"CPU": 0.5}], strategy="STRICT_SPREAD")  # RAY050: one bundle per node
    ray.get(pg.ready(), timeout=2)
    results = ray.get([simulate.remote(seed) for seed in range(4)], timeout=2)
    return results, ray.get(solve.remote("lp-42"), timeout=2)


if __name__ == "__main__":
    ray.init(num_cpus=2, resources={"licence": 1})
    print(run())
