"""Document-processing service: Ray API misuse that fails at import, submission or start-up.

Findings: RAY046 `resources={"CPU"/"GPU": ...}` in `@ray.remote`, `ray.remote(...)(f)`, an actor's
`.options(...)`, a Ray Data `map_batches` and `ray.init`; RAY065 `async def` tasks (decorated, and
through `ray.remote(...)(f)`); RAY066 a remote function, an actor class and an actor method called
like plain ones, and a recursive call inside a task; RAY091 `ray.init(local_mode=True)` in a debug
entry point and a pytest fixture. Traps: placement-group bundles with CPU / GPU keys, custom and
lowercase resources, an async generator task, an async actor, a sync task around `asyncio.run`,
`.remote` / `.options(...).remote` / `.bind`, the plain function kept under another name,
`local_mode=False` and `local_mode=<flag>`, and `pytest.raises` around a direct call.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os

import httpx
import pytest
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

OCR_URL = "http://ocr:8080/v1/recognize"
STORE_URL = "http://docstore:9000/v1/documents"
LAYOUT_CHECKPOINT = "/models/layout/model.ts"


def normalize(text: str) -> str:
    return " ".join(text.split()).lower()


normalize_remote = ray.remote(num_cpus=1)(normalize)


def fingerprint(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()  # fine: `normalize` is still the plain function


@ray.remote(resources={"CPU": 2})  # expect: RAY046
def extract_text(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


@ray.remote(num_cpus=1, resources={"docstore": 1})
def list_folder(folder: str) -> list[str]:
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))


@ray.remote(num_cpus=1)
def crawl(folder: str) -> list[str]:
    found = []
    for entry in os.scandir(folder):
        if entry.is_dir():
            found.extend(crawl(entry.path))  # expect: RAY066
        elif entry.name.endswith((".txt", ".md", ".pdf")):
            found.append(entry.path)
    return found


@ray.remote(max_retries=3)  # expect: RAY065
async def fetch_document(url: str) -> bytes:
    async with httpx.AsyncClient() as client:
        response = await client.get(url, timeout=30)
    response.raise_for_status()
    return response.content


async def _post_metadata(doc_id: str, metadata: dict) -> int:
    async with httpx.AsyncClient() as client:
        response = await client.put(f"{STORE_URL}/{doc_id}", json=metadata, timeout=10)
    return response.status_code


post_metadata = ray.remote(num_cpus=0.5)(_post_metadata)  # expect: RAY065


@ray.remote
async def stream_chunks(url: str, chunk_size: int = 1 << 20):
    # fine: an async generator is a streaming task
    async with httpx.AsyncClient() as client:
        async with client.stream("GET", url) as response:
            async for chunk in response.aiter_bytes(chunk_size):
                yield chunk


async def _download(url: str) -> bytes:
    async with httpx.AsyncClient() as client:
        return (await client.get(url, timeout=30)).content


@ray.remote(num_cpus=1)
def download(url: str) -> bytes:
    return asyncio.run(_download(url))  # fine: a sync task that runs the coroutine


compute_fingerprint = ray.remote(resources={"CPU": 1})(fingerprint)  # expect: RAY046


@ray.remote(num_cpus=1, resources={"ocr_license": 1})
class OcrClient:
    # fine: async methods make an async actor, and `ocr_license` is a custom resource
    def __init__(self, url: str = OCR_URL) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=60)

    async def recognize(self, page: bytes) -> str:
        response = await self.client.post(self.url, content=page)
        return response.json()["text"]

    async def close(self) -> None:
        await self.client.aclose()


@ray.remote(num_cpus=2, num_gpus=1)
class LayoutModel:
    def __init__(self, checkpoint: str) -> None:
        import torch

        self.model = torch.jit.load(checkpoint).cuda().eval()

    def regions(self, page: bytes) -> list[dict]:
        return self.model.detect(page)


@ray.remote(num_cpus=1)
class DocumentIndex:
    def __init__(self) -> None:
        self.postings: dict[str, set[str]] = {}

    def add(self, doc_id: str, text: str) -> int:
        for token in set(normalize(text).split()):
            self.postings.setdefault(token, set()).add(doc_id)
        return len(self.postings)

    def search(self, token: str) -> list[str]:
        return sorted(self.postings.get(token.lower(), ()))


def start_services(num_layout_replicas: int = 2) -> dict:
    pg = placement_group([{"CPU": 2, "GPU": 1}] * num_layout_replicas, strategy="SPREAD")
    ray.get(pg.ready())
    strategy = PlacementGroupSchedulingStrategy(placement_group=pg)
    layout = [LayoutModel.options(scheduling_strategy=strategy).remote(LAYOUT_CHECKPOINT) for _ in range(num_layout_replicas)]
    index = DocumentIndex.options(name="doc-index", resources={"CPU": 1}).remote()  # expect: RAY046
    ocr = OcrClient.options(max_concurrency=32).remote()
    return {"layout": layout, "index": index, "ocr": ocr, "pg": pg}


def ingest(services: dict, paths: list[str]) -> list[str]:
    texts = ray.get([extract_text.options(num_cpus=4).remote(path) for path in paths])
    cleaned = ray.get([normalize_remote.remote(text) for text in texts])
    ids = ray.get([compute_fingerprint.remote(text) for text in cleaned])
    ray.get(services["index"].add.remote(ids[0], cleaned[0]))
    return ids


def ocr_pages(services: dict, pages: list[bytes]) -> list[str]:
    ocr = services["ocr"]
    return ray.get([ocr.recognize.remote(page) for page in pages])  # fine: an async actor interleaves the calls


def chunk_text(batch: dict) -> dict:
    batch["chunks"] = [text[i : i + 512] for text in batch["text"] for i in range(0, len(text), 512)]
    return batch


def build_chunk_dataset(source: str):
    ds = ray.data.read_text(source)
    ds = ds.map(lambda row: {"text": normalize(row["text"])}, resources={"docstore": 0.1})
    return ds.map_batches(chunk_text, batch_size=64, resources={"CPU": 2})  # expect: RAY046


def preview(path: str) -> str:
    return extract_text(path)[:500]  # expect: RAY066


def rebuild_index(paths: list[str]) -> None:
    index = DocumentIndex()  # expect: RAY066
    for path in paths:
        index.add.remote(path, path)


def quick_lookup(token: str) -> list[str]:
    index = DocumentIndex.remote()
    return index.search(token)  # expect: RAY066


def pipeline_dag(url: str):
    return download.bind(url)  # fine: `.bind` builds a DAG node


def debug_main() -> None:
    ray.init(
        num_cpus=1,
        local_mode=True,  # expect: RAY091
    )
    print(preview_text(["docs/sample.txt"]))


def preview_text(paths: list[str]) -> list[str]:
    refs = list(map(extract_text.remote, paths))  # fine: passed as a value
    return [fingerprint(text) for text in ray.get(refs)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--local-mode", action="store_true")
    parser.add_argument("--address", default=None)
    args = parser.parse_args()
    if args.address:
        ray.init(address=args.address, resources={"GPU": 1})  # expect: RAY046
    else:
        ray.init(num_cpus=8, resources={"ocr_license": 4, "docstore": 2, "gpu": 1}, local_mode=args.local_mode)  # fine: "gpu" is a custom resource here
    services = start_services()
    ingest(services, ray.get(crawl.remote("/data/inbox")))


# --- tests ---------------------------------------------------------------------------------


@pytest.fixture
def ray_debug():
    ray.init(local_mode=True)  # expect: RAY091
    yield
    ray.shutdown()


@pytest.fixture
def ray_cluster():
    ray.init(num_cpus=2, local_mode=False, resources={"docstore": 1})  # expect: RAY092
    yield
    ray.shutdown()


def test_fingerprint_is_plain() -> None:
    assert fingerprint("  Hello  World ") == fingerprint("hello world")


def test_direct_call_raises(ray_cluster) -> None:
    with pytest.raises(TypeError):
        extract_text("README.md")


def test_index_roundtrip(ray_cluster) -> None:
    index = DocumentIndex.remote()
    ray.get(index.add.remote("d1", "Hello world"))
    assert ray.get(index.search.remote("hello")) == ["d1"]
