"""ObjectRefs sent outside Ray: `ray-lint check examples/` reports each RAY035 below, and
`ray-lint verify examples/out_of_band_ref_serialization.py` shows the object freed, or pinned."""

import queue

import ray


@ray.remote
def render(frame: int) -> bytes:
    return bytes([frame % 256]) * 1_000_000  # a 1 MB frame, kept in the object store


def publish(frames: list[int], jobs: queue.Queue) -> None:
    for frame in frames:
        ref = render.remote(frame)
        jobs.put(ref.hex())  # RAY035: the queue holds only the ID; Ray may free the frame


def collect(jobs: queue.Queue) -> list[int]:
    sizes = []
    while not jobs.empty():
        ref = ray.ObjectRef(bytes.fromhex(jobs.get()))  # RAY035: a ref with nothing keeping its object
        sizes.append(len(ray.get(ref, timeout=2)))
    return sizes


def checkpoint(refs: list[ray.ObjectRef], path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(ray.cloudpickle.dumps(refs))  # RAY035: pins every frame until this process exits


if __name__ == "__main__":
    ray.init()
    pending: queue.Queue = queue.Queue()
    publish([1, 2], pending)
    checkpoint([render.remote(3)], "/tmp/frames.pkl")
    print(collect(pending))
