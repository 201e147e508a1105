"""Async serving gateway: RAY006 blocking-get-in-async and RAY007 blocking-call-in-async-actor.

An async actor that fans requests out to model actors, a health checker, and an async driver, with
blocking `ray.get` / `ray.wait` and blocking `time.sleep` / HTTP / subprocess calls on the event loop,
next to the correct forms: `await ref`, `asyncio.gather`, `asyncio.to_thread`, executor lambdas,
`timeout=0` polls, gets of refs already awaited or waited for, and blocking calls in sync code.
"""

import asyncio
import logging
import subprocess
import time

import ray
import requests

logger = logging.getLogger(__name__)
HEALTH_URL = "http://localhost:8000/-/healthz"


@ray.remote
def tokenize(text: str) -> list[int]:
    return [ord(ch) % 256 for ch in text]


@ray.remote(num_cpus=2)
class Scorer:
    def __init__(self, weight: float) -> None:
        self.weight = weight

    def score(self, tokens: list[int]) -> float:
        return self.weight * sum(tokens) / max(len(tokens), 1)


@ray.remote(max_concurrency=64)
class Gateway:
    def __init__(self, weights: list[float]) -> None:
        self.scorers = [Scorer.remote(w) for w in weights]
        self.served = 0

    async def score_blocking(self, text: str) -> float:
        tokens = ray.get(tokenize.remote(text))  # expect: RAY006
        if not tokens:
            return 0.0
        refs = [scorer.score.remote(tokens) for scorer in self.scorers]
        scores = ray.get(refs)  # expect: RAY006
        self.served += 1
        return max(scores)

    async def score(self, text: str) -> float:
        tokens = await tokenize.remote(text)
        scores = await asyncio.gather(*[scorer.score.remote(tokens) for scorer in self.scorers])
        self.served += 1
        return max(scores)

    async def first_ready(self, texts: list[str]) -> list[int]:
        refs = [tokenize.remote(text) for text in texts]
        ready, _ = ray.wait(refs, num_returns=1)  # expect: RAY006
        return ray.get(ready[0])

    async def poll(self, texts: list[str]) -> list[list[int]]:
        refs = [tokenize.remote(text) for text in texts]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return ray.get(ready)

    async def gather_then_get(self, texts: list[str]) -> list[list[int]]:
        refs = [tokenize.remote(text) for text in texts]
        await asyncio.wait(refs)
        return ray.get(refs)

    async def offloaded(self, texts: list[str]) -> list[list[int]]:
        refs = [tokenize.remote(text) for text in texts]
        loop = asyncio.get_running_loop()
        first = await loop.run_in_executor(None, lambda: ray.get(refs[0]))
        rest = await asyncio.to_thread(ray.get, refs[1:])
        return [first, *rest]

    async def wait_until_healthy(self, attempts: int) -> bool:
        for _ in range(attempts):
            if requests.get(HEALTH_URL, timeout=2).ok:  # expect: RAY007
                return True
            time.sleep(0.5)  # expect: RAY007
        return False

    async def wait_until_healthy_async(self, attempts: int) -> bool:
        for _ in range(attempts):
            response = await asyncio.to_thread(requests.get, HEALTH_URL, timeout=2)
            if response.ok:
                return True
            await asyncio.sleep(0.5)
        return False

    async def dump_stats(self, path: str) -> None:
        subprocess.run(["sync"], check=True)  # expect: RAY007

        def write() -> None:
            with open(path, "w") as out:
                out.write(str(self.served))
            subprocess.run(["sync"], check=True)

        await asyncio.to_thread(write)

    def served_count(self) -> int:
        time.sleep(0)
        return self.served


async def run_client(gateway, texts: list[str]) -> list[float]:
    refs = [gateway.score.remote(text) for text in texts]
    results = []
    async for ref in _as_completed(refs):
        results.append(ray.get(ref))
    return results


async def _as_completed(refs):
    for ref in refs:
        await ref
        yield ref


async def blocking_client(gateway, texts: list[str]) -> list[float]:
    return ray.get([gateway.score.remote(text) for text in texts])  # expect: RAY006


def sync_client(gateway, texts: list[str]) -> list[float]:
    return ray.get([gateway.score.remote(text) for text in texts])


if __name__ == "__main__":
    ray.init()
    handle = Gateway.remote([0.5, 1.0, 2.0])
    corpus = ["hello", "world", "ray"]
    logger.info("scores: %s", asyncio.run(run_client(handle, corpus)))
    logger.info("scores: %s", sync_client(handle, corpus))
