"""The same script on a small local cluster; to step through a task, use Ray's distributed debugger
(`breakpoint()` in the task): ray-lint reports nothing here."""

import time

import ray


@ray.remote
def tokenize(text: str) -> list[str]:
    time.sleep(0.1)  # stands for real work
    return text.lower().split()


def vocabulary(texts: list[str]) -> set[str]:
    words: set[str] = set()
    for tokens in ray.get([tokenize.remote(text) for text in texts]):
        words.update(tokens)
    return words


if __name__ == "__main__":
    ray.init(num_cpus=1)  # one task at a time, in a worker process
    print(sorted(vocabulary(["The quick fox", "the lazy dog"])))
