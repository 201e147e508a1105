"""The same sweep with the config finished before `ray.put`: the tasks read the value the driver
meant, and ray-lint reports nothing here."""

import time

import ray


@ray.remote
def train(config: dict, seed: int) -> float:
    time.sleep(0.1)  # stands for a short training run
    return config["lr"] * (seed + 1)


def sweep(seeds: list[int], warmup: bool) -> list[float]:
    config = {"lr": 0.1, "epochs": 3}
    if warmup:
        config["lr"] = 0.01
    config_ref = ray.put(config)
    return ray.get([train.remote(config_ref, seed) for seed in seeds])


if __name__ == "__main__":
    ray.init()
    print(sweep([0, 1, 2, 3], warmup=True))
