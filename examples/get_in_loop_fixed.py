"""The same work written so that the tasks run in parallel: ray-lint reports nothing here."""

import ray


@ray.remote
def square(x: int) -> int:
    return x * x


def parallel_squares(n: int) -> list[int]:
    return ray.get([square.remote(i) for i in range(n)])


def as_they_finish(n: int) -> list[int]:
    pending = [square.remote(i) for i in range(n)]
    results = []
    while pending:
        ready, pending = ray.wait(pending)
        results.append(ray.get(ready[0]))
    return results


def iterate(steps: int) -> int:
    x = 1
    for _ in range(steps):
        x = ray.get(square.remote(x))  # each step needs the previous result: inherently sequential
    return x
