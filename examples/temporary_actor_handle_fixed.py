"""The same actors with their handles kept for as long as they are needed: ray-lint reports nothing here."""

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


def setup() -> list:
    registry = Registry.options(name="models").remote()
    heartbeat = Heartbeat.remote()
    ray.get(heartbeat.start.remote(0.1))
    return [registry, heartbeat]  # the caller keeps the actors alive


def register(name: str, path: str) -> None:
    registry = ray.get_actor("models")
    ray.get(registry.register.remote(name, path))


if __name__ == "__main__":
    ray.init()
    actors = setup()
    register("resnet", "/models/resnet.pt")
