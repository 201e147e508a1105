"""Ray code that handles task results in submission order: `ray-lint check examples/` reports the
RAY002 below, and `ray-lint verify examples/get_submission_order.py` runs it, as written and fixed,
and measures the cost."""

import time

import ray


@ray.remote
def render(scene: str) -> bytes:
    time.sleep(1.0 if scene == "finale" else 0.05)  # the finale takes twenty times longer
    return scene.encode()


def upload(frame: bytes) -> None:
    time.sleep(0.1)  # stands for encoding the frame and sending it


def publish(scenes: list[str]) -> int:
    refs = [render.remote(scene) for scene in scenes]
    uploaded = 0
    for ref in refs:
        frame = ray.get(ref)  # RAY002: the short scenes wait behind the finale, submitted first
        upload(frame)
        uploaded += 1
    return uploaded


if __name__ == "__main__":
    ray.init()
    print(publish(["finale"] + [f"scene-{i}" for i in range(10)]))
