"""Video transcoding service (RAY002 get-submission-order): loops that fetch each ref of a batch
submitted beforehand and then encode, upload or score the result, in submission order; next to a
`ray.wait` loop, plain accumulation, an ordered manifest file, a generator, a fold, a first-match
search, `ray.put` refs, one synchronous actor and a chain of dependent tasks."""

import json
import logging

import numpy as np
import ray

logger = logging.getLogger(__name__)


@ray.remote(num_cpus=2)
def transcode(clip_uri: str, codec: str) -> bytes:
    return open(clip_uri, "rb").read()


@ray.remote
def thumbnail(clip_uri: str) -> np.ndarray:
    return np.zeros((180, 320, 3), dtype=np.uint8)


@ray.remote
def detect_scenes(clip_uri: str, threshold: float) -> list[float]:
    frames = np.load(clip_uri)
    diffs = np.abs(np.diff(frames.mean(axis=(1, 2, 3))))
    return [float(i) for i in np.nonzero(diffs > threshold)[0]]


@ray.remote
def refine(cuts_ref, step: int) -> list[float]:
    return list(cuts_ref)


@ray.remote
class ManifestStore:
    def __init__(self) -> None:
        self.entries: list[dict] = []

    def entry(self, clip_uri: str) -> dict:
        self.entries.append({"uri": clip_uri, "index": len(self.entries)})
        return self.entries[-1]


def upload(blob: bytes, key: str) -> None:
    logger.info("uploading %d bytes to %s", len(blob), key)


def score_frame(frame: np.ndarray) -> float:
    return float(frame.mean())


def transcode_all(clips: list[str], codec: str) -> None:
    refs = [transcode.remote(uri, codec) for uri in clips]
    for ref in refs:
        blob = ray.get(ref)  # expect: RAY002
        upload(blob, f"out/{len(blob)}")


def thumbnails_by_clip(clips: list[str]) -> dict[str, float]:
    refs = []
    for uri in clips:
        refs.append(thumbnail.remote(uri))
    scores = {}
    for uri, ref in zip(clips, refs):
        scores[uri] = score_frame(ray.get(ref))  # expect: RAY002
    return scores


def scene_cuts(clips: list[str]) -> list[list[float]]:
    refs = [detect_scenes.remote(uri, 0.3) for uri in clips]
    return [sorted(set(ray.get(ref))) for ref in refs]  # fine: cheap builtins only


def transcode_as_finished(clips: list[str], codec: str) -> None:
    pending = [transcode.remote(uri, codec) for uri in clips]
    while pending:
        [ref], pending = ray.wait(pending, num_returns=1)
        upload(ray.get(ref), "out/any")  # fine: already in completion order


def total_bytes(clips: list[str], codec: str) -> int:
    refs = [transcode.remote(uri, codec) for uri in clips]
    total = 0
    for ref in refs:
        total += len(ray.get(ref))  # fine: plain accumulation
    return total


def write_manifest(clips: list[str], path: str) -> None:
    refs = [detect_scenes.remote(uri, 0.5) for uri in clips]
    with open(path, "w") as manifest:
        for ref in refs:
            manifest.write(json.dumps(ray.get(ref)) + "\n")  # fine: the file keeps the input order


def stream_thumbnails(clips: list[str]):
    refs = [thumbnail.remote(uri) for uri in clips]
    for ref in refs:
        yield score_frame(ray.get(ref))  # fine: the caller consumes in order


def combined_histogram(clips: list[str]) -> np.ndarray:
    refs = [thumbnail.remote(uri) for uri in clips]
    histogram = np.zeros(256)
    for ref in refs:
        histogram = np.add(histogram, np.bincount(ray.get(ref).ravel(), minlength=256))  # fine: a fold
    return histogram


def first_dark_clip(clips: list[str]) -> str | None:
    refs = [thumbnail.remote(uri) for uri in clips]
    for uri, ref in zip(clips, refs):
        if score_frame(ray.get(ref)) < 10:  # fine: stops at the first match in clip order
            return uri
    return None


def reupload(blobs: list[bytes]) -> None:
    refs = [ray.put(blob) for blob in blobs]
    for ref in refs:
        upload(ray.get(ref), "copy")  # fine: ray.put refs are ready at once


def manifest_entries(clips: list[str]) -> list[str]:
    store = ManifestStore.remote()
    refs = [store.entry.remote(uri) for uri in clips]
    entries = []
    for ref in refs:
        entries.append(json.dumps(ray.get(ref)))  # fine: one synchronous actor runs them in order
    return entries


def refine_cuts(uri: str, steps: int) -> None:
    refs = [detect_scenes.remote(uri, 0.3)]
    for step in range(steps):
        refs.append(refine.remote(refs[-1], step))
    for ref in refs:
        logger.info("cuts: %s", json.dumps(ray.get(ref)))  # fine: a chain finishes in order
