"""An ingest service: actors that pull events from a broker actor and keep running counters."""

import asyncio
import threading
import time

import ray


@ray.remote
class Broker:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def publish(self, event: dict) -> None:
        self.events.append(event)

    def next_event(self) -> dict | None:
        return self.events.pop(0) if self.events else None


@ray.remote(num_cpus=1)
class Ingestor:
    """Pulls forever; `stats` can never run once `run` has started."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.seen = 0

    def run(self) -> None:
        while True:  # expect: RAY008
            event = ray.get(self.broker.next_event.remote())
            if event is not None:
                self._store(event)
            time.sleep(0.05)

    def _store(self, event: dict) -> None:
        self.seen += 1

    def stats(self) -> dict:
        return {"seen": self.seen}


@ray.remote
class Sampler:
    def __init__(self) -> None:
        self.running = False
        self.samples: list[float] = []

    def start(self) -> None:
        self.running = True
        while self.running:  # expect: RAY008
            self.samples.append(time.monotonic())
            time.sleep(1.0)

    def stop(self) -> None:
        self.running = False


@ray.remote
class AsyncIngestor:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.seen = 0

    async def run(self) -> None:
        while True:
            event = await self.broker.next_event.remote()
            if event is not None:
                self.seen += 1
            await asyncio.sleep(0.05)

    async def stats(self) -> dict:
        return {"seen": self.seen}


@ray.remote(max_concurrency=2)
class ThreadedIngestor:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.lock = threading.Lock()
        self.seen = 0

    def run(self) -> None:
        while True:
            ray.get(self.broker.next_event.remote())
            with self.lock:
                self.seen += 1

    def stats(self) -> dict:
        with self.lock:
            return {"seen": self.seen}


@ray.remote
class Drainer:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.drained = 0

    def drain(self) -> int:
        while True:
            event = ray.get(self.broker.next_event.remote())
            if event is None:
                return self.drained
            self.drained += 1

    def drained_so_far(self) -> int:
        return self.drained


@ray.remote
class Heartbeat:
    def __init__(self, interval: float) -> None:
        self.interval = interval

    def ready(self) -> bool:
        return True

    def beat(self) -> None:
        while True:
            print("alive", time.time())
            time.sleep(self.interval)


def main() -> None:
    broker = Broker.remote()
    for i in range(10):
        broker.publish.remote({"id": i})
    drainer = Drainer.remote(broker)
    print(ray.get(drainer.drain.remote()))
    heartbeat = Heartbeat.remote(5.0)
    ray.get(heartbeat.ready.remote())
    heartbeat.beat.remote()
    ingestor = AsyncIngestor.remote(broker)
    ingestor.run.remote()
    print(ray.get(ingestor.stats.remote()))


if __name__ == "__main__":
    main()
