"""A driver that raises the BLAS thread counts of every worker: `ray-lint check examples/` reports each RAY042 below."""

import os

import numpy as np
import ray

os.environ["OMP_NUM_THREADS"] = "16"  # RAY042: local workers inherit it, and Ray keeps a value that is set
os.environ["MKL_NUM_THREADS"] = str(os.cpu_count())  # RAY042: every worker starts one MKL thread per core


@ray.remote
def gram(seed: int) -> float:
    a = np.random.default_rng(seed).standard_normal((2000, 2000))
    return float(np.trace(a @ a.T))


@ray.remote(num_cpus=2, runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "8"}})  # RAY042: 8 threads on 2 CPUs
def invert(seed: int) -> float:
    a = np.random.default_rng(seed).standard_normal((2000, 2000))
    return float(np.linalg.inv(a).sum())


if __name__ == "__main__":
    ray.init(
        runtime_env={
            "env_vars": {
                "NUMEXPR_MAX_THREADS": "64",  # RAY042: for every task and actor of the job
            },
        },
    )
    refs = [gram.remote(seed) for seed in range(8)]
    refs += [invert.remote(seed) for seed in range(4)]
    print(sum(ray.get(refs)))
