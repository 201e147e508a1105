"""RAY040 gpu-without-num-gpus in a radio-telescope beamforming pipeline that touches the GPU only lightly.

Findings: each task or actor has a single, easy-to-miss GPU marker and no `num_gpus`: a task that
records `ray.get_gpu_ids()[0]` (an IndexError without a GPU request), an actor method that asks
`torch.cuda.current_device()`, an actor whose `__init__` calls `torch.cuda.set_device(...)`, and an
actor method that runs its FFT with CuPy. Traps: a task that only tests `ray.get_gpu_ids()` for
emptiness (and indexes it only under that test), a node health probe of `torch.cuda.is_available()`
and `torch.cuda.device_count()`, CUDA code under `if torch.cuda.is_available():`, a CuPy actor with
`num_gpus=0.5`, and a class handed to a worker-group builder with `num_gpus_per_worker=1`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import cupy as cp
import numpy as np
import ray
import torch

logger = logging.getLogger(__name__)

N_ANTENNAS = 64
N_CHANNELS = 1024
SAMPLE_RATE_HZ = 250e6


@dataclass
class BlockResult:
    block_id: int
    power: np.ndarray
    gpu: int | None = None


def steering_weights(delays_s: np.ndarray, freqs_hz: np.ndarray) -> np.ndarray:
    return np.exp(-2j * np.pi * np.outer(freqs_hz, delays_s)).astype(np.complex64)


def channel_freqs(n_channels: int = N_CHANNELS) -> np.ndarray:
    return np.fft.rfftfreq(2 * n_channels - 2, d=1.0 / SAMPLE_RATE_HZ)


@ray.remote  # expect: RAY040
def channelize_block(block_id: int, voltages: np.ndarray) -> BlockResult:
    gpu = ray.get_gpu_ids()[0]  # which card this block ran on, for the run report
    spectra = np.fft.rfft(voltages, n=2 * N_CHANNELS - 2, axis=-1)
    return BlockResult(block_id, np.abs(spectra).mean(axis=0), gpu=gpu)


@ray.remote  # expect: RAY040
class DelayCalibrator:
    def __init__(self, reference_antenna: int = 0) -> None:
        self.reference = reference_antenna
        self.history: list[np.ndarray] = []

    def solve(self, visibilities: np.ndarray) -> np.ndarray:
        phases = np.angle(visibilities[:, self.reference])
        self.history.append(phases)
        return phases / (2 * np.pi * channel_freqs()[1])

    def placement(self) -> dict[str, int]:
        return {"reference": self.reference, "device": torch.cuda.current_device()}


@ray.remote(num_cpus=2)  # expect: RAY040
class RfiFlagger:
    def __init__(self, local_rank: int, threshold_sigma: float = 5.0) -> None:
        torch.cuda.set_device(local_rank)
        self.threshold = threshold_sigma

    def flag(self, power: np.ndarray) -> np.ndarray:
        median = np.median(power, axis=0)
        mad = np.median(np.abs(power - median), axis=0) * 1.4826
        return np.abs(power - median) > self.threshold * mad


@ray.remote(max_restarts=3)  # expect: RAY040
class Beamformer:
    def __init__(self, delays_s: np.ndarray) -> None:
        self.weights = steering_weights(delays_s, channel_freqs())

    def form_beam(self, voltages: np.ndarray) -> np.ndarray:
        spectra = cp.fft.rfft(cp.asarray(voltages), n=2 * N_CHANNELS - 2, axis=-1)
        beam = (spectra * cp.asarray(self.weights.T)).sum(axis=0)
        return cp.asnumpy(cp.abs(beam) ** 2)


@ray.remote
def channelize_portable(block_id: int, voltages: np.ndarray) -> BlockResult:
    # fine: the ids are only tested for emptiness, and indexed only when Ray assigned one
    if not ray.get_gpu_ids():
        logger.debug("block %d runs on the CPU", block_id)
    gpu = ray.get_gpu_ids()[0] if ray.get_gpu_ids() else None
    return BlockResult(block_id, np.abs(np.fft.rfft(voltages, axis=-1)).mean(axis=0), gpu=gpu)


@ray.remote
def node_health() -> dict[str, object]:
    # fine: only probes whether there are GPUs
    return {"cuda": torch.cuda.is_available(), "gpus": torch.cuda.device_count()}


@ray.remote
def dedisperse(power: np.ndarray, dm: float) -> np.ndarray:
    # fine: the CUDA path is guarded and falls back to the CPU
    data = torch.as_tensor(power)
    if torch.cuda.is_available():
        torch.cuda.set_device(0)
        data = data.cuda()
    shifts = (4.15e3 * dm * (channel_freqs()[1:] / 1e6) ** -2).astype(int)
    return torch.stack([torch.roll(data[i], -int(s)) for i, s in enumerate(shifts)]).cpu().numpy()


@ray.remote(num_gpus=0.5)
class HalfCardBeamformer:
    # fine: two of these share one GPU, and each asks for its half
    def __init__(self, delays_s: np.ndarray) -> None:
        self.weights = cp.asarray(steering_weights(delays_s, channel_freqs()))

    def form_beam(self, voltages: np.ndarray) -> np.ndarray:
        spectra = cp.fft.rfft(cp.asarray(voltages), n=2 * N_CHANNELS - 2, axis=-1)
        return cp.asnumpy(cp.abs((spectra * self.weights.T).sum(axis=0)) ** 2)


@ray.remote
class StationWorker:
    # fine: handed to make_worker_group below, which requests num_gpus_per_worker for it
    def __init__(self, rank: int) -> None:
        torch.cuda.set_device(0)
        self.rank = rank

    def integrate(self, voltages: np.ndarray) -> np.ndarray:
        return cp.asnumpy((cp.abs(cp.asarray(voltages)) ** 2).mean(axis=0))


def make_worker_group(cls, count: int, num_gpus_per_worker: float = 0) -> list:
    return [cls.options(num_gpus=num_gpus_per_worker).remote(rank) for rank in range(count)]


def observe(blocks: list[np.ndarray], delays_s: np.ndarray) -> dict[str, object]:
    ray.init()
    calibrator = DelayCalibrator.remote()
    flaggers = [RfiFlagger.remote(rank) for rank in range(4)]
    beamformers = [Beamformer.remote(delays_s) for _ in range(4)]
    half = [HalfCardBeamformer.remote(delays_s) for _ in range(2)]
    stations = make_worker_group(StationWorker, 4, num_gpus_per_worker=1)
    channelized = [ray.get(channelize_block.remote(0, np.concatenate(blocks)))]  # one pass over the whole observation
    portable = ray.get([channelize_portable.remote(i, b) for i, b in enumerate(blocks)])
    flags = ray.get([flaggers[r.block_id % 4].flag.remote(r.power[None, :]) for r in channelized])
    beams = ray.get([beamformers[i % 4].form_beam.remote(b) for i, b in enumerate(blocks)])
    halves = ray.get([half[i % 2].form_beam.remote(b) for i, b in enumerate(blocks)])
    integrated = ray.get([stations[i % 4].integrate.remote(b) for i, b in enumerate(blocks)])
    return {
        "placement": ray.get(calibrator.placement.remote()),
        "delays": ray.get(calibrator.solve.remote(blocks[0].T.astype(np.complex64))),
        "health": ray.get(node_health.remote()),
        "dedispersed": ray.get(dedisperse.remote(np.stack([r.power for r in portable]), 56.7)),
        "flags": flags,
        "beams": beams,
        "halves": halves,
        "integrated": integrated,
    }
