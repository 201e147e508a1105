"""A shared rate limiter and usage ledger for many scraper tasks, served by threaded actors."""

import threading
import time
from collections import defaultdict

import ray


@ray.remote(max_concurrency=32, num_cpus=0)
class RateLimiter:
    """Hands out request tokens to scrapers; many calls wait here at once."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.tokens = per_second
        self.updated = time.monotonic()
        self.lock = threading.Lock()
        self.granted = 0
        self.denied = 0
        self.waiters = []

    def acquire_token(self, host: str) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.per_second, self.tokens + (now - self.updated) * self.per_second)
            self.updated = now
            if self.tokens < 1:
                self.denied += 1
                return False
            self.tokens -= 1
        self.granted += 1  # expect: RAY079
        self.waiters.append(host)
        return True

    def stats(self) -> dict:
        with self.lock:
            return {"granted": self.granted, "denied": self.denied}


@ray.remote(num_cpus=0)
class UsageLedger:
    """Per-host byte counts, reported by every scraper after each page."""

    def __init__(self) -> None:
        self.bytes_by_host = {}
        self.pages = defaultdict(int)
        self.total_bytes = 0
        self.hosts = []
        self.last_host = None

    def record(self, host: str, size: int) -> None:
        self.bytes_by_host[host] = self.bytes_by_host.get(host, 0) + size  # expect: RAY079
        self.total_bytes = self.total_bytes + size  # expect: RAY079
        self.hosts.append(host)
        self.last_host = host

    def report(self) -> dict:
        return {"total": self.total_bytes, "hosts": len(set(self.hosts))}


@ray.remote
class Checkpointer:
    """Not threaded: calls run one at a time, so plain updates are safe."""

    def __init__(self) -> None:
        self.saved = 0

    def save(self, state: dict) -> int:
        self.saved += 1
        return self.saved


@ray.remote
def scrape(url: str, limiter, ledger) -> int:
    host = url.split("/")[2]
    while not ray.get(limiter.acquire_token.remote(host)):
        time.sleep(0.1)
    size = len(url) * 1000
    ledger.record.remote(host, size)
    return size


def main(urls: list) -> None:
    limiter = RateLimiter.remote(per_second=20.0)
    ledger = UsageLedger.options(max_concurrency=8).remote()
    checkpointer = Checkpointer.remote()
    sizes = ray.get([scrape.remote(url, limiter, ledger) for url in urls])
    saved = ray.get(checkpointer.save.remote({"pages": len(sizes)}))
    print(sum(sizes), saved, ray.get(limiter.stats.remote()), ray.get(ledger.report.remote()))


if __name__ == "__main__":
    ray.init()
    main([f"https://example.com/page/{i}" for i in range(100)])
