"""Rows of a Ray dataset gathered into batches by hand: `ray-lint check examples/` reports the RAY116
below, and `ray-lint verify examples/libraries/iter_rows_for_batch_work.py` times rows batched by hand
against `iter_batches`."""

import ray


def score(values: list) -> int:
    return sum(values)  # stands for a model scoring one batch


def score_all(n: int, batch_size: int) -> int:
    ds = ray.data.range(n)
    total, pending = 0, []
    for row in ds.iter_rows():  # RAY116: re-implements iter_batches(batch_size=...) one row at a time
        pending.append(row["id"])
        if len(pending) >= batch_size:
            total += score(pending)
            pending = []
    if pending:
        total += score(pending)
    return total


def preview(n: int) -> list:
    """A peek at the first rows: the loop stops early, so it is no batching loop."""
    ds = ray.data.range(n)
    first = []
    for row in ds.iter_rows():
        first.append(row["id"])
        if len(first) >= 5:
            break
    return first


if __name__ == "__main__":
    ray.init()
    print(score_all(20_000, batch_size=1000))
    print(preview(100))
