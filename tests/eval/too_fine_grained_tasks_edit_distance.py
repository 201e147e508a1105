"""Edit distance on a grid, a teaching example: one Ray task per cell, as in the course it comes from.

The shapes behind RAY020's recall misses: a task per cell of nested `range` loops, a task whose body
sleeps a few microseconds to "simulate work", and a loop over a list bound to a name. The traps: a
task that sleeps for real, one that writes to a file, and a grid small enough not to matter.
"""

from __future__ import annotations

import time

import ray

ROWS = 300
COLS = 300


@ray.remote
def cell_cost(a: str, b: str) -> int:
    return 0 if a == b else 1


@ray.remote
def simulated_step(x: int) -> int:
    time.sleep(1e-5)  # "simulate" work: 10 microseconds
    return 2 * x


@ray.remote
def throttled_step(x: int) -> int:
    time.sleep(0.05)  # a real pause, as a rate-limited API would impose
    return 2 * x


@ray.remote
def record(x: int) -> int:
    with open("/tmp/steps.log", "a") as log:
        log.write(f"{x}\n")
    return x


def cost_grid(left: str, right: str) -> list[list[ray.ObjectRef]]:
    grid = []
    for i in range(ROWS):
        row = []
        for j in range(COLS):
            row.append(cell_cost.remote(left[i % len(left)], right[j % len(right)]))  # expect: RAY020
        grid.append(row)
    return grid


def doubled(count: int) -> list[int]:
    numbers = list(range(20_000))
    refs = [simulated_step.remote(n) for n in numbers]  # expect: RAY020
    return ray.get(refs)


def throttled() -> list[int]:
    return ray.get([throttled_step.remote(n) for n in range(20_000)])


def logged() -> list[int]:
    return ray.get([record.remote(n) for n in range(20_000)])


def corner(left: str, right: str) -> list[int]:
    small = [cell_cost.remote(left[i], right[i]) for i in range(8)]
    return ray.get(small)


if __name__ == "__main__":
    ray.init()
    print(len(cost_grid("kitten", "sitting")), sum(doubled(10)), throttled()[:3], logged()[:3], corner("abcdefgh", "abcdefgh"))
