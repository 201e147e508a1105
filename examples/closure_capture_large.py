"""Remote code that reads a large module-level array: `ray-lint check examples/` reports each RAY031
below, and `ray-lint verify examples/closure_capture_large.py` times the export against a `ray.put` ref."""

import numpy as np
import ray

EMBEDDINGS = np.random.rand(5000, 512)  # about 20 MB
LABELS = np.zeros(3_000_000, dtype=np.int64)  # about 24 MB


@ray.remote
def nearest(query: np.ndarray) -> int:
    scores = EMBEDDINGS @ query  # RAY031: the whole array is pickled into `nearest`
    return int(scores.argmax())


@ray.remote(num_cpus=1)
class LabelLookup:
    def label(self, index: int) -> int:
        return int(LABELS[index])  # RAY031: and into the actor class


def search(queries: list[np.ndarray]) -> list[int]:
    return ray.get([nearest.remote(q) for q in queries])


if __name__ == "__main__":
    ray.init()
    print(search([np.random.rand(512) for _ in range(4)]))
    lookup = LabelLookup.remote()
    print(ray.get(lookup.label.remote(7)))
