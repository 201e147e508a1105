"""Product recommendations on Ray Serve (RAY221 serve-handle-result-blocking, RAY222
serve-blocking-call-in-async).

A `Recommender` ingress looks a user up in a `FeatureStore` deployment and has a `Ranker` deployment
order the candidates, through `DeploymentHandle`s; a driver deploys the app and smoke-tests it.

Shapes (reported): `.result()` on a handle's response inside async methods of the ingress (chained,
through a name, after `.options(...)`, in a comprehension) and inside an async driver function whose
handle comes from `serve.get_app_handle`; synchronous HTTP (`requests.get`), `time.sleep` and a
subprocess inside async deployment methods, where they hold the replica's event loop.

Traps (silent): `await response`; `.result()` in sync deployment methods (Serve runs them in a thread
pool) and in sync driver code; `.result()` on a `concurrent.futures.Future` and on a finished
`asyncio.Task`; `await asyncio.to_thread(response.result)`; a streaming response iterated with
`async for`; `requests.get` and `time.sleep` in sync methods, handed to `asyncio.to_thread`, or in a
nested `def` run by an executor; `time.sleep(0)`; a `session.get(...)` on an object of unknown type.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import requests
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request

logger = logging.getLogger("recommendations")

FEATURE_API = "http://features.internal:8080"
TOP_K = 10
RETRIES = 3

audit_pool = ThreadPoolExecutor(max_workers=2)


def write_audit_line(user: str, items: list[str]) -> int:
    with open("/tmp/recommendations.log", "a", encoding="utf-8") as log:
        return log.write(f"{user}\t{','.join(items)}\n")


@serve.deployment(num_replicas=2, max_ongoing_requests=64)
class FeatureStore:
    def __init__(self, session_factory=None) -> None:
        self.cache: dict[str, dict] = {}
        self.session = session_factory() if session_factory else None

    async def lookup(self, user: str) -> dict:
        if user in self.cache:
            return self.cache[user]
        for attempt in range(RETRIES):
            reply = requests.get(f"{FEATURE_API}/users/{user}", timeout=2)  # expect: RAY222
            if reply.ok:
                self.cache[user] = reply.json()
                return self.cache[user]
            time.sleep(0.1 * 2**attempt)  # expect: RAY222
        return {}

    async def lookup_offloaded(self, user: str) -> dict:
        reply = await asyncio.to_thread(requests.get, f"{FEATURE_API}/users/{user}", timeout=2)
        await asyncio.sleep(0)
        time.sleep(0)  # only yields the thread
        return reply.json() if reply.ok else {}

    async def lookup_pooled(self, user: str) -> dict:
        if self.session is None:
            return {}
        return self.session.get(f"{FEATURE_API}/users/{user}")  # unknown type: not judged

    async def lookup_in_thread(self, user: str) -> dict:
        def fetch() -> dict:
            return requests.get(f"{FEATURE_API}/users/{user}", timeout=2).json()

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, fetch)

    def refresh(self, users: list[str]) -> int:
        # a sync method: Serve runs it in its thread pool, off the event loop
        for user in users:
            self.cache[user] = requests.get(f"{FEATURE_API}/users/{user}", timeout=2).json()
            time.sleep(0.05)
        return len(users)


@serve.deployment(max_ongoing_requests=32)
class Ranker:
    def __init__(self, model_version: str) -> None:
        self.model_version = model_version
        self.weights = {"clicks": 0.7, "recency": 0.3}

    def rank(self, features: dict, candidates: list[str]) -> list[str]:
        clicks = features.get("clicks", {})
        return sorted(candidates, key=lambda item: -self.weights["clicks"] * clicks.get(item, 0))[:TOP_K]

    async def explain(self, item: str):
        for reason in ("clicked before", "popular today"):
            yield f"{item}: {reason}"

    async def reload(self, version: str) -> str:
        subprocess.run(["gsutil", "cp", f"gs://models/ranker-{version}", "/tmp/ranker"], check=True)  # expect: RAY222
        self.model_version = version
        return version


@serve.deployment(num_replicas=2)
class Recommender:
    def __init__(self, features: DeploymentHandle, ranker: DeploymentHandle) -> None:
        self.features = features
        self.ranker = ranker
        self.fast_ranker = ranker.options(method_name="rank")

    async def __call__(self, request: Request) -> dict:
        body = await request.json()
        features = self.features.lookup.remote(body["user"]).result()  # expect: RAY221
        ranked = await self.ranker.rank.remote(features, body["candidates"])
        audit = audit_pool.submit(write_audit_line, body["user"], ranked)
        logger.info("audit wrote %d bytes", audit.result())
        return {"user": body["user"], "items": ranked}

    async def recommend(self, user: str, candidates: list[str]) -> list[str]:
        features = await self.features.lookup.remote(user)
        response = self.fast_ranker.remote(features, candidates)
        return response.result()  # expect: RAY221

    async def recommend_many(self, users: list[str], candidates: list[str]) -> list[list[str]]:
        responses = [self.features.lookup.remote(user) for user in users]
        features = [response.result() for response in responses]  # expect: RAY221
        return [await self.ranker.rank.remote(f, candidates) for f in features]

    async def recommend_offloaded(self, user: str, candidates: list[str]) -> list[str]:
        features = await self.features.lookup.remote(user)
        response = self.ranker.rank.remote(features, candidates)
        return await asyncio.to_thread(response.result)

    async def explain(self, item: str) -> list[str]:
        stream = self.ranker.options(stream=True).explain.remote(item)
        return [line async for line in stream]

    async def refresh_all(self, users: list[str]) -> int:
        task = asyncio.create_task(self.features.refresh.remote(users)._to_object_ref())
        await task
        logger.info("refresh task done: %s", task.result())
        return len(users)

    def warm_up(self, users: list[str]) -> int:
        # a sync method: `.result()` is allowed in Serve's thread pool
        for user in users:
            self.features.lookup.remote(user).result()
        return len(users)


app = Recommender.bind(FeatureStore.bind(), Ranker.bind("v3"))


async def load_test(users: list[str]) -> list[dict]:
    handle = serve.get_app_handle("recommendations")
    return [handle.recommend.remote(user, ["a", "b"]).result() for user in users]  # expect: RAY221


async def smoke_test(handle: DeploymentHandle) -> list[str]:
    return await handle.recommend.remote("user-1", ["a", "b", "c"])


def main() -> None:
    handle = serve.run(app, name="recommendations", route_prefix="/recommend")
    print(handle.recommend.remote("user-1", ["a", "b", "c"]).result(timeout_s=30))
    print(asyncio.run(smoke_test(handle)))
    serve.delete("recommendations")


if __name__ == "__main__":
    main()
