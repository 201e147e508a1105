"""RAY211 report-on-rank0-only: `ray.train.report` is called only under a rank guard, so the other workers never reach it."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import TRAIN_TOKENS, TRAINER_CALL_TOKENS
from ray_lint.libraries.train import ONE_TRAIN_RUN, QUICK_CONTROLLER, TORCH_TRAINER_LIBRARIES, TRAIN_RUN_TIMEOUT_S, TrainFacts, rank_guard
from ray_lint.model import SemanticModel
from ray_lint.python_model import iter_subtree
from ray_lint.rule import Context, Invalid, Rule, Valid

REPORTS = frozenset({"ray.train.report", "ray.train.v2.api.train_fn_utils.report"})
# How long after a worker finished its loop `fit()` may take to return before the run counts as hung: a
# finished run returns within a second, once the controller (`QUICK_CONTROLLER`) sees every worker done.
HANG_S = 8
# Both forms in one 2-worker CPU TorchTrainer run (`Plan.joint`; one start of Ray Train serves both): each
# worker reports twice, the fixed form, and leaves a file in FINISHED/b; then reports twice more on rank 0
# only, the flagged form, and leaves a file in FINISHED/a. `fit()` runs in a daemon thread: the driver waits
# for a worker to finish the flagged loop, then up to HANG_S for `fit()`; a run that never returns is torn
# down with the job when the variant's process ends.
UNEVEN_REPORTS_MODEL = QUICK_CONTROLLER + """\
import tempfile
import threading


FINISHED = tempfile.mkdtemp()

def train_func():
    rank = ray.train.get_context().get_world_rank()
    for form, reports in (("b", True), ("a", rank == 0)):
        for epoch in range(2):
            if reports:
                ray.train.report({{"form": form, "epoch": epoch}})
        os.makedirs(os.path.join(FINISHED, form), exist_ok=True)
        open(os.path.join(FINISHED, form, str(rank)), "w").close()

def finished(form):
    folder = os.path.join(FINISHED, form)
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

trainer = train.torch.TorchTrainer(
    train_func,
    scaling_config=train.ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={{"CPU": 0.5}}),
    run_config=train.RunConfig(storage_path=tempfile.mkdtemp()),
)
outcome = []
def fit():
    try:
        outcome.append(trainer.fit())
    except BaseException as error:
        outcome.append(error)

running = threading.Thread(target=fit, daemon=True)
running.start()
deadline = time.time() + {start_s}
while running.is_alive() and not finished("a") and time.time() < deadline:
    time.sleep(0.5)
if not finished("a"):
    raise RuntimeError(f"no worker finished its loop: {{outcome or 'fit() still starting'}}")
fixed = {{"right": "every worker reported twice and went on"}} if finished("b") == ["0", "1"] else None
running.join({hang_s})
if running.is_alive():
    flagged = {{"wrong": f"rank {{', '.join(finished('a'))}} finished its loop; `fit()` had not returned {hang_s} s later"}}
elif isinstance(outcome[0], BaseException):
    raise outcome[0]
else:
    flagged = {{"right": "every worker reported; `fit()` returned"}}
__ray_lint_evidence__ = {{"a": flagged, "b": fixed}}
"""


class UnevenReportsExperiment(ReproductionExperiment[None]):
    """Two CPU workers report twice each, then twice more on rank 0 only, in one run (one start of Ray
    Train serves both forms): every report goes through in the first loop; after the second, `fit()` does
    not return."""

    facts_type = type(None)
    least_timeout_s = TRAIN_RUN_TIMEOUT_S + HANG_S

    def model(self, subject: Subject) -> Plan:
        both = script(UNEVEN_REPORTS_MODEL.format(start_s=TRAIN_RUN_TIMEOUT_S - 30, hang_s=HANG_S), TORCH_TRAINER_LIBRARIES)
        return Plan(
            Variant("report on rank 0 only", ""),
            Variant("report on every rank", ""),
            "modelled",
            f"a 2-worker CPU TorchTrainer whose workers report twice each, then twice on rank 0 only, in one run; "
            f"`fit()` given {HANG_S} s after a worker finishes",
            joint=Variant(ONE_TRAIN_RUN, both),
        )


class ReportOnRank0Only(Rule):
    code = "RAY211"
    name = "report-on-rank0-only"
    message = "`ray.train.report` is called only on some workers: training hangs at the report"
    severity = Severity.ERROR
    category = "correctness"
    tokens = ("report",)
    also_tokens = TRAIN_TOKENS
    anchor_tokens = TRAINER_CALL_TOKENS
    experiment = UnevenReportsExperiment()
    docs = """
## What it does
Finds a `ray.train.report(...)` call, in a function handed to a Ray Train trainer, that sits in
an `if` whose test reads a rank (`if world_rank == 0:`, `if ray.train.get_context().get_world_rank() == 0:`,
`if local_rank != 0:`) when that `if` has no `else` branch that reports too.

## Why is this bad?
`ray.train.report` is a barrier across all workers: the docs of Ray 2.60 require every worker to
call it the same number of times. In Ray Train v2 (the default in 2.60) each call first agrees on
the checkpoint folder through `broadcast_from_rank_zero` on a synchronization actor, whose
timeout is unset by default (`RAY_TRAIN_COLLECTIVE_TIMEOUT_S`): rank 0 waits there for ranks that
never come, and `trainer.fit()` never returns. Checked with Ray 2.60 on 2 CPU workers: rank 1
finished its loop, and `fit()` had not returned 75 s later.

Only the checkpoint is meant for rank 0. ray-lint is silent for the documented pattern, where
every worker reports and the others pass `checkpoint=None` (an `else` branch that reports, or
`checkpoint=ckpt if rank == 0 else None`), and for reports outside rank guards.

## Example
```python
if ray.train.get_context().get_world_rank() == 0:
    ray.train.report(metrics, checkpoint=checkpoint)
```

## Use instead
```python
if ray.train.get_context().get_world_rank() == 0:
    ray.train.report(metrics, checkpoint=checkpoint)
else:
    ray.train.report(metrics, checkpoint=None)
```

## Fix safety
No fix offered.

## References
- [`ray.train.report`](https://docs.ray.io/en/latest/train/api/doc/ray.train.report.html)
- [Saving and loading checkpoints](https://docs.ray.io/en/latest/train/user-guides/checkpoints.html)
"""

    VALID = [
        Valid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    if ray.train.get_context().get_world_rank() == 0:\n"
            "        ray.train.report({'loss': 1.0}, checkpoint=config['ckpt'])\n    else:\n"
            "        ray.train.report({'loss': 1.0}, checkpoint=None)\n\n"
            "TorchTrainer(train_func).fit()\n",
            "every worker reports; only rank 0 passes a checkpoint",
        ),
        Valid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    rank = ray.train.get_context().get_world_rank()\n"
            "    ray.train.report({'loss': 1.0}, checkpoint=config['ckpt'] if rank == 0 else None)\n\n"
            "TorchTrainer(train_func).fit()\n",
            "the rank decides the checkpoint, not the call",
        ),
        Valid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    if ray.train.get_context().get_world_rank() == 0:\n        print('epoch done')\n"
            "    ray.train.report({'loss': 1.0})\n\n"
            "TorchTrainer(train_func).fit()\n",
            "only the logging is guarded",
        ),
        Valid(
            "import ray.train\n\ndef evaluate(rank):\n    if rank == 0:\n        ray.train.report({'acc': 1.0})\n",
            "not a function handed to a trainer",
        ),
        Valid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    if config['smoke_test']:\n        ray.train.report({'loss': 0.0})\n\n"
            "TorchTrainer(train_func).fit()\n",
            "a guard that every worker takes alike",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    if ray.train.get_context().get_world_rank() == 0:\n"
            "        ray.train.report({'loss': 1.0}, checkpoint=config['ckpt'])\n\n"
            "TorchTrainer(train_func).fit()\n",
            6,
        ),
        Invalid(
            "from ray import train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    world_rank = train.get_context().get_world_rank()\n    for epoch in range(3):\n"
            "        if world_rank == 0:\n            train.report({'epoch': epoch})\n\n"
            "TorchTrainer(train_loop_per_worker=train_func).fit()\n",
            8,
        ),
        Invalid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    local_rank = ray.train.get_context().get_local_rank()\n"
            "    if local_rank != 0:\n        return\n    else:\n        ray.train.report({'loss': 1.0})\n\n"
            "TorchTrainer(train_func).fit()\n",
            9,
            note="in the `else` of a guard that leaves on the other ranks",
        ),
        Invalid(
            "from ray.train import report, get_context\nfrom ray.train.torch import TorchTrainer\n\n"
            "def save(metrics):\n    if get_context().get_world_rank() == 0:\n        report(metrics)\n\n"
            "def train_func(config):\n    save({'loss': 1.0})\n\n"
            "TorchTrainer(train_func).fit()\n",
            6,
            note="in a helper the loop calls",
        ),
        Invalid(
            "import ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    ctx = ray.train.get_context()\n    if ctx.get_world_rank() == 0 and config['save']:\n"
            "        ray.train.report({'loss': 1.0})\n\n"
            "TorchTrainer(train_func).fit()\n",
            7,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        facts = model.analysis(TrainFacts)
        for site in (site for name in REPORTS for site in model.calls_to(name)):
            loop = facts.loop_of_scope(site.scope)
            if loop is None:
                continue
            function = next(f for f in (loop.function, *loop.helpers) if f.scope is site.scope or _holds(f.node, site.node))
            guard = rank_guard(model, function, site.node)
            if guard is not None and not _reports_in_other_branch(model, guard, site.node):
                ctx.report(site.node, f"Only ranks passing `{ctx.snippet(guard.test, 40)}` reach this report: the rest hang")


def _holds(function: cst.FunctionDef, node: cst.CSTNode) -> bool:
    return any(inner is node for inner in iter_subtree(function))


def _reports_in_other_branch(model: SemanticModel, guard: cst.If, report: cst.Call) -> bool:
    """Whether the other branch of the guard (body or `else`) also calls `report`."""
    in_body = any(node is report for node in iter_subtree(guard.body))
    other = guard.orelse if in_body else guard.body
    if other is None:
        return False
    sites = (model.call_site(node) for node in iter_subtree(other) if isinstance(node, cst.Call))
    return any(site is not None and model.call_name(site) in REPORTS for site in sites)
