"""The same job leaving thread counts to Ray, or matching them to `num_cpus`: ray-lint reports nothing here."""

import os

import numpy as np
import ray

os.environ["MKL_NUM_THREADS"] = "1"  # Ray sets only OMP_NUM_THREADS (to num_cpus); pin MKL to one thread


@ray.remote
def gram(seed: int) -> float:
    a = np.random.default_rng(seed).standard_normal((2000, 2000))
    return float(np.trace(a @ a.T))


@ray.remote(num_cpus=2, runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "2"}})  # as many threads as CPUs held
def invert(seed: int) -> float:
    a = np.random.default_rng(seed).standard_normal((2000, 2000))
    return float(np.linalg.inv(a).sum())


if __name__ == "__main__":
    ray.init(
        runtime_env={
            "env_vars": {
                "NUMEXPR_MAX_THREADS": "1",  # one numexpr thread per worker
            },
        },
    )
    refs = [gram.remote(seed) for seed in range(8)]
    refs += [invert.remote(seed) for seed in range(4)]
    print(sum(ray.get(refs)))
