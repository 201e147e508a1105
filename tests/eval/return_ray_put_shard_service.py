"""A sharded feature store that hands out refs (RAY033 return-ray-put, RAY034 return-child-task-ref).

Reported: tasks and actor methods that return `ray.put(...)` of their result (directly, through a
name, in a tuple, in a list), and tasks that return the ref of a child task they submitted.
Silent: a ref the task also uses itself, an actor that keeps the ref it hands out (a cache), an
explicit `_owner=`, a parent that waits for its children, an actor router returning refs, a task
spawning an actor, a driver helper, and a task annotated to return an `ObjectRef`.
"""

import logging

import numpy as np
import ray
from features.io import read_parquet_shard
from features.remote import normalize_shard

logger = logging.getLogger(__name__)


@ray.remote
def load_shard(path: str):
    table = read_parquet_shard(path)
    features = np.asarray(table["features"], dtype=np.float32)
    features_ref = ray.put(features)  # expect: RAY033
    return features_ref


@ray.remote(num_returns=1)
def load_with_stats(path: str):
    features = np.asarray(read_parquet_shard(path)["features"])
    return ray.put(features), float(features.mean())  # expect: RAY033


@ray.remote
def split_rows(features: np.ndarray, rows_per_chunk: int):
    chunks = []
    for start in range(0, len(features), rows_per_chunk):
        chunks.append(ray.put(features[start : start + rows_per_chunk]))  # expect: RAY033
    return chunks


@ray.remote
def load_and_normalize(path: str):
    raw = load_shard.remote(path)
    return normalize_shard.remote(raw)  # expect: RAY034


@ray.remote
def load_many(paths: list):
    return [load_shard.remote(p) for p in paths]  # expect: RAY034


@ray.remote
def load_all(paths: list):
    # fine: the parent waits for its children, so the caller owns the result
    refs = [load_shard.remote(p) for p in paths]
    return ray.get(refs)


@ray.remote
def load_logged(path: str):
    # fine: the ref is also used here (its ID is logged)
    ref = ray.put(np.asarray(read_parquet_shard(path)["features"]))
    logger.info("shard %s stored as %s", path, ref.hex())
    return ref


@ray.remote
def load_owned_by(path: str, owner):
    # fine: an explicit ownership transfer to a long-lived actor
    return ray.put(read_parquet_shard(path), _owner=owner)


@ray.remote
def load_future(path: str) -> ray.ObjectRef:
    # fine: annotated to return a ref, a deliberate future of a future
    return normalize_shard.remote(path)


@ray.remote
class ShardCache:
    def __init__(self):
        self.refs = {}

    def publish(self, key: str, features):
        # fine: the actor keeps the ref and hands the same one out again
        self.refs[key] = ray.put(features)
        return self.refs[key]

    def lookup(self, key: str):
        return self.refs.get(key)

    def export(self, key: str):
        return ray.put(self.refs)  # expect: RAY033


@ray.remote
class Router:
    def __init__(self, loaders):
        self.loaders = loaders

    def route(self, path: str):
        # fine: an actor hands out the refs of the calls it dispatches by design
        loader = self.loaders[hash(path) % len(self.loaders)]
        return loader.load.remote(path)


@ray.remote
def spawn_cache():
    # fine: an actor handle, not an ObjectRef
    return ShardCache.remote()


def upload(features):
    # fine: a driver helper, not a remote function
    return ray.put(features)


def main(paths):
    cache = ShardCache.remote()
    refs = ray.get([load_shard.remote(p) for p in paths])
    arrays = ray.get(refs)
    for path, array in zip(paths, arrays):
        cache.publish.remote(path, array)
    return len(arrays)
