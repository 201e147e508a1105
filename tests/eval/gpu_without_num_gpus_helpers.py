"""RAY040 gpu-without-num-gpus in a CT-scan segmentation pipeline whose GPU code lives in helpers.

Findings: the GPU is used one call away from the task or actor, so the decorator looks harmless: a
task that calls a module helper doing `.cuda()`, one whose helper does `.to("cuda")`, an actor whose
`__init__` calls a module `build_model()` that moves the network to CUDA, a task that launches a
Numba `@cuda.jit` kernel as `kernel[blocks, threads](a)`, and a helper two calls deep. Traps: a
helper that picks the device with `"cuda" if torch.cuda.is_available() else "cpu"`, a GPU helper
called only under `if use_gpu:`, a task with `num_gpus=1`, a task given `.options(num_gpus=1)` at
its call site, a Numba CPU kernel, and a Ray Train launch with `ScalingConfig(use_gpu=True)`
(whose loop, though, trains a model it never prepares: RAY213).
"""

from __future__ import annotations

import math

import numpy as np
import ray
import torch
import torch.nn as nn
from numba import cuda, njit
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer

CHECKPOINT = "/models/unet3d-ct.pt"
HU_WINDOW = (-1000.0, 400.0)
THREADS_PER_BLOCK = 256


def load_segmenter(path: str = CHECKPOINT) -> nn.Module:
    model = torch.jit.load(path, map_location="cpu")
    return model.cuda().eval()


def to_gpu_batch(volume: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(volume, dtype=torch.float32).unsqueeze(0).to("cuda")


def build_model(channels: int, classes: int) -> nn.Module:
    net = nn.Sequential(
        nn.Conv3d(1, channels, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv3d(channels, classes, kernel_size=1),
    )
    return net.to("cuda")


def upload(volume: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(volume).cuda(non_blocking=True)


def normalize_window(volume: np.ndarray) -> torch.Tensor:
    low, high = HU_WINDOW
    clipped = np.clip(volume, low, high)
    return upload(((clipped - low) / (high - low)).astype(np.float32))


def pick_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_portable(path: str = CHECKPOINT) -> nn.Module:
    model = torch.jit.load(path, map_location="cpu").eval()
    return model.cuda() if torch.cuda.is_available() else model


@cuda.jit
def window_kernel(voxels, low, high):
    i = cuda.grid(1)
    if i < voxels.size:
        voxels[i] = min(max(voxels[i], low), high)


@njit(cache=True)
def window_on_cpu(voxels: np.ndarray, low: float, high: float) -> np.ndarray:
    return np.minimum(np.maximum(voxels, low), high)


@ray.remote  # expect: RAY040
def segment_scan(volume: np.ndarray) -> np.ndarray:
    model = load_segmenter()
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.as_tensor(volume, dtype=torch.float32)[None, None].to(device))
    return logits.argmax(dim=1).squeeze(0).cpu().numpy()


@ray.remote(num_cpus=2)  # expect: RAY040
def lung_volume_ml(volume: np.ndarray, spacing_mm: tuple[float, float, float]) -> float:
    batch = to_gpu_batch(volume)
    voxel_ml = math.prod(spacing_mm) / 1000.0
    return float(((batch > -500) & (batch < -300)).sum().item() * voxel_ml)


@ray.remote  # expect: RAY040
class OrganSegmenter:
    def __init__(self, channels: int = 16, classes: int = 5) -> None:
        self.model = build_model(channels, classes).eval()

    def segment(self, volume: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(volume, dtype=torch.float32)[None, None]
        with torch.no_grad():
            return self.model(x.to(next(self.model.parameters()).device)).argmax(1)[0].cpu().numpy()


@ray.remote(max_retries=2)  # expect: RAY040
def window_scan(volume: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(volume, dtype=np.float32).ravel()
    blocks = (flat.size + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    window_kernel[blocks, THREADS_PER_BLOCK](flat, *HU_WINDOW)
    return flat.reshape(volume.shape)


@ray.remote  # expect: RAY040
def mean_attenuation(volume: np.ndarray) -> float:
    windowed = normalize_window(volume)
    return float(windowed.mean().item())


@ray.remote
def window_scan_cpu(volume: np.ndarray) -> np.ndarray:
    # fine: the Numba kernel is compiled for the CPU
    return window_on_cpu(volume.astype(np.float32), *HU_WINDOW)


@ray.remote
def portable_segment(volume: np.ndarray) -> np.ndarray:
    # fine: the device is picked at run time and falls back to the CPU
    model = load_portable()
    x = torch.as_tensor(volume, dtype=torch.float32)[None, None].to(pick_device())
    with torch.no_grad():
        return model(x).argmax(1)[0].cpu().numpy()


@ray.remote
def qc_check(volume: np.ndarray, use_gpu: bool = False) -> float:
    # fine: the GPU helper runs only when the caller asks for it; otherwise numpy on the CPU
    if use_gpu:
        return float(upload(volume.astype(np.float32)).std().item())
    return float(volume.std())


@ray.remote(num_gpus=1)
def segment_scan_gpu(volume: np.ndarray) -> np.ndarray:
    # fine: requests its GPU in the decorator
    model = load_segmenter()
    with torch.no_grad():
        return model(to_gpu_batch(volume).unsqueeze(0)).argmax(1)[0].cpu().numpy()


@ray.remote
def refine_mask(volume: np.ndarray, mask: np.ndarray) -> np.ndarray:
    # fine: launched below as refine_mask.options(num_gpus=1).remote(...)
    x = normalize_window(volume)
    return (x > 0.5).cpu().numpy() & mask.astype(bool)


def train_loop_per_worker(config: dict) -> None:
    model = build_model(config["channels"], config["classes"])  # expect: RAY213
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    for _ in range(config["epochs"]):
        optimizer.zero_grad()
        loss = model(torch.randn(2, 1, 32, 32, 32, device="cuda")).mean()
        loss.backward()
        optimizer.step()


@ray.remote
def launch_finetune(config: dict) -> dict:
    # fine: Ray Train schedules the GPU workers through ScalingConfig(use_gpu=True)
    trainer = TorchTrainer(train_loop_per_worker, train_loop_config=config, scaling_config=ScalingConfig(num_workers=4, use_gpu=True))
    return trainer.fit().metrics


def run_study(scans: list[np.ndarray], spacing: tuple[float, float, float], use_gpu: bool) -> dict:
    ray.init()
    segmenters = [OrganSegmenter.remote() for _ in range(4)]
    study = np.stack(scans)  # the GPU tasks take the whole study at once
    masks = ray.get(segment_scan.remote(study))
    refs = {
        "lung_ml": lung_volume_ml.remote(study, spacing),
        "organs": [segmenters[i % 4].segment.remote(v) for i, v in enumerate(scans)],
        "windowed": window_scan.remote(study),
        "windowed_cpu": [window_scan_cpu.remote(v) for v in scans],
        "attenuation": mean_attenuation.remote(study),
        "portable": [portable_segment.remote(v) for v in scans],
        "qc": [qc_check.remote(v, use_gpu) for v in scans],
        "reference": segment_scan_gpu.remote(scans[0]),
        "refined": [refine_mask.options(num_gpus=1).remote(v, m) for v, m in zip(scans, masks)],
    }
    metrics = launch_finetune.remote({"channels": 16, "classes": 5, "lr": 3e-4, "epochs": 2})
    return {name: ray.get(group) for name, group in refs.items()} | {"finetune": ray.get(metrics)}
