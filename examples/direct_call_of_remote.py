"""A remote function called like a plain one: `ray-lint check examples/` reports the RAY066 below,
and `ray-lint verify examples/direct_call_of_remote.py` runs the script as written (Ray raises
`TypeError`) and with `.remote` inserted."""

import time

import ray


@ray.remote
def score(document: str) -> int:
    time.sleep(0.1)  # stands for a model's forward pass
    return sum(len(word) for word in document.split())


def score_all(documents: list[str]) -> dict[str, int]:
    scores = ray.get([score(doc) for doc in documents])  # RAY066: `score` is remote, call `score.remote`
    return dict(zip(documents, scores))


if __name__ == "__main__":
    ray.init()
    print(score_all(["a quick test", "of the scorer", "on three documents"]))
