"""The same work in a few batched tasks: each task gets enough elements to pay for Ray's overhead,
so ray-lint reports nothing here."""

import ray

SENSORS = 1_000
BATCH = 250


@ray.remote
def to_fahrenheit(readings: list[float]) -> list[float]:
    return [c * 9 / 5 + 32 for c in readings]


@ray.remote
def count_outliers_in(readings: list[float], low: float, high: float) -> int:
    return sum(1 for r in readings if r < low or r > high)


def convert(readings: list[float]) -> list[float]:
    parts = ray.get([to_fahrenheit.remote(readings[i : i + BATCH]) for i in range(0, SENSORS, BATCH)])
    return [f for part in parts for f in part]


def count_outliers(readings: list[float], low: float, high: float) -> int:
    refs = [count_outliers_in.remote(readings[i : i + BATCH], low, high) for i in range(0, SENSORS, BATCH)]
    return sum(ray.get(refs))


if __name__ == "__main__":
    ray.init()
    celsius = [float(i % 40) for i in range(SENSORS)]
    print(convert(celsius)[:5])
    print(count_outliers(celsius, 5.0, 35.0))
