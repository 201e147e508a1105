"""A Ray Data UDF that puts its model on the GPU while its `map_batches` call requests none:
`ray-lint check examples/` reports the RAY104 below, and `ray-lint verify
examples/libraries/gpu_udf_without_num_gpus.py` shows what GPUs such an actor sees, without and with `num_gpus`."""

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
    return ds.map_batches(Embedder, batch_size=64, compute=ray.data.ActorPoolStrategy(size=1))  # RAY104: no num_gpus


if __name__ == "__main__":
    ray.init()
    embedded = embed(1_000)
    if torch.cuda.is_available():
        print(embedded.take(2))
