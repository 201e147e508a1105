"""RAY205 trainable-spawns-unreserved-ray-work: a Tune trainable that starts Ray tasks or actors needing
CPUs or GPUs, when each trial reserves one bundle only, which the trainable itself fills."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import TUNE_RUN_TOKENS, TUNE_TOKENS, defined_function_or_class
from ray_lint.libraries.tune import TuneFacts, TuneRun
from ray_lint.model import RemoteDef, SemanticModel, Submission
from ray_lint.python_model import (
    ClassInfo,
    FunctionInfo,
    Scope,
    literal_number,
    scope_within,
)
from ray_lint.rule import Context, Invalid, Rule, Valid

PLACEMENT_GROUP_FACTORIES = frozenset({
    "ray.tune.PlacementGroupFactory", "ray.tune.execution.placement_groups.PlacementGroupFactory",
})
# Options with which a task or actor says where it goes: outside the trial's placement group
# (`placement_group=None`, a `scheduling_strategy`), or into a bundle the user picked.
PLACEMENT_OPTIONS = ("scheduling_strategy", "placement_group")
MAX_HELPER_DEPTH = 2  # how deep the trainable's calls to functions of its module are followed

TRIAL_MODEL = """\
import tempfile

@ray.remote(num_cpus=1)
def preprocess(x):
    return x * 2

def trainable(config):
    tune.report({{"value": ray.get(preprocess.remote(config["x"]), timeout=20)}})

tuner = tune.Tuner(
    {trainable},
    param_space={{"x": 1}},
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
)
results = tuner.fit()
if results.errors:
    raise results.errors[0]
"""


class UnreservedChildExperiment(ReproductionExperiment[None]):
    """One Tune trial whose trainable submits a 1-CPU task: the trial reserving one bundle (Tune's
    default, filled by the trainable itself), and reserving a second bundle for the task."""

    facts_type = type(None)
    shares_driver = True
    expected = r"No trial resources are available for launching the task"

    def model(self, subject: Subject) -> Plan:
        reserved = 'tune.with_resources(trainable, tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]))'
        return Plan(
            Variant("one bundle", script(TRIAL_MODEL.format(trainable="trainable"), ("tune",))),
            Variant("a second bundle", script(TRIAL_MODEL.format(trainable=reserved), ("tune",))),
            "modelled",
            "a Tune trial whose trainable submits a 1-CPU task, with one bundle per trial and with two",
        )


def _single_bundle(model: SemanticModel, run: TuneRun) -> bool:
    """Whether each trial certainly reserves one bundle only: Tune's default (no resources given), a dict
    of resources, or a `PlacementGroupFactory` of a one-item list. A function, a name or a list the code
    does not show may reserve more."""
    if run.resources is None:
        return True
    expr, scope, at = run.resources
    if isinstance(expr, cst.Name):
        binding = model.sole_assignment(expr.value, scope, at)
        if binding is None or binding.value is None:
            return False
        expr, scope, at = binding.value, binding.scope, binding.index
    if isinstance(expr, cst.Dict):
        return True
    if isinstance(expr, cst.Call) and model.qualified_name(expr.func, scope, at) in PLACEMENT_GROUP_FACTORIES and expr.args:
        bundles = expr.args[0].value
        return isinstance(bundles, cst.List) and len(bundles.elements) == 1
    return False


def _needs_resources(model: SemanticModel, remote: RemoteDef, kind: str) -> bool:
    """Whether the task or actor certainly asks for CPUs or GPUs and says nothing of where it goes: a task
    takes 1 CPU by default; an actor only what its options say (it holds no CPU by default)."""
    if remote.options_unknowable or any(True for option in PLACEMENT_OPTIONS for _ in remote.option_values(option)):
        return False
    if model.gpu_request(remote) == "requested":
        return True
    if kind == "task":
        share = model.cpu_share(remote)
        return share is not None and share > 0
    return any((literal_number(value) or 0) > 0 for value in remote.option_values("num_cpus"))


class _ChildWork:
    """The submissions a trainable makes, in its own body and in the module's functions it calls."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    def submissions(self, trainable: FunctionInfo | ClassInfo) -> Iterator[Submission]:
        seen: set[int] = set()
        yield from self._in(trainable.scope, seen, 0)

    def _in(self, scope: Scope, seen: set[int], depth: int) -> Iterator[Submission]:
        if id(scope) in seen or depth > MAX_HELPER_DEPTH:
            return
        seen.add(id(scope))
        for site in self.model.calls:
            if not scope_within(site.scope, scope):
                continue
            submission = self.model.submission(site.node)
            if submission is not None:
                if submission.kind in ("task", "actor-create"):
                    yield submission
                continue
            if isinstance(site.node.func, cst.Name):
                helper = defined_function_or_class(self.model, site.node.func, site.scope, site.index)
                if isinstance(helper, FunctionInfo):
                    yield from self._in(helper.scope, seen, depth + 1)


class TrainableSpawnsUnreservedRayWork(Rule):
    code = "RAY205"
    name = "trainable-spawns-unreserved-ray-work"
    message = "A Tune trainable starts Ray tasks or actors that its trial's placement group has no room for"
    severity = Severity.ERROR
    category = "resource"
    tokens = (".remote(",)
    also_tokens = TUNE_TOKENS
    anchor_tokens = TUNE_RUN_TOKENS
    experiment = UnreservedChildExperiment()
    docs = """
## What it does
Finds a trainable passed to `tune.Tuner(...)` or `tune.run(...)` (a function or a
`tune.Trainable` class of the module, through `tune.with_parameters`, `tune.with_resources` and
`functools.partial`) that submits a Ray task, or creates an actor, asking for CPUs or GPUs
(directly or in a function of the module it calls), while each trial reserves a single bundle:
no resources given (Tune's default), `tune.with_resources(fn, {"cpu": 2})` or
`resources_per_trial={...}` with a dict, or a `PlacementGroupFactory` of one bundle.

## Why is this bad?
Tune starts each trial in a placement group and its trainable in the group's first bundle, with
`placement_group_capture_child_tasks=True` (`ray/air/execution/resources/placement_group.py`):
every task and actor the trainable starts is scheduled inside the same group. The trainable
fills the first bundle, so there is no room for them, however idle the cluster. Ray 2.60 checks
the first such submission and fails the trial with "RuntimeError: No trial resources are
available for launching the task `...`. To resolve this, specify the Tune option:
resources_per_trial=tune.PlacementGroupFactory([...] + [...] * N)"; where that check does not
apply, the task waits forever. The fix is to reserve the children's resources as extra bundles
of the trial (`tune.with_resources(fn, tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]))`),
or to schedule them outside the group on purpose (`placement_group=None` or a
`scheduling_strategy`).

ray-lint is silent when the trial's resources are a `PlacementGroupFactory` of more than one
bundle, or come from a function, a variable or a list it cannot read; when the task or actor
sets `scheduling_strategy` or `placement_group`, or asks for nothing (`num_cpus=0`; an actor
without `num_cpus` holds no CPU); for actor method calls (the actor already exists); and for a
trainable that runs a `TorchTrainer` (Ray Train V2 starts its own controller with no CPUs and
its own placement group for its workers). Ray Data inside a trainable is not reported: Ray
Data 2.60 schedules its tasks with `SPREAD`, outside the trial's group.

## Example
```python
def trainable(config):
    refs = [augment.remote(shard) for shard in shards]
    ...

tuner = tune.Tuner(trainable, param_space=space)
```

## Use instead
```python
trainable = tune.with_resources(trainable, tune.PlacementGroupFactory([{"CPU": 1}] + [{"CPU": 1}] * 2))
tuner = tune.Tuner(trainable, param_space=space)
```

## Fix safety
There is no automatic fix: how many bundles the children need depends on how many run at once.

## References
- [Tune FAQ: why is my training stuck (pending actors or tasks)](https://docs.ray.io/en/latest/tune/faq.html)
- [Tune: a guide to parallelism and resources](https://docs.ray.io/en/latest/tune/tutorials/tune-resources.html)
- [Placement groups: child tasks and actors](https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html)
"""

    VALID = [
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\ndef trainable(config):\n"
            "    tune.report({'v': ray.get(work.remote(1))})\n\n"
            "fn = tune.with_resources(trainable, tune.PlacementGroupFactory([{'CPU': 1}, {'CPU': 1}]))\n"
            "tune.Tuner(fn).fit()\n",
            "a second bundle reserved for the task",
        ),
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\ndef trainable(config):\n"
            "    tune.report({'v': ray.get(work.options(placement_group=None).remote(1))})\n\ntune.Tuner(trainable).fit()\n",
            "scheduled outside the trial's group on purpose",
        ),
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote(num_cpus=0)\ndef log_metrics(x):\n    return x\n\n"
            "def trainable(config):\n    log_metrics.remote(config)\n\ntune.Tuner(trainable).fit()\n",
            "a task that asks for no CPU",
        ),
        Valid(
            "import ray\nfrom ray import tune\nfrom ray.train.torch import TorchTrainer\n\ndef train_loop(config):\n    pass\n\n"
            "def trainable(config):\n    TorchTrainer(train_loop, train_loop_config=config).fit()\n\ntune.Tuner(trainable).fit()\n",
            "Train V2 interop: the trainer makes its own placement group",
        ),
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\ndef trainable(config):\n"
            "    tune.report({'v': ray.get(work.remote(1))})\n\ntune.Tuner(tune.with_resources(trainable, resources_for)).fit()\n",
            "resources from a function the rule does not read",
        ),
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote\nclass Cache:\n    def get(self):\n        return 1\n\n"
            "def trainable(config):\n    cache = Cache.remote()\n    tune.report({'v': ray.get(cache.get.remote())})\n\n"
            "tune.Tuner(trainable).fit()\n",
            "an actor with no num_cpus holds no CPU",
        ),
        Valid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\ndef trainable(config):\n"
            "    return config\n\nrefs = [work.remote(i) for i in range(4)]\ntune.Tuner(trainable).fit()\n",
            "the driver submits the tasks, not the trainable",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\ndef trainable(config):\n"
            "    tune.report({'v': ray.get(work.remote(1))})\n\ntune.Tuner(trainable).fit()\n",
            9,
        ),
        Invalid(
            "import ray\nfrom ray import tune\n\n@ray.remote(num_gpus=1)\nclass Evaluator:\n    pass\n\n"
            "def trainable(config):\n    evaluator = Evaluator.remote()\n\n"
            "tune.Tuner(tune.with_resources(trainable, {'cpu': 2, 'gpu': 1})).fit()\n",
            9,
            note="a dict of resources is one bundle, and the trainable holds it",
        ),
        Invalid(
            "import ray\nfrom ray import tune\n\n@ray.remote(num_cpus=2)\ndef simulate(seed):\n    return seed\n\n"
            "def rollouts(n):\n    return ray.get([simulate.remote(i) for i in range(n)])\n\n"
            "def trainable(config):\n    tune.report({'r': sum(rollouts(4))})\n\n"
            "tune.run(trainable, config={'lr': 0.1}, resources_per_trial=tune.PlacementGroupFactory([{'CPU': 1}]))\n",
            9,
            note="in a helper the trainable calls",
        ),
        Invalid(
            "import ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\nclass Sweep(tune.Trainable):\n"
            "    def step(self):\n        return {'v': ray.get(work.remote(1))}\n\ntune.Tuner(Sweep).fit()\n",
            10,
            note="a class trainable",
        ),
        Invalid(
            "import functools\nimport ray\nfrom ray import tune\n\n@ray.remote\ndef work(x):\n    return x\n\n"
            "def trainable(config, data):\n    tune.report({'v': ray.get(work.remote(data))})\n\n"
            "fn = tune.with_parameters(trainable, data=1)\ntune.Tuner(fn, param_space={'lr': 0.1}).fit()\n",
            10,
            note="through with_parameters bound to a name",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        work = _ChildWork(model)
        reported: set[int] = set()
        for run in model.analysis(TuneFacts).runs:
            if run.definition is None or not _single_bundle(model, run):
                continue
            for submission in work.submissions(run.definition):
                remote = submission.remote
                if remote is None or id(submission.call) in reported:
                    continue
                kind = "task" if submission.kind == "task" else "actor"
                if not _needs_resources(model, remote, kind):
                    continue
                reported.add(id(submission.call))
                ctx.report(
                    submission.call,
                    f"`{remote.name}` {kind} started in a Tune trial that reserves one bundle, which the trainable fills",
                )
