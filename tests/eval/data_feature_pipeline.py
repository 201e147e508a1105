"""Ray Data feature engineering for a click-through model, feeding a training loop (RAY109, RAY110,
RAY111, RAY112, RAY113, RAY115): deprecated `concurrency=` / `parallelism=` / `columns=` / remote-args
keywords, a read of 20,000 blocks, lambda filters that only compare columns, a UDF that captures a
200 MB lookup blob, a global shuffle only iterated, and a repartition to 4 blocks before a map.
Left silent: `concurrency=` where it is current (reads, `select_columns`), named remote parameters,
`filter(expr=...)`, predicates an expression cannot state (method calls, arithmetic, captured
thresholds), a captured numpy array (read zero-copy), a callable class that loads its table in
`__init__`, a global shuffle before a split, `repartition(1)` before a write or before a
whole-block `map_batches(batch_size=None)`, `repartition(64)` for parallelism, the builtin `zip` and `filter`, and `override_num_blocks` below Ray's warning."""

from __future__ import annotations

import argparse
import logging
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import ray
from ray.data import ActorPoolStrategy
from ray.data.expressions import col

logger = logging.getLogger(__name__)

EVENTS = "s3://ads-lake/events/"
USERS = "s3://ads-lake/users/"
FEATURE_COLUMNS = ["user_id", "ad_id", "hour", "dwell_ms", "clicked", "country"]
MIN_DWELL_MS = 250

# A dense table of ad embeddings: numpy arrays are mapped from the object store without a copy.
AD_EMBEDDINGS = np.zeros((100_000, 256), dtype=np.float32)
# Raw blocklist bytes, copied into every task that deserializes a UDF reading it.
BLOCKLIST = bytes(200 * 10**6)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--out", default="/tmp/features")
    parser.add_argument("--read-blocks", type=int, default=400)
    return parser.parse_args()


def add_time_features(batch: pd.DataFrame) -> pd.DataFrame:
    batch["hour_sin"] = np.sin(2 * np.pi * batch["hour"] / 24)
    batch["hour_cos"] = np.cos(2 * np.pi * batch["hour"] / 24)
    return batch


def embed_ads(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    batch["ad_vec"] = AD_EMBEDDINGS[batch["ad_id"] % len(AD_EMBEDDINGS)]
    return batch


def drop_blocked(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = np.array([BLOCKLIST[int(u) % len(BLOCKLIST)] == 0 for u in batch["user_id"]])  # expect: RAY111
    return {name: values[keep] for name, values in batch.items()}


def summarize_day(batch: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"rows": [len(batch)], "clicks": [int(batch["clicked"].sum())]})


class CountryEncoder:
    """Loads its vocabulary once per actor, in the worker."""

    def __init__(self, path: str) -> None:
        self.codes = {name: i for i, name in enumerate(pd.read_csv(path)["country"])}

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        batch["country_id"] = batch["country"].map(self.codes).fillna(-1).astype("int32")
        return batch


def load_events() -> ray.data.Dataset:
    events = ray.data.read_parquet(EVENTS, columns=FEATURE_COLUMNS)  # expect: RAY115
    events = events.filter(lambda row: row["dwell_ms"] >= 250 and row["country"] != "")  # expect: RAY112
    events = events.filter(lambda row: row["dwell_ms"] >= MIN_DWELL_MS)
    events = events.filter(lambda row: row["country"].isupper())
    events = events.filter(lambda row: row["dwell_ms"] / 1000 < 600)
    events = events.filter(expr=col("clicked").is_in([0, 1]))
    return events.map_batches(add_time_features, batch_format="pandas", concurrency=8)  # expect: RAY115


def load_users() -> ray.data.Dataset:
    users = ray.data.read_parquet(USERS, override_num_blocks=20_000)  # expect: RAY113
    users = users.select_columns(["user_id", "country"], concurrency=4)
    return users.repartition(4).map_batches(  # expect: RAY110
        CountryEncoder,
        fn_constructor_args=("s3://ads-lake/countries.csv",),
        batch_size=4096,
        batch_format="pandas",
        compute=ActorPoolStrategy(size=2),
        num_cpus=1,
        memory=2 * 1024**3,
    )


def build_features(read_blocks: int) -> ray.data.Dataset:
    events = ray.data.read_parquet(EVENTS, override_num_blocks=read_blocks).select_columns(FEATURE_COLUMNS)
    events = events.map_batches(embed_ads, num_cpus=1, max_retries=3)  # expect: RAY115
    return events.map_batches(drop_blocked)


def export_daily(out: str) -> None:
    staged = ray.data.read_parquet(os.path.join(out, "staged"))
    # One file for the downstream job: the exact block count is what the write needs.
    staged.repartition(1).write_parquet(os.path.join(out, "daily"))
    # One call over the whole dataset: `batch_size=None` hands the UDF whole blocks.
    summary = ray.data.read_parquet(os.path.join(out, "staged")).repartition(1).map_batches(summarize_day, batch_size=None)
    summary.write_json(os.path.join(out, "summary"))
    # Few large input files split for parallelism, not coalesced.
    wide = ray.data.read_parquet(os.path.join(out, "wide")).repartition(64)
    wide.map_batches(add_time_features, batch_format="pandas", batch_size=2048).write_parquet(out)


def train_validation_split(features: ray.data.Dataset) -> tuple[ray.data.Dataset, ray.data.Dataset]:
    # A true global shuffle: the split must not follow the input order.
    shuffled = ray.data.read_parquet(EVENTS, override_num_blocks=400).random_shuffle(seed=17)
    return shuffled.train_test_split(test_size=0.1)


def train_epochs(epochs: int, batch_size: int) -> float:
    events = ray.data.read_parquet(EVENTS, concurrency=16).select_columns(FEATURE_COLUMNS)
    seen = 0.0
    for epoch in range(epochs):
        for batch in events.random_shuffle().iter_batches(batch_size=batch_size):  # expect: RAY109
            seen += float(batch["clicked"].sum())
        logger.info("epoch %d: %.0f clicks", epoch, seen)
    return seen


def train_locally_shuffled(epochs: int, batch_size: int) -> float:
    events = ray.data.read_parquet(EVENTS).select_columns(FEATURE_COLUMNS)
    total = 0.0
    for _ in range(epochs):
        for batch in events.iter_batches(batch_size=batch_size, local_shuffle_buffer_size=10 * batch_size):
            total += float(batch["clicked"].sum())
    return total


def audit(features: ray.data.Dataset) -> dict[str, float]:
    names = ["rows", "clicks"]
    values = [float(features.count()), float(features.sum("clicked"))]
    kept = list(filter(lambda pair: pair[1] > 0, zip(names, values)))
    schema = pa.schema([(name, pa.float64()) for name, _ in kept])
    logger.info("audit schema: %s", schema)
    return dict(kept)


if __name__ == "__main__":
    args = parse_args()
    ray.init()
    features = build_features(args.read_blocks)
    features.write_parquet(os.path.join(args.out, "staged"))
    export_daily(args.out)
    train, validation = train_validation_split(features)
    logger.info("train/validation: %d/%d", train.count(), validation.count())
    logger.info("clicks seen: %.0f", train_epochs(args.epochs, args.batch_size))
    logger.info("clicks seen locally: %.0f", train_locally_shuffled(args.epochs, args.batch_size))
    logger.info("audit: %s", audit(features))
    logger.info("users: %d, events: %d", load_users().count(), load_events().count())
