"""Batch recommendations: item embeddings are scored against user queries on a Ray cluster."""

import argparse
import logging

import numpy as np
import ray
import torch

logger = logging.getLogger(__name__)

NUM_ITEMS = 1_000_000
EMBEDDING_DIM = 64
TOP_K = 20

# Built once on the driver: 1M x 64 float32 = 256 MB.
item_embeddings = np.random.rand(NUM_ITEMS, EMBEDDING_DIM).astype(np.float32)
item_bias = np.zeros(NUM_ITEMS, dtype=np.float32)  # 4 MB
popularity = np.ones((NUM_ITEMS, 16))  # 128 MB
category_names = ["books", "music", "film", "games"]
make_reranker = lambda: torch.zeros(EMBEDDING_DIM, EMBEDDING_DIM)  # noqa: E731


@ray.remote(num_cpus=1)
def score_users(user_vectors):
    scores = user_vectors @ popularity.T  # expect: RAY031
    return np.argsort(-scores, axis=1)[:, :TOP_K]


@ray.remote(num_cpus=1)
def score_users_by_ref(user_vectors, embeddings):
    scores = user_vectors @ embeddings.T + item_bias
    return np.argsort(-scores, axis=1)[:, :TOP_K]


@ray.remote(num_cpus=1)
def rerank(candidates):
    reranker = make_reranker()
    logger.info("reranking %d candidates", len(candidates))
    return [(c, float(reranker.sum())) for c in candidates]


@ray.remote(num_cpus=1)
def label(category_id):
    return category_names[category_id]


def build_filter_actor(blocked_ids):
    blocked = np.zeros(NUM_ITEMS, dtype=bool)
    seen = np.zeros((NUM_ITEMS, 32), dtype=np.uint8)  # 32 MB

    @ray.remote(num_cpus=1)
    class ItemFilter:
        def __init__(self):
            self.blocked = blocked
            self.calls = 0

        def keep(self, candidates):
            self.calls += 1
            return [c for c in candidates if not seen[c].any()]  # expect: RAY031

    return ItemFilter.remote()


def score_with_shared_table(user_batches):
    table_ref = ray.put(item_embeddings)

    @ray.remote(num_cpus=1)
    def score_batch(i):
        users = user_batches[i]
        return ray.get(table_ref)[: len(users)]  # expect: RAY032

    return ray.get([score_batch.remote(i) for i in range(len(user_batches))])


def random_users(count):
    return np.random.rand(count, EMBEDDING_DIM).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--users-per-batch", type=int, default=512)
    args = parser.parse_args()

    ray.init()
    batches = [random_users(args.users_per_batch) for _ in range(args.batches)]

    embeddings_ref = ray.put(item_embeddings)
    good = ray.get([score_users_by_ref.remote(batch, embeddings_ref) for batch in batches])
    slow = ray.get([score_users.remote(batch) for batch in batches])
    logger.info("scored %d batches (%d by capture)", len(good), len(slow))

    item_filter = build_filter_actor(blocked_ids=[])
    kept = ray.get([item_filter.keep.remote(list(top[0])) for top in good])
    reranked = ray.get([rerank.remote(candidates) for candidates in kept])
    names = ray.get([label.remote(i % len(category_names)) for i in range(4)])
    shared = score_with_shared_table(batches)
    logger.info("reranked %d, labels %s, shared %d", len(reranked), names, len(shared))


if __name__ == "__main__":
    main()
