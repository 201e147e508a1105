"""The fix for examples/libraries/deprecated_data_args.py: the actor pool is sized with `compute=`, the
argument Ray 2.60 reads, so it logs no deprecation warning."""

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
    ds = ds.map_batches(Normalize, compute=ray.data.ActorPoolStrategy(size=2), batch_size=256)
    out = tempfile.mkdtemp()
    ds.select_columns(["feature"]).write_parquet(out)
    return out


def feature_sum(path: str) -> float:
    ds = ray.data.read_parquet(path)
    return ds.sum("feature")


if __name__ == "__main__":
    ray.init()
    print(feature_sum(export_features(2_000)))
