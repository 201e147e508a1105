"""The fix for examples/libraries/large_report_payload.py: each result holds the loss alone, and the
weights go into a checkpoint with the last one, which Tune keeps out of the metrics and its loggers."""

import os
import tempfile

import numpy as np
import ray
from ray import tune

INPUTS = np.random.rand(200, 784)
TARGETS = np.random.rand(200, 2000)


def train_linear(config: dict) -> None:
    """Gradient descent on a multi-output linear model; reports the loss after each epoch."""
    weights = np.zeros((784, 2000))  # 12.5 MB
    for epoch in range(config["epochs"]):
        residual = INPUTS @ weights - TARGETS
        weights[:] = weights - config["lr"] * INPUTS.T @ residual / len(INPUTS)
        metrics = {"loss": float(np.mean(residual**2))}
        if epoch < config["epochs"] - 1:
            tune.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as directory:
            np.save(os.path.join(directory, "weights.npy"), weights)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))


def sweep() -> float:
    tuner = tune.Tuner(
        train_linear,
        param_space={"lr": tune.grid_search([0.001, 0.01]), "epochs": 5},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
    )
    return tuner.fit().get_best_result().config["lr"]


if __name__ == "__main__":
    ray.init()
    print(sweep())
