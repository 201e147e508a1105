"""The fixed version of iter_rows_for_batch_work.py: `iter_batches` makes the batches; the peek at the
first rows stays a row loop."""

import ray


def score(values: list) -> int:
    return sum(values)  # stands for a model scoring one batch


def score_all(n: int, batch_size: int) -> int:
    ds = ray.data.range(n)
    total = 0
    for batch in ds.iter_batches(batch_size=batch_size):  # the last, shorter batch comes too
        total += score(batch["id"].tolist())
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
