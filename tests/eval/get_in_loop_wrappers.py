"""Vectorized RL environments behind plain wrapper objects (RAY001 get-in-loop, one call away).

`EnvWorker` is a plain class that holds one `EnvActor` and hides the `ray.get` in gym-like methods
(`reset`, `step`, `get_attr`). A loop or comprehension that calls such a method on each worker of
`self.workers = [EnvWorker(i) for i in range(n)]` steps the environments one at a time, exactly as a
`ray.get` written in the loop would: RAY001 reports the call in the loop, whether it iterates the
list directly, through `enumerate` or `zip`, or indexes `self.workers[i]`. The same goes for a
module-level helper that submits an evaluation episode and waits for it.

Traps (silent): a loop over one wrapper object (its calls queue on one actor anyway), wrapper
methods that read a small fact (a port, a rank), a wrapper method that returns the ref (gathered
with one `ray.get` after the loop), and, through the module helpers, a training loop where each call
needs the previous weights and a search that breaks at the first failing seed.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import ray

logger = logging.getLogger(__name__)

OBS_DIM = 8
BASE_PORT = 6000


@ray.remote
class EnvActor:
    def __init__(self, index: int, seed: int = 0) -> None:
        self.index = index
        self.rng = np.random.default_rng(seed + index)
        self.state = np.zeros(OBS_DIM)
        self.horizon = 500

    def reset(self, seed: int) -> np.ndarray:
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.normal(size=OBS_DIM)
        return self.state

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        self.state = np.roll(self.state, action) + self.rng.normal(scale=0.1, size=OBS_DIM)
        reward = float(-np.abs(self.state).sum())
        return self.state, reward, reward > -1.0

    def get_attr(self, key: str) -> Any:
        return getattr(self, key)

    def get_port(self) -> int:
        return BASE_PORT + self.index

    def get_rank(self) -> int:
        return self.index


@ray.remote
def run_episode(weights: np.ndarray, seed: int, horizon: int) -> float:
    rng = np.random.default_rng(seed)
    state, total = rng.normal(size=OBS_DIM), 0.0
    for _ in range(horizon):
        action = int(np.argmax(weights @ state)) % OBS_DIM
        state = np.roll(state, action) + rng.normal(scale=0.1, size=OBS_DIM)
        total -= float(np.abs(state).sum())
    return total


@ray.remote
def improve_policy(weights: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    candidate = weights + rng.normal(scale=0.01, size=weights.shape)
    return candidate / max(float(np.linalg.norm(candidate)), 1e-8)


class EnvWorker:
    """One environment in its own actor, behind a synchronous, gym-like interface."""

    def __init__(self, index: int, seed: int = 0) -> None:
        self.index = index
        self.actor = EnvActor.remote(index, seed)

    def reset(self, seed: int) -> np.ndarray:
        return ray.get(self.actor.reset.remote(seed))

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        return ray.get(self.actor.step.remote(action))

    def get_attr(self, key: str) -> Any:
        return ray.get(self.actor.get_attr.remote(key))

    def get_port(self) -> int:
        return ray.get(self.actor.get_port.remote())

    def rank(self) -> int:
        return ray.get(self.actor.get_rank.remote())

    def step_async(self, action: int) -> ray.ObjectRef:
        return self.actor.step.remote(action)


def evaluate_seed(weights: np.ndarray, seed: int, horizon: int = 200) -> float:
    ref = run_episode.remote(weights, seed, horizon)
    return ray.get(ref)


def refine(weights: np.ndarray, seed: int) -> np.ndarray:
    return ray.get(improve_policy.remote(weights, seed))


class VecEnv:
    def __init__(self, num_envs: int, seed: int = 0) -> None:
        self.workers = [EnvWorker(i, seed) for i in range(num_envs)]

    def reset(self, seed: int) -> np.ndarray:
        return np.stack([w.reset(seed + i) for i, w in enumerate(self.workers)])  # expect: RAY001

    def step(self, actions: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        results = []
        for w, action in zip(self.workers, actions):
            results.append(w.step(action))  # expect: RAY001
        obs, rewards, dones = zip(*results)
        return np.stack(obs), np.array(rewards), np.array(dones)

    def step_indexed(self, actions: np.ndarray) -> list[tuple[np.ndarray, float, bool]]:
        return [self.workers[i].step(int(actions[i])) for i in range(len(self.workers))]  # expect: RAY001

    def get_attr(self, key: str) -> list[Any]:
        values = []
        for w in self.workers:
            values.append(w.get_attr(key))  # expect: RAY001
        return values

    def horizons(self) -> dict[int, int]:
        horizons = {}
        for i, w in enumerate(self.workers):
            horizons[i] = w.get_attr("horizon")  # expect: RAY001
        return horizons

    def ports(self) -> list[int]:
        return [w.get_port() for w in self.workers]  # fine: a small fact per worker

    def ranks(self) -> list[int]:
        return [w.rank() for w in self.workers]  # fine: the actor method reads a rank

    def step_parallel(self, actions: list[int]) -> list[tuple[np.ndarray, float, bool]]:
        refs = [w.step_async(a) for w, a in zip(self.workers, actions)]  # fine: returns the ref
        return ray.get(refs)



def replay(actions: list[int], seed: int) -> float:
    worker = EnvWorker(0, seed)
    worker.reset(seed)
    total = 0.0
    for action in actions:
        _, reward, _ = worker.step(action)  # fine: one wrapper, one actor
        total += reward
    return total


def sweep(weights: np.ndarray, seeds: list[int]) -> dict[int, float]:
    returns = {}
    for seed in seeds:
        returns[seed] = evaluate_seed(weights, seed)  # expect: RAY001
    logger.info("mean return %.2f", np.mean(list(returns.values())))
    return returns


def mean_return(weights: np.ndarray, seeds: list[int]) -> float:
    return float(np.mean([evaluate_seed(weights, s, horizon=500) for s in seeds]))  # expect: RAY001


def train(weights: np.ndarray, seeds: list[int]) -> np.ndarray:
    for seed in seeds:
        weights = refine(weights, seed)  # fine: each step starts from the previous weights
    return weights


def first_failing_seed(weights: np.ndarray, seeds: list[int], floor: float) -> int | None:
    failing = None
    for seed in seeds:
        if evaluate_seed(weights, seed) < floor:  # fine: stops at the first failing seed
            failing = seed
            break
    return failing


if __name__ == "__main__":
    ray.init()
    env = VecEnv(num_envs=4)
    env.reset(seed=0)
    logger.info("ports %s, step %s", env.ports(), env.step_parallel([1, 2, 3, 4]))
    logger.info("sweep %s", sweep(np.eye(OBS_DIM), list(range(8))))
