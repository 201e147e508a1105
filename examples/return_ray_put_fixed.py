"""The same tasks returning their values: Ray stores each result itself (inlined when small, owned by
the caller), so one `ray.get` reads it and ray-lint reports nothing here."""

import ray


@ray.remote
def word_count(line: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in line.split():
        counts[word] = counts.get(word, 0) + 1
    return counts


@ray.remote
class Vocabulary:
    def __init__(self) -> None:
        self.words: set[str] = set()

    def add(self, line: str) -> list[str]:
        new = [w for w in line.split() if w not in self.words]
        self.words.update(new)
        return new


def count_all(lines: list[str]) -> list[dict[str, int]]:
    return ray.get([word_count.remote(line) for line in lines])


def new_words(lines: list[str]) -> list[list[str]]:
    vocabulary = Vocabulary.remote()
    return ray.get([vocabulary.add.remote(line) for line in lines])


if __name__ == "__main__":
    ray.init()
    text = ["the quick brown fox", "jumps over the lazy dog"] * 50
    print(count_all(text)[:2])
    print(new_words(text)[:2])
