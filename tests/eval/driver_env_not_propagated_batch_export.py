"""Batch export job run against a long-lived cluster: the driver reads its settings, connects with
`ray.init(address="auto")`, then sets a few environment variables and fans out export tasks.

Exercises RAY062 driver-env-not-propagated: variables the driver sets that remote code reads, on a
cluster whose workers never see the driver's environment, and a `sys.path` entry above the
script's directory whose module a task uses. The traps: a variable passed through the job's
`runtime_env`, one that only the driver reads, thread-count variables (RAY042's business), a
`sys.path` entry for the script's own directory, and an installed package imported after it.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "shared"))  # expect: RAY062
import numpy as np  # noqa: E402
from exporters import write_parquet  # noqa: E402

import ray  # noqa: E402

RUNTIME_ENV = {"env_vars": {"EXPORT_REGION": "eu-west-1"}}


@ray.remote
def export_shard(shard: int, rows: int) -> str:
    bucket = os.environ["EXPORT_BUCKET"]
    region = os.environ.get("EXPORT_REGION", "us-east-1")
    data = np.arange(rows * shard, rows * (shard + 1))
    return write_parquet(data, f"s3://{bucket}/{region}/part-{shard:05d}.parquet")


@ray.remote
class Notifier:
    def __init__(self) -> None:
        self.sent = 0

    def notify(self, paths: list[str]) -> int:
        if os.getenv("NOTIFY_DRY_RUN") == "1":
            return 0
        self.sent += len(paths)
        return self.sent


def main() -> None:
    with open("export.json") as handle:
        config = json.load(handle)
    ray.init(address="auto", runtime_env=RUNTIME_ENV)
    os.environ["EXPORT_BUCKET"] = config["bucket"]  # expect: RAY062
    os.environ["EXPORT_REGION"] = config.get("region", "eu-west-1")
    os.environ["NOTIFY_DRY_RUN"] = "1" if config.get("dry_run") else "0"  # expect: RAY062
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["EXPORT_LOG_LEVEL"] = config.get("log_level", "INFO")

    notifier = Notifier.remote()
    rows = int(config.get("rows_per_shard", 100_000))
    paths = ray.get([export_shard.remote(shard, rows) for shard in range(config["shards"])])
    sent = ray.get(notifier.notify.remote(paths))
    if os.environ["EXPORT_LOG_LEVEL"] == "DEBUG":
        print(f"exported {len(paths)} shards, notified {sent}")


if __name__ == "__main__":
    main()
