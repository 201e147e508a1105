"""The same compression with spawned processes, which start fresh and share nothing with Ray:
ray-lint reports nothing here."""

import multiprocessing
import zlib

import ray


@ray.remote(num_cpus=2)
def compress_shard(chunks: list[bytes]) -> int:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return sum(len(blob) for blob in pool.map(zlib.compress, chunks))


def make_shards(n: int) -> list[list[bytes]]:
    return [[bytes([i]) * 100_000 for i in range(4)] for _ in range(n)]


if __name__ == "__main__":
    ray.init()
    shards = make_shards(2)
    print(ray.get([compress_shard.remote(shard) for shard in shards]))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(zlib.crc32, shards[0]))
