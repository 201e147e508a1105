"""RL rollouts, evolution strategies and Monte Carlo pricing: RAY010 single-actor-bottleneck.

Stateless rollout/pricing methods fanned out to ONE actor (comprehensions, a generator expression,
`for`/`while` append loops, a dict store, inside a training loop) run one at a time. Parameter servers,
replay buffers, env-stepping actors and recorders keep state, so queuing is intended there."""

import collections

import gymnasium as gym
import httpx
import numpy as np
import ray
import torch
from ray.util.actor_pool import ActorPool


@ray.remote(num_cpus=1)
class RolloutWorker:
    def __init__(self, env_name: str, horizon: int) -> None:
        self.env_name = env_name
        self.horizon = horizon

    def rollout(self, weights: np.ndarray, seed: int) -> float:
        env = gym.make(self.env_name)
        obs, _ = env.reset(seed=seed)
        total = 0.0
        for _ in range(self.horizon):
            obs, reward, terminated, truncated, _ = env.step(int(np.argmax((weights * obs[None, :]).sum(axis=1))))
            total += float(reward)
            if terminated or truncated:
                break
        env.close()
        return total

    def perturbed_returns(self, weights: np.ndarray, seed: int, sigma: float) -> tuple[float, float]:
        noise = np.random.default_rng(seed).standard_normal(weights.shape)
        return self.rollout(weights + sigma * noise, seed), self.rollout(weights - sigma * noise, seed)


@ray.remote
class ParameterServer:
    def __init__(self, shape: tuple[int, int], lr: float) -> None:
        self.weights = np.zeros(shape)
        self.lr = lr
        self.version = 0

    def apply_update(self, gradient: np.ndarray) -> int:
        self.weights += self.lr * gradient
        self.version += 1
        return self.version

    def get_weights(self) -> np.ndarray:
        return self.weights


@ray.remote
class ReplayBuffer:
    def __init__(self, capacity: int) -> None:
        self.items = collections.deque(maxlen=capacity)

    def add_batch(self, transitions: list[tuple]) -> int:
        self.items.extend(transitions)
        return len(self.items)


@ray.remote(num_cpus=1)
class EpisodeSimulator:
    def __init__(self, env_name: str, seed: int) -> None:
        self.env = gym.make(env_name)
        self.obs, _ = self.env.reset(seed=seed)

    def step(self, action: int) -> float:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.obs = obs
        self.done = terminated or truncated
        return float(reward)


@ray.remote
class EpisodeRecorder:
    def __init__(self) -> None:
        self.episodes: list[dict] = []

    def _store(self, episode: dict) -> None:
        self.episodes.append(episode)

    def record(self, episode: dict) -> int:
        self._store(episode)
        return len(self.episodes)


@ray.remote(concurrency_groups={"io": 2, "compute": 4})
class ScenarioLoader:
    @ray.method(concurrency_group="io")
    def load(self, path: str) -> np.ndarray:
        return np.load(path)


@ray.remote
class RemoteEnvServer:
    def __init__(self, url: str) -> None:
        self.url = url

    async def evaluate(self, weights: np.ndarray, seed: int) -> float:
        async with httpx.AsyncClient() as client:
            response = await client.post(self.url, json={"weights": weights.tolist(), "seed": seed})
        return float(response.json()["return"])


@ray.remote(num_cpus=2)
class MonteCarloPricer:
    def price(self, spot: float, strike: float, vol: float, seed: int, paths: int) -> float:
        z = np.random.default_rng(seed).standard_normal(paths)
        terminal = spot * np.exp(-0.5 * vol**2 + vol * z)
        return float(np.maximum(terminal - strike, 0.0).mean())


@ray.remote(num_cpus=2)
class Critic:
    def __init__(self, checkpoint: str) -> None:
        self.model = torch.load(checkpoint).cuda().eval()

    def values(self, observations: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model(torch.as_tensor(observations).cuda()).cpu().numpy()


@ray.remote
class Progress:
    def report(self, generation: int, score: float) -> None:
        print(f"generation {generation}: {score:.2f}")


def evolution_strategies(env_name: str, generations: int, population: int, sigma: float = 0.05) -> np.ndarray:
    worker = RolloutWorker.remote(env_name, horizon=500)
    ps = ParameterServer.remote((2, 4), lr=0.01)
    progress = Progress.remote()
    for generation in range(generations):
        weights_ref = ps.get_weights.remote()  # fine: one call per generation, passed by reference
        seeds = np.random.randint(0, 2**31, size=population)
        pair_refs = [
            worker.perturbed_returns.remote(weights_ref, int(seed), sigma)  # expect: RAY010
            for seed in seeds
        ]
        pairs = np.array(ray.get(pair_refs))
        noises = np.stack([np.random.default_rng(int(seed)).standard_normal((2, 4)) for seed in seeds])
        gradient = ((pairs[:, 0] - pairs[:, 1])[:, None, None] * noises).mean(axis=0) / (2 * sigma)
        ps.apply_update.remote(gradient)  # fine: fire-and-forget, and the update is stateful
        progress.report.remote(generation, float(pairs.mean()))  # fine: fire-and-forget logging
    return ray.get(ps.get_weights.remote())


def evaluate_policy(env_name: str, weights: np.ndarray, seeds: list[int]) -> float:
    evaluator = RolloutWorker.options(num_cpus=2).remote(env_name, horizon=1000)
    weights_ref = ray.put(weights)
    returns = ray.get(list(evaluator.rollout.remote(weights_ref, seed) for seed in seeds))  # expect: RAY010
    zeros_ref = ray.put(np.zeros_like(weights))
    baseline = []
    for seed in seeds:
        ret = evaluator.rollout.remote(zeros_ref, seed)  # expect: RAY010
        baseline.append(ret)
    return float(np.mean(returns) - np.mean(ray.get(baseline)))


def price_option(spot: float, strike: float, vol: float, num_batches: int, paths_per_batch: int = 100_000) -> float:
    pricer = MonteCarloPricer.remote()
    estimates = []
    seed = 0
    while len(estimates) < num_batches:
        estimates.append(pricer.price.remote(spot, strike, vol, seed, paths_per_batch))  # expect: RAY010
        seed += 1
    return float(np.mean(ray.get(estimates)))


def price_ladder(spot: float, strikes: list[float], vol: float) -> dict[float, float]:
    pricer = MonteCarloPricer.remote()
    by_strike = {}
    for strike in strikes:
        ref = pricer.price.remote(spot, strike, vol, 7, 200_000)  # expect: RAY010
        by_strike[strike] = ref
    return dict(zip(by_strike, ray.get(list(by_strike.values()))))


def stateful_actors(env_name: str, actions: list[int], episodes: list[dict], transitions: list[list[tuple]]) -> list:
    sim = EpisodeSimulator.remote(env_name, seed=0)
    rewards = [sim.step.remote(action) for action in actions]  # fine: step advances the episode, order matters
    ps = ParameterServer.remote((2, 4), lr=0.01)
    versions = [ps.apply_update.remote(np.ones((2, 4))) for _ in range(8)]  # fine: updates the weights
    buffer = ReplayBuffer.remote(capacity=100_000)
    sizes = []
    for chunk in transitions:
        sizes.append(buffer.add_batch.remote(chunk))  # fine: extends the buffer
    recorder = EpisodeRecorder.remote()
    counts = [recorder.record.remote(ep) for ep in episodes]  # fine: record stores via _store
    return ray.get(rewards + versions + sizes + counts)


def spread_out(env_name: str, weights: np.ndarray, seeds: list[int], paths: list[str], num_workers: int = 8) -> list:
    workers = [RolloutWorker.remote(env_name, horizon=500) for _ in range(num_workers)]
    weights = ray.put(weights)
    per_worker = [w.rollout.remote(weights, seed) for w, seed in zip(workers, seeds)]  # fine: one call per actor
    strided = [workers[i % num_workers].rollout.remote(weights, s) for i, s in enumerate(seeds)]  # fine: round-robin
    pool = ActorPool(workers)
    pooled = list(pool.map_unordered(lambda w, s: w.rollout.remote(weights, s), seeds))  # fine: ActorPool
    loader = ScenarioLoader.remote()
    scenarios = [loader.load.remote(path) for path in paths]  # fine: concurrency groups run loads in threads
    server = RemoteEnvServer.remote("http://sim-farm:9000")
    remote_scores = [server.evaluate.remote(weights, s) for s in seeds]  # fine: async actor
    return ray.get(per_worker + strided + scenarios + remote_scores) + pooled


def value_and_probes(batches: list[np.ndarray], fresh_seeds: list[int], env_name: str, weights: np.ndarray) -> list:
    critic = Critic.options(num_gpus=1).remote("critic.pt")
    values = [critic.values.remote(batch) for batch in batches]  # fine: the critic holds one GPU
    probes = []
    for seed in fresh_seeds:
        probe = RolloutWorker.remote(env_name, horizon=50)  # fine: a fresh actor per seed
        probes.append(probe.rollout.remote(weights, seed))
    smoke = RolloutWorker.remote(env_name, horizon=10)
    for _ in range(1):
        probes.append(smoke.rollout.remote(weights, 0))  # fine: range(1) runs once
    return ray.get(values + probes)


def rollouts_for(worker, weights: np.ndarray, seeds: list[int]) -> list[float]:
    refs = [worker.rollout.remote(weights, s) for s in seeds]  # fine: a parameter, class not visible here
    checker = RolloutWorker.remote("CartPole-v1", 200)
    scores = []
    for seed in seeds:
        scores.append(ray.get(checker.rollout.remote(weights, seed)))  # expect: RAY010 (fetched one by one, but one actor would serialize them anyway)
    return ray.get(refs) + scores
