"""Ray initialized once, by the entry point, and reused by the sweep: ray-lint reports nothing here."""

import time

import ray


@ray.remote
def train(lr: float) -> float:
    time.sleep(0.1)  # stands for a training run
    return 1.0 - lr


def sweep(learning_rates: list[float]) -> list[float]:
    if not ray.is_initialized():
        ray.init(num_cpus=2)
    return ray.get([train.remote(lr) for lr in learning_rates])


if __name__ == "__main__":
    ray.init(namespace="sweep")
    print(ray.get(train.remote(0.5)))
    print(sweep([0.1, 0.01]))
