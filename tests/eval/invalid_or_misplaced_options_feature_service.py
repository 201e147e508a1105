"""A feature-serving service: a registry actor, loader tasks and an embedding actor, with options that
Ray 2.60 refuses.

Findings: RAY094 a task option on an actor class, an actor option on a task, a typo, a retry count
below -1, an invalid `lifetime`, `retry_exceptions` as strings, `max_calls` in `.options(...)`,
`get_if_exists` with no name, an undeclared concurrency group, a resource in an actor method's
`.options(...)`, and `ray.remote(f, ...)`. Traps: every valid option of each kind, `.options(...)`
through `**overrides`, a `get_if_exists` whose name comes from the decorator, declared concurrency
groups, a Serve deployment's own `.options(...)`, and a test that expects Ray's error.
"""

from __future__ import annotations

import time

import pytest
import ray
from ray import serve

RETRYABLE = (ConnectionError, TimeoutError)


@ray.remote(
    name="feature-registry",
    namespace="features",
    lifetime="detached",
    max_restarts=-1,
    max_task_retries=3,
    concurrency_groups={"reads": 8, "writes": 1},
)
class FeatureRegistry:
    def __init__(self) -> None:
        self.tables: dict[str, list[str]] = {}

    @ray.method(concurrency_group="writes")
    def register(self, table: str, columns: list[str]) -> None:
        self.tables[table] = columns

    @ray.method(concurrency_group="reads", num_returns=1)
    def columns(self, table: str) -> list[str]:
        return self.tables.get(table, [])

    @ray.method(concurrency_group="admin")  # expect: RAY094
    def drop(self, table: str) -> None:
        self.tables.pop(table, None)


@ray.remote(num_cpus=1, max_retries=3, retry_exceptions=list(RETRYABLE))
def load_partition(table: str, day: str) -> int:
    time.sleep(0.01)
    return len(table) + len(day)


@ray.remote(num_cpus=1, max_restarts=2)  # expect: RAY094
def backfill(table: str, days: list[str]) -> int:
    return len(days)


@ray.remote(num_cpus=2, max_retries=5, max_concurrency=4)  # expect: RAY094
class Embedder:
    def __init__(self, model: str) -> None:
        self.model = model

    def embed(self, rows: list[str]) -> list[int]:
        return [len(row) for row in rows]


@ray.remote(num_gpu=1)  # expect: RAY094
def train_ranker(table: str) -> str:
    return table


@ray.remote(max_retries=-3)  # expect: RAY094
def compact(table: str) -> None:
    pass


@ray.remote(lifetime="forever")  # expect: RAY094
class Cache:
    def get(self, key: str) -> str | None:
        return None


@ray.remote(retry_exceptions=["ConnectionError"])  # expect: RAY094
def fetch_remote(url: str) -> bytes:
    return url.encode()


def export(table: str) -> str:
    return table


remote_export = ray.remote(export, num_cpus=1)  # expect: RAY094


def start(overrides: dict[str, object]) -> None:
    registry = FeatureRegistry.options(get_if_exists=True).remote()
    registry.register.remote("clicks", ["user", "item"])
    refs = [load_partition.options(max_retries=1, name=f"load-{day}").remote("clicks", day) for day in ("mon", "tue")]
    refs.append(load_partition.options(max_calls=1).remote("clicks", "wed"))  # expect: RAY094
    ray.get(refs)
    cache = Cache.options(get_if_exists=True).remote()  # expect: RAY094
    embedder = Embedder.options(**overrides).remote("minilm")
    print(ray.get(embedder.embed.remote(["a", "bb"])), cache)
    columns = registry.columns.options(num_gpus=1).remote("clicks")  # expect: RAY094
    print(ray.get(columns))


@serve.deployment
class Ranker:
    def __call__(self, request: dict[str, str]) -> str:
        return request.get("user", "")


ranker_app = Ranker.options(num_replicas=2, max_ongoing_requests=16).bind()


def test_backfill_rejects_actor_options() -> None:
    with pytest.raises(ValueError):
        ray.remote(max_concurrency=4)(export)
