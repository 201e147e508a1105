"""Batch inference driver: RAY010 single-actor-bottleneck on stateless model actors.

Independent tokenize/embed/classify/decode calls fanned out to ONE actor handle (comprehensions,
append loops, dict stores, a refill loop, `.options(...)`, `ray.remote(Cls)`, `max_concurrency=1`),
next to the cases where one actor is right or the handle is not a single one: a GPU actor, stateful
metrics and caches, async and threaded actors, `ActorPool`, replicas, unknown handles.
"""

import time

import httpx
import numpy as np
import ray
import torch
from ray.util import ActorPool
from transformers import AutoModel, AutoTokenizer

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


@ray.remote(num_cpus=1)
class Tokenizer:
    def __init__(self, model_name: str) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)

    def encode(self, texts: list[str]) -> dict[str, np.ndarray]:
        return dict(self.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np"))


@ray.remote(num_cpus=4)
class CpuEmbedder:
    def __init__(self, model_name: str) -> None:
        self.model = AutoModel.from_pretrained(model_name).eval()

    def _mean_pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
        summed = (hidden * mask.unsqueeze(-1)).sum(dim=1)
        return (summed / mask.sum(dim=1, keepdim=True)).numpy()

    def embed(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            inputs = {key: torch.from_numpy(value) for key, value in batch.items()}
            hidden = self.model(**inputs).last_hidden_state
        return self._mean_pool(hidden, inputs["attention_mask"])


@ray.remote(num_gpus=1)
class GpuEmbedder:
    def __init__(self, model_name: str) -> None:
        self.model = AutoModel.from_pretrained(model_name).half().cuda().eval()

    def embed(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            inputs = {key: torch.from_numpy(value).cuda() for key, value in batch.items()}
            return self.model(**inputs).last_hidden_state.mean(dim=1).float().cpu().numpy()


@ray.remote(num_cpus=1, max_concurrency=1)
class Classifier:
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.centroids = np.load("centroids.npy")

    def classify(self, features: np.ndarray) -> list[int]:
        distances = np.abs(features[:, None, :] - self.centroids[None, :, :]).sum(axis=-1)
        return [int(i) if d < self.threshold else -1 for i, d in zip(distances.argmin(axis=1), distances.min(axis=1))]


@ray.remote
class Reranker:
    def __init__(self, model_name: str) -> None:
        self.model = AutoModel.from_pretrained(model_name).eval()
        self.latencies: list[float] = []

    def _record(self, started: float) -> None:
        self.latencies.append(time.perf_counter() - started)

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        started = time.perf_counter()
        scores = [float(self.model.score(query, doc)) for doc in docs]
        self._record(started)
        return scores


@ray.remote
class EmbeddingCache:
    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def get_or_put(self, key: str, vector: np.ndarray) -> np.ndarray:
        if key not in self.vectors:
            self.vectors[key] = vector
        return self.vectors[key]


@ray.remote
class LlmGateway:
    def __init__(self, url: str) -> None:
        self.url = url

    async def generate(self, prompt: str) -> str:
        async with httpx.AsyncClient() as client:
            response = await client.post(self.url, json={"prompt": prompt, "max_tokens": 128})
        return response.json()["text"]


@ray.remote(max_concurrency=16)
class ModerationClient:
    def __init__(self, url: str) -> None:
        self.url = url

    def check(self, text: str) -> bool:
        return httpx.post(self.url, json={"input": text}, timeout=10).json()["flagged"]


class Detokenizer:
    def __init__(self, model_name: str) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)

    def decode(self, token_ids: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)


RemoteDetokenizer = ray.remote(Detokenizer)


def embed_corpus(batches: list[list[str]]) -> np.ndarray:
    tokenizer = Tokenizer.remote(MODEL_NAME)
    embedder = CpuEmbedder.options(num_cpus=8).remote(MODEL_NAME)
    encoded = [tokenizer.encode.remote(batch) for batch in batches]  # expect: RAY010
    vectors = [
        embedder.embed.remote(ref)  # expect: RAY010
        for ref in encoded
    ]
    return np.concatenate(ray.get(vectors))


def classify_requests(requests: list[dict]) -> list[list[int]]:
    classifier = Classifier.remote(threshold=0.5)
    refs = []
    for request in requests:
        refs.append(classifier.classify.options(name=f"classify-{request['id']}").remote(request["features"]))  # expect: RAY010
    return ray.get(refs)


def decode_outputs(outputs: dict[str, list[list[int]]]) -> dict[str, list[str]]:
    detokenizer = RemoteDetokenizer.remote(MODEL_NAME)
    pending = {}
    for request_id, token_ids in outputs.items():
        pending[request_id] = detokenizer.decode.remote(token_ids)  # expect: RAY010
    return dict(zip(pending, ray.get(list(pending.values()))))


def classify_stream(feature_stream, max_in_flight: int = 32) -> list[list[int]]:
    classifier = Classifier.remote(threshold=0.8)
    in_flight, labels = [], []
    for features in feature_stream:
        if len(in_flight) >= max_in_flight:
            ready, in_flight = ray.wait(in_flight, num_returns=1)
            labels.extend(ray.get(ready))
        ref = classifier.classify.remote(features)  # expect: RAY010
        in_flight.append(ref)
    return labels + ray.get(in_flight)


def serve_without_bottleneck(batches: list[dict], queries: list[tuple[str, list[str]]], texts: list[str]) -> dict:
    gpu = GpuEmbedder.remote(MODEL_NAME)
    gpu_refs = [gpu.embed.remote(batch) for batch in batches]  # fine: one GPU actor owns the device, calls queue by design
    reranker = Reranker.remote(MODEL_NAME)
    score_refs = [reranker.rerank.remote(q, docs) for q, docs in queries]  # fine: rerank records latencies (via _record)
    cache = EmbeddingCache.remote()
    cached = [cache.get_or_put.remote(text, ref) for text, ref in zip(texts, gpu_refs)]  # fine: writes the cache dict
    gateway = LlmGateway.remote("http://llm:8000/v1/completions")
    completions = [gateway.generate.remote(text) for text in texts]  # fine: async actor interleaves the calls
    moderation = ModerationClient.remote("http://moderation:8080/check")
    flags = [moderation.check.remote(text) for text in texts]  # fine: max_concurrency=16 runs them in threads
    return {"scores": ray.get(score_refs), "cached": ray.get(cached), "completions": ray.get(completions), "flags": ray.get(flags)}


def embed_with_replicas(batches: list[dict], num_replicas: int = 4) -> list[np.ndarray]:
    replicas = [CpuEmbedder.remote(MODEL_NAME) for _ in range(num_replicas)]
    warmup = [replica.embed.remote(batches[0]) for replica in replicas]  # fine: one call per actor
    ray.get(warmup)
    refs = [replicas[i % num_replicas].embed.remote(batch) for i, batch in enumerate(batches)]  # fine: round-robin
    pool = ActorPool(replicas)
    for batch in batches:
        pool.submit(lambda actor, value: actor.embed.remote(value), batch)  # fine: the pool picks an idle actor
    pooled = [pool.get_next() for _ in batches]
    return ray.get(refs) + pooled


def embed_pooled(batches: list[dict]) -> list[np.ndarray]:
    pool = ActorPool([CpuEmbedder.remote(MODEL_NAME) for _ in range(4)])
    return list(pool.map(lambda actor, batch: actor.embed.remote(batch), batches))  # fine: ActorPool.map


def token_counts(model_names: list[str], sample: list[str], shared_embedder, texts: list[str]) -> list:
    refs = []
    for model_name in model_names:
        tokenizer = Tokenizer.remote(model_name)  # fine: a new actor per iteration
        refs.append(tokenizer.encode.remote(sample))
    refs += [shared_embedder.embed.remote(text) for text in texts]  # fine: parameter, class unknown
    service = ray.get_actor("embedding-service")
    refs += [service.embed.remote(text) for text in texts]  # fine: named actor, class unknown
    return ray.get(refs)


def embed_queries_one_by_one(tokenized_queries: list[dict]) -> list[np.ndarray]:
    embedder = CpuEmbedder.remote(MODEL_NAME)
    vectors = []
    for query in tokenized_queries:
        vector = ray.get(embedder.embed.remote(query))  # expect: RAY010 (fetched one by one, but one actor would serialize them anyway)
        vectors.append(vector / np.linalg.norm(vector))
    return vectors
