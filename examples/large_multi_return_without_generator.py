"""Tasks that build several large arrays and return them all at once: `ray-lint check examples/`
reports each RAY037 below, and `ray-lint verify examples/large_multi_return_without_generator.py`
measures the worker's heap against a generator."""

import numpy as np
import ray


@ray.remote(num_returns=4)
def make_shards(seed: int) -> list[np.ndarray]:
    np.random.seed(seed)
    return [np.random.rand(2_500_000) for _ in range(4)]  # RAY037: 4 x 20 MB in the heap at once


@ray.remote
class Loader:
    @ray.method(num_returns=3)
    def load(self, scale: float):
        features = np.full((1000, 2500), scale, dtype=np.float64)
        labels = np.zeros((1000, 2500))
        weights = np.full((1000, 2500), 0.5)
        return features, labels, weights  # RAY037: all three alive until the method returns


if __name__ == "__main__":
    ray.init()
    shards = make_shards.remote(0)
    print([float(s.mean()) for s in ray.get(shards)])
    loader = Loader.remote()
    features, labels, weights = loader.load.remote(2.0)
    print(ray.get(features).shape, ray.get(weights).mean())
