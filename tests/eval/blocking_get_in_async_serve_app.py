"""Semantic product search on Ray Serve (RAY006 blocking-get-in-async in `@serve.deployment` classes).

A `SearchApi` ingress deployment embeds the query with a Ray task, asks a `ProductIndex` actor for
candidates and a `Reranker` deployment (through a `DeploymentHandle`) for the final order. Shapes
(reported): an async `__call__` that blocks on `ray.get` of a task's ref and of an actor call's ref,
a sync helper method of the deployment that calls `ray.get`, called on `self` from an async method
(reported at the call), and `ray.wait` in an async method: each stalls the replica's event loop, so
every other request to the replica waits too.

Traps (silent): a sync deployment method that calls `ray.get` and is called from no coroutine,
`await ref`, `await asyncio.gather(*refs)`, a `ray.get(..., timeout=0)` poll, a deployment handle
response that is awaited, and `ray.get` in a sync function (or the sync helper) handed to
`await asyncio.to_thread(...)`, which runs it in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import ray
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request

logger = logging.getLogger("product_search")

EMBED_DIM = 128
TOP_K = 20


@ray.remote(num_cpus=1)
def embed_query(text: str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(text)) % (2**32))
    vector = rng.normal(size=EMBED_DIM)
    return vector / np.linalg.norm(vector)


@ray.remote(num_cpus=2)
class ProductIndex:
    def __init__(self, shard: int, size: int = 10_000) -> None:
        rng = np.random.default_rng(shard)
        self.shard = shard
        self.vectors = rng.normal(size=(size, EMBED_DIM))
        self.titles = [f"product-{shard}-{i}" for i in range(size)]

    def search(self, query: np.ndarray, k: int = TOP_K) -> list[tuple[str, float]]:
        scores = self.vectors @ query
        best = np.argsort(-scores)[:k]
        return [(self.titles[i], float(scores[i])) for i in best]

    def title(self, position: int) -> str:
        return self.titles[position]


def merge_hits(shards: list[list[tuple[str, float]]], k: int = TOP_K) -> list[tuple[str, float]]:
    hits = [hit for shard in shards for hit in shard]
    return sorted(hits, key=lambda hit: -hit[1])[:k]


def fetch_blocking(refs: list[ray.ObjectRef]) -> list:
    return ray.get(refs)


@serve.deployment(num_replicas=2)
class Reranker:
    async def rerank(self, query: str, hits: list[tuple[str, float]]) -> list[str]:
        bonus = {title: float(query.lower() in title) for title, _ in hits}
        return [title for title, score in sorted(hits, key=lambda h: -(h[1] + bonus[h[0]]))]


@serve.deployment(num_replicas=4, max_ongoing_requests=32)
class SearchApi:
    def __init__(self, reranker: DeploymentHandle, num_shards: int = 4) -> None:
        self.reranker = reranker
        self.shards = [ProductIndex.remote(shard) for shard in range(num_shards)]
        self.warm_query: ray.ObjectRef | None = None

    async def __call__(self, request: Request) -> dict:
        query = (await request.json())["q"]
        vector = ray.get(embed_query.remote(query))  # expect: RAY006
        hits = ray.get(self.shards[0].search.remote(vector))  # expect: RAY006
        return {"query": query, "results": [title for title, _ in hits]}

    def _search_all_sync(self, vector: np.ndarray) -> list[tuple[str, float]]:
        refs = [shard.search.remote(vector) for shard in self.shards]
        return merge_hits(ray.get(refs))

    async def search(self, query: str) -> list[str]:
        vector = await embed_query.remote(query)
        hits = self._search_all_sync(vector)  # expect: RAY006
        return [title for title, _ in hits]

    async def fastest_shard(self, query: str) -> list[tuple[str, float]]:
        vector = await embed_query.remote(query)
        refs = [shard.search.remote(vector) for shard in self.shards]
        ready, _ = ray.wait(refs, num_returns=1)  # expect: RAY006
        return await ready[0]

    async def search_ranked(self, query: str) -> list[str]:
        vector = await embed_query.remote(query)
        shards = await asyncio.gather(*[shard.search.remote(vector) for shard in self.shards])
        # fine: a DeploymentResponse, awaited
        return await self.reranker.rerank.remote(query, merge_hits(shards))

    async def title(self, shard: int, position: int) -> str:
        ref = self.shards[shard].title.remote(position)
        return await ref  # fine: awaits the ref

    async def search_offloaded(self, query: str) -> list[str]:
        vector = await embed_query.remote(query)
        refs = [shard.search.remote(vector) for shard in self.shards]
        shards = await asyncio.to_thread(fetch_blocking, refs)  # fine: runs in a worker thread
        hits = await asyncio.to_thread(self._search_all_sync, vector)  # fine: passed, not called
        return [title for title, _ in merge_hits(shards + [hits])]

    async def warm_status(self) -> str:
        if self.warm_query is None:
            self.warm_query = embed_query.remote("warm-up")
            return "started"
        try:
            ray.get(self.warm_query, timeout=0)  # fine: a non-blocking poll
        except ray.exceptions.GetTimeoutError:
            return "warming"
        return "warm"

    def reload_shards(self, num_shards: int) -> int:
        # fine: a sync method; Serve runs it in a thread, and no coroutine calls it
        self.shards = [ProductIndex.remote(shard) for shard in range(num_shards)]
        probes = [shard.title.remote(0) for shard in self.shards]
        logger.info("reloaded shards: %s", ray.get(probes))
        return len(self.shards)


app = SearchApi.bind(Reranker.bind(), num_shards=4)


if __name__ == "__main__":
    ray.init()
    serve.run(app, route_prefix="/search")
