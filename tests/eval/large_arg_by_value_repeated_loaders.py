"""RAY030 large-arg-by-value-repeated in a retail demand-forecasting job whose big inputs are loaded.

Findings: data read from disk, whose size the code does not show but which is a dataset, passed by
value to every task of a loop or comprehension: product embeddings from `np.load`, a sales history
from `pd.read_parquet`, a model state from `torch.load` handed to each actor of a pool, and a
1,000,000-element list comprehension of per-SKU state vectors sent to every task. Traps: the loaded
array `ray.put` once and the ref passed (inline and through a name), a frame parsed from a request's
text with `io.StringIO`, a loaded value passed to a single task, a different slice per iteration,
a different file loaded in each iteration, and a frame changed in place before each call.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import ray
import torch

EMBEDDINGS_PATH = "/data/catalog/product_embeddings.npy"
HISTORY_PATH = "/data/sales/history.parquet"
MODEL_PATH = "/models/demand-tft.pt"
N_SKUS = 1_000_000
STATE_DIM = 16


@ray.remote
def score_candidates(embeddings: np.ndarray, query_ids: list[int], k: int = 50) -> list[list[int]]:
    scores = embeddings[query_ids] @ embeddings.T
    return np.argsort(-scores, axis=1)[:, :k].tolist()


@ray.remote
def fit_store(history: pd.DataFrame, store_id: int) -> dict:
    sales = history.loc[history["store_id"] == store_id, "units"]
    return {"store_id": store_id, "mean": float(sales.mean()), "std": float(sales.std())}


@ray.remote
def update_states(states: list[np.ndarray], sku_ids: list[int], decay: float) -> dict[int, np.ndarray]:
    return {sku: states[sku] * decay for sku in sku_ids}


@ray.remote
def summarize(frame: pd.DataFrame, column: str) -> dict:
    return frame[column].describe().to_dict()


@ray.remote
class Forecaster:
    def __init__(self, state_dict: dict) -> None:
        self.model = torch.nn.Linear(STATE_DIM, 1)
        self.model.load_state_dict(state_dict, strict=False)

    def predict(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model(torch.as_tensor(features, dtype=torch.float32)).squeeze(-1).numpy()


def similar_products(query_batches: list[list[int]]) -> list[list[list[int]]]:
    embeddings = np.load(EMBEDDINGS_PATH)
    refs = [score_candidates.remote(embeddings, batch) for batch in query_batches]  # expect: RAY030
    return ray.get(refs)


def per_store_stats(store_ids: list[int]) -> list[dict]:
    history = pd.read_parquet(HISTORY_PATH, columns=["store_id", "date", "units"])
    refs = []
    for store_id in store_ids:
        refs.append(fit_store.remote(history, store_id))  # expect: RAY030
    return ray.get(refs)


def forecaster_pool(size: int) -> list:
    state_dict = torch.load(MODEL_PATH, map_location="cpu")
    return [Forecaster.remote(state_dict) for _ in range(size)]  # expect: RAY030


def decay_all(sku_batches: list[list[int]], decay: float = 0.97) -> list[dict]:
    states = [np.zeros(STATE_DIM, dtype=np.float32) for _ in range(N_SKUS)]
    return ray.get([update_states.remote(states, batch, decay) for batch in sku_batches])  # expect: RAY030


def similar_products_shared(query_batches: list[list[int]]) -> list[list[list[int]]]:
    # fine: the embeddings go to the object store once; every task gets the same ref
    embeddings_ref = ray.put(np.load(EMBEDDINGS_PATH))
    return ray.get([score_candidates.remote(embeddings_ref, batch) for batch in query_batches])


def per_store_stats_shared(store_ids: list[int]) -> list[dict]:
    history = pd.read_parquet(HISTORY_PATH)
    history_ref = ray.put(history)
    return ray.get([fit_store.remote(history_ref, store_id) for store_id in store_ids])


def summarize_upload(csv_text: str, columns: list[str]) -> list[dict]:
    # fine: parsed from the request body in memory, no bigger than the text itself
    frame = pd.read_csv(io.StringIO(csv_text))
    return ray.get([summarize.remote(frame, column) for column in columns])


def full_catalog_scan() -> list[list[int]]:
    # fine: the loaded array is passed once, outside any loop
    embeddings = np.load(EMBEDDINGS_PATH, mmap_mode="r")
    return ray.get(score_candidates.remote(embeddings, list(range(100)), k=10))


def chunked_scoring(chunk: int = 100_000) -> list[np.ndarray]:
    # fine: each task gets its own slice, so each slice is sent once
    embeddings = np.load(EMBEDDINGS_PATH)
    refs = []
    for start in range(0, len(embeddings), chunk):
        block = embeddings[start : start + chunk]
        refs.append(score_candidates.remote(block, list(range(len(block))), k=5))
    return ray.get(refs)


def weekly_stats(paths: list[str], store_id: int) -> list[dict]:
    # fine: a different file is loaded in each iteration, and each frame goes to one task
    refs = []
    for path in paths:
        week = pd.read_parquet(path)
        refs.append(fit_store.remote(week, store_id))
    return ray.get(refs)


def scenario_stats(store_id: int, uplifts: list[float]) -> list[dict]:
    # fine: the frame is changed before each call, so every task needs its own copy
    history = pd.read_parquet(HISTORY_PATH)
    base = history["units"].copy()
    refs = []
    for uplift in uplifts:
        history["units"] = base * (1.0 + uplift)
        refs.append(fit_store.remote(history, store_id))
    return ray.get(refs)


def main(store_ids: list[int], query_batches: list[list[int]]) -> None:
    ray.init()
    print(len(similar_products(query_batches)), len(similar_products_shared(query_batches)))
    print(per_store_stats(store_ids)[:3], per_store_stats_shared(store_ids)[:3])
    pool = forecaster_pool(4)
    features = np.random.rand(8, STATE_DIM)
    print(ray.get([actor.predict.remote(features) for actor in pool]))
    print(len(decay_all([list(range(i, i + 1000)) for i in range(0, 10_000, 1000)])))
    print(full_catalog_scan()[:2], len(chunked_scoring()))
    print(summarize_upload("store_id,units\n1,4\n2,7\n", ["units"]))
    print(weekly_stats([HISTORY_PATH], store_ids[0]), scenario_stats(store_ids[0], [0.0, 0.1, 0.2]))


if __name__ == "__main__":
    main([1, 2, 3], [[0, 1, 2], [3, 4, 5]])
