"""Ray code whose actor loops in one method while another is meant to stop it: `ray-lint check
examples/` reports the RAY008 below, and `ray-lint verify examples/sync_actor_busy_loop.py` runs the
rule's model of it and shows the call that never runs."""

import time

import ray


@ray.remote
class Collector:
    """Polls a source for new records until it is told to stop."""

    def __init__(self) -> None:
        self.running = True
        self.collected = 0

    def run(self) -> int:
        while self.running:  # RAY008: `stop` queues behind this call, so the loop never ends
            time.sleep(0.05)  # stands for polling the source
            self.collected += 1
        return self.collected

    def stop(self) -> None:
        self.running = False


if __name__ == "__main__":
    ray.init()
    collector = Collector.remote()
    loop = collector.run.remote()
    time.sleep(0.3)
    try:
        ray.get(collector.stop.remote(), timeout=2)
        print(ray.get(loop), "records")
    except ray.exceptions.GetTimeoutError:
        print("stop() did not run in 2 s: the actor is still in run()")
