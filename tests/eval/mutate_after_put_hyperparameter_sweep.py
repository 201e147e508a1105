"""Hyperparameter sweep: a shared dataset and a base config are put once, trials run as tasks."""

import copy
import random

import numpy as np
import ray


@ray.remote
def run_trial(config: dict, data: np.ndarray, seed: int) -> float:
    rng = np.random.default_rng(seed)
    sample = data[rng.integers(0, len(data), size=256)]
    return float(sample.mean() * config["lr"])


@ray.remote
class Leaderboard:
    def __init__(self) -> None:
        self.entries = []

    def submit(self, config: dict, score: float) -> None:
        self.entries.append((score, config))

    def best(self) -> tuple:
        return max(self.entries, key=lambda entry: entry[0])


def load_dataset(rows: int) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(rows, 32))


def sweep(base: dict, data: np.ndarray, seeds: list) -> list:
    data_ref = ray.put(data)
    base_ref = ray.put(base)
    base["warmup_steps"] = 500  # expect: RAY083
    futures = [run_trial.remote(base_ref, data_ref, seed) for seed in seeds]
    return ray.get(futures)


def sweep_variants(base: dict, data: np.ndarray, seeds: list) -> dict:
    data_ref = ray.put(data)
    variants = {}
    for lr in (1e-2, 1e-3, 1e-4):
        base["lr"] = lr
        config_ref = ray.put(base)  # a fresh snapshot after each change
        variants[lr] = [run_trial.remote(config_ref, data_ref, seed) for seed in seeds]
    return {lr: ray.get(refs) for lr, refs in variants.items()}


def report(board, base: dict, scores: list) -> None:
    config_ref = ray.put(base)
    board.submit.remote(config_ref, max(scores))
    base.clear()  # the board got its copy already


def staged(base: dict, data: np.ndarray) -> list:
    data_ref = ray.put(data)
    stage_one = ray.put(base)
    base["lr"] = base["lr"] / 10
    stage_two = ray.put(base)
    first = run_trial.remote(stage_one, data_ref, 0)
    second = run_trial.remote(stage_two, data_ref, 0)
    return ray.get([first, second])


def random_search(space: dict, data: np.ndarray, trials: int) -> list:
    data_ref = ray.put(data)
    picked = {}
    picked_ref = ray.put(picked)
    for name, choices in space.items():
        picked.setdefault(name, random.choice(choices))  # expect: RAY083
    refs = [run_trial.remote(picked_ref, data_ref, seed) for seed in range(trials)]
    return ray.get(refs)


def main() -> None:
    data = load_dataset(10_000)
    base = {"lr": 1e-3, "batch_size": 64}
    board = Leaderboard.remote()
    scores = sweep(copy.deepcopy(base), data, seeds=list(range(8)))
    report(board, copy.deepcopy(base), scores)
    print(sweep_variants(copy.deepcopy(base), data, seeds=[0, 1]))
    print(staged(copy.deepcopy(base), data))
    print(random_search({"lr": [1e-2, 1e-3], "batch_size": [32, 64]}, data, trials=4))
    print(ray.get(board.best.remote()))


if __name__ == "__main__":
    ray.init()
    main()
