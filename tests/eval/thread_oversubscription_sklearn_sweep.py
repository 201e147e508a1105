"""Hyper-parameter sweep that trains scikit-learn, joblib and PyTorch models in Ray tasks and actors.

Exercises RAY041 thread-oversubscription: `n_jobs=-1` / `n_jobs=k`, joblib `Parallel`,
`torch.set_num_threads`, `threadpool_limits` and process or thread pools sized past the `num_cpus`
a task or actor asked for. The traps: parallelism that matches `num_cpus` (in the decorator or in
a `.options(...)` call), `n_jobs=1` / `None`, sizes held in variables, `.options(**resources)`,
I/O thread pools, and the same calls made in driver code.
"""

from __future__ import annotations

import multiprocessing
import os
import urllib.request
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import ray
import torch
from joblib import Parallel, delayed
from sklearn.ensemble import BaggingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from threadpoolctl import threadpool_limits

FOREST_GRID = {"max_depth": [4, 8, 16], "min_samples_leaf": [1, 5, 20]}
C_VALUES = [0.01, 0.1, 1.0, 10.0]
WIDE_RESOURCES = {"num_cpus": 16, "memory": 32 * 1024**3}


def load_split(path: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(path)
    return data["X"], data["y"]


def score_c(X: np.ndarray, y: np.ndarray, c: float) -> float:
    model = LogisticRegression(C=c, max_iter=500)
    return float(cross_val_score(model, X, y, cv=3).mean())


def log_features(shard: np.ndarray) -> np.ndarray:
    return np.log1p(np.abs(shard)).astype(np.float32)


@ray.remote
def fit_forest(path: str, n_estimators: int) -> float:
    X, y = load_split(path)
    model = RandomForestClassifier(n_estimators=n_estimators, n_jobs=-1)  # expect: RAY041
    return float(cross_val_score(model, X, y, cv=3).mean())


@ray.remote(num_cpus=4)
def fit_forest_pinned(path: str, n_estimators: int) -> float:
    X, y = load_split(path)
    model = RandomForestClassifier(n_estimators=n_estimators, n_jobs=4)  # fine: matches num_cpus=4
    return float(cross_val_score(model, X, y, cv=3, n_jobs=1).mean())  # fine: a single job


@ray.remote(num_cpus=2)
def grid_search_forest(path: str) -> dict:
    X, y = load_split(path)
    search = GridSearchCV(  # expect: RAY041
        RandomForestClassifier(n_jobs=None),  # fine: None means one job
        FOREST_GRID,
        cv=5,
        n_jobs=8,
    )
    return search.fit(X, y).best_params_


@ray.remote(num_cpus=8)
def boosted_cv(path: str) -> float:
    X, y = load_split(path)
    model = HistGradientBoostingClassifier(max_iter=200)
    return float(cross_val_score(model, X, y, cv=5, n_jobs=-1).mean())  # expect: RAY041


@ray.remote
def sweep_regularization(path: str) -> list[float]:
    X, y = load_split(path)
    return Parallel(n_jobs=4)(delayed(score_c)(X, y, c) for c in C_VALUES)  # expect: RAY041


@ray.remote
def sweep_regularization_sized(path: str, n_jobs: int) -> list[float]:
    X, y = load_split(path)
    # fine: the caller passes the job count, so it cannot be checked here
    return Parallel(n_jobs=n_jobs)(delayed(score_c)(X, y, c) for c in C_VALUES)


@ray.remote
def bootstrap_ensemble(path: str, rounds: int) -> list[float]:
    X, y = load_split(path)
    rng = np.random.default_rng(0)
    scores = []
    for _ in range(rounds):
        idx = rng.integers(0, len(y), len(y))
        model = RandomForestClassifier(n_estimators=50, n_jobs=8)  # fine: main() runs it with num_cpus=8
        scores.append(model.fit(X[idx], y[idx]).score(X, y))
    return scores


@ray.remote
def fit_wide_forest(path: str) -> float:
    X, y = load_split(path)
    model = RandomForestClassifier(n_estimators=1000, n_jobs=16)  # fine: .options(**WIDE_RESOURCES) hides its CPU share
    return float(model.fit(X, y).score(X, y))


@ray.remote(num_cpus=4)
def fit_logistic(path: str) -> float:
    X, y = load_split(path)
    with threadpool_limits(limits=16, user_api="blas"):  # expect: RAY041
        model = LogisticRegression(max_iter=1000).fit(X, y)
    return float(model.score(X, y))


@ray.remote
def fit_logistic_single_thread(path: str) -> float:
    X, y = load_split(path)
    with threadpool_limits(limits=1, user_api="blas"):  # fine: caps BLAS at the task's one CPU
        model = LogisticRegression(max_iter=1000).fit(X, y)
    return float(model.score(X, y))


@ray.remote(num_cpus=2)
def featurize(path: str) -> np.ndarray:
    X, _ = load_split(path)
    with ProcessPoolExecutor() as pool:  # expect: RAY041, RAY064
        return np.concatenate(list(pool.map(log_features, np.array_split(X, 16))))


@ray.remote(num_cpus=2)
def featurize_pinned(path: str) -> np.ndarray:
    X, _ = load_split(path)
    with multiprocessing.Pool(processes=2) as pool:  # expect: RAY064 (it forks); for RAY041 it is fine: two processes for two CPUs
        return np.concatenate(pool.map(log_features, np.array_split(X, 16)))


@ray.remote
def featurize_threaded(path: str) -> np.ndarray:
    X, _ = load_split(path)
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:  # expect: RAY041
        return np.concatenate(list(pool.map(log_features, np.array_split(X, 64))))


@ray.remote
def download_splits(urls: list[str], out_dir: str) -> list[str]:
    targets = [os.path.join(out_dir, os.path.basename(url)) for url in urls]
    with ThreadPoolExecutor(max_workers=16) as pool:  # fine: the threads wait on the network
        return [path for path, _ in pool.map(urllib.request.urlretrieve, urls, targets)]


def fit_bagging(path: str) -> float:
    X, y = load_split(path)
    model = BaggingClassifier(n_estimators=32, n_jobs=-1)  # expect: RAY041
    return float(model.fit(X, y).score(X, y))


fit_bagging_remote = ray.remote(fit_bagging)


@ray.remote(num_cpus=2)
class TorchTrainer:
    def __init__(self, n_features: int, hidden: int) -> None:
        torch.set_num_threads(os.cpu_count())  # expect: RAY041
        torch.set_num_interop_threads(2)  # fine: matches num_cpus=2
        layers = [torch.nn.Linear(n_features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2)]
        self.model = torch.nn.Sequential(*layers)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def fit(self, path: str, epochs: int) -> float:
        X, y = load_split(path)
        xb, yb = torch.from_numpy(X).float(), torch.from_numpy(y).long()
        loss = torch.tensor(0.0)
        for _ in range(epochs):
            self.opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(self.model(xb), yb)
            loss.backward()
            self.opt.step()
        return float(loss)


@ray.remote
class Evaluator:
    def __init__(self, threads: int) -> None:
        torch.set_num_threads(1)  # fine: one thread for the actor's one CPU
        self.threads = threads

    def widen(self) -> None:
        torch.set_num_threads(self.threads)  # fine: the count is only known at run time

    def warm_up(self) -> None:
        torch.set_num_interop_threads(4)  # expect: RAY041


def local_baseline(path: str) -> dict:
    X, y = load_split(path)
    # fine: driver code, not a Ray task; the driver may use every core of this machine
    search = GridSearchCV(LogisticRegression(max_iter=500), {"C": C_VALUES}, n_jobs=-1)
    return search.fit(X, y).best_params_


def main(path: str) -> None:
    ray.init(num_cpus=multiprocessing.cpu_count())  # fine: sizes the local cluster, in the driver
    torch.set_num_threads(os.cpu_count())  # fine: the driver's own torch threads
    forests = [fit_forest.remote(path, n) for n in (100, 200, 400)]
    pinned = [fit_forest_pinned.remote(path, n) for n in (100, 200, 400)]
    bagged = bootstrap_ensemble.options(num_cpus=8).remote(path, 10)
    wide = fit_wide_forest.options(**WIDE_RESOURCES).remote(path)
    trainers = [TorchTrainer.remote(64, hidden) for hidden in (32, 64, 128)]
    losses = [trainer.fit.remote(path, 20) for trainer in trainers]
    evaluator = Evaluator.remote(2)
    evaluator.warm_up.remote()
    others = [
        grid_search_forest.remote(path),
        boosted_cv.remote(path),
        sweep_regularization.remote(path),
        sweep_regularization_sized.remote(path, 1),
        fit_logistic.remote(path),
        fit_logistic_single_thread.remote(path),
        fit_bagging_remote.remote(path),
        featurize.remote(path),
        featurize_pinned.remote(path),
        featurize_threaded.remote(path),
    ]
    results = ray.get(forests + pinned + [bagged, wide] + losses + others)
    print(local_baseline(path), results)
