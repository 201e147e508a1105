"""Launcher for a nightly BLAS-heavy simulation job: environment set-up in the driver,
`ray.init(runtime_env=...)`, and per-task and per-actor `runtime_env` overrides.

Exercises RAY042 driver-env-thread-override: thread-count variables (OMP, MKL, OpenBLAS, numexpr,
vecLib) raised above 1 through `os.environ[...] =`, `setdefault`, `update` and `os.putenv`, and in
`runtime_env={"env_vars": ...}` dicts given to `ray.init`, `@ray.remote` and `.options`, directly or
through a dict assigned earlier in the same function. The traps: values of "1", values from
variables, f-strings, the scheduler or a config, other environment variables, reads and `pop`, the
environment of a non-Ray subprocess, and `runtime_env`s whose own call requests at least as many
CPUs (`num_cpus`) as the threads it sets.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess

import numpy as np
import ray

# Left over from when the job ran alone on a 16-core box.
os.environ["OMP_NUM_THREADS"] = "16"  # expect: RAY042
os.environ["TOKENIZERS_PARALLELISM"] = "false"  # fine: not a thread-count variable
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # fine: not a thread-count variable


@ray.remote
def simulate(seed: int, size: int) -> float:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size))
    return float(np.linalg.norm(a @ a.T))


@ray.remote(num_cpus=2, runtime_env={"env_vars": {"MKL_NUM_THREADS": "8"}})  # expect: RAY042
def factorize(seed: int, size: int) -> float:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((size, size)))
    return float(np.abs(np.diag(r)).sum())


@ray.remote(num_cpus=4, runtime_env={"env_vars": {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}})  # fine: 4 CPUs held
def solve(seed: int, size: int) -> float:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((size, size)), rng.standard_normal(size)
    return float(np.linalg.solve(a, b).sum())


@ray.remote(
    num_cpus=4,
    runtime_env={
        "env_vars": {
            "OMP_NUM_THREADS": "4",  # fine: matches num_cpus=4
            "OPENBLAS_NUM_THREADS": "16",  # expect: RAY042
        },
    },
)
def eigen_decompose(seed: int, size: int) -> float:
    a = np.random.default_rng(seed).standard_normal((size, size))
    return float(np.linalg.eigvalsh(a + a.T).max())


@ray.remote(num_cpus=1)
class MonteCarlo:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def run(self, n_paths: int) -> float:
        steps = self.rng.standard_normal((n_paths, 252)).cumsum(axis=1)
        return float(np.exp(steps[:, -1] * 0.01).mean())


def configure_fast_math() -> None:
    os.environ["MKL_NUM_THREADS"] = str(os.cpu_count())  # expect: RAY042
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "8")  # expect: RAY042
    os.environ.update({"NUMEXPR_MAX_THREADS": "64"})  # expect: RAY042
    os.putenv("VECLIB_MAXIMUM_THREADS", "16")  # expect: RAY042
    os.environ["MKL_DYNAMIC"] = "FALSE"  # fine: not a thread count
    os.environ.setdefault("KMP_AFFINITY", "granularity=fine,compact")  # fine: not a thread count


def configure_single_threaded() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # fine: one thread per worker
    os.environ.setdefault("MKL_NUM_THREADS", "1")  # fine: one thread per worker
    os.environ.update({"OPENBLAS_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"})  # fine: one thread each
    os.putenv("VECLIB_MAXIMUM_THREADS", "1")  # fine: one thread per worker
    os.environ.pop("NUMEXPR_MAX_THREADS", None)  # fine: removes an override


def configure_from_scheduler(threads: int) -> None:
    cpus = os.environ.get("SLURM_CPUS_PER_TASK", "1")  # fine: a read
    os.environ["OMP_NUM_THREADS"] = cpus  # fine: the scheduler's allocation, unknown here
    os.environ["MKL_NUM_THREADS"] = f"{cpus}"  # fine: an f-string, unknown here
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)  # fine: from a variable
    print("BLAS threads:", os.environ["OMP_NUM_THREADS"])  # fine: a read


def run_native_preprocessor(path: str) -> None:
    # fine: the environment of a native tool started outside Ray, not of Ray workers
    env = {**os.environ, "OMP_NUM_THREADS": "32"}
    subprocess.run(["./preprocess", "--input", path], env=env, check=True)


def launch_local() -> None:
    ray.init(
        runtime_env={
            "env_vars": {
                "OMP_NUM_THREADS": "8",  # expect: RAY042
                "PYTHONHASHSEED": "0",  # fine: not a thread-count variable
            },
        },
    )


def launch_cluster(address: str) -> None:
    runtime_env = {
        "working_dir": ".",
        "pip": ["numexpr==2.10.1"],
        "env_vars": {
            "NUMEXPR_NUM_THREADS": "32",  # expect: RAY042
            "MKL_NUM_THREADS": "1",  # fine: one thread per worker
        },
    }
    ray.init(address=address, runtime_env=runtime_env)


def launch_from_config(config: dict) -> None:
    # fine: the variables come from the config file, so their values are unknown here
    ray.init(address=config["address"], runtime_env={"env_vars": config["env_vars"]})


def run_trials(n_trials: int, size: int) -> list[float]:
    refs = [simulate.remote(seed, size) for seed in range(n_trials)]
    refs += [factorize.remote(0, size), solve.remote(1, size), eigen_decompose.remote(2, size)]
    wide = simulate.options(
        num_cpus=8,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": "8"}},  # fine: num_cpus=8 covers both
    ).remote(n_trials, size * 4)
    oversized = simulate.options(
        runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": str(multiprocessing.cpu_count())}},  # expect: RAY042
    ).remote(n_trials + 1, size * 4)
    quiet = simulate.options(runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}).remote(0, size)  # fine: "1"
    pricer = MonteCarlo.options(num_cpus=2, runtime_env={"env_vars": {"NUMEXPR_NUM_THREADS": "8"}}).remote(7)  # expect: RAY042
    return ray.get(refs + [wide, oversized, quiet, pricer.run.remote(100_000)])


def main() -> None:
    parser = argparse.ArgumentParser(description="nightly simulation launcher")
    parser.add_argument("--address", default=None)
    parser.add_argument("--config", default=None)
    parser.add_argument("--mode", choices=["fast", "single", "slurm"], default="single")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trials", type=int, default=32)
    args = parser.parse_args()
    if args.mode == "fast":
        configure_fast_math()
    elif args.mode == "slurm":
        configure_from_scheduler(args.threads)
    else:
        configure_single_threaded()
    run_native_preprocessor("data/raw")
    if args.config:
        with open(args.config) as f:
            launch_from_config(json.load(f))
    elif args.address:
        launch_cluster(args.address)
    else:
        launch_local()
    print(sum(run_trials(args.trials, 1024)))


if __name__ == "__main__":
    main()
