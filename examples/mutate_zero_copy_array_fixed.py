"""The same normalization on a copy of the argument: the task owns what it writes to, and
ray-lint reports nothing here."""

import time

import numpy as np
import ray


@ray.remote
def normalize(batch: np.ndarray) -> np.ndarray:
    time.sleep(0.1)  # stands for loading the batch's statistics
    centered = batch - batch.mean()  # a new array: the argument stays untouched
    return centered / (centered.std() + 1e-8)


def normalize_all(batches: list[np.ndarray]) -> list[np.ndarray]:
    return ray.get([normalize.remote(b) for b in batches])


if __name__ == "__main__":
    ray.init()
    rng = np.random.default_rng(0)
    out = normalize_all([rng.normal(5.0, 2.0, size=1000) for _ in range(4)])
    print([round(float(b.mean()), 6) for b in out])
