"""The fixed form of train_missing_set_epoch.py: `sampler.set_epoch(epoch)` at the start of each epoch
gives the DistributedSampler a new seed, so every epoch reads a new order."""

import tempfile

import torch
from torch.utils.data import DataLoader, TensorDataset

import ray
import ray.train
import ray.train.torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_func(config: dict) -> None:
    dataset = TensorDataset(torch.arange(64, dtype=torch.float32).unsqueeze(1))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    loader = ray.train.torch.prepare_data_loader(loader)
    model = ray.train.torch.prepare_model(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)  # a new shuffle each epoch
        for (inputs,) in loader:
            loss = model(inputs).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        ray.train.report({"epoch": epoch, "loss": loss.item()})


if __name__ == "__main__":
    ray.init()
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"lr": 0.01, "epochs": 3},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    )
    trainer.fit()
