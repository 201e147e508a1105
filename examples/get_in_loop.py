"""Ray code with `ray.get` in loops: `ray-lint check examples/` reports each RAY001 below."""

import ray
from ray import get as fetch


@ray.remote
def square(x: int) -> int:
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
        out[item] = ray.get(ref)  # RAY001: an actor call waited on in the same iteration
    return out
