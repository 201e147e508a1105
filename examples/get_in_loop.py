"""Ray code with `ray.get` in loops: `ray-lint check examples/` reports each RAY001 below, and
`ray-lint verify examples/get_in_loop.py` runs it, as written and fixed, and measures the cost."""

import time

import ray
from ray import get as fetch


@ray.remote
def square(x: int) -> int:
    time.sleep(0.25)  # stands for real work
    return x * x


@ray.remote
class Scorer:
    def score(self, item: str) -> int:
        return len(item)


def sequential_squares(n: int) -> list[int]:
    results = []
    for i in range(n):
        results.append(ray.get(square.remote(i)))  # RAY001: one task at a time
    return results


def total(n: int) -> int:
    return sum(fetch(square.options(num_cpus=1).remote(i)) for i in range(n))  # RAY001, through an alias


def scores(items: list[str]) -> dict[str, int]:
    scorer = Scorer.remote()
    out = {}
    for item in items:
        ref = scorer.score.remote(item)
        out[item] = ray.get(ref)  # RAY010: one stateless actor serializes these calls anyway
    return out


if __name__ == "__main__":
    ray.init()
    print(sequential_squares(6))
    print(total(6))
    print(scores(["a", "bb", "ccc"]))
