"""The same inference with the actor pool sized: a fixed number of actors, each with the memory its
model needs, so Ray starts only as many as fit. `ray-lint check --preview` reports nothing."""

import numpy as np
import ray
import torch


class Classify:
    def __init__(self) -> None:
        # Stands for a multi-GiB checkpoint; each actor of the pool holds its own copy.
        torch.save(torch.nn.Linear(8, 2).state_dict(), "/tmp/classifier.pt")
        self.weights = torch.load("/tmp/classifier.pt")
        self.model = torch.nn.Linear(8, 2)
        self.model.load_state_dict(self.weights)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        features = torch.as_tensor(np.stack(batch["features"]), dtype=torch.float32)
        with torch.no_grad():
            batch["label"] = self.model(features).argmax(dim=1).numpy()
        return batch


def main() -> None:
    ds = ray.data.from_items([{"features": np.random.rand(8)} for _ in range(256)])
    labelled = ds.map_batches(Classify, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2), memory=512 * 1024**2)
    print(labelled.count(), "rows labelled")


if __name__ == "__main__":
    ray.init()
    main()
