"""The same training loop with a local shuffle buffer: batches are drawn at random from a buffer of
rows while the data streams, with no all-to-all exchange. ray-lint reports nothing here."""

import ray


def train(epochs: int, batch_size: int) -> float:
    features = ray.data.range_tensor(100_000, shape=(32,))
    seen = 0.0
    for _ in range(epochs):
        for batch in features.iter_batches(batch_size=batch_size, local_shuffle_buffer_size=8 * batch_size):
            seen += float(batch["data"][:, 0].sum())
    return seen


def split(rows: int) -> tuple[int, int]:
    # A true global shuffle: the split must not follow the input order.
    train_set, test_set = ray.data.range(rows).random_shuffle(seed=7).train_test_split(test_size=0.2)
    return train_set.count(), test_set.count()


if __name__ == "__main__":
    ray.init()
    print(train(epochs=2, batch_size=1024))
    print(split(10_000))
