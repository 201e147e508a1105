"""Ray Data filters written as Python lambdas that only compare columns: `ray-lint check examples/`
reports each RAY112 below, and `ray-lint verify examples/libraries/filter_fn_instead_of_expr.py` times a
lambda predicate against the same predicate as an expression."""

import ray


def recent_clicks(n: int) -> int:
    events = ray.data.range(n).map_batches(
        lambda batch: {"id": batch["id"], "kind": batch["id"] % 4, "age_s": batch["id"] % 7200}
    )
    clicks = events.filter(lambda row: row["kind"] == 1)  # RAY112: one Python call per row
    recent = clicks.filter(fn=lambda row: row["age_s"] < 3600 and row["id"] >= 0)  # RAY112
    return recent.count()


def odd_ids(n: int) -> int:
    # A method call: an expression cannot state it, so the lambda stays.
    return ray.data.range(n).filter(lambda row: str(row["id"]).endswith(("1", "3", "5", "7", "9"))).count()


if __name__ == "__main__":
    ray.init()
    print(recent_clicks(100_000))
    print(odd_ids(10_000))
