"""Ray tasks and actors that use a GPU without requesting one: `ray-lint check examples/` reports each RAY040 below."""

import ray
import torch


def make_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


@ray.remote  # RAY040: trains on CUDA, but Ray was never asked for a GPU
def train(seed: int) -> float:
    torch.manual_seed(seed)
    model = make_model().cuda()
    x = torch.randn(512, 64, device="cuda")
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    return float(loss)


@ray.remote(num_cpus=2)  # RAY040: `num_cpus` alone reserves no GPU, so replicas pile onto the same device
class Predictor:
    def __init__(self) -> None:
        self.model = make_model().to("cuda").eval()

    def predict(self, batch: list[list[float]]) -> list[int]:
        with torch.no_grad():
            return self.model(torch.tensor(batch).cuda()).argmax(-1).tolist()


if __name__ == "__main__":
    ray.init()
    losses = ray.get([train.remote(seed) for seed in range(4)])
    predictor = Predictor.remote()
    print(losses, ray.get(predictor.predict.remote([[0.0] * 64])))
