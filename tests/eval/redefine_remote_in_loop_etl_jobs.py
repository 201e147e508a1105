"""Nightly ETL: each source table is extracted, cleaned and loaded by Ray tasks."""

from __future__ import annotations

import functools
import logging

import ray

logger = logging.getLogger(__name__)

_load_task = None


def extract(table: str, day: str) -> list[dict]:
    return [{"table": table, "day": day, "row": i} for i in range(1_000)]


def clean(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row.get("row") is not None]


def load(rows: list[dict], target: str) -> int:
    logger.info("loading %d rows into %s", len(rows), target)
    return len(rows)


def run_tables(tables: list[str], day: str) -> list[int]:
    refs = []
    for table in tables:
        @ray.remote(num_cpus=1)  # expect: RAY021
        def etl(name: str, when: str) -> int:
            return load(clean(extract(name, when)), "warehouse")

        refs.append(etl.remote(table, day))
    return ray.get(refs)


def run_tables_with_target(tables: list[str], day: str, targets: dict[str, str]) -> list[int]:
    refs = []
    for table in tables:
        target = targets[table]

        @ray.remote  # expect: RAY021
        def etl_to(name: str, when: str) -> int:
            return load(clean(extract(name, when)), target)

        refs.append(etl_to.remote(table, day))
    return ray.get(refs)


def clean_remote(rows: list[dict]) -> ray.ObjectRef:
    cleaner = ray.remote(clean)  # expect: RAY021
    return cleaner.remote(rows)


def load_remote(rows: list[dict]) -> ray.ObjectRef:
    global _load_task
    if _load_task is None:
        _load_task = ray.remote(load)
    return _load_task.remote(rows, "warehouse")


@functools.lru_cache(maxsize=None)
def remote_step(step: str):
    return ray.remote({"extract": extract, "clean": clean, "load": load}[step])


def make_loader(target: str):
    @ray.remote
    def load_into(rows: list[dict]) -> int:
        return load(rows, target)

    return load_into


def backfill(days: list[str]) -> list[int]:
    refs = []
    for day in days:
        rows = extract("orders", day)
        refs.append(clean_remote(rows))
        refs.append(load_remote(rows))
        refs.append(remote_step("clean").remote(rows))
    return ray.get(refs)


def loaders_for(targets: list[str]) -> list:
    # One remote function per target, each created once: a factory, not a redefinition.
    return [make_loader(t) for t in targets]


def main() -> None:
    ray.init()

    @ray.remote
    def count(rows: list[dict]) -> int:
        return len(rows)

    days = ["2024-05-01", "2024-05-02", "2024-05-03"]
    print(run_tables(["orders", "customers"], days[0]))
    print(backfill(days))
    print(ray.get(count.remote(extract("orders", days[0]))))
    print(len(loaders_for(["warehouse", "lake"])))


if __name__ == "__main__":
    main()
