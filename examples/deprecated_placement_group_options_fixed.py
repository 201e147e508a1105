"""The same placement-group scheduling through `scheduling_strategy`: ray-lint reports nothing here."""

import ray
from ray import remote
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


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
        Shard.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)
        ).remote(i)
        for i in range(num_shards)
    ]
    totals = ray.get([shard.load.remote(list(range(10))) for shard in shards])
    strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_capture_child_tasks=True)
    result = ray.get(merge.options(scheduling_strategy=strategy).remote(totals))
    remove_placement_group(pg)
    return result


if __name__ == "__main__":
    ray.init()
    print(run(2))
