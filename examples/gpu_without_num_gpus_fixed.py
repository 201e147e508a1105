"""The same GPU work with its GPUs requested from Ray: ray-lint reports nothing here."""

import ray
import torch


def make_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


@ray.remote(num_gpus=1)  # Ray schedules it on a free GPU and sets CUDA_VISIBLE_DEVICES to that one
def train(seed: int) -> float:
    torch.manual_seed(seed)
    model = make_model().cuda()
    x = torch.randn(512, 64, device="cuda")
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    return float(loss)


@ray.remote(num_cpus=2, num_gpus=0.5)  # a small model: two replicas share one GPU
class Predictor:
    def __init__(self) -> None:
        self.model = make_model().to("cuda").eval()

    def predict(self, batch: list[list[float]]) -> list[int]:
        with torch.no_grad():
            return self.model(torch.tensor(batch).cuda()).argmax(-1).tolist()


@ray.remote
def smoke_test() -> float:
    device = "cuda" if torch.cuda.is_available() else "cpu"  # runs anywhere, with a CPU fallback
    return float(make_model().to(device)(torch.randn(8, 64, device=device)).sum())


if __name__ == "__main__":
    ray.init()
    losses = ray.get([train.remote(seed) for seed in range(4)])
    predictor = Predictor.remote()
    print(losses, ray.get([predictor.predict.remote([[0.0] * 64]), smoke_test.remote()]))
