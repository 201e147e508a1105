"""The same download as a sync task that runs the coroutine with `asyncio.run`, as Ray's docs
advise: ray-lint reports nothing here."""

import asyncio

import ray


async def _download(url: str) -> bytes:
    await asyncio.sleep(0.1)  # stands for an async HTTP client's request
    return url.encode()


@ray.remote
def fetch(url: str) -> int:
    body = asyncio.run(_download(url))
    return len(body)


def total_size(urls: list[str]) -> int:
    return sum(ray.get([fetch.remote(url) for url in urls]))


if __name__ == "__main__":
    ray.init()
    print(total_size(["https://example.com/a", "https://example.com/b"]))
