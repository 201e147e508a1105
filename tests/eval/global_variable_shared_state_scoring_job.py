"""Nightly scoring job: a driver that tunes a threshold, scores documents with tasks and an actor,
and keeps a few module-level tables.

Exercises RAY060 global-variable-shared-state and RAY061 class-variable-shared-state: a threshold
rebound by the driver after the tasks that read it were submitted, a config dict changed inside a
sweep loop, results appended to a module list inside tasks, and a class-level counter on an actor.
The traps: read-only constants, a lazily loaded per-worker model, a per-worker cache filled under a
membership test, a value changed before the first submission, values passed as arguments, state
kept by one actor's methods, and a class attribute filled lazily under a condition.
"""

from __future__ import annotations

import argparse

import ray

STOPWORDS = frozenset({"a", "an", "the"})
SETTINGS = {"threshold": 0.5, "boost": 1.0}
MIN_LENGTH = 3
scored_ids: list[int] = []
_model = None
_token_cache: dict[str, int] = {}


def load_model():
    return lambda tokens: sum(len(t) for t in tokens) / 100.0


def tokenize(text: str) -> list[str]:
    return [t for t in text.lower().split() if t not in STOPWORDS and len(t) >= MIN_LENGTH]


@ray.remote
def score(doc_id: int, text: str) -> float:
    global _model
    if _model is None:
        _model = load_model()
    value = _model(tokenize(text)) * SETTINGS["boost"]
    scored_ids.append(doc_id)  # expect: RAY060
    return value


@ray.remote
def count_tokens(text: str) -> int:
    if text not in _token_cache:
        _token_cache[text] = len(tokenize(text))
    return _token_cache[text]


@ray.remote
def keep(values: list[float], threshold: float) -> list[bool]:
    return [value > threshold for value in values]


@ray.remote
class Ranker:
    calls = 0
    _vocab = None

    def __init__(self, top_k: int) -> None:
        self.top_k = top_k
        self.seen: dict[int, float] = {}
        if Ranker._vocab is None:
            Ranker._vocab = set(STOPWORDS)

    def add(self, doc_id: int, value: float) -> None:
        Ranker.calls += 1  # expect: RAY061
        self.seen[doc_id] = value

    def top(self) -> list[int]:
        ranked = sorted(self.seen, key=self.seen.get, reverse=True)
        return ranked[: self.top_k]


def tune(docs: dict[int, str]) -> dict[float, float]:
    means = {}
    for boost in (0.5, 1.0, 2.0):
        SETTINGS["boost"] = boost  # expect: RAY060
        values = ray.get([score.remote(i, text) for i, text in docs.items()])
        means[boost] = sum(values) / len(values)
    return means


def main() -> None:
    global MIN_LENGTH
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-length", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()
    MIN_LENGTH = args.min_length  # before any submission: the tasks are pickled with it
    ray.init()

    docs = {i: f"document number {i} about the ranking of things" for i in range(20)}
    lengths = ray.get([count_tokens.remote(text) for text in docs.values()])
    print("tokens", sum(lengths), "cached in driver:", len(_token_cache))

    values = ray.get([score.remote(i, text) for i, text in docs.items()])
    print("scored", len(scored_ids), "documents")
    MIN_LENGTH = 5  # expect: RAY060
    rescored = ray.get([score.remote(i, text) for i, text in docs.items()])

    threshold = SETTINGS["threshold"]
    kept = ray.get(keep.remote(values, threshold))
    threshold = 0.9
    strict = ray.get(keep.remote(rescored, threshold))

    ranker = Ranker.remote(args.top_k)
    ray.get([ranker.add.remote(i, v) for i, v in enumerate(values)])
    print(sum(kept), sum(strict), ray.get(ranker.top.remote()))
    print(tune(docs))


if __name__ == "__main__":
    main()
