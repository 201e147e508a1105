"""The model loaded once per GPU actor, and every call served by the actors: ray-lint reports nothing here."""

import time

import ray


def load_encoder(device: str):
    """Stands in for loading a model onto the GPU (`torch.load(path).to(device)`)."""
    time.sleep(0.1)
    return lambda text: [len(text) / 10, text.count(" ") / 10]


@ray.remote(num_gpus=1)
class Encoder:
    def __init__(self) -> None:
        self.encoder = load_encoder("cuda")

    def embed(self, text: str) -> list[float]:
        return self.encoder(text)


def embed_all(encoders: list, texts: list[str]) -> list[list[float]]:
    refs = [encoders[i % len(encoders)].embed.remote(t) for i, t in enumerate(texts)]
    return ray.get(refs)


def best_match(encoders: list, query: str, docs: list[str]) -> str:
    vectors = embed_all(encoders, [query, *docs])
    scores = [sum(a * b for a, b in zip(vectors[0], v)) for v in vectors[1:]]
    return docs[scores.index(max(scores))]


if __name__ == "__main__":
    ray.init(num_gpus=2)  # logical GPUs where the machine has none: enough for this example
    encoders = [Encoder.remote() for _ in range(2)]
    docs = ["ray runs tasks", "gpus are fast", "actors keep state"]
    print(embed_all(encoders, docs))
    print(best_match(encoders, "which keeps state", docs))
