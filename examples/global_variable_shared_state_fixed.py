"""The same work with the state passed explicitly: the threshold goes to each task as an argument,
and the tasks return what they did instead of appending it to a global. ray-lint reports nothing."""

import time

import ray


@ray.remote
def keep(score: float, threshold: float) -> bool:
    return score > threshold


@ray.remote
def ingest(record_id: str) -> tuple[str, int]:
    time.sleep(0.1)  # stands for parsing and storing the record
    return record_id, len(record_id)


def sweep(scores: list[float]) -> tuple[list[bool], list[bool]]:
    loose = ray.get([keep.remote(s, 0.5) for s in scores])
    strict = ray.get([keep.remote(s, 0.9) for s in scores])
    return loose, strict


def ingest_all(record_ids: list[str]) -> int:
    results = ray.get([ingest.remote(r) for r in record_ids])
    seen_ids = [record_id for record_id, _ in results]
    print(f"ingested {len(seen_ids)} of {len(record_ids)} records")
    return sum(size for _, size in results)


if __name__ == "__main__":
    ray.init()
    print(sweep([0.3, 0.6, 0.95]))
    print(ingest_all(["a1", "b22", "c333"]))
