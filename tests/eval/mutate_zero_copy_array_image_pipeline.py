"""An image augmentation pipeline with a job registry (RAY036 mutate-zero-copy-array, RAY035
out-of-band-ref-serialization).

Reported: in-place writes to numpy arrays that Ray handed over read-only (a task argument
annotated or passed as an ndarray, an actor method argument, the result of `ray.get`), and
refs that leave Ray's tracking (pickled, their hex stored in Redis, rebuilt from bytes and
fetched). Silent: arrays copied first, new arrays, dict and list arguments, unannotated
arguments, a ref's hex in a log line or as a dict key, and IDs rebuilt only for display.
"""

import logging
import pickle

import numpy as np
import numpy.typing as npt
import ray
import redis

logger = logging.getLogger(__name__)
registry = redis.Redis()


@ray.remote
def flip(image: npt.NDArray[np.uint8]) -> np.ndarray:
    image[:] = image[:, ::-1]  # expect: RAY036
    return image


@ray.remote
def add_noise(image: np.ndarray, scale: float = 3.0):
    noisy = image.astype(np.float32)
    # fine: a new array
    noisy += np.random.normal(0.0, scale, image.shape)
    return noisy


@ray.remote
def clip(image, low, high):
    np.clip(image, low, high, out=image)  # expect: RAY036
    return image


@ray.remote
def crop(image: np.ndarray, box: tuple):
    # fine: copied before the write
    image = image.copy()
    top, left, bottom, right = box
    image[:top] = 0
    return image[top:bottom, left:right]


@ray.remote
def tag(meta: dict, label: str):
    # fine: a dict argument is a copy, and writable
    meta["label"] = label
    return meta


@ray.remote
def fill_holes(mask):
    # fine: not shown to be a numpy array
    mask[mask < 0] = 0
    return mask


@ray.remote
class Stats:
    def __init__(self, shape):
        self.total = np.zeros(shape)
        self.count = 0

    def add(self, image: np.ndarray):
        image -= image.mean()  # expect: RAY036
        self.total += image
        self.count += 1


def submit(job_id: str, paths: list) -> None:
    refs = [flip.remote(np.load(p)) for p in paths]
    for ref in refs:
        logger.info("job %s: %s", job_id, ref.hex())
    preview_ref = flip.remote(np.load(paths[0]))
    registry.set(f"job:{job_id}", preview_ref.hex())  # expect: RAY035
    pending = {}
    for ref in refs:
        pending[ref.hex()] = job_id


def checkpoint(paths: list, out_path: str) -> None:
    refs = [flip.remote(np.load(p)) for p in paths]
    with open(out_path, "wb") as out:
        pickle.dump({"refs": refs}, out)  # expect: RAY035


def resume(job_id: str):
    hex_id = registry.get(f"job:{job_id}").decode()
    ref = ray.ObjectRef(bytes.fromhex(hex_id))  # expect: RAY035
    return ray.get(ref)


def describe(rows: list) -> list:
    # fine: IDs rebuilt only for display
    return [str(ray.ObjectRef(bytes.fromhex(row["id"]))) for row in rows]


def preview(path: str) -> np.ndarray:
    base = ray.put(np.zeros((64, 64), dtype=np.uint8))
    canvas = ray.get(base)
    canvas[0, :] = 255  # expect: RAY036
    safe = ray.get(base).copy()
    safe[0, :] = 255
    return safe
