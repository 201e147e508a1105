"""Ray Train rules (RAY211, RAY213-RAY216) in a FashionMNIST-style classifier trained with TorchTrainer.

Findings: a model trained without `prepare_model` (built in the loop, or by a helper), a DataLoader
every worker reads whole, a prepared shuffled loader read each epoch without `set_epoch`, a user
`DistributedSampler` without `set_epoch`, hard-coded CUDA devices on a GPU trainer, and a report
only rank 0 reaches. Traps: the tutorial's correct loop, a model prepared inside its builder, a
one-worker trainer, an evaluation-only loop, a rank-0 evaluation loader, a Ray Data shard, CUDA on
a CPU trainer, and the documented report with `checkpoint=None` on the other ranks.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ray.data
import ray.train
import ray.train.torch
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

NUM_WORKERS = int(os.environ.get("NUM_WORKERS", "2"))


class NeuralNetwork(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.stack = nn.Sequential(nn.Linear(28 * 28, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stack(self.flatten(x))


def fake_images(n: int) -> TensorDataset:
    return TensorDataset(torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,)))


def build_prepared_model() -> nn.Module:
    return ray.train.torch.prepare_model(NeuralNetwork())


def build_model() -> nn.Module:
    return NeuralNetwork()


def save_checkpoint(model: nn.Module, metrics: dict) -> None:
    with tempfile.TemporaryDirectory() as folder:
        torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
        checkpoint = Checkpoint.from_directory(folder)
        if ray.train.get_context().get_world_rank() == 0:
            ray.train.report(metrics, checkpoint=checkpoint)
        else:
            ray.train.report(metrics, checkpoint=None)


def train_func(config: dict) -> None:
    """The tutorial's loop: everything prepared, set_epoch each epoch, every rank reports."""
    loader = DataLoader(fake_images(256), batch_size=config["batch_size"], shuffle=True)
    loader = ray.train.torch.prepare_data_loader(loader)
    model = build_prepared_model()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        for images, labels in loader:
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        save_checkpoint(model, {"epoch": epoch, "loss": loss.item()})


def train_func_unprepared(config: dict) -> None:
    model = NeuralNetwork()  # expect: RAY213
    loader = DataLoader(fake_images(256), batch_size=config["batch_size"], shuffle=True)  # expect: RAY214
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for images, labels in loader:
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        ray.train.report({"epoch": epoch, "loss": loss.item()})


def train_func_helper_model(config: dict) -> None:
    model = build_model()  # expect: RAY213
    loader = ray.train.torch.prepare_data_loader(DataLoader(fake_images(128), batch_size=32))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for images, labels in loader:
        nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()
    ray.train.report({"done": 1})


def train_func_same_order(config: dict) -> None:
    loader = DataLoader(fake_images(256), batch_size=config["batch_size"], shuffle=True)
    loader = ray.train.torch.prepare_data_loader(loader)
    model = ray.train.torch.prepare_model(NeuralNetwork())
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for images, labels in loader:  # expect: RAY215
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
        if ray.train.get_context().get_world_rank() == 0:
            val_loader = DataLoader(fake_images(64), batch_size=64)
            for images, labels in val_loader:
                print(epoch, model(images).argmax(dim=1).eq(labels).float().mean().item())
        ray.train.report({"epoch": epoch})


def train_func_own_sampler(config: dict) -> None:
    dataset = fake_images(256)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=config["batch_size"], sampler=sampler)
    model = ray.train.torch.prepare_model(NeuralNetwork())
    for epoch in range(config["epochs"]):
        for images, labels in loader:  # expect: RAY215
            nn.functional.cross_entropy(model(images), labels).backward()
        ray.train.report({"epoch": epoch})


def train_func_on_gpu(config: dict) -> None:
    model = ray.train.torch.prepare_model(NeuralNetwork()).cuda()
    shard = ray.train.get_dataset_shard("train")
    for batch in shard.iter_torch_batches(batch_size=config["batch_size"], device="cuda:0"):  # expect: RAY216
        nn.functional.cross_entropy(model(batch["image"]), batch["label"].to("cuda")).backward()
    if ray.train.get_context().get_world_rank() == 0:
        ray.train.report({"done": 1})  # expect: RAY211


def train_func_on_cpu(config: dict) -> None:
    model = ray.train.torch.prepare_model(NeuralNetwork())
    images = torch.randn(8, 1, 28, 28).to("cuda" if torch.cuda.is_available() else "cpu")
    nn.functional.cross_entropy(model(images), torch.zeros(8, dtype=torch.long)).backward()
    ray.train.report({"done": 1})


def evaluate_func(config: dict) -> None:
    model = NeuralNetwork()
    model.eval()
    loader = ray.train.torch.prepare_data_loader(DataLoader(fake_images(128), batch_size=64))
    with torch.no_grad():
        correct = sum(model(images).argmax(dim=1).eq(labels).sum().item() for images, labels in loader)
    ray.train.report({"correct": correct})


def single_worker_func(config: dict) -> None:
    model = NeuralNetwork()
    loader = DataLoader(fake_images(128), batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for images, labels in loader:
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
    ray.train.report({"done": 1})


def fit(loop, use_gpu: bool = False, workers: int = NUM_WORKERS, **kwargs) -> None:
    """Not a trainer call ray-lint can follow: the loop is a parameter."""
    TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu), **kwargs).fit()


def main() -> None:
    config = {"lr": 1e-3, "batch_size": 32, "epochs": 2}
    run_config = RunConfig(storage_path=tempfile.mkdtemp())
    scaling = ScalingConfig(num_workers=NUM_WORKERS, use_gpu=False)
    for loop in (train_func, train_func_unprepared, train_func_helper_model, train_func_same_order, train_func_own_sampler):
        TorchTrainer(loop, train_loop_config=config, scaling_config=scaling, run_config=run_config).fit()
    TorchTrainer(train_func_unprepared, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(train_func, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(train_func_unprepared, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(train_func_helper_model, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(train_func_same_order, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(train_func_own_sampler, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(
        train_func_on_gpu,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=4, use_gpu=True),
        datasets={"train": ray.data.range(10)},
    ).fit()
    TorchTrainer(train_func_on_cpu, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2, use_gpu=False)).fit()
    TorchTrainer(evaluate_func, train_loop_config=config, scaling_config=scaling).fit()
    TorchTrainer(single_worker_func, train_loop_config=config, scaling_config=ScalingConfig(num_workers=1)).fit()


if __name__ == "__main__":
    main()
