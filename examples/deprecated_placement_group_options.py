"""Placement-group scheduling with the legacy options: `ray-lint check examples/` reports each RAY053 below,
and `ray-lint verify examples/deprecated_placement_group_options.py` replays each with Ray's deprecation
warnings raised as errors, next to the same request through a `PlacementGroupSchedulingStrategy`."""

import ray
from ray import remote
from ray.util.placement_group import placement_group, remove_placement_group


@ray.remote(num_cpus=0.5)
class Shard:
    def __init__(self, index: int) -> None:
        self.index = index

    def load(self, rows: list[int]) -> int:
        return sum(rows) * (self.index + 1)


@remote(num_cpus=0.5)
def merge(totals: list[int]) -> int:
    return sum(totals)


def run(num_shards: int) -> int:
    pg = placement_group([{"CPU": 1}] * num_shards, strategy="PACK")
    ray.get(pg.ready())
    shards = [
        Shard.options(placement_group=pg, placement_group_bundle_index=i).remote(i)  # RAY053: deprecated since Ray 1.10
        for i in range(num_shards)
    ]
    totals = ray.get([shard.load.remote(list(range(10))) for shard in shards])
    ref = merge.options(placement_group=pg, placement_group_capture_child_tasks=True).remote(totals)  # RAY053: a hidden warning
    result = ray.get(ref)
    remove_placement_group(pg)
    return result


if __name__ == "__main__":
    ray.init()
    print(run(2))
