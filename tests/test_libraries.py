"""The library model (`ray_lint.libraries`): datasets, training loops, Tune runs and Serve deployments,
resolved through imports and aliases, and nothing that merely looks like them."""

from __future__ import annotations

import textwrap

import libcst as cst

from ray_lint.libraries.data import UDF_METHODS, DatasetFacts, udf_of
from ray_lint.libraries.serve import ServeFacts
from ray_lint.libraries.train import TrainFacts, rank_guard
from ray_lint.libraries.tune import TuneFacts
from ray_lint.model import SemanticModel


def model_of(source: str) -> SemanticModel:
    return SemanticModel(cst.parse_module(textwrap.dedent(source)))


def dataset_methods(source: str) -> list[str]:
    model = model_of(source)
    return sorted(model.source_of(site.node.func) for site, _ in model.analysis(DatasetFacts).calls(UDF_METHODS))


def test_datasets_are_followed_through_names_chains_and_aliases() -> None:
    source = """
        import ray
        import ray.data as rd
        from ray.data import read_parquet

        ds = ray.data.read_parquet("s3://bucket/table").filter(keep)
        ds = ds.map(parse)
        ds.map_batches(score)
        read_parquet("x").map(parse)
        rd.range(10).flat_map(split)
    """
    assert dataset_methods(source) == [
        "ds.map", "ds.map_batches", 'ray.data.read_parquet("s3://bucket/table").filter', 'rd.range(10).flat_map',
        'read_parquet("x").map',
    ]


def test_things_that_only_look_like_datasets_are_not() -> None:
    source = """
        import ray
        import pandas as pd

        frame = pd.read_parquet("x")
        frame.map(str)
        results = map(str, [1, 2])
        pool.map(work, items)
        ds = other_library.read_parquet("x")
        ds.map_batches(score)
        ds = ds
    """
    assert dataset_methods(source) == []


def test_udf_of_reads_the_first_positional_argument_or_fn() -> None:
    call = cst.parse_expression("ds.map_batches(Predictor, batch_size=32)")
    assert isinstance(call, cst.Call) and cst.Module([]).code_for_node(udf_of(call)) == "Predictor"  # type: ignore[arg-type]
    call = cst.parse_expression("ds.map(fn=parse)")
    assert isinstance(call, cst.Call) and cst.Module([]).code_for_node(udf_of(call)) == "parse"  # type: ignore[arg-type]


TRAIN = """
    import functools
    from ray import train
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer as Trainer

    def build_model():
        return Net()

    def train_func(config):
        model = build_model()
        rank = train.get_context().get_world_rank()
        if rank == 0:
            train.report({"loss": 1.0})
        for epoch in range(3):
            train.report({"epoch": epoch})

    def unused(config):
        pass

    scaling = ScalingConfig(num_workers=4, use_gpu=True)
    Trainer(functools.partial(train_func, lr=0.1), scaling_config=scaling).fit()
"""


def test_train_loops_are_found_through_aliases_partial_and_a_named_scaling_config() -> None:
    model = model_of(TRAIN)
    loops = model.analysis(TrainFacts).loops
    assert [loop.function.node.name.value for loop in loops] == ["train_func"]
    (loop,) = loops
    assert (loop.num_workers, loop.use_gpu) == (4, True)
    assert [helper.node.name.value for helper in loop.helpers] == ["build_model"]
    helper_scope = loop.helpers[0].scope
    assert model.analysis(TrainFacts).loop_of_scope(helper_scope) is loop


def test_rank_guards_cover_only_the_guarded_report() -> None:
    model = model_of(TRAIN)
    (loop,) = model.analysis(TrainFacts).loops
    guarded, every_epoch = model.calls_to("ray.train.report")
    assert rank_guard(model, loop.function, guarded.node) is not None
    assert rank_guard(model, loop.function, every_epoch.node) is None


def test_a_trainer_of_another_library_or_unknown_scaling_is_not_guessed() -> None:
    model = model_of(
        """
        from lightning import Trainer
        from ray.train.torch import TorchTrainer

        def loop(config):
            pass

        Trainer(loop)
        TorchTrainer(train_loop_per_worker=loop, scaling_config=make_scaling())
        """
    )
    (loop,) = model.analysis(TrainFacts).loops
    assert loop.trainer.node.func.value == "TorchTrainer"  # type: ignore[attr-defined]
    assert (loop.num_workers, loop.use_gpu) == (None, None)


def test_tune_runs_and_class_trainables() -> None:
    model = model_of(
        """
        from ray import tune

        class Trainable(tune.Trainable):
            def step(self):
                return {}

        class NotTrainable:
            pass

        tune.Tuner(objective, param_space={"lr": tune.loguniform(1e-4, 1e-1)}).fit()
        tune.run(Trainable, config={"x": 1})
        """
    )
    facts = model.analysis(TuneFacts)
    assert [model.source_of(run.trainable) for run in facts.runs if run.trainable] == ["objective", "Trainable"]
    assert all(run.param_space is not None for run in facts.runs)
    assert [info.node.name.value for info in facts.trainable_classes] == ["Trainable"]


SERVE = """
    from ray import serve
    from ray.serve.handle import DeploymentHandle

    @serve.deployment(num_replicas=2)
    class Ingress:
        def __init__(self, model: DeploymentHandle, retries: int):
            self.model = model
            self.retries = retries
            self.pool = make_pool()

        async def __call__(self, request):
            response = self.model.predict.remote(request)
            other = self.pool.remote(request)
            return response, other

    @serve.deployment
    async def health(request):
        return "ok"

    class Plain:
        async def run(self):
            pass

    app = Ingress.bind(Model.bind(), 3)
"""


def test_deployments_and_handle_responses() -> None:
    model = model_of(SERVE)
    facts = model.analysis(ServeFacts)
    assert sorted(d.name for d in facts.deployments.values()) == ["Ingress", "health"]
    call = next(f for f in model.functions if f.node.name.value == "__call__")
    assert facts.deployment_of_scope(call.scope) is not None
    plain = next(f for f in model.functions if f.node.name.value == "run")
    assert facts.deployment_of_scope(plain.scope) is None
    responses = {
        model.source_of(site.node): facts.is_handle_response(site.node, site.scope, site.index)
        for site in model.calls_by_tail["remote"]
    }
    assert responses == {"self.model.predict.remote(request)": True, "self.pool.remote(request)": False}


def test_every_library_rule_ships_five_tricky_negatives_and_five_findings() -> None:
    from ray_lint.rule import all_rules

    thin = [
        f"{rule.code}: {len(rule.VALID)} valid, {len(rule.INVALID)} invalid"
        for rule in all_rules() if int(rule.code[3:]) >= 100 and (len(rule.VALID) < 5 or len(rule.INVALID) < 5)
    ]
    assert thin == []


def test_ray_train_models_combine_into_one_program_that_keeps_each_parts_evidence_apart() -> None:
    from ray_lint.rule import rule_by_code_or_name

    experiments = [rule.experiment for rule in map(rule_by_code_or_name, ("RAY212", "RAY213", "RAY214", "RAY215")) if rule is not None]
    parts = [experiment.model(None).part for experiment in experiments]  # type: ignore[union-attr]
    assert len(parts) == 4 and all(part is not None and part.program is parts[0].program for part in parts), parts
    alone = parts[0].program((parts[0].text,)).source
    shared = parts[0].program(tuple(part.text for part in parts)).source
    for source in (alone, shared):
        compile(source, "<model>", "exec")
    assert "__ray_lint_evidence__ = forms_of(0, evidence_of_0)" in alone  # one part: the evidence of a joint plan
    assert shared.count("TorchTrainer(") == 1 and "__ray_lint_evidence__ = {\"parts\": [forms_of(0, evidence_of_0)" in shared
    defined = [line.split("(")[0] for line in shared.splitlines() if line.startswith("def ")]
    assert len(defined) == len(set(defined)) and "def fixed_form_3" in defined, defined
