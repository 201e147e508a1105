"""The fixed version of gpu_udf_without_num_gpus.py: the `map_batches` call requests the GPU its UDF
uses, so Ray places each actor on a GPU of its own and sets its `CUDA_VISIBLE_DEVICES`."""

import numpy as np
import ray
import torch


class Embedder:
    def __init__(self) -> None:
        self.model = torch.nn.Linear(4, 2).to("cuda")

    def __call__(self, batch: dict) -> dict:
        features = np.stack([batch["id"]] * 4, axis=1).astype("float32")
        with torch.no_grad():
            embeddings = self.model(torch.as_tensor(features, device="cuda"))
        batch["embedding"] = embeddings.cpu().numpy()
        return batch


def embed(n: int) -> ray.data.Dataset:
    ds = ray.data.range(n)
    return ds.map_batches(Embedder, batch_size=64, num_gpus=1, compute=ray.data.ActorPoolStrategy(size=1))


if __name__ == "__main__":
    ray.init()
    embedded = embed(1_000)
    if torch.cuda.is_available():
        print(embedded.take(2))
