"""The fixed form of train_model_not_prepared.py: `prepare_model` wraps the model in
DistributedDataParallel, so every worker applies the same averaged gradients."""

import tempfile

import torch
from torch import nn

import ray
import ray.train
import ray.train.torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def train_func(config: dict) -> None:
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(Regressor())  # gradients are averaged across workers
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    rank = ray.train.get_context().get_world_rank()
    inputs = torch.randn(64, 4, generator=torch.Generator().manual_seed(rank))
    targets = inputs.sum(dim=1, keepdim=True)
    for epoch in range(config["epochs"]):
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ray.train.report({"epoch": epoch, "loss": loss.item()})


if __name__ == "__main__":
    ray.init()
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.05, "epochs": 3},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    )
    trainer.fit()
