"""Options Ray refuses: `ray-lint check examples/` reports each RAY094 below, and `ray-lint verify
examples/invalid_or_misplaced_options.py` replays each on a stand-in task or actor, and the fixed options."""

import time

import ray


@ray.remote(max_retries=3)  # RAY094: a task option: an actor's retries are max_restarts / max_task_retries
class Indexer:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, tokens: list[str]) -> int:
        for token in tokens:
            self.index[token] = self.index.get(token, 0) + 1
        return len(self.index)


@ray.remote(lifetime="detached")  # RAY094: an actor option: a task has no lifetime
def tokenize(text: str) -> list[str]:
    time.sleep(0.1)  # stands in for a real tokenizer
    return text.lower().split()


def build(texts: list[str]) -> int:
    indexer = Indexer.options(get_if_exists=True).remote()  # RAY094: reusing an actor needs its name
    tokens = ray.get([tokenize.options(num_cpu=1).remote(text) for text in texts])  # RAY094: num_cpus
    return ray.get([indexer.add.remote(part) for part in tokens])[-1]


if __name__ == "__main__":
    ray.init()
    print(build(["The quick brown fox", "jumps over the lazy dog"]))
