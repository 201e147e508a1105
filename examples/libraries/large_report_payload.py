"""A Tune sweep whose trials report their weights with every result: `ray-lint check examples/` reports
RAY203 below, and `ray-lint verify examples/libraries/large_report_payload.py` times it against reporting
the loss alone."""

import tempfile

import numpy as np
import ray
from ray import tune

INPUTS = np.random.rand(200, 784)
TARGETS = np.random.rand(200, 2000)


def train_linear(config: dict) -> None:
    """Gradient descent on a multi-output linear model; reports the loss after each epoch."""
    weights = np.zeros((784, 2000))  # 12.5 MB
    for _ in range(config["epochs"]):
        residual = INPUTS @ weights - TARGETS
        weights[:] = weights - config["lr"] * INPUTS.T @ residual / len(INPUTS)
        tune.report({"loss": float(np.mean(residual**2)), "weights": weights})  # RAY203: sent and logged every epoch


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
