"""Price feature computation for a retail catalogue, spread over a Ray cluster."""

from __future__ import annotations

import math
import time

import numpy as np
import ray
import requests

CURRENCY_RATE = 1.08
PRICE_API = "https://prices.internal.example.com/v1/sku/"


def _clip(value: float) -> float:
    return max(0.0, min(value, 1_000_000.0))


@ray.remote
def to_eur(price: float) -> float:
    """Convert one USD price to EUR."""
    return _clip(price * CURRENCY_RATE)


@ray.remote
def log_margin(price: float, cost: float) -> float:
    margin = price - cost
    return math.log1p(margin) if margin > 0 else 0.0


@ray.remote
def to_eur_batch(prices: list[float]) -> list[float]:
    return [_clip(p * CURRENCY_RATE) for p in prices]


@ray.remote
def fetch_price(sku: str) -> float:
    response = requests.get(PRICE_API + sku, timeout=10)
    response.raise_for_status()
    return float(response.json()["price"])


@ray.remote
def zscore(block: np.ndarray) -> np.ndarray:
    return (block - block.mean()) / block.std()


@ray.remote
def heartbeat() -> float:
    return time.time()


def convert_catalogue(prices: list[float]) -> list[float]:
    refs = [to_eur.remote(p) for p in prices]  # unknown size: reported only with `unknown-size-loops`
    return ray.get(refs)


def price_grid() -> list[float]:
    return ray.get([to_eur.remote(cents / 100) for cents in range(20_000)])  # expect: RAY020


def margins(prices: list[float], costs: list[float]) -> list[float]:
    refs = []
    for price, cost in zip(prices, costs):
        refs.append(log_margin.remote(price, cost))  # unknown size: reported only with `unknown-size-loops`
    return ray.get(refs)


def convert_catalogue_batched(prices: list[float], batch_size: int = 5_000) -> list[float]:
    batches = [prices[i : i + batch_size] for i in range(0, len(prices), batch_size)]
    converted = ray.get([to_eur_batch.remote(b) for b in batches])
    return [p for batch in converted for p in batch]


def refresh_prices(skus: list[str]) -> list[float]:
    # Network-bound: many concurrent requests are the point, even if each is cheap for the CPU.
    return ray.get([fetch_price.remote(sku) for sku in skus])


def normalise(matrix: np.ndarray) -> np.ndarray:
    blocks = np.array_split(matrix, 16)
    return np.concatenate(ray.get([zscore.remote(b) for b in blocks]))


def spot_check(prices: list[float]) -> list[float]:
    # A handful of samples: the overhead does not matter.
    return ray.get([to_eur.remote(prices[i]) for i in range(5)])


def cluster_alive(checks: int = 1_000) -> bool:
    # The same call repeated: a liveness probe, not per-element work.
    stamps = ray.get([heartbeat.remote() for _ in range(checks)])
    return max(stamps) - min(stamps) < 60


def monitor(interval_s: float) -> None:
    while True:
        ray.get(heartbeat.remote())
        time.sleep(interval_s)


def main() -> None:
    ray.init()
    prices = [float(i % 997) for i in range(100_000)]
    costs = [p * 0.7 for p in prices]
    print(sum(convert_catalogue(prices)))
    print(sum(margins(prices, costs)))
    print(sum(convert_catalogue_batched(prices)))
    print(spot_check(prices), cluster_alive())


if __name__ == "__main__":
    main()
