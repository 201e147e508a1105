"""A Serve app for question answering over documents (RAY222 serve-blocking-call-in-async, one helper away).

The ingress fetches a page, the reader answers a question over it with a seq2seq model, and a reranker
scores passages with a cross-encoder. Reported: an async method that runs model inference on the replica's
event loop, directly or through a sync helper of its class; an async method that calls a module helper
which makes a synchronous HTTP request; the blocking `*_sync` form of a task adapter's API.

Traps (silent): tokenizer calls (a tokenizer is not a model); inference in a `@serve.batch` handler;
inference handed to a worker thread with `asyncio.to_thread`; a sync deployment method (Serve runs it in
its thread pool); a classic model's prediction; the awaited `*_async` form of the adapter's API; a helper
that only falls back to HTTP in an `except` block; an async method that awaits other deployments.
"""

from __future__ import annotations

import asyncio
import logging

import requests
import xgboost as xgb
from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.serve.task_consumer import instantiate_adapter_from_config
from starlette.requests import Request
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

logger = logging.getLogger(__name__)

PAGE_CACHE: dict[str, str] = {}
MAX_ANSWER_TOKENS = 64


def fetch_page(url: str) -> str:
    response = requests.get(url, timeout=10)
    response.raise_for_status()
    return response.text


def cached_page(url: str) -> str:
    try:
        return PAGE_CACHE[url]
    except KeyError:
        PAGE_CACHE[url] = requests.get(url, timeout=10).text
        return PAGE_CACHE[url]


@serve.deployment(ray_actor_options={"num_gpus": 1}, max_ongoing_requests=16)
class Reader:
    def __init__(self, model_name: str) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(model_name)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_name)
        self.model = model.to("cuda").eval()

    def answer(self, question: str, context: str) -> str:
        inputs = self.tokenizer(question, context, return_tensors="pt", truncation=True).to("cuda")
        output = self.model.generate(**inputs, max_new_tokens=MAX_ANSWER_TOKENS)
        return self.tokenizer.decode(output[0], skip_special_tokens=True)

    async def __call__(self, question: str, context: str) -> str:
        tokens = self.tokenizer(question)
        logger.debug("question of %d tokens", len(tokens["input_ids"]))
        return self.answer(question, context)  # expect: RAY222

    async def answer_offloaded(self, question: str, context: str) -> str:
        return await asyncio.to_thread(self.answer, question, context)

    def answer_sync(self, question: str, context: str) -> str:
        return self.answer(question, context)


@serve.deployment
class Reranker:
    def __init__(self) -> None:
        self.scorer = pipeline("text-classification", model="cross-encoder/ms-marco-MiniLM-L-6-v2")

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def score_batch(self, pairs: list[dict[str, str]]) -> list[float]:
        return [result["score"] for result in self.scorer(pairs)]

    async def score_one(self, pair: dict[str, str]) -> float:
        return self.scorer(pair)[0]["score"]  # expect: RAY222


@serve.deployment
class SpamFilter:
    def __init__(self, path: str) -> None:
        self.booster = xgb.Booster(model_file=path)

    async def __call__(self, features: list[float]) -> float:
        return float(self.booster.predict(xgb.DMatrix([features]))[0])


@serve.deployment
class Ingress:
    def __init__(self, reader: DeploymentHandle, reranker: DeploymentHandle, config: dict) -> None:
        self.reader = reader
        self.reranker = reranker
        self.adapter = instantiate_adapter_from_config(config)

    async def __call__(self, request: Request) -> dict[str, str]:
        body = await request.json()
        page = fetch_page(body["url"])  # expect: RAY222
        score = await self.reranker.score_batch.remote({"query": body["question"], "passage": page[:2000]})
        answer = await self.reader.remote(body["question"], page)
        return {"answer": answer, "score": str(score)}

    async def cached(self, request: Request) -> str:
        body = await request.json()
        return await self.reader.remote(body["question"], cached_page(body["url"]))

    async def submit_report(self, request: Request) -> str:
        body = await request.json()
        task = self.adapter.enqueue_task_sync("build_report", args=[body])  # expect: RAY222
        return task.id

    async def submit_report_async(self, request: Request) -> str:
        body = await request.json()
        task = await self.adapter.enqueue_task_async("build_report", args=[body])
        return task.id


app = Ingress.bind(Reader.bind("google/flan-t5-base"), Reranker.bind(), {"queue": "reports"})
