"""A numpy array written in place after it came through Ray: `ray-lint check examples/` reports
the RAY036 below, and `ray-lint verify examples/mutate_zero_copy_array.py` runs the script as
written and with the fix (it needs numpy).

Ray hands a task its numpy arguments as zero-copy, read-only views of the object store, so an
in-place write raises `ValueError: assignment destination is read-only`.
"""

import time

import numpy as np
import ray


@ray.remote
def normalize(batch: np.ndarray) -> np.ndarray:
    time.sleep(0.1)  # stands for loading the batch's statistics
    batch -= batch.mean()  # RAY036: the argument is a read-only view of the object store
    return batch / (batch.std() + 1e-8)


def normalize_all(batches: list[np.ndarray]) -> list[np.ndarray]:
    return ray.get([normalize.remote(b) for b in batches])


if __name__ == "__main__":
    ray.init()
    rng = np.random.default_rng(0)
    out = normalize_all([rng.normal(5.0, 2.0, size=1000) for _ in range(4)])
    print([round(float(b.mean()), 6) for b in out])
