"""The remote functions made once, at module level, and called in the loops: ray-lint reports nothing here."""

import ray


@ray.remote
def count(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


@ray.remote
def tokenize(line: str) -> list[str]:
    return line.lower().split()


def count_words(batches: list[list[str]]) -> list[int]:
    return ray.get([count.remote(batch) for batch in batches])


def tokenize_all(lines: list[str]) -> list[list[str]]:
    return ray.get([tokenize.remote(line) for line in lines])


if __name__ == "__main__":
    ray.init()
    text = ["The quick brown fox", "jumps over", "the lazy dog"] * 40
    print(count_words([text[i : i + 3] for i in range(0, len(text), 3)]))
    print(len(tokenize_all(text)))
