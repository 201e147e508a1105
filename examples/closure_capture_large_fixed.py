"""The large arrays stored with `ray.put` and handed to the task and the actor as arguments: ray-lint
reports nothing here."""

import numpy as np
import ray


@ray.remote
def nearest(embeddings: np.ndarray, query: np.ndarray) -> int:
    scores = embeddings @ query
    return int(scores.argmax())


@ray.remote(num_cpus=1)
class LabelLookup:
    def __init__(self, labels: np.ndarray) -> None:
        self.labels = labels

    def label(self, index: int) -> int:
        return int(self.labels[index])


def search(embeddings_ref: ray.ObjectRef, queries: list[np.ndarray]) -> list[int]:
    return ray.get([nearest.remote(embeddings_ref, q) for q in queries])


if __name__ == "__main__":
    ray.init()
    embeddings_ref = ray.put(np.random.rand(5000, 512))
    print(search(embeddings_ref, [np.random.rand(512) for _ in range(4)]))
    lookup = LabelLookup.remote(ray.put(np.zeros(3_000_000, dtype=np.int64)))
    print(ray.get(lookup.label.remote(7)))
