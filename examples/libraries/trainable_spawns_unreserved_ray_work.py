"""A Tune sweep whose trainable fans out Ray tasks: `ray-lint check examples/libraries/` reports the RAY205
below, and `ray-lint verify examples/libraries/trainable_spawns_unreserved_ray_work.py` shows the trial fail."""

import tempfile

import ray
from ray import tune


@ray.remote(num_cpus=1)
def augment(shard: list[float], factor: float) -> list[float]:
    return [x * factor for x in shard]


def evaluate(config: dict) -> None:
    shards = [[1.0, 2.0], [3.0, 4.0]]
    refs = [augment.remote(shard, config["factor"]) for shard in shards]  # RAY205: no room in the trial's bundle
    augmented = ray.get(refs, timeout=30)
    tune.report({"score": sum(sum(shard) for shard in augmented)})


def main() -> None:
    tuner = tune.Tuner(
        evaluate,
        param_space={"factor": tune.grid_search([0.5, 2.0])},
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
    )
    results = tuner.fit()
    for error in results.errors:
        print("trial failed:", str(error).split("RuntimeError: ")[-1].splitlines()[0])
    print("scores:", [result.metrics.get("score") for result in results])


if __name__ == "__main__":
    ray.init()
    main()
