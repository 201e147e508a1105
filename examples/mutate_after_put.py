"""An object changed after `ray.put`: `ray-lint check examples/` reports the RAY083 below, and
`ray-lint verify examples/mutate_after_put.py` replays it in a model.

`ray.put` copies the object into the object store: the ref names that snapshot, and a change the
driver makes afterwards never reaches the tasks that get the ref.
"""

import time

import ray


@ray.remote
def train(config: dict, seed: int) -> float:
    time.sleep(0.1)  # stands for a short training run
    return config["lr"] * (seed + 1)


def sweep(seeds: list[int], warmup: bool) -> list[float]:
    config = {"lr": 0.1, "epochs": 3}
    config_ref = ray.put(config)
    if warmup:
        config["lr"] = 0.01  # RAY083: the store still holds lr=0.1
    return ray.get([train.remote(config_ref, seed) for seed in seeds])


if __name__ == "__main__":
    ray.init()
    print(sweep([0, 1, 2, 3], warmup=True))
