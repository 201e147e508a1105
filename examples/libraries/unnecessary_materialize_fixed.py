"""The fixed version of unnecessary_materialize.py: a dataset read once streams into its consumer;
the one read every epoch stays materialized."""

import ray


def preprocess(batch: dict) -> dict:
    batch["x"] = batch["id"] * 2
    return batch


def export_once(n: int) -> int:
    ds = ray.data.range(n, override_num_blocks=8).map_batches(preprocess)
    rows = 0
    for batch in ds.iter_batches(batch_size=256):
        rows += len(batch["x"])  # stands for a training or export step
    return rows


def train(n: int, epochs: int) -> int:
    """Read once per epoch: here the materialized dataset saves re-running `preprocess`."""
    ds = ray.data.range(n, override_num_blocks=8).map_batches(preprocess).materialize()
    steps = 0
    for _ in range(epochs):
        for _batch in ds.iter_batches(batch_size=256):
            steps += 1
    return steps


if __name__ == "__main__":
    ray.init()
    print(export_once(10_000))
    print(train(10_000, epochs=2))
