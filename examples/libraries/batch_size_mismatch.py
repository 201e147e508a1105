"""A CPU feature step asked for batches of half a million rows: `ray-lint check --preview
examples/libraries/` reports the RAY107 below (rows of unknown size: info, preview)."""

import numpy as np
import pandas as pd
import ray


def add_features(batch: pd.DataFrame) -> pd.DataFrame:
    batch["log_amount"] = np.log1p(batch["amount"])
    batch["bucket"] = (batch["amount"] // 100).astype("int64")
    return batch


def main() -> None:
    ds = ray.data.from_pandas(pd.DataFrame({"amount": np.random.rand(600_000) * 1_000}))
    # Each CPU task holds its input, the UDF's copies and its output for 500,000 rows at once.
    features = ds.map_batches(add_features, batch_format="pandas", batch_size=500_000)  # RAY107: far above ~16 MiB
    print(features.count(), "rows")


if __name__ == "__main__":
    ray.init()
    main()
