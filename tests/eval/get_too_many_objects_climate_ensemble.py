"""Climate ensemble runs (RAY003 get-too-many-objects, preview): one `ray.get` on thousands of
ensemble members, or on members whose gridded fields add up to gigabytes; next to small scalar
results, a count taken from the input, a filtered comprehension, `ray.wait` batches, slices and a
small ensemble."""

import logging

import numpy as np
import ray

logger = logging.getLogger(__name__)

MEMBERS = 4_000
LAT = 721
LON = 1440
LEVELS = 8


@ray.remote
def run_member(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    state = rng.normal(size=(LAT, LON))
    for _ in range(100):
        state = 0.99 * state + 0.01 * rng.normal(size=state.shape)
    return state


@ray.remote
def full_field(seed: int) -> np.ndarray:
    return np.zeros((LEVELS, LAT, LON), dtype=np.float32)


@ray.remote
def global_mean(seed: int) -> float:
    rng = np.random.default_rng(seed)
    return float(rng.normal(size=(LAT, LON)).mean())


@ray.remote
def fetch_observations(station: int):
    return np.load(f"/data/stations/{station}.npy")


def ensemble_fields() -> np.ndarray:
    fields = ray.get([run_member.remote(seed) for seed in range(MEMBERS)])  # expect: RAY003
    return np.mean(fields, axis=0)


def vertical_profiles() -> list[np.ndarray]:
    return ray.get([full_field.remote(seed) for seed in range(200)])  # expect: RAY003


def station_data() -> list[np.ndarray]:
    refs = []
    for station in range(12_000):
        refs.append(fetch_observations.remote(station))
    return ray.get(refs)  # expect: RAY003


def ensemble_means() -> float:
    means = ray.get([global_mean.remote(seed) for seed in range(MEMBERS)])  # fine: scalar results
    return sum(means) / len(means)


def small_ensemble() -> np.ndarray:
    fields = ray.get([full_field.remote(seed) for seed in range(20)])  # fine: 660 MB in all
    return np.stack(fields)


def members_for(seeds: list[int]) -> list[np.ndarray]:
    return ray.get([run_member.remote(seed) for seed in seeds])  # fine: the count is the caller's


def even_members() -> list[np.ndarray]:
    return ray.get([run_member.remote(s) for s in range(MEMBERS) if s % 2 == 0])  # fine: filtered


def streamed_mean() -> np.ndarray:
    pending = [run_member.remote(seed) for seed in range(MEMBERS)]
    total = np.zeros((LAT, LON))
    while pending:
        ready, pending = ray.wait(pending, num_returns=min(32, len(pending)))
        for field in ray.get(ready):  # fine: one batch at a time
            total += field
    return total / MEMBERS


def sliced_mean() -> np.ndarray:
    refs = [run_member.remote(seed) for seed in range(MEMBERS)]
    total = np.zeros((LAT, LON))
    for start in range(0, len(refs), 64):
        total += np.sum(ray.get(refs[start : start + 64]), axis=0)  # fine: slices of 64
    logger.info("done")
    return total / MEMBERS
