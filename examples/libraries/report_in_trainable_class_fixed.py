"""The fix for examples/libraries/report_in_trainable_class.py: the class trainable returns its metrics from `step()`."""

import tempfile

import ray
from ray import tune


class QuadraticFit(tune.Trainable):
    """Fits `a` in `(a - 3) ** 2` by gradient descent, one step per iteration."""

    def setup(self, config: dict) -> None:
        self.a = 0.0
        self.lr = config["lr"]

    def step(self) -> dict:
        self.a -= self.lr * 2 * (self.a - 3)
        return {"loss": (self.a - 3) ** 2}  # the class API reports what step() returns

    def save_checkpoint(self, checkpoint_dir: str) -> dict:
        return {"a": self.a}

    def load_checkpoint(self, checkpoint: dict) -> None:
        self.a = checkpoint["a"]


def sweep() -> dict:
    tuner = tune.Tuner(
        QuadraticFit,
        param_space={"lr": tune.grid_search([0.05, 0.2])},
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), stop={"training_iteration": 3}, verbose=0),
    )
    return {result.config["lr"]: result.metrics.get("loss") for result in tuner.fit()}


if __name__ == "__main__":
    ray.init()
    print(sweep())
