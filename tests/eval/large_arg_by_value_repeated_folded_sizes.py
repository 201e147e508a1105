"""RAY030 large-arg-by-value-repeated in a seismic survey pipeline whose large arrays have computed sizes.

Findings: no shape is a plain `(5000, 5000)` literal, the size has to be folded: `np.arange(50_000_000)`
(400 MB of sample indices), `np.linspace(0, 1, 20_000_000)` (160 MB time axis), a dict comprehension
of 50 noise templates of `2**18` floats (about 105 MB), and `np.zeros((N_SHOTS, N_RECEIVERS))` sized
by module-level constants (67 MB), each passed by value to every task of a `for` loop, a `while`
loop, a list, dict or generator comprehension, or every actor of a pool. Traps: arrays below the
10 MB threshold (`np.arange(1_000)`, a 100,000-point `linspace`, `np.zeros((N_SHOTS, 8))`), the same
large arrays `ray.put` once with the ref passed, a single call outside any loop, and a different
slice of the array per iteration.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import ray

N_SHOTS = 4_096
N_RECEIVERS = 2_048
CHUNK = 5_000_000


@ray.remote
def migrate_shot(velocity: np.ndarray, shot_id: int, aperture_m: float = 3_000.0) -> np.ndarray:
    column = velocity[shot_id % velocity.shape[0]]
    return np.cumsum(aperture_m / np.maximum(column, 1.0))


@ray.remote
def resample_trace(sample_index: np.ndarray, trace_id: int, decimation: int) -> np.ndarray:
    return sample_index[trace_id::decimation].astype(np.float32)


@ray.remote
def stack_window(time_axis: np.ndarray, t0: float, t1: float) -> float:
    mask = (time_axis >= t0) & (time_axis < t1)
    return float(np.sin(2 * np.pi * 30.0 * time_axis[mask]).sum())


@ray.remote
def denoise_channel(templates: dict[int, np.ndarray], channel: int, gain: float) -> np.ndarray:
    return gain * np.convolve(templates[channel], np.hanning(64), mode="same")


@ray.remote
class ShotGatherer:
    def __init__(self, velocity: np.ndarray, rank: int) -> None:
        self.velocity = velocity
        self.rank = rank

    def gather(self, shot_id: int) -> float:
        return float(self.velocity[shot_id].mean())


def migrate_survey(shot_ids: Iterable[int]) -> list[np.ndarray]:
    velocity = np.zeros((N_SHOTS, N_RECEIVERS))
    refs = []
    for shot_id in shot_ids:
        refs.append(migrate_shot.remote(velocity, shot_id))  # expect: RAY030
    return ray.get(refs)


def resample_all(trace_ids: list[int], decimation: int = 4) -> list[np.ndarray]:
    sample_index = np.arange(50_000_000)
    refs = [resample_trace.remote(sample_index, t, decimation) for t in trace_ids]  # expect: RAY030
    return ray.get(refs)


def stack_windows(edges: list[float]) -> dict[float, float]:
    time_axis = np.linspace(0, 1, 20_000_000)
    refs = {t0: stack_window.remote(time_axis, t0, t1) for t0, t1 in zip(edges, edges[1:])}  # expect: RAY030
    return dict(zip(refs, ray.get(list(refs.values()))))


def denoise(gains: list[float]) -> list[np.ndarray]:
    templates = {k: np.random.rand(2**18) for k in range(50)}
    pending = []
    channel = 0
    while channel < len(gains):
        pending.append(denoise_channel.remote(templates, channel, gains[channel]))  # expect: RAY030
        channel += 1
    return ray.get(pending)


def total_energy(windows: list[tuple[float, float]]) -> float:
    time_axis = np.linspace(0, 1, 20_000_000)
    return sum(ray.get(list(stack_window.remote(time_axis, a, b) for a, b in windows)))  # expect: RAY030


def gatherer_pool(size: int) -> list:
    velocity = np.zeros((N_SHOTS, N_RECEIVERS))
    return [ShotGatherer.remote(velocity, rank) for rank in range(size)]  # expect: RAY030


def migrate_with_put(shot_ids: Iterable[int]) -> list[np.ndarray]:
    velocity_ref = ray.put(np.zeros((N_SHOTS, N_RECEIVERS)))  # fine: stored once, the ref is passed
    return ray.get([migrate_shot.remote(velocity_ref, s) for s in shot_ids])


def denoise_with_put(gains: list[float]) -> list[np.ndarray]:
    templates = {k: np.random.rand(2**18) for k in range(50)}
    templates_ref = ray.put(templates)
    return ray.get([denoise_channel.remote(templates_ref, c, g) for c, g in enumerate(gains)])


def resample_in_slices(trace_ids: list[int]) -> list[np.ndarray]:
    sample_index = np.arange(50_000_000)
    refs = []
    for start in range(0, sample_index.size, CHUNK):
        # fine: each task gets a different 40 MB slice, which one ray.put would not share
        refs.append(resample_trace.remote(sample_index[start : start + CHUNK], trace_ids[0], 2))
    return ray.get(refs)


def migrate_reference_shot() -> np.ndarray:
    velocity = np.zeros((N_SHOTS, N_RECEIVERS))
    return ray.get(migrate_shot.remote(velocity, 0))  # fine: one call, no loop


def quick_look(trace_ids: list[int], edges: list[float]) -> dict[str, list]:
    # fine: every array here is under 10 MB, so Ray inlines it in the task spec
    sample_index = np.arange(1_000)
    time_axis = np.linspace(0, 1, 100_000)
    statics = np.zeros((N_SHOTS, 8))
    return {
        "traces": ray.get([resample_trace.remote(sample_index, t, 1) for t in trace_ids]),
        "windows": ray.get([stack_window.remote(time_axis, a, b) for a, b in zip(edges, edges[1:])]),
        "statics": ray.get([migrate_shot.remote(statics, s) for s in trace_ids]),
    }


def run_survey(shot_ids: list[int], gains: list[float]) -> dict[str, object]:
    ray.init()
    edges = [i / 10 for i in range(11)]
    return {
        "migrated": migrate_survey(shot_ids),
        "resampled": resample_all(shot_ids),
        "stacked": stack_windows(edges),
        "denoised": denoise(gains),
        "energy": total_energy(list(zip(edges, edges[1:]))),
        "pool": gatherer_pool(4),
        "with_put": migrate_with_put(shot_ids),
        "denoised_put": denoise_with_put(gains),
        "sliced": resample_in_slices(shot_ids),
        "reference": migrate_reference_shot(),
        "quick": quick_look(shot_ids, edges),
    }
