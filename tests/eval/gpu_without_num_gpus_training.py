"""RAY040 gpu-without-num-gpus in a PyTorch hyper-parameter sweep with training and evaluation workers.

Findings: tasks and actors that use CUDA without asking Ray for a GPU (a bare decorator, `num_cpus`
only, `num_gpus=0`, options without `num_gpus`, `ray.remote(fn)`). Traps: GPUs requested in the
decorator (fractional, through a variable), by `.options` at a call site or `**opts`, availability
probes, CPU fallbacks, GPU code in plain helpers or in a nested function run later by a GPU worker.
"""

from __future__ import annotations

import os
import time

import numpy as np
import ray
import torch
import torch.nn as nn
import torch.nn.functional as F

GPUS_PER_TRIAL = float(os.environ.get("GPUS_PER_TRIAL", "1"))
EVAL_OPTIONS = {"num_cpus": 2, "num_gpus": 0.25}


def mlp(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, 4))


def synthetic_batch(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.normal(size=(n, 32)).astype(np.float32))
    return x, torch.from_numpy(rng.integers(0, 4, size=n))


def warm_start(model: nn.Module, path: str) -> nn.Module:
    # fine: a plain helper; only remote bodies are judged, and its callers request a GPU
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.cuda()


@ray.remote  # expect: RAY040
def train_trial(config: dict) -> dict:
    model = mlp(config["hidden"]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    for step in range(config["steps"]):
        x, y = synthetic_batch(config["batch_size"], step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
        loss.backward()
        opt.step()
    return {"config": config, "loss": float(loss)}


@ray.remote(num_gpus=1)
def train_trial_on_gpu(config: dict, checkpoint: str | None = None) -> dict:
    # fine: the decorator reserves a GPU for the trial
    model = mlp(config["hidden"])
    model = warm_start(model, checkpoint) if checkpoint else model.cuda()
    return {"config": config, "params": sum(p.numel() for p in model.parameters())}


@ray.remote(num_cpus=4)  # expect: RAY040
def evaluate_checkpoint(path: str) -> float:
    device = torch.device("cuda:0")
    model = mlp(128)
    model.load_state_dict(torch.load(path, map_location="cpu"))
    x, y = synthetic_batch(2048, seed=0)
    return float((model.to(device)(x.to(device)).argmax(-1) == y.to(device)).float().mean())


@ray.remote(num_gpus=0.5)
def evaluate_shared_gpu(path: str) -> float:
    # fine: a fractional GPU is still a GPU request; two evaluations share one device
    model = mlp(128).to(torch.device("cuda")).eval()
    model.load_state_dict(torch.load(path, map_location="cuda"))
    return float(model(torch.randn(256, 32).cuda()).softmax(-1).max(-1).values.mean())


@ray.remote(num_gpus=0)  # expect: RAY040
def profile_forward(hidden: int, batch_size: int) -> float:
    model = mlp(hidden).to("cuda")
    x = torch.randn(batch_size, 32).to("cuda")
    start = time.perf_counter()
    model(x)
    torch.cuda.synchronize()
    return time.perf_counter() - start


@ray.remote(max_retries=2)  # expect: RAY040
def mixed_precision_step(config: dict, seed: int) -> float:
    torch.cuda.manual_seed_all(seed)
    model = mlp(config["hidden"])
    x, y = synthetic_batch(256, seed)
    with torch.cuda.amp.autocast():
        loss = F.cross_entropy(model(x), y)
    return float(loss)


def distill(teacher_path: str, hidden: int) -> float:
    teacher = mlp(512).to(device="cuda:1").eval()
    teacher.load_state_dict(torch.load(teacher_path, map_location="cpu"))
    student = mlp(hidden).to(device="cuda:1")
    x = torch.randn(512, 32).to(device="cuda:1")
    target = teacher(x).softmax(-1).detach()
    return float(F.kl_div(student(x).log_softmax(-1), target, reduction="batchmean"))


distill_task = ray.remote(distill)  # expect: RAY040


@ray.remote(num_gpus=GPUS_PER_TRIAL)
def train_with_budget(config: dict) -> float:
    # fine: the GPU share comes from a variable; its value is unknown, so the rule stays quiet
    model = mlp(config["hidden"]).cuda()
    return float(sum(p.norm() for p in model.parameters()))


@ray.remote
def evaluate_with_options(path: str) -> float:
    # fine: the call site passes **EVAL_OPTIONS, which may carry num_gpus
    model = mlp(128).cuda().eval()
    return float(model(torch.randn(16, 32).cuda()).mean())


@ray.remote
def finetune(config: dict, path: str) -> float:
    # fine: the sweep launches it with finetune.options(num_gpus=1)
    model = mlp(config["hidden"])
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return float(sum(p.norm() for p in model.cuda().parameters()))


@ray.remote
def gpu_inventory() -> dict:
    # fine: only probes what the worker can see; nothing is allocated on a device
    return {
        "available": torch.cuda.is_available(),
        "count": torch.cuda.device_count(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_build": torch.version.cuda,
    }


@ray.remote
def smoke_test(hidden: int) -> float:
    # fine: runs wherever it lands, CPU fallback included
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = mlp(hidden).to(device)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return float(model(torch.randn(8, 32, device=device)).sum())


@ray.remote
def build_collate(pad_value: float):
    # fine: the returned collate function runs later inside the GPU trainers, not in this task
    def collate(rows: list[torch.Tensor]) -> torch.Tensor:
        batch = nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_value)
        return batch.cuda(non_blocking=True)

    return collate


@ray.remote(  # expect: RAY040
    num_cpus=2,
    max_restarts=1,
)
class DataParallelWorker:
    def __init__(self, rank: int, hidden: int) -> None:
        self.rank = rank
        self.model = mlp(hidden)
        self.buffer = torch.zeros(1024, 32, device="cuda")

    def train_epoch(self, seed: int) -> float:
        x, y = synthetic_batch(1024, seed + self.rank)
        return float(F.cross_entropy(self.model(x), y))


@ray.remote  # expect: RAY040
class Evaluator:
    def __init__(self, hidden: int) -> None:
        self.model = mlp(hidden).eval()

    def score(self, path: str) -> float:
        self.model.load_state_dict(torch.load(path, map_location="cpu"))
        torch.cuda.set_device(0)
        return float(self.model.cuda()(torch.randn(64, 32).cuda()).mean())


@ray.remote
class GpuTrainer:
    # fine: created below with GpuTrainer.options(num_gpus=1)
    def __init__(self, hidden: int) -> None:
        self.model = mlp(hidden).cuda()
        self.steps = 0

    def step(self, seed: int) -> int:
        x, y = synthetic_batch(64, seed)
        F.cross_entropy(self.model(x.cuda()), y.cuda()).backward()
        self.steps += 1
        return self.steps


def run_sweep(configs: list[dict], checkpoint: str) -> list:
    ray.init()
    refs = [train_trial.remote(c) for c in configs]
    refs += [train_trial_on_gpu.remote(c, checkpoint) for c in configs]
    refs += [train_with_budget.remote(c) for c in configs]
    refs += [finetune.options(num_gpus=1).remote(c, checkpoint) for c in configs]
    refs += [
        evaluate_checkpoint.remote(checkpoint),
        evaluate_shared_gpu.remote(checkpoint),
        profile_forward.options(num_cpus=1).remote(128, 512),
        mixed_precision_step.remote(configs[0], 0),
        distill_task.remote(checkpoint, 64),
        evaluate_with_options.options(**EVAL_OPTIONS).remote(checkpoint),
        build_collate.remote(0.0),
        gpu_inventory.remote(),
        smoke_test.remote(64),
    ]
    workers = [DataParallelWorker.remote(rank, 256) for rank in range(4)]
    refs += [w.train_epoch.remote(7) for w in workers]
    evaluator = Evaluator.options(name="evaluator", num_cpus=1).remote(256)
    trainer = GpuTrainer.options(num_gpus=1, num_cpus=4).remote(256)
    refs += [evaluator.score.remote(checkpoint), trainer.step.remote(0)]
    return ray.get(refs)
