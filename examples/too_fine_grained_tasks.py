"""Tasks that do almost nothing, one per element: `ray-lint check examples/` reports each RAY020 below,
and `ray-lint verify examples/too_fine_grained_tasks.py` times a task per element against batches."""

import ray

SENSORS = 1_000


@ray.remote
def to_fahrenheit(celsius: float) -> float:
    return celsius * 9 / 5 + 32


@ray.remote
def is_outlier(reading: float, low: float, high: float) -> bool:
    return reading < low or reading > high


def convert(readings: list[float]) -> list[float]:
    return ray.get([to_fahrenheit.remote(readings[i]) for i in range(SENSORS)])  # RAY020: one multiplication per task


def count_outliers(readings: list[float], low: float, high: float) -> int:
    refs = []
    for i in range(SENSORS):
        refs.append(is_outlier.remote(readings[i], low, high))  # RAY020: one comparison per task
    return sum(ray.get(refs))


if __name__ == "__main__":
    ray.init()
    celsius = [float(i % 40) for i in range(SENSORS)]
    print(convert(celsius)[:5])
    print(count_outliers(celsius, 5.0, 35.0))
