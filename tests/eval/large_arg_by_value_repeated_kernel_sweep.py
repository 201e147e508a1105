"""Kernel ridge regression: sweep regularization strengths over one shared Gram matrix."""

import argparse

import numpy as np
import ray

N_POINTS = 4_000
N_FEATURES = 128
ALPHAS = [1e-3, 1e-2, 1e-1, 1.0, 10.0]


@ray.remote
def fit_ridge(gram, targets, alpha):
    regularized = gram + alpha * np.eye(gram.shape[0])
    return np.linalg.solve(regularized, targets)


@ray.remote
def score(gram, weights, targets):
    predictions = gram @ weights
    return float(np.mean((predictions - targets) ** 2))


@ray.remote
class FoldEvaluator:
    def __init__(self, gram):
        self.gram = gram

    def evaluate(self, weights, targets):
        return float(np.mean((self.gram @ weights - targets) ** 2))


def build_gram(points):
    return points @ points.T


def sweep_by_value(targets):
    gram = np.zeros((N_POINTS, N_POINTS))  # 128 MB, filled below
    gram[:] = build_gram(np.random.rand(N_POINTS, N_FEATURES))
    refs = []
    for alpha in ALPHAS:
        refs.append(fit_ridge.remote(gram, targets, alpha))  # expect: RAY030
    return ray.get(refs)


def sweep_with_put(targets):
    gram = np.zeros((N_POINTS, N_POINTS))
    gram[:] = build_gram(np.random.rand(N_POINTS, N_FEATURES))
    gram_ref = ray.put(gram)
    refs = [fit_ridge.remote(gram_ref, targets, alpha) for alpha in ALPHAS]
    return ray.get(refs)


def evaluators(count):
    validation = np.ones((N_POINTS, N_POINTS), dtype=np.float32)  # 64 MB
    return [FoldEvaluator.remote(validation) for _ in range(count)]  # expect: RAY030


def score_all(weights_list, targets):
    gram = np.random.rand(N_POINTS, N_POINTS)
    return ray.get([score.remote(gram, weights, targets) for weights in weights_list])  # expect: RAY030


def refit_until_stable(targets, tolerance):
    """Each round changes the matrix in place: every task needs that round's values."""
    gram = np.zeros((N_POINTS, N_POINTS))
    previous = None
    for _ in range(10):
        gram += np.random.rand(N_POINTS, N_POINTS) * 1e-3
        weights = ray.get(fit_ridge.remote(gram, targets, 1.0))
        if previous is not None and np.abs(weights - previous).max() < tolerance:
            break
        previous = weights
    return previous


def single_fit(targets):
    gram = np.zeros((N_POINTS, N_POINTS))
    return ray.get(fit_ridge.remote(gram, targets, 1.0))


def small_inputs(targets_list):
    offsets = np.zeros(N_FEATURES)  # 1 KB: inlined in the task spec
    return ray.get([fit_ridge.remote(offsets, targets, 0.1) for targets in targets_list])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tolerance", type=float, default=1e-6)
    args = parser.parse_args()
    ray.init()
    targets = np.random.rand(N_POINTS)
    print(sweep_by_value(targets))
    print(sweep_with_put(targets))
    evaluators(4)
    print(refit_until_stable(targets, args.tolerance))
    print(single_fit(targets))


if __name__ == "__main__":
    main()
