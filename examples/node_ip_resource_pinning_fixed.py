"""The same work placed by node id, softly, so that Ray can run it elsewhere: ray-lint reports nothing here."""

import time

import ray
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup, placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote
class FeatureCache:
    def __init__(self) -> None:
        self.features: dict[str, list[float]] = {}

    def get(self, key: str) -> list[float]:
        time.sleep(0.1)  # stands in for a read from the node's local disk
        return self.features.setdefault(key, [float(len(key))])


def start_cache() -> ActorHandle:
    node_id = ray.get_runtime_context().get_node_id()
    strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)
    return FeatureCache.options(scheduling_strategy=strategy).remote()


def reserve_trainers(count: int) -> PlacementGroup:
    return placement_group([{"CPU": 0.5} for _ in range(count)], strategy="PACK")


if __name__ == "__main__":
    ray.init()
    cache = start_cache()
    print(ray.get([cache.get.remote(key) for key in ("a", "bb", "ccc")]))
    group = reserve_trainers(2)
    print(ray.get(group.ready(), timeout=5))
