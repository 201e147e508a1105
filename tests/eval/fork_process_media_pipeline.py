"""A media transcoding pipeline that uses local process pools inside Ray (RAY064 fork-process).

Reported: a `multiprocessing.Pool`, a `ProcessPoolExecutor` and an `os.fork()` in Ray tasks and actor
methods (default fork start method), and a fork context used by the driver after `ray.init()`.
Silent: a spawn context, a thread pool, `subprocess`, Ray's own `ray.util.multiprocessing.Pool`,
a pool the driver uses before `ray.init()`, and a plain helper that Ray does not run.
"""

import logging
import multiprocessing
import os
import subprocess
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import ray
from media.codecs import decode_frames, encode_frames, probe
from ray.util.multiprocessing import Pool as RayPool

logger = logging.getLogger(__name__)


def thumbnail(frame):
    return frame[::8, ::8]


def scan_local(paths):
    """Runs on the laptop before the cluster is involved."""
    with multiprocessing.Pool(8) as pool:
        return pool.map(probe, paths)


@ray.remote(num_cpus=4)
def make_thumbnails(video_path):
    frames = decode_frames(video_path)
    with multiprocessing.Pool(processes=4) as pool:  # expect: RAY064
        return pool.map(thumbnail, frames)


@ray.remote(num_cpus=4)
def make_thumbnails_spawned(video_path):
    frames = decode_frames(video_path)
    with multiprocessing.get_context("spawn").Pool(processes=4) as pool:
        return pool.map(thumbnail, frames)


@ray.remote
def transcode(video_path, target):
    subprocess.run(["ffmpeg", "-y", "-i", video_path, target], check=True)
    return target


@ray.remote(num_cpus=2)
class Encoder:
    def __init__(self, preset):
        self.preset = preset
        self.encoded = 0

    def encode_batch(self, clips):
        with ProcessPoolExecutor(max_workers=2) as pool:  # expect: RAY064
            outputs = list(pool.map(encode_frames, clips))
        self.encoded += len(outputs)
        return outputs

    def upload_batch(self, clips):
        with ThreadPoolExecutor(max_workers=8) as threads:
            return list(threads.map(self._upload, clips))

    def _upload(self, clip):
        logger.info("uploading %s", clip)
        return clip

    def detach_watchdog(self):
        pid = os.fork()  # expect: RAY064
        if pid == 0:
            os.execv("/usr/bin/watchdog", ["watchdog", str(os.getppid())])
        return pid


def summarize(paths):
    ray_pool = RayPool()
    return ray_pool.map(probe, paths)


def main(paths):
    metadata = scan_local(paths)
    logger.info("probed %d videos", len(metadata))

    ray.init(address="auto")
    thumbs = ray.get([make_thumbnails.remote(p) for p in paths])
    spawned = ray.get([make_thumbnails_spawned.remote(p) for p in paths])
    outputs = ray.get([transcode.remote(p, p + ".mp4") for p in paths])

    encoder = Encoder.remote("fast")
    uploaded = ray.get(encoder.upload_batch.remote(encoder.encode_batch.remote(outputs)))

    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:  # expect: RAY064
        pool.map(logger.info, [len(thumbs), len(spawned), len(uploaded)])

    return summarize(outputs)


if __name__ == "__main__":
    main(["a.mov", "b.mov"])
