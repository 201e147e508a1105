"""The same app with the ingress awaiting the model's response: ray-lint reports nothing here."""

import ray
from ray import serve
from ray.serve.handle import DeploymentHandle


@serve.deployment(ray_actor_options={"num_cpus": 0})
class SentimentModel:
    """Stands for a model: scores a text from a tiny lexicon."""

    def __init__(self) -> None:
        self.lexicon = {"great": 1.0, "good": 0.5, "bad": -0.5, "awful": -1.0}

    async def predict(self, text: str) -> float:
        return sum(self.lexicon.get(word, 0.0) for word in text.lower().split())


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Ingress:
    def __init__(self, model: DeploymentHandle) -> None:
        self.model = model

    async def __call__(self, text: str) -> dict:
        score = await self.model.predict.remote(text)  # the replica serves other requests meanwhile
        return {"text": text, "label": "positive" if score > 0 else "negative"}


app = Ingress.bind(SentimentModel.bind())


if __name__ == "__main__":
    ray.init()
    serve.start(proxy_location="Disabled")
    try:
        handle = serve.run(app, name="sentiment", route_prefix=None)
        print(handle.remote("a great day").result(timeout_s=30))
    finally:
        serve.shutdown()
