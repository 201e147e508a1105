"""Ray code that sends thousands of calls to one actor without waiting for any: `ray-lint check
examples/` reports the RAY012 below, and `ray-lint verify examples/unbounded_pending_submission.py`
runs the rule's model of it and shows the backlog, with Ray's own warning."""

import ray


@ray.remote
class Recorder:
    """Keeps a tally of the events it is sent."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def record(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def totals(self) -> dict[str, int]:
        return self.counts


def replay(recorder) -> dict[str, int]:
    for i in range(10_000):
        recorder.record.remote("click" if i % 3 else "view")  # RAY012: every call queues at once
    return ray.get(recorder.totals.remote())


if __name__ == "__main__":
    ray.init()
    print(replay(Recorder.remote()))
