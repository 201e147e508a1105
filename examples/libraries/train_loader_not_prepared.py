"""A Ray Train loop whose DataLoader every worker reads whole: `ray-lint check` reports RAY214 below,
and `ray-lint verify examples/libraries/train_loader_not_prepared.py` counts the samples each worker reads."""

import tempfile

import torch
from torch.utils.data import DataLoader, TensorDataset

import ray
import ray.train
import ray.train.torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_func(config: dict) -> None:
    dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(dataset, batch_size=32)  # RAY214: both workers read all 256 samples
    model = ray.train.torch.prepare_model(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        seen = 0
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(inputs)
        ray.train.report({"epoch": epoch, "samples": seen})


if __name__ == "__main__":
    ray.init()
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.01, "epochs": 2},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    )
    trainer.fit()
