"""The same sweep with a second bundle reserved in each trial for the tasks its trainable starts:
`ray-lint check` reports nothing, and both trials finish."""

import tempfile

import ray
from ray import tune


@ray.remote(num_cpus=1)
def augment(shard: list[float], factor: float) -> list[float]:
    return [x * factor for x in shard]


def evaluate(config: dict) -> None:
    shards = [[1.0, 2.0], [3.0, 4.0]]
    refs = [augment.remote(shard, config["factor"]) for shard in shards]  # run in the trial's second bundle
    augmented = ray.get(refs, timeout=30)
    tune.report({"score": sum(sum(shard) for shard in augmented)})


def main() -> None:
    # One CPU for the trainable, one for its tasks (they take turns in it).
    trainable = tune.with_resources(evaluate, tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]))
    tuner = tune.Tuner(
        trainable,
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
