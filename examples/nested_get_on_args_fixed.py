"""The same totals given its refs as top-level arguments, which Ray resolves before the task starts:
ray-lint reports nothing here."""

import ray


@ray.remote
def count_events(day: int, shard: int) -> int:
    return len(f"day={day} shard={shard}".split())  # stands for counting one small log file


@ray.remote
def _total(*counts):
    return sum(counts)


def daily_totals(days: int) -> list[int]:
    reports = [_total.remote(*[count_events.remote(day, s) for s in range(3)]) for day in range(days)]
    return ray.get(reports)


if __name__ == "__main__":
    ray.init()
    print(sum(daily_totals(600)))
