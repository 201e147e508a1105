"""Module globals used as state shared with Ray workers: `ray-lint check examples/` reports each
RAY060 below, and `ray-lint verify examples/global_variable_shared_state.py` replays each in a model.

Every worker process gets its own copy of the globals, pickled with the remote function when it is
first submitted: the driver's later changes never reach it, and the workers' changes never come back.
"""

import time

import ray

THRESHOLD = 0.5
seen_ids = []


@ray.remote
def keep(score: float) -> bool:
    return score > THRESHOLD


@ray.remote
def ingest(record_id: str) -> int:
    time.sleep(0.1)  # stands for parsing and storing the record
    seen_ids.append(record_id)  # RAY060: the append stays in this worker's copy of the list
    return len(record_id)


def sweep(scores: list[float]) -> tuple[list[bool], list[bool]]:
    global THRESHOLD
    loose = ray.get([keep.remote(s) for s in scores])
    THRESHOLD = 0.9  # RAY060: `keep` was pickled with 0.5 and keeps using it
    strict = ray.get([keep.remote(s) for s in scores])
    return loose, strict


def ingest_all(record_ids: list[str]) -> int:
    sizes = ray.get([ingest.remote(r) for r in record_ids])
    print(f"ingested {len(seen_ids)} of {len(record_ids)} records")  # prints 0
    return sum(sizes)


if __name__ == "__main__":
    ray.init()
    print(sweep([0.3, 0.6, 0.95]))
    print(ingest_all(["a1", "b22", "c333"]))
