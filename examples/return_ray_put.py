"""Tasks that store their result with `ray.put` and return the ref: `ray-lint check examples/` reports
each RAY033 below, and `ray-lint verify examples/return_ray_put.py` times them against returning values."""

import ray


@ray.remote
def word_count(line: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in line.split():
        counts[word] = counts.get(word, 0) + 1
    ref = ray.put(counts)  # RAY033: owned by this worker, and a second round trip to read
    return ref


@ray.remote
class Vocabulary:
    def __init__(self) -> None:
        self.words: set[str] = set()

    def add(self, line: str):
        new = [w for w in line.split() if w not in self.words]
        self.words.update(new)
        return ray.put(new)  # RAY033: the same from an actor method


def count_all(lines: list[str]) -> list[dict[str, int]]:
    refs = ray.get([word_count.remote(line) for line in lines])
    return ray.get(refs)


def new_words(lines: list[str]) -> list[list[str]]:
    vocabulary = Vocabulary.remote()
    return ray.get(ray.get([vocabulary.add.remote(line) for line in lines]))


if __name__ == "__main__":
    ray.init()
    text = ["the quick brown fox", "jumps over the lazy dog"] * 50
    print(count_all(text)[:2])
    print(new_words(text)[:2])
