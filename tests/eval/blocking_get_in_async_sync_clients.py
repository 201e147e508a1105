"""Online feature serving behind a synchronous client (RAY006 blocking-get-in-async, one call away).

`StoreClient` is a plain class that wraps a `FeatureStore` actor; its `fetch_sync` submits a lookup and
waits for it with `ray.get`. An async actor method or an async Ray Serve handler that calls
`self.client.fetch_sync(key)` blocks its event loop on that `ray.get` as surely as if it were written
there, and so does a call of a module-level helper that submits a task and gets it: RAY006 reports the
call in the coroutine.

Traps (silent): the same client called from a synchronous method, a coroutine that awaits the ref
itself, the blocking client method handed to `asyncio.to_thread` / `run_in_executor` (passed, not
called), a client method that only submits and returns the ref, and an `asyncio.run` entry point that
shares its loop with nothing.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import ray
from ray import serve

logger = logging.getLogger(__name__)

EMBEDDING_DIM = 64


@ray.remote
class FeatureStore:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}

    def upsert(self, key: str, row: dict[str, float]) -> None:
        self.rows[key] = row

    def lookup(self, key: str) -> dict[str, float]:
        return self.rows.get(key, {})


@ray.remote
def load_embedding(item_id: str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(item_id)) % (2**32))
    return rng.normal(size=EMBEDDING_DIM)


class StoreClient:
    """A thin client for code that is not async: every call returns the row itself."""

    def __init__(self, store: ray.actor.ActorHandle) -> None:
        self.store = store

    def fetch_sync(self, key: str) -> dict[str, float]:
        ref = self.store.lookup.remote(key)
        return ray.get(ref)

    def fetch_ref(self, key: str) -> ray.ObjectRef:
        return self.store.lookup.remote(key)

    def upsert_sync(self, key: str, row: dict[str, float]) -> None:
        ray.get(self.store.upsert.remote(key, row))


def embedding_sync(item_id: str) -> np.ndarray:
    return ray.get(load_embedding.remote(item_id))


def score(row: dict[str, float], embedding: np.ndarray) -> float:
    return float(sum(row.values()) + embedding[: len(row)].sum())


@ray.remote(max_concurrency=32)
class FeatureServer:
    def __init__(self, store: ray.actor.ActorHandle) -> None:
        self.client = StoreClient(store)

    async def features(self, user_id: str) -> dict[str, float]:
        row = self.client.fetch_sync(user_id)  # expect: RAY006
        logger.debug("user %s has %d features", user_id, len(row))
        return row

    async def record(self, user_id: str, row: dict[str, float]) -> None:
        self.client.upsert_sync(user_id, row)  # expect: RAY006

    async def score_item(self, user_id: str, item_id: str) -> float:
        row = await self.client.fetch_ref(user_id)  # fine: the client only submits
        embedding = embedding_sync(item_id)  # expect: RAY006
        return score(row, embedding)

    async def score_item_async(self, user_id: str, item_id: str) -> float:
        row, embedding = await asyncio.gather(self.client.fetch_ref(user_id), load_embedding.remote(item_id))
        return score(row, embedding)

    async def features_offloaded(self, user_id: str) -> dict[str, float]:
        return await asyncio.to_thread(self.client.fetch_sync, user_id)  # fine: runs in a worker thread

    def features_blocking(self, user_id: str) -> dict[str, float]:
        return self.client.fetch_sync(user_id)  # fine: a synchronous method


@serve.deployment(num_replicas=2)
class Ranker:
    def __init__(self, store: ray.actor.ActorHandle) -> None:
        self.client = StoreClient(store)

    async def __call__(self, request) -> dict[str, float]:
        payload = await request.json()
        user_id, items = payload["user_id"], payload["items"]
        row = self.client.fetch_sync(user_id)  # expect: RAY006
        embeddings = await asyncio.gather(*[load_embedding.remote(item) for item in items])
        return {item: score(row, emb) for item, emb in zip(items, embeddings)}

    async def warm(self, item_id: str) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, embedding_sync, item_id)  # fine: passed, not called

    async def profile(self, user_id: str) -> dict[str, float]:
        return await self.client.store.lookup.remote(user_id)  # fine: awaits the ref


async def smoke_test(store: ray.actor.ActorHandle) -> float:
    client = StoreClient(store)
    row = await client.fetch_ref("user-0")
    return score(row, embedding_sync("item-0"))  # fine: the loop's only coroutine


if __name__ == "__main__":
    ray.init()
    feature_store = FeatureStore.remote()
    StoreClient(feature_store).upsert_sync("user-0", {"clicks": 3.0, "views": 10.0})
    logger.info("smoke test score %.3f", asyncio.run(smoke_test(feature_store)))
    serve.run(Ranker.bind(feature_store))
