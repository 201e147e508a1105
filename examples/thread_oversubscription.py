"""Tasks that start more threads than the CPUs they hold: `ray-lint check examples/` reports each RAY041 below."""

import multiprocessing
import os

import cv2
import numpy as np
import ray
import torch
from sklearn.ensemble import RandomForestClassifier


def brightness(image: np.ndarray) -> float:
    return float(image.mean())


@ray.remote
def fit(X: np.ndarray, y: np.ndarray) -> float:
    model = RandomForestClassifier(n_estimators=200, n_jobs=-1)  # RAY041: every core, on a 1-CPU task
    return model.fit(X, y).score(X, y)


@ray.remote
def score_images(paths: list[str]) -> list[float]:
    images = [cv2.imread(path) for path in paths]  # RAY041: OpenCV ignores OMP_NUM_THREADS
    with multiprocessing.Pool() as pool:  # RAY041: one process per core, for a 1-CPU task
        return pool.map(brightness, images)


@ray.remote
class Embedder:
    def __init__(self) -> None:
        torch.set_num_threads(os.cpu_count())  # RAY041: the actor holds one CPU
        self.model = torch.nn.Linear(512, 64).eval()

    def embed(self, batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model(torch.from_numpy(batch)).numpy()


if __name__ == "__main__":
    ray.init()
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((1000, 20)), rng.integers(0, 2, 1000)
    embedders = [Embedder.remote() for _ in range(4)]
    batches = np.split(rng.standard_normal((64, 512)).astype(np.float32), 4)
    refs = [fit.remote(X, y) for _ in range(8)]
    refs += [embedder.embed.remote(batch) for embedder, batch in zip(embedders, batches)]
    refs.append(score_images.remote(["a.jpg", "b.jpg"]))
    print(ray.get(refs))
