"""A Ray task that asks for its GPU and CPUs through `resources=`: `ray-lint check examples/` reports the
RAY046 below, and `ray-lint verify examples/resources_dict_cpu_gpu.py` runs the script as written and fixed."""

import time

import ray


@ray.remote(resources={"GPU": 1, "CPU": 1})  # RAY046: Ray refuses CPU / GPU keys at decoration
def embed(batch: list[str]) -> list[float]:
    time.sleep(0.2)  # stands in for a forward pass on the GPU
    return [len(text) / 10 for text in batch]


def embed_corpus(corpus: list[str], batch_size: int) -> list[float]:
    batches = [corpus[i : i + batch_size] for i in range(0, len(corpus), batch_size)]
    vectors: list[float] = []
    for part in ray.get([embed.remote(batch) for batch in batches]):
        vectors.extend(part)
    return vectors


if __name__ == "__main__":
    ray.init()
    corpus = [f"document number {i}" for i in range(12)]
    print(embed_corpus(corpus, batch_size=4))
