"""Short GPU tasks submitted in a loop: `ray-lint check examples/` reports each RAY022 below, and
`ray-lint verify examples/short_gpu_tasks.py` times them against GPU actors (logical GPUs will do)."""

import time

import ray


def load_encoder(device: str):
    """Stands in for loading a model onto the GPU (`torch.load(path).to(device)`)."""
    time.sleep(0.1)
    return lambda text: [len(text) / 10, text.count(" ") / 10]


@ray.remote(num_gpus=1)
def embed(text: str) -> list[float]:
    encoder = load_encoder("cuda")
    return encoder(text)


@ray.remote(num_gpus=0.5)
def rerank(query: str, doc: str) -> float:
    encoder = load_encoder("cuda")
    q, d = encoder(query), encoder(doc)
    return q[0] * d[0] + q[1] * d[1]


def embed_all(texts: list[str]) -> list[list[float]]:
    return ray.get([embed.remote(t) for t in texts])  # RAY022: a new worker process (and model load) per text


def best_match(query: str, docs: list[str]) -> str:
    refs = []
    for doc in docs:
        refs.append(rerank.remote(query, doc))  # RAY022: the same, with half a GPU per task
    scores = ray.get(refs)
    return docs[scores.index(max(scores))]


if __name__ == "__main__":
    ray.init(num_gpus=2)  # logical GPUs where the machine has none: enough for this example
    docs = ["ray runs tasks", "gpus are fast", "actors keep state"]
    print(embed_all(docs))
    print(best_match("which keeps state", docs))
