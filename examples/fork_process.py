"""Processes forked from code connected to Ray: `ray-lint check examples/` reports each RAY064 below,
and `ray-lint verify examples/fork_process.py` shows the forked child holding Ray's sockets."""

import multiprocessing
import zlib

import ray


@ray.remote(num_cpus=2)
def compress_shard(chunks: list[bytes]) -> int:
    with multiprocessing.Pool(2) as pool:  # RAY064: forks the Ray worker, its sockets and threads
        return sum(len(blob) for blob in pool.map(zlib.compress, chunks))


def make_shards(n: int) -> list[list[bytes]]:
    return [[bytes([i]) * 100_000 for i in range(4)] for _ in range(n)]


if __name__ == "__main__":
    ray.init()
    shards = make_shards(2)
    print(ray.get([compress_shard.remote(shard) for shard in shards]))
    with multiprocessing.Pool(2) as pool:  # RAY064: the driver is connected to Ray by now
        print(pool.map(zlib.crc32, shards[0]))
