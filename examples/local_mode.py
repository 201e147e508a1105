"""Local mode, which Ray 2.60 no longer has: `ray-lint check examples/` reports the RAY091 below,
and `ray-lint verify examples/local_mode.py` calls Ray's own `ray.init` with it."""

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
    # Run the tasks inline to step through them with pdb, as Ray's testing tips used to suggest.
    ray.init(local_mode=True)  # RAY091: raises RuntimeError in Ray 2.60
    print(sorted(vocabulary(["The quick fox", "the lazy dog"])))
