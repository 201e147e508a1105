"""The fix for examples/libraries/excessive_read_parallelism.py: the read's task count is left to Ray
Data, which sizes it from the data and the cluster's CPUs."""

import ray


def tag_kind(batch: dict) -> dict:
    batch["kind"] = batch["id"] % 4
    return batch


def build_pipeline(rows: int) -> ray.data.Dataset:
    ds = ray.data.range(rows)
    return ds.map_batches(tag_kind)


def kind_counts(ds: ray.data.Dataset) -> dict:
    return {row["kind"]: row["count()"] for row in ds.groupby("kind").count().take_all()}


if __name__ == "__main__":
    ray.init()
    build_pipeline(1_000_000).explain()  # a dry run: Ray Data plans the read without running it
