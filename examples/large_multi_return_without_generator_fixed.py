"""The same values yielded one by one: Ray stores each as it is yielded, so the worker need not hold
them all at once, and the callers are unchanged. ray-lint reports nothing here."""

import numpy as np
import ray


@ray.remote(num_returns=4)
def make_shards(seed: int):
    np.random.seed(seed)
    for _ in range(4):
        yield np.random.rand(2_500_000)


@ray.remote
class Loader:
    @ray.method(num_returns=3)
    def load(self, scale: float):
        yield np.full((1000, 2500), scale, dtype=np.float64)
        yield np.zeros((1000, 2500))
        yield np.full((1000, 2500), 0.5)


if __name__ == "__main__":
    ray.init()
    shards = make_shards.remote(0)
    print([float(s.mean()) for s in ray.get(shards)])
    loader = Loader.remote()
    features, labels, weights = loader.load.remote(2.0)
    print(ray.get(features).shape, ray.get(weights).mean())
