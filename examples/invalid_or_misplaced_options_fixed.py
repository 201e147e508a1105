"""The same options, each where Ray takes it: ray-lint reports nothing here."""

import time

import ray


@ray.remote(max_restarts=3, max_task_retries=3)
class Indexer:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, tokens: list[str]) -> int:
        for token in tokens:
            self.index[token] = self.index.get(token, 0) + 1
        return len(self.index)


@ray.remote(max_retries=2)
def tokenize(text: str) -> list[str]:
    time.sleep(0.1)  # stands in for a real tokenizer
    return text.lower().split()


def build(texts: list[str]) -> int:
    indexer = Indexer.options(name="indexer", get_if_exists=True).remote()
    tokens = ray.get([tokenize.options(num_cpus=1).remote(text) for text in texts])
    return ray.get([indexer.add.remote(part) for part in tokens])[-1]


if __name__ == "__main__":
    ray.init()
    print(build(["The quick brown fox", "jumps over the lazy dog"]))
