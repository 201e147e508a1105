"""Map-reduce over shards where reducers fetch their own inputs (RAY005 nested-get-on-args).

Reported: a task that calls `ray.get` on one of its parameters, whole, once and unconditionally
(its caller nests the refs in a list). Silent: a task that picks which refs to get with
`ray.wait`, streams them one at a time, forwards them to child tasks, creates its own refs, may
return before the get, or handles a failed input in a `try`; and refs passed as top-level args.
"""

import logging

import numpy as np
import ray

logger = logging.getLogger(__name__)


@ray.remote
def load_shard(path: str) -> np.ndarray:
    return np.load(path)


@ray.remote
def histogram(shard: np.ndarray, bins: int) -> np.ndarray:
    counts, _ = np.histogram(shard, bins=bins, range=(0.0, 1.0))
    return counts


@ray.remote
def merge_histograms(partials):
    counts = ray.get(partials)  # expect: RAY005
    return np.sum(counts, axis=0)


@ray.remote
def merge_direct(*partials):
    return np.sum(partials, axis=0)


@ray.remote(num_cpus=2)
def concat_shards(bins, shards):
    arrays = ray.get(shards)  # expect: RAY005
    return np.histogram(np.concatenate(arrays), bins=bins)[0]


@ray.remote
def first_available(shards):
    ready, _ = ray.wait(shards, num_returns=1)
    return ray.get(ready[0])


@ray.remote
def streaming_total(shards) -> float:
    total = 0.0
    for ref in shards:
        total += float(ray.get(ref).sum())  # one shard in memory at a time
    return total


@ray.remote
def upload(shard: np.ndarray, bucket: str) -> int:
    np.save(f"/mnt/{bucket}/shard.npy", shard)
    return 1


@ray.remote
def archive_all(shards, bucket: str) -> int:
    done = ray.get([upload.remote(ref, bucket) for ref in shards])  # forwarded to children, never fetched here
    return sum(done)


@ray.remote
def cached_merge(partials, cache_key: str):
    cached = CACHE.get(cache_key)
    if cached is not None:
        return cached
    return np.sum(ray.get(partials), axis=0)


@ray.remote
def tolerant_merge(partials):
    try:
        return np.sum(ray.get(partials), axis=0)
    except ray.exceptions.RayTaskError:
        logger.exception("a shard failed")
        return None


@ray.remote
def shard_report(paths: list[str], bins: int):
    refs = [histogram.remote(load_shard.remote(p), bins) for p in paths]
    return np.sum(ray.get(refs), axis=0)  # the nested-task pattern: its own children


CACHE: dict = {}


def run(paths: list[str], bins: int = 32) -> np.ndarray:
    shards = [load_shard.remote(p) for p in paths]
    partials = [histogram.remote(s, bins) for s in shards]
    nested = ray.get(merge_histograms.remote(partials))
    direct = ray.get(merge_direct.remote(*partials))
    combined = ray.get(concat_shards.remote(bins, shards))
    logger.info("first shard has %d rows", len(ray.get(first_available.remote(shards))))
    logger.info("total %.3f", ray.get(streaming_total.remote(shards)))
    logger.info("cached %s", ray.get(cached_merge.remote(partials, "daily")))
    logger.info("tolerant %s", ray.get(tolerant_merge.remote(partials)))
    logger.info("archived %d", ray.get(archive_all.remote(shards, "backups")))
    assert np.array_equal(nested, direct)
    return combined


if __name__ == "__main__":
    ray.init()
    print(run([f"shard-{i}.npy" for i in range(8)]))
