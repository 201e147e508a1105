"""The same work with quantities Ray takes: ray-lint reports nothing here."""

import time

import ray


@ray.remote(num_cpus=1)
def crunch(chunk: list[int]) -> int:
    time.sleep(0.1)  # stands in for real work
    return sum(x * x for x in chunk)


@ray.remote(num_gpus=2)
class Trainer:
    def __init__(self, lr: float) -> None:
        self.lr = lr

    def step(self, loss: float) -> float:
        return loss * (1 - self.lr)


@ray.remote
def score(x: int) -> int:
    return x + 1


def run(data: list[int]) -> tuple[int, float, list[int]]:
    total = sum(ray.get([crunch.remote(data[i : i + 4]) for i in range(0, len(data), 4)]))
    trainer = Trainer.remote(0.1)
    loss = ray.get(trainer.step.remote(1.0))
    scores = ray.get([score.options(num_cpus=0.25).remote(x) for x in data[:3]])
    return total, loss, scores


if __name__ == "__main__":
    ray.init()
    print(run(list(range(12))))
