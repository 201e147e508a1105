"""RAY020 too-fine-grained-tasks in a Monte Carlo course notebook: estimating pi and pricing an option.

Findings: one task per sample, where each task does a few arithmetic operations: a comprehension of
`double_draw.remote(x) for x in range(100000)` whose task returns `2 * x`, the same over a task that
"simulates work" with `time.sleep(1e-5)` (10 microseconds) and returns its input, and a loop over
`samples = list(range(50_000))`, bound to a name, that submits a task per sample whose body is a
linear congruential draw. Traps: a task that sleeps 0.5 s per call (a rate-limited quote service),
tasks that do real work (a loop over a price path, a numpy least-squares solve), a tiny task in a
loop of 4 iterations, and tasks that each take a batch of many samples.
"""

from __future__ import annotations

import math
import time

import numpy as np
import ray

LCG_A = 1_103_515_245
LCG_C = 12_345
LCG_M = 2**31
N_SAMPLES = 50_000
BATCH = 250


def lcg_uniform(seed: int) -> float:
    return ((LCG_A * seed + LCG_C) % LCG_M) / LCG_M


@ray.remote
def double_draw(x: int) -> int:
    return 2 * x


@ray.remote
def simulated_draw(x: int) -> int:
    time.sleep(1e-5)  # "simulate" a costly draw: 10 microseconds
    return x


@ray.remote
def in_unit_circle(sample: int) -> int:
    u = lcg_uniform(sample)
    v = lcg_uniform(sample + N_SAMPLES)
    return 1 if u * u + v * v <= 1.0 else 0


@ray.remote
def quoted_price(sample: int) -> float:
    time.sleep(0.5)  # the quote service allows two requests a second per client
    return 100.0 + lcg_uniform(sample)


@ray.remote
def path_payoff(seed: int, strike: float = 100.0, steps: int = 252) -> float:
    price = 100.0
    for step in range(steps):
        price *= math.exp(0.0002 + 0.01 * (lcg_uniform(seed * steps + step) - 0.5))
    return max(price - strike, 0.0)


@ray.remote
def regression_step(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(256, 4))
    payoff = rng.normal(size=256)
    return np.linalg.solve(basis.T @ basis, basis.T @ payoff)


@ray.remote
def pi_batch(start: int, count: int) -> int:
    hits = 0
    for sample in range(start, start + count):
        u, v = lcg_uniform(sample), lcg_uniform(sample + N_SAMPLES)
        hits += u * u + v * v <= 1.0
    return hits


@ray.remote
def mean_of_samples(samples: list[float]) -> float:
    return sum(samples) / len(samples)


def doubled_draws() -> list[int]:
    refs = [double_draw.remote(x) for x in range(100000)]  # expect: RAY020
    return ray.get(refs)


def simulated_draws() -> int:
    refs = [simulated_draw.remote(x) for x in range(100000)]  # expect: RAY020
    return sum(ray.get(refs))


def estimate_pi_per_sample() -> float:
    samples = list(range(50_000))
    hits = []
    for sample in samples:
        hits.append(in_unit_circle.remote(sample))  # expect: RAY020
    return 4.0 * sum(ray.get(hits)) / len(samples)


def estimate_pi_batched() -> float:
    # fine: each of the 200 tasks draws 250 samples, so the overhead is paid once per batch
    refs = [pi_batch.remote(start, BATCH) for start in range(0, N_SAMPLES, BATCH)]
    return 4.0 * sum(ray.get(refs)) / N_SAMPLES


def estimate_pi_chunked() -> float:
    # fine: the task takes a list of samples, whose sum is real work
    draws = [lcg_uniform(s) for s in range(N_SAMPLES)]
    chunks = [draws[i : i + BATCH] for i in range(0, N_SAMPLES, BATCH)]
    return float(np.mean(ray.get([mean_of_samples.remote(chunk) for chunk in chunks])))


def quoted_prices() -> list[float]:
    # fine: half a second per task is the task's work, not Ray's overhead
    return ray.get([quoted_price.remote(s) for s in range(1_000)])


def price_call_option() -> float:
    # fine: each task walks a 252-step price path
    payoffs = ray.get([path_payoff.remote(seed) for seed in range(N_SAMPLES)])
    return math.exp(-0.05) * sum(payoffs) / N_SAMPLES


def regression_coefficients() -> np.ndarray:
    # fine: each task solves a least-squares system with numpy
    return np.mean(ray.get([regression_step.remote(seed) for seed in range(N_SAMPLES)]), axis=0)


def smoke_test() -> list[int]:
    # fine: four tiny tasks, a check that the cluster answers
    return ray.get([double_draw.remote(x) for x in range(4)])


if __name__ == "__main__":
    ray.init()
    print(smoke_test(), len(doubled_draws()), simulated_draws())
    print(estimate_pi_per_sample(), estimate_pi_batched(), estimate_pi_chunked())
    print(price_call_option(), regression_coefficients(), quoted_prices()[:3])
