"""Configuration the driver puts in its own environment: `ray-lint check examples/` reports the
RAY062 below, and `ray-lint verify examples/driver_env_not_propagated.py` replays it in a model.

Ray's workers are started by the raylet, with the environment the raylet had when `ray.init()`
started it (or when `ray start` did): a variable the driver sets afterwards never reaches them.
"""

import os
import time

import ray


@ray.remote
def export_report(rows: list[int]) -> str:
    out_dir = os.environ.get("REPORT_DIR", "/tmp")  # the workers see the default
    time.sleep(0.1)  # stands for writing the file
    return os.path.join(out_dir, f"report-{len(rows)}.csv")


def export_all(batches: list[list[int]]) -> list[str]:
    return ray.get([export_report.remote(rows) for rows in batches])


if __name__ == "__main__":
    ray.init()
    os.environ["REPORT_DIR"] = "/tmp/reports"  # RAY062: set after the workers' raylet started
    print(export_all([[1, 2, 3], [4, 5]]))
