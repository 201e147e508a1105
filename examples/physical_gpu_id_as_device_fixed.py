"""The same embedders on `cuda:0`, the first of the GPUs Ray made visible to each actor: ray-lint
reports nothing here."""

import time

import ray


@ray.remote(num_gpus=1)
class Embedder:
    def __init__(self, model_name: str) -> None:
        self.device = "cuda:0"  # the GPU Ray assigned, whichever physical one it is
        self.model_name = model_name  # the encoder would be loaded onto self.device here

    def embed(self, texts: list[str]) -> list[float]:
        time.sleep(0.1)  # stands for running the encoder on self.device
        return [float(len(text)) for text in texts]

    def where(self) -> str:
        return self.device


def embed_all(shards: list[list[str]]) -> list[list[float]]:
    embedders = [Embedder.remote("mini-encoder") for _ in shards]
    print("devices:", ray.get([e.where.remote() for e in embedders]))
    return ray.get([e.embed.remote(shard) for e, shard in zip(embedders, shards)])


if __name__ == "__main__":
    ray.init(num_gpus=2)  # logical GPUs are enough to see which index each actor would use
    print(embed_all([["a", "bb"], ["ccc"]]))
