"""The same watcher pausing with `await asyncio.sleep`, so that the callers' waits overlap: ray-lint
reports nothing here."""

import asyncio
import time

import ray


@ray.remote
class JobWatcher:
    """Waits for jobs of an external scheduler; each caller waits for its own job."""

    def __init__(self, poll_s: float) -> None:
        self.poll_s = poll_s

    async def wait_for(self, job: str, runs_s: float) -> str:
        deadline = time.monotonic() + runs_s  # stands for asking the scheduler whether the job is done
        while time.monotonic() < deadline:
            await asyncio.sleep(self.poll_s)  # the other callers' polls run during the pause
        return f"{job} done"


if __name__ == "__main__":
    ray.init()
    watcher = JobWatcher.remote(0.05)
    print(ray.get([watcher.wait_for.remote(f"job-{i}", 0.2) for i in range(4)]))
