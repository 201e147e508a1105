"""Batch scoring on a single workstation: resource requests that Ray refuses, that name the wrong
resource, that the local cluster can never satisfy, or that pin work to one node's IP.

Findings: RAY047 a negative `num_cpus`, a fractional `num_gpus` above 1, a Neuron fraction and a TPU
count Ray refuses; RAY081 `"num_gpus"` / `"memory"` / `"cpu"` keys in `resources=` and a lowercase
placement-group bundle; RAY050 requests above what `ray.init(num_cpus=8, num_gpus=1, ...)` starts
(CPUs, an undeclared custom resource, bundles that together exceed the node); RAY048 a `node:<ip>`
pin. Traps: fractions below one GPU, whole values written as floats, a custom resource the init
declares, `"memory"` in a bundle, the head-node marker, a `.options(...)` that always overrides the
decorator, a test that expects Ray's error, Ray Tune's lowercase keys and Flower's `client_resources`.
"""

from __future__ import annotations

import glob

import pyarrow.parquet as pq
import pytest
import ray
from ray import tune
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

SHARDS = "/data/scoring/*.parquet"
SCRATCH = {"scratch_ssd": 1}


@ray.remote(num_cpus=2, memory=4 * 1024**3)
def score_shard(path: str) -> int:
    table = pq.read_table(path, columns=["text"])
    return sum(len(text) for text in table.column("text").to_pylist())


@ray.remote(num_cpus=-1)  # expect: RAY047
def compact(paths: list[str]) -> int:
    return len(paths)


@ray.remote(num_gpus=1.5)  # expect: RAY047
class Reranker:
    def rerank(self, rows: list[str]) -> list[str]:
        return sorted(rows)


@ray.remote(num_gpus=0.25)
class Encoder:
    def encode(self, rows: list[str]) -> list[int]:
        return [len(r) for r in rows]


@ray.remote(num_gpus=1.0, resources={"TPU": 4.0})
class Distiller:
    def distill(self, rows: list[str]) -> list[str]:
        return rows


@ray.remote(resources={"neuron_cores": 0.5})  # expect: RAY047
def compile_graph(name: str) -> str:
    return name


@ray.remote(resources={"num_gpus": 1})  # expect: RAY081
def embed(texts: list[str]) -> list[int]:
    return [len(t) for t in texts]


@ray.remote(num_cpus=1, resources=SCRATCH)
def spill(path: str) -> str:
    return path


@ray.remote(num_cpus=16)  # expect: RAY050
def reindex(paths: list[str]) -> int:
    return len(paths)


@ray.remote(num_cpus=32)  # fine: every submission below sets num_cpus again
def merge(parts: list[int]) -> int:
    return sum(parts)


@ray.remote(num_cpus=1, resources={"nvme_pool": 1})  # expect: RAY050
def warm_cache(path: str) -> str:
    return path


@ray.remote(resources={"node:__internal_head__": 0.001})
class MetricsSink:
    def record(self, value: int) -> None:
        print(value)


def start_feature_store():
    ip = ray.util.get_node_ip_address()
    return Reranker.options(resources={f"node:{ip}": 0.01}).remote()  # expect: RAY048


def start_pinned_cache(node_id: str):
    return Distiller.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)).remote()


def score_all() -> int:
    paths = sorted(glob.glob(SHARDS))
    refs = [score_shard.remote(p) for p in paths]
    refs += [score_shard.options(resources={"memory": 2 * 1024**3}).remote(p) for p in paths[:2]]  # expect: RAY081
    refs.append(spill.options(resources={"cpu": 2, "scratch_ssd": 1}).remote(paths[0]))  # expect: RAY081
    parts = ray.get(refs)
    return ray.get(merge.options(num_cpus=4).remote(parts))


def reserve_groups():
    fitting = placement_group([{"CPU": 2, "memory": 2 * 1024**3}, {"CPU": 2, "GPU": 1}])
    lowercase = placement_group([{"cpu": 1}])  # expect: RAY081
    too_big = placement_group([{"CPU": 4}, {"CPU": 4}, {"CPU": 4}])  # expect: RAY050
    return fitting, lowercase, too_big


def tune_ranker():
    trainable = tune.with_resources(lambda config: None, {"cpu": 2, "gpu": 1})
    return tune.Tuner(trainable).fit()


def simulate_clients(start_simulation, client_fn):
    start_simulation(client_fn=client_fn, num_clients=4, client_resources={"num_gpus": 0.25, "num_cpus": 1})


def test_tpu_count_is_refused() -> None:
    with pytest.raises(ValueError):
        ray.remote(resources={"TPU": 3})(compile_graph)


def main() -> None:
    ray.init(num_cpus=8, num_gpus=1, resources={"scratch_ssd": 2})
    distiller = Distiller.options(resources={"TPU": 3}).remote()  # expect: RAY047
    sink = MetricsSink.remote()
    encoder = Encoder.remote()
    print(score_all(), reserve_groups(), start_feature_store())
    ray.get([sink.record.remote(1), encoder.encode.remote(["a"]), distiller.distill.remote(["b"])])


if __name__ == "__main__":
    main()
