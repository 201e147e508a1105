"""Batch-scoring job: `ray.wait` / `ray.get` arguments Ray rejects, and `ray.init` / `ray.is_initialized` slips.

Findings: RAY069 a single ref, a tuple, a positional `num_returns`, a negative timeout, a duplicate
ref and `num_returns` larger than the list; RAY070 a dict view, a positional timeout, a negative
timeout and the ObjectRefGenerator of a streaming task; RAY080 `ray.is_initialized` without `()`;
RAY090 a second `ray.init` in the script's main block. Traps: the `ray.wait` loop with a ref list,
`num_returns=2` tasks, `timeout=-1` on `ray.get`, `ray.get(list(gen))`, `asyncio.wait` and
`threading.Event.wait`, a guarded `ray.init`, and a `ray.init` after `ray.shutdown()`.
"""

from __future__ import annotations

import argparse
import asyncio
import threading

import numpy as np
import ray

ray.init(num_cpus=4)

stop_event = threading.Event()


@ray.remote
def load_shard(path: str) -> np.ndarray:
    return np.load(path)


@ray.remote(num_returns=2)
def split_features(shard: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return shard[:, :-1], shard[:, -1]


@ray.remote
def stream_rows(shard: np.ndarray):
    for row in shard:
        yield row


@ray.remote
def score(features: np.ndarray, weights: np.ndarray) -> float:
    return float(np.dot(features, weights).sum())


def ensure_ray() -> None:
    if not ray.is_initialized:  # expect: RAY080
        ray.init(num_cpus=4)


def connect(address: str) -> None:
    if not ray.is_initialized():
        ray.init(address=address)


def score_shards(paths: list[str], weights: np.ndarray) -> list[float]:
    weights_ref = ray.put(weights)
    shards = {path: load_shard.remote(path) for path in paths}
    loaded = ray.get(shards.values())  # expect: RAY070
    pending = [score.remote(shard, weights_ref) for shard in loaded]
    scores: list[float] = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=30.0)
        scores.extend(ray.get(done))
    return scores


def probe(path: str) -> bool:
    ref = load_shard.remote(path)
    ready, _ = ray.wait(ref, timeout=5)  # expect: RAY069
    return bool(ready)


def first_two(paths: list[str]) -> list[np.ndarray]:
    left, right = load_shard.remote(paths[0]), load_shard.remote(paths[1])
    done, _ = ray.wait((left, right))  # expect: RAY069
    more, _ = ray.wait([left, right], 2)  # expect: RAY069
    both, _ = ray.wait([left, right], num_returns=3)  # expect: RAY069
    again, _ = ray.wait([left, left])  # expect: RAY069
    return ray.get(done + more + both + again)


def split(path: str) -> tuple[np.ndarray, np.ndarray]:
    refs = split_features.remote(load_shard.remote(path))
    ready, _ = ray.wait(refs, num_returns=2)
    features, labels = ray.get(ready)
    return features, labels


def rows_of(path: str) -> list[np.ndarray]:
    gen = stream_rows.remote(load_shard.remote(path))
    rows = ray.get(gen)  # expect: RAY070
    return list(rows)


def rows_listed(path: str) -> list[np.ndarray]:
    gen = stream_rows.remote(load_shard.remote(path))
    return ray.get(list(gen))


def poll(path: str) -> np.ndarray | None:
    ref = load_shard.remote(path)
    ready, _ = ray.wait([ref], timeout=-1)  # expect: RAY069
    if not ready:
        return None
    shard = ray.get(ref, 10)  # expect: RAY070
    retry = ray.get(ref, timeout=-5)  # expect: RAY070
    forever = ray.get(ref, timeout=-1)
    return shard if retry is not None else forever


async def heartbeat(tasks: set[asyncio.Task]) -> None:
    await asyncio.wait(tasks, timeout=5)
    stop_event.wait(1)


def restart(address: str) -> None:
    ray.shutdown()
    ray.init(address=address)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="auto")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    ray.init(address=args.address)  # expect: RAY090
    print(score_shards(args.paths, np.ones(8)))
