"""Data-quality checks that hide the blocking `ray.get` in helper functions (RAY001 get-in-loop).

A loop or comprehension that calls a module-level helper whose body submits a task and waits for
it runs the tasks one at a time, just like a `ray.get` written in the loop: RAY001 reports the
helper call in the loop, never the helper, and a helper of such a helper too (up to three calls
deep), naming the function that holds the get. Not followed: methods called on `self`, async
helpers, nested functions, helpers imported from another module, helpers that only submit or only
wait on a ref they are given, and helpers that wait inside their own loop (reported there). Also
silent: a helper whose result feeds the next call (one call away or two), a first-hit search and a
polling loop.
"""

import logging
import sys
import time

import numpy as np
import ray
from ray import get as fetch

from quality.remote_checks import score_remotely

logger = logging.getLogger(__name__)


@ray.remote
def score_shard(path: str, threshold: float) -> float:
    values = np.load(path)
    return float(np.mean(values > threshold))


@ray.remote
def fit_step(state: dict, batch: np.ndarray) -> dict:
    count = state["count"] + len(batch)
    mean = state["mean"] + (batch.sum() - len(batch) * state["mean"]) / count
    return {"count": count, "mean": mean}


@ray.remote
def probe(host: str) -> bool:
    return not host.startswith("down-")


def score_one(path: str, threshold: float = 0.5) -> float:
    # fine: the helper has no loop; the loops that call it are reported
    ref = score_shard.remote(path, threshold)
    logger.debug("scoring %s", path)
    return ray.get(ref)


def score_one_retrying(path: str) -> float:
    try:
        return ray.get(score_shard.options(max_retries=5).remote(path, 0.5))
    except ray.exceptions.RayTaskError:
        logger.warning("giving up on %s", path)
        return float("nan")


def is_up(host: str) -> bool:
    return fetch(probe.remote(host))


def fit_one(state: dict, batch: np.ndarray) -> dict:
    return ray.get(fit_step.remote(state, batch))


def submit_one(path: str):
    return score_shard.remote(path, 0.5)


def wait_for(ref) -> float:
    return ray.get(ref)


def score_and_log(path: str) -> float:
    value = score_one(path)  # fine: not in a loop
    logger.info("%s scored %.3f", path, value)
    return value


def score_group(paths: list[str]) -> list[float]:
    return [ray.get(score_shard.remote(p, 0.5)) for p in paths]  # expect: RAY001


def check_all(paths: list[str]) -> list[float]:
    scores = []
    for path in paths:
        scores.append(score_one(path))  # expect: RAY001
    return scores


def strict_scores(paths: list[str]) -> list[float]:
    return [score_one(p, threshold=0.9) for p in paths]  # expect: RAY001


def total_score(paths: list[str]) -> float:
    return sum(score_one_retrying(p) for p in paths)  # expect: RAY001


def host_status(hosts: list[str]) -> dict[str, bool]:
    return {host: is_up(host) for host in hosts}  # expect: RAY001


def drain(queue: list[str]) -> list[float]:
    results = []
    while queue:
        path = queue.pop()
        results.append(
            score_one(path)  # expect: RAY001
        )
    return results


def fit_logged(state: dict, batch: np.ndarray) -> dict:
    state = fit_one(state, batch)
    logger.debug("fitted %d rows", state["count"])
    return state


def running_mean(batches: list[np.ndarray]) -> float:
    state = {"count": 0, "mean": 0.0}
    for batch in batches:
        state = fit_one(state, batch)  # fine: each call needs the previous state
    return state["mean"]


def running_mean_logged(batches: list[np.ndarray]) -> float:
    state = {"count": 0, "mean": 0.0}
    for batch in batches:
        state = fit_logged(state, batch)  # fine: two calls away, each call still needs the previous state
    return state["mean"]


def check_all_logged(paths: list[str]) -> list[float]:
    return [score_and_log(p) for p in paths]  # expect: RAY001


def check_groups(groups: list[list[str]]) -> list[list[float]]:
    # fine: score_group waits inside its own loop, which is reported there
    return [score_group(group) for group in groups]


def mean_score_parallel(paths: list[str]) -> float:
    refs = [submit_one(p) for p in paths]  # fine: the helper only submits
    total = 0.0
    for ref in refs:
        total += wait_for(ref)  # fine: waits on refs submitted before the loop
    return total / max(len(refs), 1)


def check_remotely(paths: list[str]) -> list[float]:
    return [score_remotely(p) for p in paths]  # fine: helpers from other modules are not followed


def first_live_host(hosts: list[str]) -> str | None:
    for host in hosts:
        if is_up(host):  # fine: a search that stops at the first live host
            return host
    return None


def wait_until_up(host: str, timeout_s: float = 300.0) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if is_up(host):  # fine: polling, sleeps between probes and stops once up
            return True
        time.sleep(5)
    return False


class ShardChecker:
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def score(self, path: str) -> float:
        return ray.get(score_shard.remote(path, self.threshold))

    def score_all(self, paths: list[str]) -> list[float]:
        return [self.score(p) for p in paths]  # fine: methods are not followed


async def score_async(path: str) -> float:
    return await score_shard.remote(path, 0.5)


async def score_all_async(paths: list[str]) -> list[float]:
    scores = []
    for path in paths:
        scores.append(await score_async(path))  # fine: async helpers are not followed
    return scores


def audit(paths: list[str], hosts: list[str]) -> dict:
    def reachable(host: str) -> bool:
        return ray.get(probe.remote(host))

    # fine: nested functions are not followed, only module-level ones
    up = [h for h in hosts if reachable(h)]
    return {"hosts": up, "mean_score": mean_score_parallel(paths)}


if __name__ == "__main__":
    ray.init()
    for arg in sys.argv[1:]:
        print(arg, score_one(arg))  # expect: RAY001
