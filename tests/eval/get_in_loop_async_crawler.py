"""An async web crawler on Ray (RAY001 get-in-loop, the `await` form).

Coroutines drive a pool of async `Fetcher` actors, a `parse_page` task and an `extract_links` task.
An `ObjectRef` is awaitable, and awaiting each one in the loop that submitted it runs the calls one
at a time, exactly as a `ray.get` per iteration would. Shapes (reported): `values.append(await
fetcher.fetch.remote(url))` in a `for` loop over urls (an async actor runs calls concurrently, so the
loop is what serializes them), `ref = parse_page.remote(html)` then `out.append(await ref)`, and an
`await` per element in a comprehension inside a coroutine.

Traps (silent): `await asyncio.gather(*[...])` over every submission, a pagination loop whose each
await gives the next url, an `async for` over a streaming generator's refs, a loop over one stateful
sync `Frontier` actor (it runs the calls one at a time whatever the caller does), a retry loop that
breaks on success, and a polling loop that awaits `asyncio.sleep` between checks.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx
import ray

logger = logging.getLogger("crawler")

LINK = re.compile(r'href="([^"#]+)"')
MAX_PAGES_PER_SITE = 200


@dataclass
class Page:
    url: str
    title: str
    links: list[str]
    next_url: str | None = None


@ray.remote(max_restarts=2)
class Fetcher:
    def __init__(self, user_agent: str) -> None:
        self.client = httpx.AsyncClient(headers={"User-Agent": user_agent}, timeout=10.0)

    async def fetch(self, url: str) -> str:
        response = await self.client.get(url, follow_redirects=True)
        response.raise_for_status()
        return response.text


@ray.remote
class Frontier:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    def add(self, url: str) -> bool:
        if url in self.seen:
            return False
        self.seen.add(url)
        return True


@ray.remote
def parse_page(url: str, html: str) -> Page:
    title = html.split("<title>", 1)[-1].split("</title>", 1)[0].strip()
    links = [urljoin(url, href) for href in LINK.findall(html)]
    next_url = next((link for link in links if "page=" in link), None)
    return Page(url=url, title=title, links=links, next_url=next_url)


@ray.remote
def extract_links(page: Page) -> list[str]:
    return sorted({link for link in page.links if link.startswith("http")})


@ray.remote
def count_indexed(bucket: str) -> int:
    return len(bucket) * 10


@ray.remote(num_returns="streaming")
def crawl_site(seed: str, limit: int = MAX_PAGES_PER_SITE):
    for i in range(limit):
        yield Page(url=f"{seed}/p/{i}", title=f"page {i}", links=[])


async def fetch_all(urls: list[str], user_agent: str = "ray-crawler") -> list[str]:
    fetcher = Fetcher.remote(user_agent)
    values = []
    for url in urls:
        values.append(await fetcher.fetch.remote(url))  # expect: RAY001
    return values


async def parse_all(urls: list[str], bodies: list[str]) -> list[Page]:
    out = []
    for url, html in zip(urls, bodies):
        ref = parse_page.remote(url, html)
        out.append(await ref)  # expect: RAY001
    return out


async def links_of(pages: list[Page]) -> list[list[str]]:
    return [await extract_links.remote(page) for page in pages]  # expect: RAY001


async def fetch_all_concurrently(fetchers: list, urls: list[str]) -> list[str]:
    # fine: every fetch is submitted before any is awaited
    return await asyncio.gather(*[fetchers[i % len(fetchers)].fetch.remote(url) for i, url in enumerate(urls)])


async def follow_pagination(start: str) -> list[Page]:
    fetcher = Fetcher.remote("ray-crawler/pages")
    pages: list[Page] = []
    url: str | None = start
    while url is not None and len(pages) < MAX_PAGES_PER_SITE:
        html = await fetcher.fetch.remote(url)
        page = await parse_page.remote(url, html)  # fine: the page gives the next url
        pages.append(page)
        url = page.next_url
    return pages


async def stream_site(seed: str) -> list[str]:
    titles = []
    async for ref in crawl_site.remote(seed):
        page = await ref  # fine: the stream yields each ref once its page is ready
        titles.append(page.title)
    return titles


async def new_urls(frontier, urls: list[str]) -> list[str]:
    fresh = []
    for url in urls:
        if await frontier.add.remote(url):  # fine: one stateful actor runs the calls one at a time
            fresh.append(url)
    return fresh


async def fetch_with_retry(fetchers: list, url: str, attempts: int = 3) -> str | None:
    html = None
    for attempt in range(attempts):
        fetcher = fetchers[attempt % len(fetchers)]  # another replica on each retry
        try:
            html = await fetcher.fetch.remote(url)  # fine: retries until one attempt succeeds
            break
        except ray.exceptions.RayTaskError:
            logger.warning("fetch of %s failed (attempt %d), trying another fetcher", url, attempt + 1)
    return html


async def wait_until_indexed(bucket: str, min_docs: int, poll_s: float = 5.0) -> int:
    while True:
        count = await count_indexed.remote(bucket)  # fine: polls until the index is big enough
        if count >= min_docs:
            return count
        await asyncio.sleep(poll_s)


async def crawl(seeds: list[str]) -> dict[str, int]:
    fetchers = [Fetcher.remote(f"ray-crawler/{i}") for i in range(4)]
    frontier = Frontier.remote()
    fresh = await new_urls(frontier, seeds)
    bodies = await fetch_all_concurrently(fetchers, fresh)
    pages = await parse_all(fresh, bodies)
    links = await links_of(pages)
    extra = await fetch_all([link for group in links for link in group[:5]])
    streamed = await asyncio.gather(*[stream_site(seed) for seed in seeds])
    first = await fetch_with_retry(fetchers, seeds[0])
    listing = await follow_pagination(f"{seeds[0]}/catalog?page=1")
    await wait_until_indexed("crawl-index", min_docs=len(pages))
    logger.info("seed page: %d bytes, catalog: %d pages", len(first or ""), len(listing))
    return {"pages": len(pages), "extra": len(extra), "streamed": sum(map(len, streamed))}


if __name__ == "__main__":
    ray.init()
    logger.info("crawl summary: %s", asyncio.run(crawl(["https://example.com", "https://example.org"])))
