"""Ray Data code that runs a vectorizable numpy function one row at a time: `ray-lint check examples/`
reports the RAY101 below, and `ray-lint verify examples/libraries/map_for_vectorizable_udf.py` times `map`
against `map_batches` on the same function."""

import numpy as np
import ray


def add_features(row: dict) -> dict:
    """Elementwise numpy only: the same code works on a row's scalars and on a batch's columns."""
    row["log_id"] = np.log1p(row["id"])
    row["scaled"] = np.clip(row["id"] / 1000.0, 0.0, 1.0)
    return row


def label(row: dict) -> dict:
    """Per-row Python logic: `map` is the right call for this one."""
    row["bucket"] = "low" if row["id"] < 500 else "high"
    return row


def feature_sum(n: int) -> float:
    ds = ray.data.range(n)
    ds = ds.map(add_features)  # RAY101: elementwise numpy, one row at a time
    return sum(float(batch["log_id"].sum()) for batch in ds.iter_batches(batch_size=None))


def bucket_counts(n: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in ray.data.range(n).map(label).iter_rows():
        counts[row["bucket"]] = counts.get(row["bucket"], 0) + 1
    return counts


if __name__ == "__main__":
    ray.init()
    print(feature_sum(20_000))
    print(bucket_counts(1_000))
