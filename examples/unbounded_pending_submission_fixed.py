"""The same events sent to the actor in batches, a few calls in all: ray-lint reports nothing here."""

import ray


@ray.remote
class Recorder:
    """Keeps a tally of the events it is sent."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def record_many(self, kinds: list[str]) -> None:
        for kind in kinds:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def totals(self) -> dict[str, int]:
        return self.counts


def replay(recorder) -> dict[str, int]:
    kinds = ["click" if i % 3 else "view" for i in range(10_000)]
    for start in range(0, len(kinds), 1_000):
        recorder.record_many.remote(kinds[start : start + 1_000])  # 10 calls, not 10,000
    return ray.get(recorder.totals.remote())


if __name__ == "__main__":
    ray.init()
    print(replay(Recorder.remote()))
