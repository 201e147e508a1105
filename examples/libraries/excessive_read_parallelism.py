"""A Ray Data pipeline that asks for one read task per shard of a large export: `ray-lint check examples/`
reports RAY113 below, and `ray-lint verify examples/libraries/excessive_read_parallelism.py` shows Ray 2.60
warning about the same count when it plans the read."""

import ray

SHARDS = 20_000


def tag_kind(batch: dict) -> dict:
    batch["kind"] = batch["id"] % 4
    return batch


def build_pipeline(rows: int) -> ray.data.Dataset:
    ds = ray.data.range(rows, override_num_blocks=SHARDS)  # RAY113: 20,000 read tasks for a 2-CPU cluster
    return ds.map_batches(tag_kind)


def kind_counts(ds: ray.data.Dataset) -> dict:
    return {row["kind"]: row["count()"] for row in ds.groupby("kind").count().take_all()}


if __name__ == "__main__":
    ray.init()
    build_pipeline(1_000_000).explain()  # a dry run: Ray Data plans the read without running it
