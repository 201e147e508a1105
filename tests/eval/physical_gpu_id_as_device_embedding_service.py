"""Embedding service: GPU actors encode text batches, a GPU task fine-tunes a projection head."""

import logging
import os

import numpy as np
import pynvml
import ray
import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class ProjectionHead(nn.Module):
    def __init__(self, dim: int, out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.linear(x), dim=-1)


@ray.remote(num_gpus=1)
class Encoder:
    def __init__(self, checkpoint: str) -> None:
        gpu_id = ray.get_gpu_ids()[0]
        logger.info("encoder on physical GPU %s", gpu_id)
        self.device = torch.device(f"cuda:{gpu_id}")  # expect: RAY082
        self.model = torch.load(checkpoint, map_location="cpu").to(self.device)
        self.model.eval()

    def encode(self, batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            tensor = torch.from_numpy(batch).to(self.device)
            return self.model(tensor).cpu().numpy()

    def free_memory_mb(self) -> int:
        # NVML numbers GPUs physically, so the physical id is right here.
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(ray.get_gpu_ids()[0])
        return pynvml.nvmlDeviceGetMemoryInfo(handle).free // (1 << 20)


@ray.remote(num_gpus=2)
def fine_tune(features: np.ndarray, labels: np.ndarray, epochs: int) -> dict:
    gpus = ray.get_gpu_ids()
    torch.cuda.set_device(gpus[0])  # expect: RAY082
    head = ProjectionHead(features.shape[1], 64).cuda()
    head = nn.DataParallel(head, device_ids=gpus)  # expect: RAY082
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
    x = torch.from_numpy(features).cuda()
    y = torch.from_numpy(labels).cuda()
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(head(x), y)
        loss.backward()
        optimizer.step()
    return {k: v.cpu() for k, v in head.module.state_dict().items()}


@ray.remote(num_gpus=1)
def warm_cache(paths: list) -> int:
    # Maps the physical id to its place among the visible devices: correct.
    gpu_id = str(ray.get_gpu_ids()[0])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", gpu_id).split(",")
    device = torch.device(f"cuda:{visible.index(gpu_id)}")
    loaded = 0
    for path in paths:
        torch.load(path, map_location=device)
        loaded += 1
    return loaded


@ray.remote(num_gpus=1)
def score(batch: np.ndarray) -> float:
    device = torch.device("cuda")
    logger.info("scoring on GPUs %s", ray.get_gpu_ids())
    return float(torch.from_numpy(batch).to(device).sum())


def main(checkpoint: str, batches: list, features: np.ndarray, labels: np.ndarray) -> None:
    encoders = [Encoder.remote(checkpoint) for _ in range(2)]
    refs = [encoders[i % 2].encode.remote(batch) for i, batch in enumerate(batches)]
    embeddings = ray.get(refs)
    weights = ray.get(fine_tune.remote(features, labels, epochs=5))
    total = ray.get(score.remote(np.concatenate(batches)))
    print(len(embeddings), len(weights), total)


if __name__ == "__main__":
    ray.init()
    main("encoder.pt", [np.zeros((8, 16), dtype=np.float32)], np.zeros((8, 16)), np.zeros((8, 64)))
