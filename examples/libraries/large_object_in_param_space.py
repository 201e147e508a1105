"""A Tune sweep that hands its training data over in `param_space`: `ray-lint check examples/` reports
RAY201 below, and `ray-lint verify examples/libraries/large_object_in_param_space.py` times it against
`tune.with_parameters`."""

import tempfile

import numpy as np
import ray
from ray import tune

FEATURES = np.random.rand(5000, 500)  # 20 MB of float64
TARGETS = np.random.rand(5000)


def train_ridge(config: dict) -> None:
    """Fits a ridge regression with the trial's penalty and reports its training error."""
    x, y = config["features"], config["targets"]
    weights = np.linalg.solve(x.T @ x + config["alpha"] * np.eye(x.shape[1]), x.T @ y)
    tune.report({"mse": float(np.mean((x @ weights - y) ** 2))})


def sweep() -> float:
    tuner = tune.Tuner(
        train_ridge,
        param_space={
            "alpha": tune.grid_search([0.01, 0.1, 1.0, 10.0]),
            "features": FEATURES,  # RAY201: copied into every trial's config and every result
            "targets": TARGETS,
        },
        tune_config=tune.TuneConfig(metric="mse", mode="min"),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
    )
    return tuner.fit().get_best_result().config["alpha"]


if __name__ == "__main__":
    ray.init()
    print(sweep())
