"""Ray Data export jobs that push a product catalogue into a search index, a vector store and a
warehouse (RAY116): rows read with `iter_rows()` and gathered into fixed-size batches by hand, as a
generator that yields lists of rows, as two side-by-side column lists flushed by count, and as
embeddings stacked with numpy every 64 rows.
Left silent: a row loop that writes each row out, a peek at the first rows that breaks after a few,
groups cut by a change of key (a sorted dataset) rather than by count, rows skipped with `continue`
before they are gathered, `iter_rows` on a pandas-like frame wrapper, a loop that already uses
`iter_batches`, a length check that only logs progress, and every row stacked once after the loop."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import numpy as np
import ray
from ray.data import Dataset

logger = logging.getLogger(__name__)

CATALOGUE = "s3://shop-lake/catalogue/"
INDEX_BATCH = 500
VECTOR_BATCH = 64


class SearchIndex:
    """A client of the search cluster's bulk API."""

    def bulk(self, documents: list[dict]) -> None:
        logger.info("indexed %d documents", len(documents))


class VectorStore:
    def upsert(self, ids: list[str], vectors: np.ndarray) -> None:
        logger.info("upserted %d vectors of width %d", len(ids), vectors.shape[1])


class FrameRows:
    """A thin wrapper over a pandas frame that also spells its row iterator `iter_rows`."""

    def __init__(self, frame) -> None:
        self.frame = frame

    def iter_rows(self) -> Iterator[dict]:
        yield from self.frame.to_dict("records")


def embed(text: str) -> np.ndarray:
    return np.frombuffer(text.encode().ljust(32, b" ")[:32], dtype=np.uint8).astype(np.float32)


def load_catalogue() -> Dataset:
    return ray.data.read_parquet(CATALOGUE).select_columns(["sku", "title", "brand", "price", "weight"])


def to_document(row: dict) -> dict:
    return {"_id": row["sku"], "title": row["title"], "price": float(row["price"])}


def index_catalogue(ds: Dataset, index: SearchIndex) -> int:
    documents, sent = [], 0
    for row in ds.iter_rows():  # expect: RAY116
        documents.append(to_document(row))
        if len(documents) >= INDEX_BATCH:
            index.bulk(documents)
            sent += len(documents)
            documents = []
    if documents:
        index.bulk(documents)
        sent += len(documents)
    return sent


def row_batches(path: str, size: int) -> Iterator[list[dict]]:
    """Hands the catalogue to a legacy loader that wants lists of row dicts."""
    pending: list[dict] = []
    for row in ray.data.read_json(path).iter_rows():  # expect: RAY116
        pending.append(dict(row))
        if len(pending) == size:
            yield pending
            pending = []
    if pending:
        yield pending


def upsert_vectors(ds: Dataset, store: VectorStore) -> None:
    ids, vectors = [], []
    for record in ds.iter_rows():  # expect: RAY116
        ids.append(record["sku"])
        vectors.append(embed(record["title"]))
        if VECTOR_BATCH <= len(vectors):
            store.upsert(ids, np.stack(vectors))
            ids, vectors = [], []
    if ids:
        store.upsert(ids, np.stack(vectors))


def dump_jsonl(ds: Dataset, path: str) -> None:
    with open(path, "w") as out:
        for row in ds.iter_rows():
            out.write(json.dumps(to_document(row)) + "\n")


def preview(ds: Dataset) -> list[dict]:
    shown = []
    for row in ds.iter_rows():
        shown.append(row)
        if len(shown) >= 5:
            logger.info("first rows: %s", shown)
            break
    return shown


def per_brand_totals(ds: Dataset) -> dict[str, float]:
    """Groups of a sorted dataset, cut where the brand changes: not a fixed batch size."""
    totals: dict[str, float] = {}
    group: list[float] = []
    brand = None
    for row in ds.sort("brand").iter_rows():
        if row["brand"] != brand and group:
            totals[brand] = sum(group)
            group = []
        brand = row["brand"]
        group.append(float(row["price"]))
    if group:
        totals[brand] = sum(group)
    return totals


def index_priced(ds: Dataset, index: SearchIndex) -> None:
    """Skips unpriced rows: the batches are of the rows that remain."""
    documents = []
    for row in ds.iter_rows():
        if row["price"] is None:
            continue
        documents.append(to_document(row))
        if len(documents) >= INDEX_BATCH:
            index.bulk(documents)
            documents = []
    if documents:
        index.bulk(documents)


def index_frame(rows: FrameRows, index: SearchIndex) -> None:
    documents = []
    for row in rows.iter_rows():
        documents.append(to_document(row))
        if len(documents) >= INDEX_BATCH:
            index.bulk(documents)
            documents = []


def index_in_batches(ds: Dataset, index: SearchIndex) -> None:
    for batch in ds.iter_batches(batch_size=INDEX_BATCH, batch_format="pandas"):
        index.bulk(batch.to_dict("records"))


def count_with_progress(ds: Dataset) -> int:
    seen = []
    for row in ds.iter_rows():
        seen.append(row["sku"])
        if len(seen) % 10_000 == 0:
            logger.info("read %d rows", len(seen))
    return len(seen)


def price_matrix(ds: Dataset) -> np.ndarray:
    return np.stack([np.asarray([row["price"], row["weight"]]) for row in ds.iter_rows()])


if __name__ == "__main__":
    ray.init()
    catalogue = load_catalogue()
    index_catalogue(catalogue, SearchIndex())
    upsert_vectors(catalogue, VectorStore())
    for chunk in row_batches(CATALOGUE, 256):
        logger.info("loaded %d rows", len(chunk))
