"""Independent calls queued on one actor: `ray-lint check examples/` reports each RAY010 below."""

import time

import ray


@ray.remote(num_cpus=1)
class Scorer:
    def __init__(self, weights: list[float]) -> None:
        self.weights = weights

    def score(self, features: list[float]) -> float:
        time.sleep(0.5)  # stands in for a model forward pass
        return sum(w * x for w, x in zip(self.weights, features))


WEIGHTS = [0.2, 0.5, 0.3]


def score_all(rows: list[list[float]]) -> list[float]:
    scorer = Scorer.remote(WEIGHTS)
    refs = [scorer.score.remote(row) for row in rows]  # RAY010: one actor runs the calls one at a time
    return ray.get(refs)


def score_by_id(rows: dict[str, list[float]]) -> dict[str, float]:
    scorer = Scorer.remote(WEIGHTS)
    refs = {}
    for row_id, row in rows.items():
        refs[row_id] = scorer.score.remote(row)  # RAY010: the same queue, written as a loop
    return dict(zip(refs, ray.get(list(refs.values()))))


if __name__ == "__main__":
    ray.init()
    start = time.perf_counter()
    score_all([[1.0, 2.0, 3.0]] * 8)  # 8 x 0.5 s on one actor: about 4 s
    print(f"one actor: {time.perf_counter() - start:.1f} s")
