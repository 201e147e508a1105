"""Work pinned to this node by its `node:<ip>` resource: `ray-lint check examples/` reports each RAY048 below, and
`ray-lint verify examples/node_ip_resource_pinning.py` shows pinned work wait once its node is gone."""

import time

import ray
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup, placement_group


@ray.remote
class FeatureCache:
    def __init__(self) -> None:
        self.features: dict[str, list[float]] = {}

    def get(self, key: str) -> list[float]:
        time.sleep(0.1)  # stands in for a read from the node's local disk
        return self.features.setdefault(key, [float(len(key))])


def start_cache() -> ActorHandle:
    ip = ray.util.get_node_ip_address()
    return FeatureCache.options(resources={f"node:{ip}": 0.01}).remote()  # RAY048: restarts can only wait for this IP


def reserve_trainers(ip: str, count: int) -> PlacementGroup:
    return placement_group([{"CPU": 0.5, f"node:{ip}": 0.01} for _ in range(count)])  # RAY048: one node or none


if __name__ == "__main__":
    ray.init()
    cache = start_cache()
    print(ray.get([cache.get.remote(key) for key in ("a", "bb", "ccc")]))
    group = reserve_trainers(ray.util.get_node_ip_address(), 2)
    print(ray.get(group.ready(), timeout=5))
