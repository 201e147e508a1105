"""Image preprocessing pipeline: OpenCV decoding, augmentation and hashing in Ray tasks and actors,
with multiprocessing, thread pools and numba for the heavy parts.

Exercises RAY041 thread-oversubscription on OpenCV (which ignores OMP_NUM_THREADS; this module never
calls `cv2.setNumThreads`, so each task or actor that uses OpenCV is reported once, at its first
`cv2` call), `multiprocessing.Pool`, `ProcessPoolExecutor`, thread pools sized with `cpu_count()`
and `numba.set_num_threads`. The traps: pools that match `num_cpus`, I/O thread pools, sizes from
variables, OpenCV in driver code, and an actor whose CPU share `.options(**spec)` hides.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import boto3
import cv2
import numba
import numpy as np
import ray
from ray.util import ActorPool

BUCKET = "training-images"
THUMB_SIZE = (256, 256)
THUMBNAILER_SPEC = {"num_cpus": 2, "max_restarts": 3}


@numba.njit(parallel=True)
def standardize(batch: np.ndarray) -> np.ndarray:
    out = np.empty(batch.shape, dtype=np.float32)
    for i in numba.prange(batch.shape[0]):
        out[i] = (batch[i] - batch[i].mean()) / (batch[i].std() + 1e-6)
    return out


def sharpness(image: np.ndarray) -> float:
    gray = image.mean(axis=2)
    return float(np.var(np.diff(gray, axis=0)) + np.var(np.diff(gray, axis=1)))


def average_hash(image: np.ndarray) -> int:
    small = image.mean(axis=2)[:: max(1, image.shape[0] // 8), :: max(1, image.shape[1] // 8)][:8, :8]
    bits = (small > small.mean()).flatten()
    return int("".join("1" if bit else "0" for bit in bits), 2)


def channel_histogram(image: np.ndarray) -> np.ndarray:
    return np.stack([np.bincount(image[..., c].ravel(), minlength=256) for c in range(3)])


@ray.remote
def fetch_objects(keys: list[str]) -> list[bytes]:
    s3 = boto3.client("s3")
    with ThreadPoolExecutor(max_workers=32) as pool:  # fine: the threads wait on S3, not on the CPU
        return list(pool.map(lambda key: s3.get_object(Bucket=BUCKET, Key=key)["Body"].read(), keys))


@ray.remote
def make_thumbnails(paths: list[str]) -> list[np.ndarray]:
    thumbs = []
    for path in paths:
        image = cv2.imread(path, cv2.IMREAD_COLOR)  # expect: RAY041
        thumbs.append(cv2.resize(image, THUMB_SIZE, interpolation=cv2.INTER_AREA))  # same task: reported once
    return thumbs


@ray.remote
def decode_blobs(blobs: list[bytes]) -> list[np.ndarray]:
    buffers = [np.frombuffer(blob, dtype=np.uint8) for blob in blobs]
    return [cv2.imdecode(buf, cv2.IMREAD_COLOR) for buf in buffers]  # expect: RAY041


@ray.remote
def standardize_shard(batch: np.ndarray) -> np.ndarray:
    numba.set_num_threads(8)  # expect: RAY041
    return standardize(batch)


@ray.remote(num_cpus=4)
def standardize_large_shard(batch: np.ndarray) -> np.ndarray:
    numba.set_num_threads(4)  # fine: matches num_cpus=4
    return standardize(batch)


@ray.remote
def standardize_small_shard(batch: np.ndarray) -> np.ndarray:
    numba.set_num_threads(1)  # fine: one thread for one CPU
    return standardize(batch)


@ray.remote
def blur_scores(images: list[np.ndarray]) -> list[float]:
    with multiprocessing.Pool() as pool:  # expect: RAY041, RAY064
        return pool.map(sharpness, images)


@ray.remote(num_cpus=2)
def histograms(images: list[np.ndarray]) -> np.ndarray:
    with multiprocessing.Pool(2) as pool:  # expect: RAY064 (it forks); for RAY041 it is fine: two processes for two CPUs
        return np.sum(pool.map(channel_histogram, images), axis=0)


@ray.remote(num_cpus=2)
def histograms_sized(images: list[np.ndarray], workers: int) -> np.ndarray:
    with multiprocessing.Pool(processes=workers) as pool:  # expect: RAY064 (it forks); for RAY041 it is fine: the size is only known at run time
        return np.sum(pool.map(channel_histogram, images), axis=0)


@ray.remote
def perceptual_hashes(images: list[np.ndarray]) -> list[int]:
    with ThreadPoolExecutor(max_workers=multiprocessing.cpu_count()) as pool:  # expect: RAY041
        return list(pool.map(average_hash, images))


@ray.remote
def upload_thumbnails(thumbs: dict[str, bytes]) -> int:
    s3 = boto3.client("s3")
    with ThreadPoolExecutor(max_workers=8) as pool:  # fine: a literal size, for uploads
        list(pool.map(lambda item: s3.put_object(Bucket=BUCKET, Key=item[0], Body=item[1]), thumbs.items()))
    return len(thumbs)


@ray.remote
class Augmenter:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.processed = 0

    def augment(self, image: np.ndarray) -> np.ndarray:
        angle = float(self.rng.uniform(-15, 15))
        h, w = image.shape[:2]
        matrix = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)  # expect: RAY041
        rotated = cv2.warpAffine(image, matrix, (w, h), borderMode=cv2.BORDER_REFLECT)  # same actor: reported once
        self.processed += 1
        return rotated


@ray.remote(num_cpus=4)
class ShardScorer:
    def __init__(self) -> None:
        self.pool = ProcessPoolExecutor(max_workers=8)  # expect: RAY041, RAY064
        self.helpers = multiprocessing.Pool(os.cpu_count())  # expect: RAY041, RAY064

    def score(self, images: list[np.ndarray]) -> list[float]:
        return list(self.pool.map(sharpness, images))

    def hashes(self, images: list[np.ndarray]) -> list[int]:
        return self.helpers.map(average_hash, images)


@ray.remote(num_cpus=4)
class HistogramActor:
    def __init__(self) -> None:
        self.pool = ProcessPoolExecutor(max_workers=4)  # expect: RAY064 (it forks); for RAY041 it is fine: matches num_cpus=4

    def histograms(self, images: list[np.ndarray]) -> list[np.ndarray]:
        return list(self.pool.map(channel_histogram, images))


@ray.remote
class Thumbnailer:
    def render(self, image: np.ndarray) -> bytes:
        thumb = cv2.resize(image, THUMB_SIZE)  # fine: created with .options(**THUMBNAILER_SPEC), CPU share unknown
        ok, encoded = cv2.imencode(".jpg", thumb)
        return encoded.tobytes() if ok else b""


def preview(path: str) -> None:
    # fine: driver code; OpenCV threads in the driver do not multiply across workers
    image = cv2.imread(path)
    cv2.imwrite("/tmp/preview.jpg", cv2.resize(image, THUMB_SIZE))


def run(keys: list[str], local_paths: list[str]) -> None:
    ray.init()
    preview(local_paths[0])
    images_ref = decode_blobs.remote(fetch_objects.remote(keys))
    images = ray.get(images_ref)
    thumbs = make_thumbnails.remote(local_paths)
    batch = np.stack(images).astype(np.float32)
    standardized = [
        standardize_shard.remote(batch[:64]),
        standardize_large_shard.remote(batch[64:]),
        standardize_small_shard.remote(batch[:8]),
    ]
    stats = [blur_scores.remote(images_ref), histograms.remote(images_ref), histograms_sized.remote(images_ref, 2)]
    hashes = perceptual_hashes.remote(images_ref)
    augmenters = ActorPool([Augmenter.remote(seed) for seed in range(4)])
    augmented = list(augmenters.map(lambda actor, image: actor.augment.remote(image), images))
    scorers = [ShardScorer.remote() for _ in range(2)]
    scores = [scorer.score.remote(images_ref) for scorer in scorers]
    hist_actor = HistogramActor.remote()
    thumbnailer = Thumbnailer.options(**THUMBNAILER_SPEC).remote()
    rendered = ray.get(thumbnailer.render.remote(augmented[0]))
    uploaded = upload_thumbnails.remote({"thumbs/0.jpg": rendered})
    print(ray.get([thumbs, hashes, uploaded, hist_actor.histograms.remote(images_ref)] + standardized + stats + scores))
