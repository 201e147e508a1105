"""The fixed version of expensive_setup_in_function_udf.py: a callable class loads the model once,
in `__init__`, on each actor of its pool, and `__call__` reuses it for every batch."""

import os
import pickle
import tempfile

import ray

MODEL_PATH = os.path.join(tempfile.gettempdir(), "ray_lint_example_model.pkl")


def load_model() -> dict:
    with open(MODEL_PATH, "rb") as f:
        return pickle.load(f)  # stands for loading weights: seconds in real code


class Predictor:
    def __init__(self) -> None:
        self.model = load_model()

    def __call__(self, batch: dict) -> dict:
        batch["score"] = batch["id"] * self.model["weight"] + self.model["bias"]
        return batch


def score_all(n: int) -> int:
    ds = ray.data.range(n).map_batches(Predictor, batch_size=100, compute=ray.data.ActorPoolStrategy(size=1))
    return sum(int(batch["score"].sum()) for batch in ds.iter_batches(batch_size=None))


if __name__ == "__main__":
    with open(MODEL_PATH, "wb") as f:
        pickle.dump({"weight": 2, "bias": 1}, f)
    ray.init()
    print(score_all(2_000))
