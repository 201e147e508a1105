"""A Ray Data function UDF that loads its model for every batch: `ray-lint check examples/` reports
the RAY102 below, and `ray-lint verify examples/libraries/expensive_setup_in_function_udf.py` times a per-batch
set-up against a callable class that does it once per actor."""

import os
import pickle
import tempfile

import ray

MODEL_PATH = os.path.join(tempfile.gettempdir(), "ray_lint_example_model.pkl")


def load_model() -> dict:
    with open(MODEL_PATH, "rb") as f:
        return pickle.load(f)  # stands for loading weights: seconds in real code


def predict(batch: dict) -> dict:
    model = load_model()
    batch["score"] = batch["id"] * model["weight"] + model["bias"]
    return batch


def score_all(n: int) -> int:
    ds = ray.data.range(n).map_batches(predict, batch_size=100)  # RAY102: a model load per batch
    return sum(int(batch["score"].sum()) for batch in ds.iter_batches(batch_size=None))


if __name__ == "__main__":
    with open(MODEL_PATH, "wb") as f:
        pickle.dump({"weight": 2, "bias": 1}, f)
    ray.init()
    print(score_all(2_000))
