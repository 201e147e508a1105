"""The same scoring spread over several actors (or a task): ray-lint reports nothing here."""

import time

import ray
from ray.util import ActorPool


@ray.remote(num_cpus=1)
class Scorer:
    def __init__(self, weights: list[float]) -> None:
        self.weights = weights

    def score(self, features: list[float]) -> float:
        time.sleep(0.5)  # stands in for a model forward pass
        return sum(w * x for w, x in zip(self.weights, features))


@ray.remote(num_cpus=1)
class RunningTotal:
    def __init__(self) -> None:
        self.total = 0.0

    def add(self, value: float) -> float:
        self.total += value
        return self.total


WEIGHTS = [0.2, 0.5, 0.3]


def score_all(rows: list[list[float]], num_actors: int = 4) -> list[float]:
    pool = ActorPool([Scorer.remote(WEIGHTS) for _ in range(num_actors)])
    return list(pool.map(lambda actor, row: actor.score.remote(row), rows))  # results in input order


def score_by_id(rows: dict[str, list[float]], num_actors: int = 4) -> dict[str, float]:
    scorers = [Scorer.remote(WEIGHTS) for _ in range(num_actors)]
    refs = {row_id: scorers[i % num_actors].score.remote(row) for i, (row_id, row) in enumerate(rows.items())}
    return dict(zip(refs, ray.get(list(refs.values()))))


def running_totals(values: list[float]) -> list[float]:
    totals = RunningTotal.remote()
    return ray.get([totals.add.remote(v) for v in values])  # stateful: these calls must run in order


if __name__ == "__main__":
    ray.init()
    start = time.perf_counter()
    score_all([[1.0, 2.0, 3.0]] * 8)  # 8 x 0.5 s on four actors: about 1 s
    print(f"four actors: {time.perf_counter() - start:.1f} s")
