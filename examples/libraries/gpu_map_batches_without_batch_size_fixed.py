"""The fixed version of gpu_map_batches_without_batch_size.py: the GPU step names its batch size,
which Ray Data requires with `num_gpus` (pick the largest batch that fits the GPU's memory)."""

import ray


class Classifier:
    def __init__(self) -> None:
        self.classes = 3  # stands for a model moved to the GPU

    def __call__(self, batch: dict) -> dict:
        batch["label"] = batch["id"] % self.classes
        return batch


def classify(n: int) -> ray.data.Dataset:
    ds = ray.data.range(n)
    return ds.map_batches(
        Classifier,
        num_gpus=1,
        batch_size=64,
        compute=ray.data.ActorPoolStrategy(size=1),
    )


if __name__ == "__main__":
    ray.init()
    labelled = classify(1_000)
    if ray.cluster_resources().get("GPU", 0) >= 1:
        print(labelled.take(3))
