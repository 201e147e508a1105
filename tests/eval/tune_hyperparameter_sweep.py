"""A hyperparameter sweep with Ray Tune over a small tabular regression problem: a function trainable
(per-epoch mini-batch SGD), a class trainable (gradient-boosting rounds), and the driver code that
builds search spaces and Tuners.

Reported: a feature matrix put in `param_space` (RAY201), a matrix handed to the trainable with
`functools.partial` and a nested objective that closes over a matrix (RAY202), weights and a large
buffer reported as metrics (RAY203), a report on every batch (RAY204), and `tune.report` inside a
`tune.Trainable` subclass (RAY206).

Left silent: data passed with `tune.with_parameters`, `ray.put` refs and file paths in the config,
small lists and grid values, per-class accuracies as metrics, weights saved in a checkpoint, a report
once per epoch or every 50 batches, `step()` returning its metrics, a function trainable built inside
a method of a `Trainable`, a module-level trainable reading a module-level array, and small
`functools.partial` arguments.
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np
import ray
from ray import tune

N_ROWS = 20_000
N_FEATURES = 256
FEATURES = np.random.rand(N_ROWS, N_FEATURES)  # 41 MB of float64
TARGETS = np.random.rand(N_ROWS)
CLASS_WEIGHTS = [1.0, 2.0, 0.5]
BATCH_SIZE = 512


def batches(x: np.ndarray, y: np.ndarray, size: int):
    for start in range(0, len(x), size):
        yield x[start : start + size], y[start : start + size]


def sgd_epoch(weights: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float) -> float:
    losses = []
    for xb, yb in batches(x, y, BATCH_SIZE):
        error = xb @ weights - yb
        weights -= lr * xb.T @ error / len(xb)
        losses.append(float(np.mean(error**2)))
    return float(np.mean(losses))


def train_sgd(config: dict, features: np.ndarray, targets: np.ndarray) -> None:
    """The function trainable: one report per epoch, with a checkpoint of the weights."""
    weights = np.zeros(features.shape[1])
    for epoch in range(config["epochs"]):
        loss = sgd_epoch(weights, features, targets, config["lr"])
        with tempfile.TemporaryDirectory() as directory:
            np.save(os.path.join(directory, "weights.npy"), weights)
            tune.report(
                {"loss": loss, "epoch": epoch, "class_weights": CLASS_WEIGHTS},
                checkpoint=tune.Checkpoint.from_directory(directory),
            )


def train_sgd_verbose(config: dict, features: np.ndarray, targets: np.ndarray) -> None:
    """A debugging variant that reports every batch, and every 50th batch with its gradient norm."""
    weights = np.zeros(features.shape[1])
    for epoch in range(config["epochs"]):
        for step, (xb, yb) in enumerate(batches(features, targets, BATCH_SIZE)):
            error = xb @ weights - yb
            gradient = xb.T @ error / len(xb)
            weights -= config["lr"] * gradient
            tune.report({"loss": float(np.mean(error**2)), "epoch": epoch})  # expect: RAY204
            if step % 50 == 0:
                tune.report({"gradient_norm": float(np.linalg.norm(gradient))})


def train_from_config(config: dict) -> None:
    """Reads its data from the config: a ref, or a path to load from."""
    features = ray.get(config["features_ref"]) if "features_ref" in config else np.load(config["path"])
    weights = np.zeros(features.shape[1])
    residuals = np.zeros((4000, 512))
    tune.report({"loss": float(np.mean(features @ weights)), "weights": weights})
    tune.report({"loss": 0.0, "residuals": residuals})  # expect: RAY203


def train_on_module_data(config: dict) -> None:
    """A module-level trainable reading module-level arrays: pickled by reference when imported."""
    weights = np.zeros(N_FEATURES)
    loss = sgd_epoch(weights, FEATURES, TARGETS, config["lr"])
    tune.report({"loss": loss})


class BoostingTrainable(tune.Trainable):
    """The class trainable: one boosting round per `step()`, metrics returned from it."""

    def setup(self, config: dict) -> None:
        self.rounds = 0
        self.prediction = np.zeros(N_ROWS)
        self.learning_rate = config["learning_rate"]

    def step(self) -> dict:
        residual = TARGETS - self.prediction
        self.prediction += self.learning_rate * residual.mean()
        self.rounds += 1
        return {"loss": float(np.mean(residual**2)), "rounds": self.rounds}

    def save_checkpoint(self, checkpoint_dir: str) -> dict:
        return {"prediction": self.prediction, "rounds": self.rounds}

    def load_checkpoint(self, checkpoint: dict) -> None:
        self.prediction, self.rounds = checkpoint["prediction"], checkpoint["rounds"]

    def probe(self) -> tune.Tuner:
        """Builds a small function trainable of its own: `tune.report` is right there."""

        def quick(config: dict) -> None:
            tune.report({"score": config["x"] * self.learning_rate})

        return tune.Tuner(quick, param_space={"x": tune.grid_search([1, 2])})


class LoggingBoostingTrainable(BoostingTrainable):
    """Adds logging through Tune's `report`, which a class trainable must not use."""

    def step(self) -> dict:
        result = super().step()
        tune.report(result)  # expect: RAY206
        return result


class NetTrainable(tune.Trainable):
    def setup(self, config: dict) -> None:
        self.net = build_net(config)

    def step(self) -> dict:
        loss = self.net.fit_epoch()
        tune.report({"loss": loss})  # expect: RAY206
        return {"loss": loss, "weights": self.net.state_dict()}  # expect: RAY203


def build_net(config: dict):
    raise NotImplementedError("stands for a torch model")


def sweep_with_parameters(storage: str) -> tune.ResultGrid:
    tuner = tune.Tuner(
        tune.with_parameters(train_sgd, features=FEATURES, targets=TARGETS),
        param_space={"lr": tune.loguniform(1e-4, 1e-1), "epochs": 5, "layers": [64, 32]},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=8),
        run_config=tune.RunConfig(storage_path=storage),
    )
    return tuner.fit()


def sweep_in_config(storage: str) -> tune.ResultGrid:
    space = {
        "lr": tune.grid_search([0.001, 0.01, 0.1]),
        "epochs": 3,
        "features": FEATURES,  # expect: RAY201
        "targets": TARGETS,
    }
    return tune.Tuner(train_from_config, param_space=space, run_config=tune.RunConfig(storage_path=storage)).fit()


def sweep_with_refs(storage: str) -> tune.ResultGrid:
    features_ref = ray.put(FEATURES)
    space = {"features_ref": features_ref, "path": "features.npy", "lr": tune.choice([0.01, 0.1])}
    return tune.Tuner(train_from_config, param_space=space, run_config=tune.RunConfig(storage_path=storage)).fit()


def sweep_with_partial(storage: str) -> tune.ResultGrid:
    trainable = functools.partial(train_sgd, features=FEATURES, targets=TARGETS)  # expect: RAY202
    return tune.Tuner(trainable, param_space={"lr": 0.01, "epochs": 2}, run_config=tune.RunConfig(storage_path=storage)).fit()


def sweep_small_partial(storage: str) -> tune.ResultGrid:
    trainable = functools.partial(train_sgd_verbose, features=TARGETS[:100, None], targets=TARGETS[:100])
    return tune.Tuner(trainable, param_space={"lr": 0.01, "epochs": 1}, run_config=tune.RunConfig(storage_path=storage)).fit()


def sweep_closure(storage: str) -> tune.ResultGrid:
    holdout = np.random.rand(8000, 512)

    def objective(config: dict) -> None:
        weights = np.full(512, config["scale"])
        tune.report({"holdout_loss": float(np.mean(holdout @ weights))})  # expect: RAY202

    return tune.Tuner(objective, param_space={"scale": tune.uniform(0.0, 1.0)}, run_config=tune.RunConfig(storage_path=storage)).fit()


def sweep_boosting(storage: str) -> tune.ResultGrid:
    tuner = tune.Tuner(
        BoostingTrainable,
        param_space={"learning_rate": tune.grid_search([0.05, 0.1, 0.3])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=storage, stop={"training_iteration": 20}),
    )
    return tuner.fit()


def sweep_module_data(storage: str) -> tune.ResultGrid:
    return tune.Tuner(train_on_module_data, param_space={"lr": 0.01}, run_config=tune.RunConfig(storage_path=storage)).fit()


if __name__ == "__main__":
    ray.init()
    with tempfile.TemporaryDirectory() as storage_path:
        print(sweep_with_parameters(storage_path).get_best_result().metrics)
        print(sweep_boosting(storage_path).get_best_result().metrics)
