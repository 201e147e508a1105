"""A coroutine made a Ray task: `ray-lint check examples/` reports the RAY065 below, and
`ray-lint verify examples/async_def_remote_task.py` shows Ray refusing it as the decorator runs."""

import asyncio

import ray


async def _download(url: str) -> bytes:
    await asyncio.sleep(0.1)  # stands for an async HTTP client's request
    return url.encode()


@ray.remote  # RAY065: Ray tasks cannot be coroutines, so this raises ValueError at import
async def fetch(url: str) -> int:
    body = await _download(url)
    return len(body)


def total_size(urls: list[str]) -> int:
    return sum(ray.get([fetch.remote(url) for url in urls]))


if __name__ == "__main__":
    ray.init()
    print(total_size(["https://example.com/a", "https://example.com/b"]))
