"""The fix for examples/libraries/large_object_in_param_space.py: the data goes to the trainable with
`tune.with_parameters`, which puts it in Ray's object store once."""

import tempfile

import numpy as np
import ray
from ray import tune

FEATURES = np.random.rand(5000, 500)  # 20 MB of float64
TARGETS = np.random.rand(5000)


def train_ridge(config: dict, features: np.ndarray, targets: np.ndarray) -> None:
    """Fits a ridge regression with the trial's penalty and reports its training error."""
    x, y = features, targets
    weights = np.linalg.solve(x.T @ x + config["alpha"] * np.eye(x.shape[1]), x.T @ y)
    tune.report({"mse": float(np.mean((x @ weights - y) ** 2))})


def sweep() -> float:
    tuner = tune.Tuner(
        tune.with_parameters(train_ridge, features=FEATURES, targets=TARGETS),
        param_space={"alpha": tune.grid_search([0.01, 0.1, 1.0, 10.0])},
        tune_config=tune.TuneConfig(metric="mse", mode="min"),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
    )
    return tuner.fit().get_best_result().config["alpha"]


if __name__ == "__main__":
    ray.init()
    print(sweep())
