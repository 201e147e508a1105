"""The same gateway awaiting the reply, so that its requests overlap: ray-lint reports nothing here."""

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
        return await self.model.predict.remote(features)  # yields the event loop to the other requests


if __name__ == "__main__":
    ray.init()
    gateway = Gateway.remote()
    print(ray.get([gateway.handle.remote({"a": i, "b": 2 * i}) for i in range(4)]))
