"""A physical GPU id used as a CUDA device index: `ray-lint check examples/` reports the RAY082
below, and `ray-lint verify examples/physical_gpu_id_as_device.py` replays it in a model: on two
GPUs (logical ones will do), the index each task would use beside the devices Ray lets it see.

Ray sets `CUDA_VISIBLE_DEVICES` to the GPUs it gives an actor, so CUDA numbers them from 0: the
actor given GPU 1 sees one device, `cuda:0`, and `cuda:1` fails with "invalid device ordinal".
"""

import time

import ray


@ray.remote(num_gpus=1)
class Embedder:
    def __init__(self, model_name: str) -> None:
        self.device = f"cuda:{ray.get_gpu_ids()[0]}"  # RAY082: the physical id, not the visible index
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
