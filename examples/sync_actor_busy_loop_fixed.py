"""The same collector as an async actor, whose loop yields at each `await` so that `stop` runs:
ray-lint reports nothing here."""

import asyncio
import time

import ray


@ray.remote
class Collector:
    """Polls a source for new records until it is told to stop."""

    def __init__(self) -> None:
        self.running = True
        self.collected = 0

    async def run(self) -> int:
        while self.running:
            await asyncio.sleep(0.05)  # stands for polling the source; `stop` can run meanwhile
            self.collected += 1
        return self.collected

    async def stop(self) -> None:
        self.running = False


if __name__ == "__main__":
    ray.init()
    collector = Collector.remote()
    loop = collector.run.remote()
    time.sleep(0.3)
    ray.get(collector.stop.remote(), timeout=2)
    print(ray.get(loop, timeout=2), "records")
