"""A Tune sweep that binds its training data to the trainable with `functools.partial`: `ray-lint check
examples/` reports RAY202 below, and `ray-lint verify examples/libraries/partial_or_closure_for_large_data.py`
times it against `tune.with_parameters`."""

import functools
import tempfile

import numpy as np
import ray
from ray import tune

FEATURES = np.random.rand(5000, 1000)  # 40 MB of float64
TARGETS = np.random.rand(5000)


def train_ridge(config: dict, features: np.ndarray, targets: np.ndarray) -> None:
    """Fits a ridge regression with the trial's penalty and reports its training error."""
    gram = features.T @ features + config["alpha"] * np.eye(features.shape[1])
    weights = np.linalg.solve(gram, features.T @ targets)
    tune.report({"mse": float(np.mean((features @ weights - targets) ** 2))})


def sweep() -> float:
    tuner = tune.Tuner(
        functools.partial(train_ridge, features=FEATURES, targets=TARGETS),  # RAY202: pickled into the trainable
        param_space={"alpha": tune.grid_search([0.01, 0.1, 1.0, 10.0])},
        tune_config=tune.TuneConfig(metric="mse", mode="min"),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
    )
    return tuner.fit().get_best_result().config["alpha"]


if __name__ == "__main__":
    ray.init()
    print(sweep())
