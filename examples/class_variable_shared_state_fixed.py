"""The same crawl with shared state in one actor and settings passed to the constructor:
ray-lint reports nothing here."""

import time

import ray


@ray.remote
class Progress:
    def __init__(self) -> None:
        self.pages_seen = 0

    def add(self, n: int) -> None:
        self.pages_seen += n

    def total(self) -> int:
        return self.pages_seen


@ray.remote
class Crawler:
    def __init__(self, progress, timeout_s: float = 5.0) -> None:
        self.progress = progress
        self.timeout_s = timeout_s

    def fetch(self, url: str) -> int:
        time.sleep(min(0.1, self.timeout_s))  # stands for the download
        self.progress.add.remote(1)
        return len(url)


def crawl(urls: list[str]) -> int:
    progress = Progress.remote()
    crawlers = [Crawler.remote(progress, timeout_s=1.0) for _ in range(2)]
    sizes = ray.get([crawlers[i % 2].fetch.remote(u) for i, u in enumerate(urls)])
    print("pages seen:", ray.get(progress.total.remote()), "of", len(urls))
    return sum(sizes)


if __name__ == "__main__":
    ray.init()
    print(crawl(["a.example", "b.example", "c.example", "d.example"]))
