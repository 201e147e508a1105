"""Hyper-parameter sweep driver (RAY001 get-in-loop): trials waited on one at a time in loops,
comprehensions and `max(...)`, via an alias, `.options(...)` and an actor method; next to one get
after submitting all, one get per wave, `ray.wait` loops, pipelining, SGD steps and restarts that
need the previous result, a first-hit search, polling, a one-trial smoke test, a get after
`ray.wait(..., timeout=0)` and a dry run with a stub `ray`."""

import glob
import itertools
import logging
import os
import time

import numpy as np
import ray
from ray import get as fetch_result

logger = logging.getLogger(__name__)

LEARNING_RATES = [1e-3, 3e-3, 1e-2]
BATCH_SIZES = [64, 128, 256]
SEEDS = [0, 1, 2, 3]


@ray.remote(num_cpus=2)
def train_trial(config: dict, data: tuple[np.ndarray, np.ndarray]) -> dict:
    features, target = data
    rng = np.random.default_rng(config["seed"])
    weights = rng.normal(scale=0.01, size=features.shape[1])
    for _ in range(config["epochs"]):
        idx = rng.choice(len(features), config["batch_size"])
        err = (features[idx] * weights).sum(axis=1) - target[idx]
        weights -= config["lr"] * (features[idx] * err[:, None]).mean(axis=0)
    return {"weights": weights, "val_loss": float(np.mean(err**2))}


@ray.remote
def evaluate(weights: np.ndarray, data: tuple[np.ndarray, np.ndarray], split: str) -> float:
    features, target = data
    return 1.0 - float(np.var(target - (features * weights).sum(axis=1)) / np.var(target))


@ray.remote
def sgd_step(weights: np.ndarray, batch: tuple[np.ndarray, np.ndarray], lr: float) -> np.ndarray:
    features, target = batch
    err = (features * weights).sum(axis=1) - target
    return weights - lr * (features * err[:, None]).mean(axis=0)


@ray.remote
def checkpoint_ready(path: str) -> bool:
    return os.path.exists(os.path.join(path, ".complete"))


@ray.remote
def count_finished(run_dir: str) -> int:
    return len(glob.glob(os.path.join(run_dir, "*", "result.json")))


@ray.remote(num_cpus=1)
class TrialLedger:
    def __init__(self) -> None:
        self.rows: list[tuple[int, float]] = []

    def record(self, trial_id: int, metrics: dict) -> int:
        self.rows.append((trial_id, metrics["val_loss"]))
        return len(self.rows)


def grid(epochs: int = 20) -> list[dict]:
    pairs = itertools.product(LEARNING_RATES, BATCH_SIZES)
    return [{"lr": lr, "batch_size": bs, "seed": 0, "epochs": epochs} for lr, bs in pairs]


def sweep_sequential(data_ref) -> list[dict]:
    results = []
    for config in grid():
        results.append(ray.get(train_trial.remote(config, data_ref)))  # expect: RAY001
    # fine: every trial is submitted before the single get
    refs = [train_trial.remote(config, data_ref) for config in grid(epochs=40)]
    return results + ray.get(refs)


def sweep_in_waves(data_ref, wave_size: int = 4) -> list[dict]:
    configs = grid()
    results = []
    for start in range(0, len(configs), wave_size):
        wave = configs[start : start + wave_size]
        # fine: one get per wave of trials that run in parallel
        results.extend(ray.get([train_trial.remote(c, data_ref) for c in wave]))
    return results


def seed_robustness(config: dict, data_ref) -> dict[int, float]:
    return {
        seed: fetch_result(train_trial.remote({**config, "seed": seed}, data_ref))["val_loss"]  # expect: RAY001
        for seed in SEEDS
    }


def best_score(candidates: list[np.ndarray], data_ref) -> float:
    return max(
        ray.get(evaluate.remote(w, data_ref, "test"))  # expect: RAY001
        for w in candidates
    )


def long_trials(configs: list[dict], data_ref) -> list[tuple[dict, float]]:
    out = []
    for i, config in enumerate(configs):
        ref = train_trial.options(num_cpus=4, name=f"long-trial-{i}").remote(config, data_ref)
        logger.info("submitted long trial %d: %s", i, config)
        metrics = ray.get(ref)  # expect: RAY001
        out.append((config, metrics["val_loss"]))
    return out


def record_trials(ledger, configs: list[dict], data_ref) -> None:
    for trial_id, config in enumerate(configs):
        metrics_ref = train_trial.remote(config, data_ref)
        count = ray.get(ledger.record.remote(trial_id, metrics_ref))  # expect: RAY001
        logger.info("ledger holds %d trials", count)


def random_search(data_ref, budget: int) -> list[float]:
    rng = np.random.default_rng(7)
    losses = []
    trial = 0
    while trial < budget:
        config = {"lr": float(10 ** rng.uniform(-4, -1)), "batch_size": 128, "seed": trial, "epochs": 10}
        losses.append(
            ray.get(  # expect: RAY001
                train_trial.remote(config, data_ref)
            )["val_loss"]
        )
        trial += 1
    return losses


def fine_tune(weights: np.ndarray, batches: list, lr: float) -> np.ndarray:
    for batch in batches:
        # fine: each SGD step needs the weights the previous step returned
        weights = ray.get(sgd_step.remote(weights, batch, lr))
    return weights


def restarts_until_converged(config: dict, data_ref, tol: float = 1e-3) -> int:
    loss = float("inf")
    seed = 0
    while loss > tol and seed < 50:  # fine: whether to restart again depends on this loss
        loss = ray.get(train_trial.remote({**config, "seed": seed}, data_ref))["val_loss"]
        seed += 1
    return seed


def first_ready_checkpoint(paths: list[str]) -> str | None:
    for path in paths:
        # fine: a search that stops at the first ready checkpoint
        if ray.get(checkpoint_ready.remote(path)):
            return path
    return None


def evaluate_pipelined(candidates: list[np.ndarray], data_ref) -> list[float]:
    scores: list[float] = []
    if not candidates:
        return scores
    in_flight = evaluate.remote(candidates[0], data_ref, "val")
    for weights in candidates[1:]:
        # fine: pipelining, the next evaluation runs while we wait for the previous one
        ref, in_flight = in_flight, evaluate.remote(weights, data_ref, "val")
        scores.append(ray.get(ref))
    scores.append(ray.get(in_flight))
    return scores


def best_as_finished(data_ref) -> float:
    pending = [train_trial.remote(c, data_ref) for c in grid()]
    best = float("inf")
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        metrics = ray.get(done[0])  # fine: the ref came from ray.wait and is already done
        best = min(best, metrics["val_loss"])
    return best


def mean_score(candidates: list[np.ndarray], data_ref) -> float:
    refs = [evaluate.remote(w, data_ref, "val") for w in candidates]
    total = 0.0
    for ref in refs:
        total += ray.get(ref)  # fine: every ref was submitted before the loop
    # fine: the get in the loop's iterable runs once
    for metrics in ray.get([train_trial.remote(c, data_ref) for c in grid(epochs=5)]):
        logger.info("val_loss=%.4f", metrics["val_loss"])
    return total / max(len(refs), 1)


def smoke_test(data_ref) -> dict:
    for config in grid(epochs=1):
        metrics = ray.get(train_trial.remote(config, data_ref))
        assert np.isfinite(metrics["val_loss"]), config
        return metrics  # fine: the smoke test returns after the first trial
    raise ValueError("empty grid")


def wait_for_sweep(run_dir: str, expected: int, timeout_s: float = 3600.0) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        finished = ray.get(count_finished.remote(run_dir))  # fine: polling, sleeps between checks
        logger.info("%d/%d trials finished", finished, expected)
        if finished >= expected:
            return True
        time.sleep(30)
    return False


def quick_scores(candidates: list[np.ndarray], data_ref) -> dict[int, float]:
    scores, late = {}, {}
    for i, weights in enumerate(candidates):
        ref = evaluate.remote(weights, data_ref, "val")
        ready, _ = ray.wait([ref], timeout=0)
        if ready:
            scores[i] = ray.get(ref)  # fine: ray.wait said it is ready, the get does not block
        else:
            late[i] = ref
    scores.update(zip(late, ray.get(list(late.values()))))
    return scores


class _InlineRay:  # stand-in for the `ray` module in dry runs: values are already computed
    def get(self, value):
        return value


def dry_run(configs: list[dict], data, trainer, ray=_InlineRay()) -> list[dict]:
    # fine: `ray` is the inline stub passed in here, not the Ray module
    return [ray.get(trainer.remote(config, data)) for config in configs]
