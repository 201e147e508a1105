"""A GPU batch-inference step with no batch size: `ray-lint check examples/` reports the RAY103 below,
and `ray-lint verify examples/libraries/gpu_map_batches_without_batch_size.py` shows Ray Data refusing the call
(Ray 2.60 checks it when `map_batches` is called, so no GPU is needed to see it)."""

import ray


class Classifier:
    def __init__(self) -> None:
        self.classes = 3  # stands for a model moved to the GPU

    def __call__(self, batch: dict) -> dict:
        batch["label"] = batch["id"] % self.classes
        return batch


def classify(n: int) -> ray.data.Dataset:
    ds = ray.data.range(n)
    return ds.map_batches(  # RAY103: num_gpus without batch_size
        Classifier,
        num_gpus=1,
        compute=ray.data.ActorPoolStrategy(size=1),
    )


if __name__ == "__main__":
    ray.init()
    labelled = classify(1_000)
    if ray.cluster_resources().get("GPU", 0) >= 1:
        print(labelled.take(3))
