"""Workers that pull items from a shared work-queue actor and process them."""

import time

import numpy as np
import ray


@ray.remote
class WorkQueue:
    def __init__(self, items: list[int]) -> None:
        self.items = list(items)

    def get_work_item(self) -> int | None:
        return self.items.pop(0) if self.items else None

    def get_after(self, cursor: int) -> int | None:
        return cursor + 1 if cursor < 100 else None


def featurize(item: int) -> np.ndarray:
    return np.sin(np.arange(item * 1000, dtype=np.float64))


@ray.remote
class Worker:
    def __init__(self, queue) -> None:
        self.queue = queue
        self.done = 0

    def run(self) -> int:
        while True:
            item = ray.get(self.queue.get_work_item.remote())  # expect: RAY009
            if item is None:
                return self.done
            featurize(item)
            self.done += 1

    def run_pipelined(self) -> int:
        next_ref = self.queue.get_work_item.remote()
        while True:
            item = ray.get(next_ref)
            if item is None:
                return self.done
            next_ref = self.queue.get_work_item.remote()
            featurize(item)
            self.done += 1

    def walk(self) -> int:
        cursor = 0
        while True:
            cursor = ray.get(self.queue.get_after.remote(cursor))
            if cursor is None:
                return self.done
            featurize(cursor)
            self.done += 1

    def count_only(self) -> int:
        seen = []
        while True:
            item = ray.get(self.queue.get_work_item.remote())
            if item is None:
                return len(seen)
            seen.append(item)


@ray.remote
class Monitor:
    def __init__(self, queue) -> None:
        self.queue = queue

    def watch(self) -> None:
        while True:
            item = ray.get(self.queue.get_work_item.remote())
            print("peek", item)
            time.sleep(10)


def main() -> None:
    queue = WorkQueue.remote(list(range(20)))
    workers = [Worker.remote(queue) for _ in range(2)]
    print(ray.get([w.run.remote() for w in workers]))


if __name__ == "__main__":
    main()
