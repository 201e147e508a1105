"""The large arrays stored once with `ray.put` and passed by reference: ray-lint reports nothing here."""

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
    weights_ref = ray.put(np.random.rand(2000, 2000))  # one copy in the object store, read by every task
    return ray.get([score.remote(weights_ref, seed) for seed in range(n)])


def start_evaluators(n: int) -> list:
    table_ref = ray.put(np.ones((1000, 2000)))
    return [Evaluator.remote(table_ref) for _ in range(n)]


if __name__ == "__main__":
    ray.init()
    print(score_seeds(8))
    evaluators = start_evaluators(2)
    print(ray.get([e.evaluate.remote(0) for e in evaluators]))
