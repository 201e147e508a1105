"""A rollout-and-train loop that fetches intermediate results only to pass them on (RAY004 unnecessary-get).

Reported: a `ray.get` whose value goes nowhere but into other `.remote(...)` calls (a task, an actor
method, an actor constructor), bound to a name or written inline. Silent: values that are also
inspected, logged, transformed, returned or stored; lists of refs; a get with a timeout or inside a
`try` that handles the producer's failure; a name read again at the top of the next iteration.
"""

import logging

import numpy as np
import ray

logger = logging.getLogger(__name__)


@ray.remote
def generate_rollout(policy_seed: int, steps: int) -> np.ndarray:
    rng = np.random.default_rng(policy_seed)
    return rng.normal(size=(steps, 64))


@ray.remote
def compute_advantages(rollout: np.ndarray, gamma: float = 0.99) -> np.ndarray:
    discounts = gamma ** np.arange(len(rollout))
    return rollout * discounts[:, None]


@ray.remote
def load_config(path: str) -> dict:
    return {"path": path, "lr": 3e-4, "batch": 256}


@ray.remote
class Learner:
    def __init__(self, config: dict):
        self.config = config
        self.weights = np.zeros(64)

    def update(self, advantages: np.ndarray) -> float:
        self.weights += self.config["lr"] * advantages.mean(axis=0)
        return float(np.abs(self.weights).sum())

    def get_weights(self) -> np.ndarray:
        return self.weights


@ray.remote
class RolloutWorker:
    def __init__(self, seed: int):
        self.seed = seed
        self.weights = None

    def set_weights(self, weights: np.ndarray) -> None:
        self.weights = weights

    def sample(self, steps: int) -> np.ndarray:
        return np.random.default_rng(self.seed).normal(size=(steps, 64))


def build(config_path: str, num_workers: int):
    config = ray.get(load_config.remote(config_path))  # expect: RAY004
    learner = Learner.remote(config)
    workers = [RolloutWorker.remote(seed) for seed in range(num_workers)]
    return learner, workers


def broadcast(learner, workers) -> None:
    weights = ray.get(learner.get_weights.remote())  # expect: RAY004
    ray.get([w.set_weights.remote(weights) for w in workers])


def train_step(learner, seed: int) -> float:
    rollout = ray.get(generate_rollout.remote(seed, 1000))  # expect: RAY004
    advantages = compute_advantages.remote(rollout)
    return ray.get(learner.update.remote(advantages))


def train_step_inline(learner, seed: int) -> float:
    advantages = compute_advantages.remote(ray.get(generate_rollout.remote(seed, 500)))  # expect: RAY004
    return ray.get(learner.update.remote(advantages))


def checked_step(learner, seed: int) -> float:
    rollout = ray.get(generate_rollout.remote(seed, 1000))  # fine: inspected before it is passed on
    if not np.isfinite(rollout).all():
        logger.warning("rollout %d has NaNs", seed)
        return float("nan")
    return ray.get(learner.update.remote(compute_advantages.remote(rollout)))


def scaled_step(learner, seed: int, scale: float) -> float:
    rollout = ray.get(generate_rollout.remote(seed, 1000))  # fine: transformed locally first
    return ray.get(learner.update.remote(rollout * scale))


def guarded_step(learner, seed: int) -> float:
    try:
        rollout = ray.get(generate_rollout.remote(seed, 1000))  # fine: the failure is handled here
    except ray.exceptions.RayTaskError:
        logger.exception("rollout %d failed", seed)
        rollout = np.zeros((1000, 64))
    return ray.get(learner.update.remote(compute_advantages.remote(rollout)))


def bounded_step(learner, seed: int) -> float:
    rollout = ray.get(generate_rollout.remote(seed, 1000), timeout=60)  # fine: fail fast here
    return ray.get(learner.update.remote(rollout))


def batched_step(learner, seeds: list[int]) -> float:
    rollouts = ray.get([generate_rollout.remote(s, 200) for s in seeds])  # fine: a list of values
    return ray.get(learner.update.remote(np.concatenate(rollouts)))


def grow_until_long(learner, seed: int) -> None:
    previous = None
    while previous is None or len(previous) < 1000:
        steps = 100 if previous is None else 2 * len(previous)
        previous = ray.get(generate_rollout.remote(seed, steps))  # fine: read at the next iteration's top
        learner.update.remote(previous)


def main() -> None:
    ray.init()
    learner, workers = build("ppo.yaml", num_workers=4)
    broadcast(learner, workers)
    logger.info("loss: %.3f", train_step(learner, seed=0))
    grow_until_long(learner, seed=1)


if __name__ == "__main__":
    main()
