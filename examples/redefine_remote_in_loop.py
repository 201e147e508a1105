"""`ray.remote` applied again on every pass of a loop: `ray-lint check examples/` reports each RAY021
below, and `ray-lint verify examples/redefine_remote_in_loop.py` times the cost of the re-exports."""

import ray


def tokenize(line: str) -> list[str]:
    return line.lower().split()


def count_words(batches: list[list[str]]) -> list[int]:
    refs = []
    for batch in batches:
        @ray.remote  # RAY021: a new remote function, exported again, for every batch
        def count(lines: list[str]) -> int:
            return sum(len(line.split()) for line in lines)

        refs.append(count.remote(batch))
    return ray.get(refs)


def tokenize_all(lines: list[str]) -> list[list[str]]:
    refs = []
    for line in lines:
        task = ray.remote(tokenize)  # RAY021: the same function made remote once per line
        refs.append(task.remote(line))
    return ray.get(refs)


if __name__ == "__main__":
    ray.init()
    text = ["The quick brown fox", "jumps over", "the lazy dog"] * 40
    print(count_words([text[i : i + 3] for i in range(0, len(text), 3)]))
    print(len(tokenize_all(text)))
