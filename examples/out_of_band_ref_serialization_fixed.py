"""The same pipeline with the refs handed through Ray, which counts them: ray-lint reports nothing here."""

import ray


@ray.remote
def render(frame: int) -> bytes:
    return bytes([frame % 256]) * 1_000_000  # a 1 MB frame, kept in the object store


@ray.remote
class Collector:
    def __init__(self) -> None:
        self.refs: list[ray.ObjectRef] = []

    def add(self, refs: list[ray.ObjectRef]) -> None:
        self.refs.extend(refs)  # refs inside an argument: Ray keeps their objects alive

    def sizes(self) -> list[int]:
        return [len(frame) for frame in ray.get(self.refs)]


def publish(frames: list[int], collector) -> None:
    refs = [render.remote(frame) for frame in frames]
    ray.get(collector.add.remote(refs))


if __name__ == "__main__":
    ray.init()
    collector = Collector.remote()
    publish([1, 2], collector)
    print(ray.get(collector.sizes.remote()))
