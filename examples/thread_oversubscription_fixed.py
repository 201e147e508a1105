"""The same work with threads matched to each task's CPUs: ray-lint reports nothing here."""

import multiprocessing

import cv2
import numpy as np
import ray
import torch
from sklearn.ensemble import RandomForestClassifier


def brightness(image: np.ndarray) -> float:
    return float(image.mean())


@ray.remote(num_cpus=4)
def fit(X: np.ndarray, y: np.ndarray) -> float:
    model = RandomForestClassifier(n_estimators=200, n_jobs=4)  # four jobs on the four CPUs it holds
    return model.fit(X, y).score(X, y)


@ray.remote(num_cpus=2)
def score_images(paths: list[str]) -> list[float]:
    cv2.setNumThreads(1)  # OpenCV must be told; it does not read OMP_NUM_THREADS
    images = [cv2.imread(path) for path in paths]
    with multiprocessing.get_context("spawn").Pool(processes=2) as pool:  # spawned, one per requested CPU
        return pool.map(brightness, images)


@ray.remote
class Embedder:
    def __init__(self) -> None:
        torch.set_num_threads(1)  # one thread for the actor's one CPU
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
