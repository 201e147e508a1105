"""The same task asking for its GPU and CPUs with `num_gpus` / `num_cpus`: ray-lint reports nothing here."""

import time

import ray


@ray.remote(num_gpus=1, num_cpus=1)
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
