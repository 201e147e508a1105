"""The same Ray Data filters as predicate expressions, which Arrow evaluates on whole columns:
ray-lint reports nothing here."""

import ray
from ray.data.expressions import col


def recent_clicks(n: int) -> int:
    events = ray.data.range(n).map_batches(
        lambda batch: {"id": batch["id"], "kind": batch["id"] % 4, "age_s": batch["id"] % 7200}
    )
    clicks = events.filter(expr=col("kind") == 1)
    recent = clicks.filter(expr=(col("age_s") < 3600) & (col("id") >= 0))
    return recent.count()


def odd_ids(n: int) -> int:
    # A method call: an expression cannot state it, so the lambda stays.
    return ray.data.range(n).filter(lambda row: str(row["id"]).endswith(("1", "3", "5", "7", "9"))).count()


if __name__ == "__main__":
    ray.init()
    print(recent_clicks(100_000))
    print(odd_ids(10_000))
