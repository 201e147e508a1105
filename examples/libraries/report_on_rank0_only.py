"""A Ray Train loop that reports only from rank 0: `ray-lint check examples/` reports RAY211 below, and
`ray-lint verify examples/libraries/report_on_rank0_only.py` shows `fit()` never returning once the other
worker has finished its loop."""

import tempfile

import ray
import ray.train
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model
from torch import nn


def train_func(config: dict) -> None:
    torch.manual_seed(0)
    model = prepare_model(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    rank = ray.train.get_context().get_world_rank()
    inputs = torch.randn(64, 4, generator=torch.Generator().manual_seed(rank))
    targets = inputs.sum(dim=1, keepdim=True)
    for epoch in range(config["epochs"]):
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            ray.train.report({"epoch": epoch, "loss": loss.item()})  # RAY211: rank 1 never reports: rank 0 waits


if __name__ == "__main__":
    ray.init()
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.05, "epochs": 3},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    )
    print(trainer.fit().metrics)
