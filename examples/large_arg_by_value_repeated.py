"""One large array passed by value to every task: `ray-lint check examples/` reports each RAY030
below, and `ray-lint verify examples/large_arg_by_value_repeated.py` times the copies against `ray.put`."""

import numpy as np
import ray


@ray.remote
def score(weights: np.ndarray, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return float(weights[rng.integers(0, len(weights), 100)].sum())


@ray.remote(num_cpus=1)
class Evaluator:
    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights

    def evaluate(self, row: int) -> float:
        return float(self.weights[row].mean())


def score_seeds(n: int) -> list[float]:
    weights = np.random.rand(2000, 2000)  # 32 MB
    return ray.get([score.remote(weights, seed) for seed in range(n)])  # RAY030: 32 MB copied per task


def start_evaluators(n: int) -> list:
    table = np.ones((1000, 2000))  # 16 MB
    evaluators = []
    for _ in range(n):
        evaluators.append(Evaluator.remote(table))  # RAY030: a new copy for each actor
    return evaluators


if __name__ == "__main__":
    ray.init()
    print(score_seeds(8))
    evaluators = start_evaluators(2)
    print(ray.get([e.evaluate.remote(0) for e in evaluators]))
