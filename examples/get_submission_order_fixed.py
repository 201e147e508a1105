"""The same uploads handled as the renders finish, with `ray.wait`: ray-lint reports nothing here."""

import time

import ray


@ray.remote
def render(scene: str) -> bytes:
    time.sleep(1.0 if scene == "finale" else 0.05)  # the finale takes twenty times longer
    return scene.encode()


def upload(frame: bytes) -> None:
    time.sleep(0.1)  # stands for encoding the frame and sending it


def publish(scenes: list[str]) -> int:
    pending = [render.remote(scene) for scene in scenes]
    uploaded = 0
    while pending:
        [ref], pending = ray.wait(pending, num_returns=1)
        upload(ray.get(ref))  # each frame as soon as it is ready: the uploads overlap the finale
        uploaded += 1
    return uploaded


if __name__ == "__main__":
    ray.init()
    print(publish(["finale"] + [f"scene-{i}" for i in range(10)]))
