"""Ray code that blocks an async actor's event loop with `ray.get`: `ray-lint check examples/` reports
the RAY006 below, and `ray-lint verify examples/blocking_get_in_async.py` runs the rule's model of it
and measures the cost."""

import asyncio

import ray


@ray.remote
class Model:
    async def predict(self, features: list[float]) -> float:
        await asyncio.sleep(0.2)  # stands for a model server's reply
        return sum(features)


@ray.remote
class Gateway:
    def __init__(self) -> None:
        self.model = Model.remote()

    async def handle(self, request: dict[str, int]) -> float:
        features = [float(value) for value in request.values()]
        return ray.get(self.model.predict.remote(features))  # RAY006: every other request waits meanwhile


if __name__ == "__main__":
    ray.init()
    gateway = Gateway.remote()
    print(ray.get([gateway.handle.remote({"a": i, "b": 2 * i}) for i in range(4)]))
