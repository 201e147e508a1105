"""Tag product images with a vision model on a GPU Ray cluster."""

from __future__ import annotations

import subprocess

import ray
import torch
from PIL import Image

MODEL_PATH = "/models/tagger.pt"


def load_tagger() -> torch.nn.Module:
    model = torch.jit.load(MODEL_PATH)
    return model.eval().cuda()


def to_tensor(path: str) -> torch.Tensor:
    image = Image.open(path).convert("RGB").resize((224, 224))
    return torch.tensor(list(image.getdata()), dtype=torch.float32).view(224, 224, 3).permute(2, 0, 1)


@ray.remote(num_gpus=1)
def tag_image(path: str) -> list[int]:
    model = load_tagger()
    with torch.no_grad():
        logits = model(to_tensor(path).unsqueeze(0).cuda())
    return logits.topk(5).indices[0].tolist()


@ray.remote(num_gpus=1)
def tag_batch(paths: list[str]) -> list[list[int]]:
    model = load_tagger()
    batch = torch.stack([to_tensor(p) for p in paths]).cuda()
    with torch.no_grad():
        return model(batch).topk(5).indices.tolist()


@ray.remote(num_gpus=1, max_calls=0)
def tag_image_reused(path: str) -> list[int]:
    model = load_tagger()
    with torch.no_grad():
        return model(to_tensor(path).unsqueeze(0).cuda()).topk(5).indices[0].tolist()


@ray.remote(num_gpus=1)
def finetune(config: dict) -> float:
    model = load_tagger()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(config["epochs"]):
        optimizer.step()
    return config["lr"]


@ray.remote(num_gpus=1)
def profile_kernel(binary: str) -> int:
    return subprocess.run([binary, "--iterations", "1000"], check=False).returncode


@ray.remote(num_gpus=1)
class Tagger:
    def __init__(self) -> None:
        self.model = load_tagger()

    def tag(self, path: str) -> list[int]:
        with torch.no_grad():
            return self.model(to_tensor(path).unsqueeze(0).cuda()).topk(5).indices[0].tolist()


def tag_catalogue(paths: list[str]) -> list[list[int]]:
    refs = [tag_image.remote(p) for p in paths]  # expect: RAY022
    return ray.get(refs)


def tag_catalogue_batched(paths: list[str], size: int = 256) -> list[list[int]]:
    refs = [tag_batch.remote(paths[i : i + size]) for i in range(0, len(paths), size)]
    return [tags for batch in ray.get(refs) for tags in batch]


def tag_catalogue_reused(paths: list[str]) -> list[list[int]]:
    return ray.get([tag_image_reused.remote(p) for p in paths])


def tag_catalogue_with_actors(paths: list[str], replicas: int = 4) -> list[list[int]]:
    taggers = [Tagger.remote() for _ in range(replicas)]
    refs = [taggers[i % replicas].tag.remote(p) for i, p in enumerate(paths)]
    return ray.get(refs)


def sweep(learning_rates: list[float]) -> list[float]:
    return ray.get([finetune.remote({"lr": lr, "epochs": 10}) for lr in learning_rates])


def profile(binaries: list[str]) -> list[int]:
    return ray.get([profile_kernel.remote(b) for b in binaries])


def smoke_test(paths: list[str]) -> list[list[int]]:
    return ray.get([tag_image.remote(paths[i]) for i in range(2)])


if __name__ == "__main__":
    ray.init()
    images = [f"/data/images/{i}.jpg" for i in range(10_000)]
    print(len(tag_catalogue(images)), len(tag_catalogue_batched(images)))
    print(sweep([0.1, 0.01]), smoke_test(images))
