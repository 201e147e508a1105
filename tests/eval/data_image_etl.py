"""Nightly product-image ETL and batch inference with Ray Data.

Reads the image manifest from parquet, decodes and resizes the images, adds price and text
features, labels each image with a GPU classifier, embeds it, and writes labels, embeddings and an
audit sample back to parquet.

Reported:
- RAY101: `map(normalize_prices)`, elementwise numpy run one row at a time;
- RAY102: `map_batches(count_title_tokens)`, which builds a tokenizer for every batch;
- RAY103: the GPU classifier step without a batch size;
- RAY104: the embedding step, whose class moves its model to CUDA without requesting a GPU;
- RAY108: the audit sample, materialized and then written once.

Left silent (traps): decoding with PIL and a dict lookup per row (`map` is right there), a numpy
reduction per row, a tokenizer behind `@lru_cache`, a lazily created S3 client in a `global`, a
`np.load` of the row's own file, the classifier step with a batch size from the config, an
embedder that picks CUDA only when there is one, a dataset materialized and then counted and
written, and the training split read once per epoch.
"""

from __future__ import annotations

import io
import logging
from functools import lru_cache

import boto3
import numpy as np
import ray
import torch
from PIL import Image
from transformers import AutoModelForImageClassification, AutoTokenizer

logger = logging.getLogger(__name__)

MANIFEST = "s3://shop-data/manifests/images.parquet"
OUTPUT = "s3://shop-data/derived/"
CLASSIFIER = "google/vit-base-patch16-224"
IMAGE_SIZE = (224, 224)
DEPARTMENTS = {"shoes": "apparel", "shirts": "apparel", "lamps": "home", "sofas": "home"}

_s3 = None


def decode_image(row: dict) -> dict:
    image = Image.open(io.BytesIO(row["bytes"])).convert("RGB").resize(IMAGE_SIZE)
    row["image"] = np.asarray(image, dtype=np.uint8)
    return row


def normalize_prices(row: dict) -> dict:
    row["log_price"] = np.log1p(row["price"])
    row["discount"] = np.clip(1.0 - row["sale_price"] / row["price"], 0.0, 1.0)
    return row


def brightness(row: dict) -> dict:
    row["brightness"] = np.mean(row["image"]) / 255.0
    return row


def tag_department(row: dict) -> dict:
    row["department"] = DEPARTMENTS.get(row["category"], "other")
    return row


def has_image(row: dict) -> bool:
    return row["bytes"] is not None and len(row["bytes"]) > 0


def count_title_tokens(batch: dict) -> dict:
    tokenizer = AutoTokenizer.from_pretrained("xlm-roberta-base")
    batch["title_tokens"] = np.array([len(tokenizer(title)["input_ids"]) for title in batch["title"]])
    return batch


@lru_cache(maxsize=1)
def description_tokenizer() -> AutoTokenizer:
    return AutoTokenizer.from_pretrained("xlm-roberta-base")


def count_description_tokens(batch: dict) -> dict:
    tokenizer = description_tokenizer()
    batch["description_tokens"] = np.array([len(tokenizer(text)["input_ids"]) for text in batch["description"]])
    return batch


def attach_thumbnail(row: dict) -> dict:
    row["thumbnail"] = np.load(row["thumbnail_path"])
    return row


def upload_preview(row: dict) -> dict:
    global _s3
    if _s3 is None:
        _s3 = boto3.client("s3")
    _s3.put_object(Bucket="shop-previews", Key=f"{row['sku']}.png", Body=row["bytes"])
    return row


class ImageClassifier:
    def __init__(self, model_name: str) -> None:
        self.model = AutoModelForImageClassification.from_pretrained(model_name).to("cuda").eval()

    def __call__(self, batch: dict) -> dict:
        pixels = torch.as_tensor(batch["image"], device="cuda").permute(0, 3, 1, 2).float() / 255.0
        with torch.no_grad():
            logits = self.model(pixel_values=pixels).logits
        batch["label"] = logits.argmax(-1).cpu().numpy()
        return batch


class Embedder:
    def __init__(self) -> None:
        self.model = torch.jit.load("/models/image_embedder.pt").cuda().eval()

    def __call__(self, batch: dict) -> dict:
        pixels = torch.as_tensor(batch["image"]).permute(0, 3, 1, 2).float().cuda() / 255.0
        with torch.no_grad():
            batch["embedding"] = self.model(pixels).cpu().numpy()
        return batch


class PortableEmbedder:
    def __init__(self) -> None:
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = torch.jit.load("/models/image_embedder.pt").to(self.device).eval()

    def __call__(self, batch: dict) -> dict:
        pixels = torch.as_tensor(batch["image"]).permute(0, 3, 1, 2).float().to(self.device) / 255.0
        with torch.no_grad():
            batch["embedding"] = self.model(pixels).cpu().numpy()
        return batch


def prepare(manifest: str) -> ray.data.Dataset:
    ds = ray.data.read_parquet(manifest)
    ds = ds.filter(has_image)
    ds = ds.map(decode_image)
    ds = ds.map(normalize_prices)  # expect: RAY101
    ds = ds.map(brightness)
    ds = ds.map(tag_department)
    ds = ds.map(attach_thumbnail)
    ds = ds.map_batches(count_title_tokens, batch_size=256)  # expect: RAY102
    return ds.map_batches(count_description_tokens, batch_size=256)


def classify(ds: ray.data.Dataset, batch_size: int, nightly: bool) -> ray.data.Dataset:
    if nightly:
        return ds.map_batches(  # expect: RAY103
            ImageClassifier,
            fn_constructor_args=(CLASSIFIER,),
            num_gpus=1,
            compute=ray.data.ActorPoolStrategy(size=2),
        )
    return ds.map_batches(
        ImageClassifier,
        fn_constructor_args=(CLASSIFIER,),
        num_gpus=1,
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=2),
    )


def embed(ds: ray.data.Dataset, portable: bool) -> ray.data.Dataset:
    if portable:
        return ds.map_batches(PortableEmbedder, batch_size=128, compute=ray.data.ActorPoolStrategy(size=2))
    return ds.map_batches(Embedder, batch_size=128, compute=ray.data.ActorPoolStrategy(size=2))  # expect: RAY104


def export_audit_sample(ds: ray.data.Dataset, path: str) -> None:
    sample = ds.random_sample(0.01, seed=7).materialize()  # expect: RAY108
    sample.write_parquet(path)


def export_labels(ds: ray.data.Dataset, path: str) -> None:
    labelled = ds.select_columns(["sku", "label", "department"]).materialize()
    logger.info("writing %d labels", labelled.count())
    labelled.write_parquet(path)


def fit_head(ds: ray.data.Dataset, epochs: int) -> float:
    train = ds.select_columns(["embedding", "label"]).materialize()
    head = torch.nn.Linear(512, 1000)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
    loss = torch.tensor(0.0)
    for _ in range(epochs):
        for batch in train.iter_torch_batches(batch_size=512):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(head(batch["embedding"]), batch["label"])
            loss.backward()
            optimizer.step()
    return float(loss)


def publish_previews(ds: ray.data.Dataset) -> int:
    return ds.map(upload_preview).count()


def main() -> None:
    ray.init()
    ds = prepare(MANIFEST)
    ds = classify(ds, batch_size=64, nightly=True)
    ds = embed(ds, portable=False)
    export_audit_sample(ds, OUTPUT + "audit/")
    export_labels(ds, OUTPUT + "labels/")
    logger.info("head loss %.3f", fit_head(ds, epochs=3))
    logger.info("published %d previews", publish_previews(ds))


if __name__ == "__main__":
    main()
