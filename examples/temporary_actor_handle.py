"""Actors whose handles are dropped at once, so Ray destroys them: `ray-lint check examples/` reports
each RAY072 below, and `ray-lint verify examples/temporary_actor_handle.py` shows what is lost."""

import threading
import time

import ray


@ray.remote
class Registry:
    def __init__(self) -> None:
        self.models: dict[str, str] = {}

    def register(self, name: str, path: str) -> None:
        self.models[name] = path


@ray.remote
class Heartbeat:
    def start(self, interval: float) -> bool:
        def beat() -> None:
            for _ in range(3):
                time.sleep(interval)  # stands for reporting to a monitor

        threading.Thread(target=beat, daemon=True).start()
        return True


def setup() -> None:
    Registry.options(name="models").remote()  # RAY072: no handle kept, so the actor is gone at once
    ray.get(Heartbeat.remote().start.remote(0.1))  # RAY072: the thread dies with the actor


def register(name: str, path: str) -> None:
    registry = ray.get_actor("models")
    ray.get(registry.register.remote(name, path))


if __name__ == "__main__":
    ray.init()
    setup()
    register("resnet", "/models/resnet.pt")
