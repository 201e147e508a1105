"""Synthetic training data: tasks that split generated tables into several object-store values."""

import numpy as np
import ray
import torch

ROWS = 500_000
COLS = 16
SHARDS = 4


@ray.remote(num_returns=SHARDS)
def generate_shards(seed):
    rng = np.random.default_rng(seed)
    del rng
    return [np.random.rand(ROWS, COLS) for _ in range(SHARDS)]  # expect: RAY037


@ray.remote(num_returns=SHARDS)
def generate_shards_streamed(seed):
    for _ in range(SHARDS):
        yield np.random.rand(ROWS, COLS)


@ray.remote(num_returns=2)
def embedding_tables():
    users = torch.randn(50_000, 256)
    users[:, 0] = 1.0
    items = torch.randn(50_000, 256)
    return users, items  # expect: RAY037


@ray.remote(num_returns=2)
def features_with_labels():
    """Both arrays are filled row by row together: a generator could not free one early."""
    features = np.zeros((ROWS, COLS))
    labels = np.zeros((ROWS, COLS))
    for row in range(0, ROWS, 1000):
        features[row] = row
        labels[row] = features[row] * 2
    return features, labels


@ray.remote(num_returns=3)
def summary_stats(values):
    return float(np.mean(values)), float(np.std(values)), len(values)


@ray.remote(num_returns=2)
def split(path):
    table = np.load(path)
    middle = len(table) // 2
    return table[:middle], table[middle:]


@ray.remote(num_returns=4)
def noisy_copies(scale):
    copies = []
    for i in range(4):
        copy = np.empty((ROWS, COLS))
        copy.fill(scale * i)
        copies.append(copy)
    return copies  # expect: RAY037


@ray.remote
class Sampler:
    def __init__(self, seed):
        self.seed = seed

    @ray.method(num_returns=2)
    def sample_pair(self):
        return bytes(32 * 10**6), bytes(32 * 10**6)  # expect: RAY037

    @ray.method(num_returns=2)
    def sample_small(self):
        return bytes(1024), bytes(1024)


def main():
    ray.init()
    shard_refs = generate_shards.remote(0)
    streamed_refs = generate_shards_streamed.remote(1)
    user_ref, item_ref = embedding_tables.remote()
    features_ref, labels_ref = features_with_labels.remote()
    mean_ref, std_ref, count_ref = summary_stats.remote(np.arange(10))
    sampler = Sampler.remote(7)
    left_ref, right_ref = sampler.sample_pair.remote()
    copies = noisy_copies.remote(0.5)
    print(ray.get([mean_ref, std_ref, count_ref]))
    print(len(shard_refs), len(streamed_refs), len(copies))
    del user_ref, item_ref, features_ref, labels_ref, left_ref, right_ref


if __name__ == "__main__":
    main()
