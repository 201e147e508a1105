"""State kept on an actor's class: `ray-lint check examples/` reports each RAY061 below, and
`ray-lint verify examples/class_variable_shared_state.py` replays each in a model.

Every actor is its own process with its own copy of the class, and `@ray.remote` turns the class's
name in the driver into an `ActorClass` wrapper: class attributes are shared with no other actor.
"""

import time

import ray


@ray.remote
class Crawler:
    pages_seen = 0
    timeout_s = 5.0

    def fetch(self, url: str) -> int:
        time.sleep(min(0.1, self.timeout_s))  # stands for the download
        Crawler.pages_seen += 1  # RAY061: counts this actor's pages only
        return len(url)

    def progress(self) -> int:
        return Crawler.pages_seen


def crawl(urls: list[str]) -> int:
    Crawler.timeout_s = 1.0  # RAY061: lands on the wrapper; the actors keep 5.0
    crawlers = [Crawler.remote() for _ in range(2)]
    sizes = ray.get([crawlers[i % 2].fetch.remote(u) for i, u in enumerate(urls)])
    print("pages seen:", ray.get(crawlers[0].progress.remote()), "of", len(urls))
    return sum(sizes)


if __name__ == "__main__":
    ray.init()
    print(crawl(["a.example", "b.example", "c.example", "d.example"]))
