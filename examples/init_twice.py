"""`ray.init` called while Ray is already running: `ray-lint check examples/` reports each RAY090
below, and `ray-lint verify examples/init_twice.py` calls Ray's own `ray.init` a second time."""

import time

import ray


@ray.remote
def train(lr: float) -> float:
    time.sleep(0.1)  # stands for a training run
    return 1.0 - lr


def sweep(learning_rates: list[float]) -> list[float]:
    refs = []
    for lr in learning_rates:
        ray.init(num_cpus=2)  # RAY090: the second iteration calls it again, with Ray still running
        refs.append(train.remote(lr))
    return ray.get(refs)


if __name__ == "__main__":
    ray.init()
    print(ray.get(train.remote(0.5)))
    ray.init(namespace="sweep")  # RAY090: Ray is still initialized from the call above
    print(sweep([0.1, 0.01]))
