"""RAY040 gpu-without-num-gpus in a semantic-search service: embedding, reranking and vision inference.

Findings: actors and tasks that put models on CUDA, use CuPy, pin TensorFlow to "/GPU:0" or ask JAX
for its GPUs without requesting `num_gpus` (a bare decorator, `num_cpus` only, `max_restarts` only,
`ray.remote(num_cpus=...)(Cls)`). Traps: GPUs requested through `**ACTOR_OPTS` or an `.options` kept
in a variable, a Serve deployment and Ray Data / Ray Train entry points that get their GPUs
elsewhere, CPU-pinned TensorFlow and JAX, a guarded CUDA path, `device="cpu"`, and driver-side CuPy.
"""

from __future__ import annotations

import cupy as cp
import jax
import jax.numpy as jnp
import numpy as np
import ray
import tensorflow as tf
import torch
from ray import serve
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer
from ray.util import ActorPool
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

ACTOR_OPTS = {"num_cpus": 4, "num_gpus": 1}
EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"


@ray.remote  # expect: RAY040
class EmbeddingServer:
    def __init__(self, name: str = EMBED_MODEL) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.model = AutoModel.from_pretrained(name).to("cuda").eval()

    def embed(self, texts: list[str]) -> np.ndarray:
        tokens = self.tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            out = self.model(**{k: v.cuda() for k, v in tokens.items()})
        return out.last_hidden_state.mean(dim=1).cpu().numpy()


@ray.remote(**ACTOR_OPTS)
class BulkEmbedder:
    # fine: the decorator options come from a dict that may carry num_gpus
    def __init__(self, name: str = EMBED_MODEL) -> None:
        self.model = SentenceTransformer(name, device="cuda")

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=256, convert_to_numpy=True)


@ray.remote
class CpuEmbedder:
    # fine: an explicit CPU replica for overflow traffic
    def __init__(self, name: str = EMBED_MODEL) -> None:
        self.model = SentenceTransformer(name, device="cpu")

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, convert_to_numpy=True)


@ray.remote
class CrossEncoder:
    # fine: every replica is started with CrossEncoder.options(num_gpus=1)
    def __init__(self, name: str = RERANK_MODEL) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(name)
        self.model = AutoModelForSequenceClassification.from_pretrained(name).cuda().eval()

    def score(self, query: str, docs: list[str]) -> list[float]:
        pairs = self.tokenizer([query] * len(docs), docs, padding=True, return_tensors="pt").to("cuda")
        with torch.no_grad():
            return self.model(**pairs).logits.squeeze(-1).tolist()


@ray.remote
class PortableScorer:
    # fine: uses the GPU only when one is visible and otherwise stays on the CPU
    def __init__(self, name: str = RERANK_MODEL) -> None:
        self.model = AutoModelForSequenceClassification.from_pretrained(name).eval()
        if torch.cuda.is_available():
            self.model = self.model.cuda()

    def device(self) -> str:
        return str(next(self.model.parameters()).device)


class Reranker:
    def __init__(self, dim: int) -> None:
        self.device = torch.device("cuda")
        self.proj = torch.nn.Linear(dim, dim).to(self.device)

    def rerank(self, query: np.ndarray, docs: np.ndarray, k: int) -> list[int]:
        q = self.proj(torch.as_tensor(query, device=self.device))
        scores = self.proj(torch.as_tensor(docs, device=self.device)) @ q
        return scores.topk(k).indices.tolist()


RemoteReranker = ray.remote(num_cpus=2)(Reranker)  # expect: RAY040


@ray.remote(max_restarts=2)  # expect: RAY040
class FrameDetector:
    def __init__(self, path: str) -> None:
        self.model = torch.jit.load(path, map_location="cpu").eval()
        self.stream = None

    def start(self) -> bool:
        self.stream = torch.cuda.Stream()
        self.model = self.model.half()
        return True


@ray.remote  # expect: RAY040
class ImageClassifier:
    def __init__(self, path: str) -> None:
        with tf.device("/GPU:0"):
            self.model = tf.keras.models.load_model(path)

    def classify(self, images: np.ndarray) -> np.ndarray:
        return self.model.predict(images, verbose=0).argmax(-1)


@ray.remote
def decode_images(paths: list[str]) -> list[np.ndarray]:
    # fine: JPEG decoding is pinned to the CPU
    with tf.device("/CPU:0"):
        return [tf.io.decode_jpeg(tf.io.read_file(p)).numpy() for p in paths]


@ray.remote(num_cpus=1)  # expect: RAY040
def normalize_embeddings(batch: np.ndarray) -> np.ndarray:
    x = cp.asarray(batch)
    x /= cp.linalg.norm(x, axis=1, keepdims=True)
    return cp.asnumpy(x)


@ray.remote  # expect: RAY040
def score_with_jax(params: dict, features: np.ndarray) -> np.ndarray:
    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.asarray(features), gpu)
    return np.asarray(jnp.tanh(x @ params["w"] + params["b"]))


@ray.remote
def softmax_on_host(logits: np.ndarray) -> np.ndarray:
    # fine: explicitly placed on the host CPU
    cpu = jax.devices("cpu")[0]
    return np.asarray(jax.nn.softmax(jax.device_put(jnp.asarray(logits), cpu)))


@ray.remote
def embed_batch(texts: list[str]) -> np.ndarray:
    # fine: always launched through gpu_embed = embed_batch.options(num_gpus=1)
    model = SentenceTransformer(EMBED_MODEL).cuda()
    return model.encode(texts, convert_to_numpy=True)


def topk_on_driver(query: np.ndarray, matrix: np.ndarray, k: int) -> np.ndarray:
    # fine: plain driver code; the driver process owns its GPU, no Ray scheduling involved
    scores = cp.asarray(matrix) @ cp.asarray(query)
    return cp.asnumpy(cp.argsort(-scores)[:k])


@serve.deployment(ray_actor_options={"num_gpus": 1})
class RerankService:
    # fine: a Serve deployment, given its GPU through ray_actor_options
    def __init__(self) -> None:
        self.model = AutoModelForSequenceClassification.from_pretrained(RERANK_MODEL).cuda()


class BatchPredictor:
    # fine: a Ray Data UDF class; map_batches below passes num_gpus=1
    def __init__(self) -> None:
        self.model = SentenceTransformer(EMBED_MODEL, device="cuda")

    def __call__(self, batch: dict) -> dict:
        batch["embedding"] = self.model.encode(list(batch["text"]), convert_to_numpy=True)
        return batch


def train_loop_per_worker(config: dict) -> None:
    # fine: a Ray Train worker; ScalingConfig(use_gpu=True) assigns the GPUs
    model = AutoModel.from_pretrained(EMBED_MODEL).cuda()
    torch.cuda.set_device(ray.train.get_context().get_local_rank())
    model.train()


def run(queries: list[str], corpus: list[list[str]], images: list[str], parquet: str) -> dict:
    ray.init()
    pool = ActorPool([EmbeddingServer.remote() for _ in range(2)])
    vectors = np.concatenate(list(pool.map(lambda actor, chunk: actor.embed.remote(chunk), corpus)))
    normalized = normalize_embeddings.remote(vectors)
    bulk, spare = BulkEmbedder.remote(), CpuEmbedder.remote()
    encoders = [CrossEncoder.options(num_gpus=1).remote() for _ in range(2)]
    reranker = RemoteReranker.remote(vectors.shape[1])
    detector, classifier = FrameDetector.remote("/models/detector.pt"), ImageClassifier.remote("/models/clf")
    gpu_embed = embed_batch.options(num_gpus=1)
    scores = [enc.score.remote(q, docs) for enc, q, docs in zip(encoders, queries, corpus)]
    refs = [
        bulk.embed.remote(queries),
        spare.embed.remote(queries),
        PortableScorer.remote().device.remote(),
        reranker.rerank.remote(vectors[0], vectors, 10),
        detector.start.remote(),
        classifier.classify.remote(decode_images.remote(images)),
        score_with_jax.remote({"w": vectors[:1].T, "b": 0.0}, vectors),
        softmax_on_host.remote(vectors[:8]),
        gpu_embed.remote(queries),
        normalized,
    ]
    ds = ray.data.read_parquet(parquet, columns=["text"])  # expect: RAY115
    ds.map_batches(BatchPredictor, num_gpus=1, concurrency=2, batch_size=64).write_parquet(parquet + ".emb")  # expect: RAY115
    TorchTrainer(train_loop_per_worker, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)).fit()
    serve.run(RerankService.bind())
    return {"scores": ray.get(scores), "results": ray.get(refs)}
