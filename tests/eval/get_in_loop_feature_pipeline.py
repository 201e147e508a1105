"""Nightly feature ETL with actors, using `import ray as rt` (RAY001 get-in-loop): gets of a ref
submitted in the same iteration on a stateful actor, an actor pool, `.options(...)` tasks, `dict(...)`
over a generator, a set comprehension, a `while` queue and a multi-line get; next to one get per
batch, a `ray.wait` loop, pipelined loading, a paging cursor, retries that stop on success, the get
in the loop's iterable, refs built before the loop and a `ray.wait(timeout=0)` check."""

import collections
import logging

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import ray as rt

logger = logging.getLogger(__name__)


@rt.remote
def load_shard(path: str) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


@rt.remote
def schema_of(path: str) -> tuple[str, ...]:
    return tuple(pq.read_schema(path).names)


@rt.remote
def profile_column(table: pd.DataFrame, name: str) -> dict:
    col = table[name]
    return {"mean": float(col.mean()), "std": float(col.std()), "nulls": int(col.isna().sum())}


@rt.remote(num_cpus=2)
def normalize(table: pd.DataFrame, stats: dict) -> pd.DataFrame:
    out = table.copy()
    for name, s in stats.items():
        out[name] = (out[name] - s["mean"]) / (s["std"] or 1.0)
    return out


@rt.remote
def list_page(prefix: str, cursor: str | None, page_size: int) -> tuple[list[str], str | None]:
    start, end = int(cursor or 0), int(cursor or 0) + page_size
    return [f"{prefix}/part-{i:05d}.parquet" for i in range(start, end)], (str(end) if end < 1000 else None)


@rt.remote
def upload(table: pd.DataFrame, uri: str) -> bool:
    table.to_parquet(uri)
    return True


@rt.remote(num_cpus=1)
class EventParser:
    def __init__(self, schema_version: int) -> None:
        self.schema_version = schema_version
        self.rows_parsed = 0

    def parse(self, raw: bytes) -> pd.DataFrame:
        frame = pd.read_json(raw, lines=True)
        self.rows_parsed += len(frame)
        return frame


@rt.remote(num_cpus=1)
class FeatureExtractor:
    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.batches_seen = 0

    def extract(self, table: pd.DataFrame) -> np.ndarray:
        self.batches_seen += 1
        codes = table["event"].map(self.vocab).fillna(0).to_numpy(dtype=np.int64)
        return np.bincount(codes, minlength=len(self.vocab) + 1)


@rt.remote(num_cpus=1)
class FeatureStoreWriter:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.rows_written = 0

    def write(self, name: str, features: np.ndarray) -> int:
        np.save(f"{self.uri}/{name}.npy", features)
        self.rows_written += len(features)
        return self.rows_written


def parse_raw(parser, blobs: list[bytes]) -> list[pd.DataFrame]:
    frames = []
    for blob in blobs:
        # fine: every call goes to one actor (`parser`), which runs them one at a time anyway
        frames.append(rt.get(parser.parse.remote(blob)))
    return frames


def extract_features(extractors: list, table_refs: list) -> list[np.ndarray]:
    histograms = []
    for i, table_ref in enumerate(table_refs):
        worker = extractors[i % len(extractors)]
        hist_ref = worker.extract.remote(table_ref)
        histograms.append(rt.get(hist_ref))  # expect: RAY001
    return histograms


def extract_features_pooled(extractors: list, table_refs: list) -> list[np.ndarray]:
    # fine: every call goes out first, then one get for the whole pool
    refs = [extractors[i % len(extractors)].extract.remote(t) for i, t in enumerate(table_refs)]
    return rt.get(refs)


def profile(table_ref, columns: list[str]) -> dict[str, dict]:
    return dict((name, rt.get(profile_column.remote(table_ref, name))) for name in columns)  # expect: RAY001


def normalize_all(tables: dict[str, object], stats: dict) -> dict[str, pd.DataFrame]:
    out = {}
    for name, table_ref in tables.items():
        ref = normalize.options(num_cpus=4, name=f"normalize-{name}").remote(table_ref, stats)
        logger.debug("normalizing %s", name)
        out[name] = rt.get(ref)  # expect: RAY001
    return out


def distinct_schemas(paths: list[str]) -> set[tuple[str, ...]]:
    return {rt.get(schema_of.remote(p)) for p in paths}  # expect: RAY001


def write_features(writer, features: dict[str, np.ndarray]) -> None:
    queue = collections.deque(sorted(features.items()))
    while queue:
        name, matrix = queue.popleft()
        total = rt.get(writer.write.remote(name, matrix))  # fine: one stateful actor writes in order
        logger.info("wrote %s, %d rows so far", name, total)


def row_counts(paths: list[str]) -> list[int]:
    return [
        len(
            rt.get(  # expect: RAY001
                load_shard.options(num_cpus=1).remote(p)
            )
        )
        for p in paths
    ]


def load_in_batches(paths: list[str], batch_size: int = 16) -> list[pd.DataFrame]:
    tables = []
    for start in range(0, len(paths), batch_size):
        batch = paths[start : start + batch_size]
        # fine: one get per batch of shards that load in parallel
        tables.extend(rt.get([load_shard.remote(p) for p in batch]))
    return tables


def load_pipelined(paths: list[str]) -> int:
    rows = 0
    next_ref = load_shard.remote(paths[0])
    for i in range(len(paths)):
        ref = next_ref
        if i + 1 < len(paths):
            next_ref = load_shard.remote(paths[i + 1])
        rows += len(rt.get(ref))  # fine: pipelining, the next shard loads while this one is counted
    return rows


def list_keys(prefix: str, page_size: int = 100) -> list[str]:
    keys: list[str] = []
    cursor = None
    while True:
        # fine: each page request needs the cursor the previous page returned
        page, cursor = rt.get(list_page.remote(prefix, cursor, page_size))
        keys.extend(page)
        if cursor is None:
            break
    return keys


def upload_with_retries(table_ref, uri: str, attempts: int = 3) -> bool:
    for attempt in range(attempts):
        if rt.get(upload.remote(table_ref, uri)):  # fine: stops at the first successful upload
            return True
        logger.warning("upload to %s failed (attempt %d)", uri, attempt + 1)
    return False


def upload_all(tables: dict[str, object], out_uri: str) -> int:
    pending = [upload.remote(t, f"{out_uri}/{name}.parquet") for name, t in tables.items()]
    ok = 0
    while pending:
        done, pending = rt.wait(pending, num_returns=min(4, len(pending)))
        ok += sum(rt.get(done))  # fine: the refs came from ray.wait and are finished
    return ok


def null_report(table_ref, columns: list[str]) -> int:
    stats_refs = [profile_column.remote(table_ref, c) for c in columns]
    nulls = 0
    for ref in stats_refs:
        nulls += rt.get(ref)["nulls"]  # fine: every ref was submitted before the loop
    # fine: the get in the loop's iterable runs once
    for stats in rt.get(stats_refs):
        logger.info("mean=%.3f std=%.3f", stats["mean"], stats["std"])
    return nulls


def eager_schemas(paths: list[str]) -> dict[str, tuple[str, ...]]:
    found, slow = {}, []
    for path in paths:
        ref = schema_of.remote(path)
        ready, _ = rt.wait([ref], timeout=0)
        if ready:
            found[path] = rt.get(ref)  # fine: ray.wait said it is ready, the get does not block
        else:
            slow.append((path, ref))
    found.update(zip([p for p, _ in slow], rt.get([r for _, r in slow])))
    return found


def run(raw_blobs: list[bytes], vocab: dict[str, int], out_uri: str) -> None:
    frames = parse_raw(EventParser.remote(schema_version=3), raw_blobs)
    extractors = [FeatureExtractor.remote(vocab) for _ in range(4)]
    histograms = extract_features_pooled(extractors, [rt.put(frame) for frame in frames])
    write_features(FeatureStoreWriter.remote(out_uri), {f"hist-{i}": h for i, h in enumerate(histograms)})
