"""Ray code that blocks an async actor's event loop with `time.sleep`: `ray-lint check examples/`
reports the RAY007 below, and `ray-lint verify examples/blocking_call_in_async_actor.py` runs the
rule's model of it and measures the cost."""

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
            time.sleep(self.poll_s)  # RAY007: holds the event loop, so the other callers' polls wait
        return f"{job} done"


if __name__ == "__main__":
    ray.init()
    watcher = JobWatcher.remote(0.05)
    print(ray.get([watcher.wait_for.remote(f"job-{i}", 0.2) for i in range(4)]))
