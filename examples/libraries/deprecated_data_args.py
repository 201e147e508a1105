"""A Ray Data job written against older Ray: `ray-lint check examples/` reports the RAY115 below,
and `ray-lint verify examples/libraries/deprecated_data_args.py` shows Ray 2.60's own deprecation warning
for it."""

import tempfile

import ray


class Normalize:
    """Scales each feature by a constant the actor loads once."""

    def __init__(self) -> None:
        self.scale = 0.5

    def __call__(self, batch: dict) -> dict:
        batch["feature"] = batch["id"] * self.scale
        return batch


def export_features(rows: int) -> str:
    ds = ray.data.range(rows, override_num_blocks=4)
    ds = ds.map_batches(Normalize, concurrency=2, batch_size=256)  # RAY115: deprecated since Ray 2.51, use compute=
    out = tempfile.mkdtemp()
    ds.select_columns(["feature"]).write_parquet(out)
    return out


def feature_sum(path: str) -> float:
    ds = ray.data.read_parquet(path)
    return ds.sum("feature")


if __name__ == "__main__":
    ray.init()
    print(feature_sum(export_features(2_000)))
