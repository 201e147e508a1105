"""RAY204 report-too-often: `tune.report(...)` / `train.report(...)` on every pass of the inner loop of a
nested loop (every batch), where each call is a result that Tune's driver processes."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import TRAIN_TOKENS, TUNE_TOKENS
from ray_lint.libraries.tune import REPORT_TOKENS, TUNE_WARM_UP, TuneFacts
from ray_lint.python_model import CallSite, FunctionInfo, Loop, scope_within
from ray_lint.rule import Context, Invalid, Rule, Valid


# A Tune sweep over the learning rates `{grid}` whose trials run {epochs} epochs of {batches} batches of
# {batch_ms} ms each, reporting at `{report}` (once per batch, or once per epoch). `timed` covers only `fit()`.
BATCHES_MODEL = """\
import tempfile

def train_fn(config):
    for epoch in range({epochs}):
        for batch in range({batches}):
            time.sleep({batch_ms} / 1000)
            loss = config["lr"] / (1 + epoch)
{report}

tuner = tune.Tuner(
    train_fn,
    param_space={{"lr": tune.grid_search({grid})}},
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
)
"""


class ResultsPerBatchExperiment(Experiment[None]):
    """A Tune sweep of 2 trials, each 4 epochs of 250 batches of 1 ms, that reports after every batch
    against once per epoch; timed from `fit()` on, after a one-trial sweep that sets Tune up in both
    forms. The same work: what A adds is Tune's driver handling 1,000 results per trial instead of 4."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # the trials are the same; A pays for the results Tune's driver handles
    TRIALS = 2
    EPOCHS = 4
    BATCHES = 250
    BATCH_MS = 1

    def plan(self, subject: Subject) -> Plan:
        grid = [round(0.1 * (i + 1), 1) for i in range(self.TRIALS)]
        shared = {"grid": grid, "epochs": self.EPOCHS, "batches": self.BATCHES, "batch_ms": self.BATCH_MS}
        fit = timed("return sorted(result.metrics['loss'] for result in tuner.fit())")
        per_batch = "            tune.report({'loss': loss})"
        per_epoch = "        tune.report({'loss': loss})"
        return Plan(
            Variant("a report per batch", script(TUNE_WARM_UP + BATCHES_MODEL.format(**shared, report=per_batch) + fit, ("tune",))),
            Variant("a report per epoch", script(TUNE_WARM_UP + BATCHES_MODEL.format(**shared, report=per_epoch) + fit, ("tune",))),
            "modelled",
            f"a Tune sweep of {self.TRIALS} trials of {self.EPOCHS} epochs of {self.BATCHES} batches of {self.BATCH_MS} ms",
        )


class ReportTooOften(Rule):
    code = "RAY204"
    name = "report-too-often"
    message = "`report()` runs on every pass of an inner loop: report once per epoch"
    severity = Severity.INFO
    category = "perf"
    preview = True
    tokens = ("report(",)
    also_tokens = TUNE_TOKENS + TRAIN_TOKENS + REPORT_TOKENS
    experiment = ResultsPerBatchExperiment()
    docs = """
## What it does
Finds, in a function trainable handed to `tune.Tuner(...)` / `tune.run(...)` (through
`tune.with_parameters`, `tune.with_resources` or `functools.partial`), a call of the session's
`report` (`ray.tune.report`, `ray.train.report`, `ray.air.session.report`) that runs on every pass of the inner loop of a nested loop in the
same function (`for epoch ...: for batch in loader: report(...)`), with no `if` around it inside
that loop. The inner loop must be a `for` over something other than `range(...)`: a loader, a
dataset's batches, shards. It is a preview rule: a short experiment can afford a report per batch.

## Why is this bad?
Each `report` is a result: the trial sends it to Tune's driver, which runs the searcher, the
scheduler, the stoppers, the progress reporter and every logger callback (JSON, CSV,
TensorBoard) on it, and saves the experiment's state. Reported per batch, thousands of small
results a second queue up there. Tune's FAQ lists "You are reporting results too often" among the
causes of slow runs, and Tune warns "Processing trial results took … s, which may be a
performance bottleneck. Please consider reporting results less frequently to Ray Tune."
(`tune_controller.py`). Each report also increments `training_iteration`, so schedulers such as
ASHA that stop trials by iteration count batches, not epochs.

ray-lint is silent for Ray Train loops run by a trainer alone (per-step reports are the norm
when a step takes seconds, as in LLM fine-tuning), for a report in a single loop (once per epoch, which is the intended use), for
inner loops over `range(...)` and `while` loops (often epochs within stages, not batches),
for a report under an `if` inside the inner loop (`if step % 100 == 0:`), and for a report after
the inner loop. The opposite mistake, reporting only once at the end, disables early stopping.

## Example
```python
def train_fn(config):
    for epoch in range(config["epochs"]):
        for x, y in loader:
            loss = step(x, y)
            tune.report({"loss": loss})
```

## Use instead
```python
def train_fn(config):
    for epoch in range(config["epochs"]):
        for x, y in loader:
            loss = step(x, y)
        tune.report({"loss": loss})
```

## Fix safety
There is no automatic fix: where to report, and what to aggregate over the epoch, is the
author's choice.

## References
- [Tune FAQ: How can I avoid bottlenecks?](https://docs.ray.io/en/latest/tune/faq.html#how-can-i-avoid-bottlenecks)
- [ray.tune.report](https://docs.ray.io/en/latest/tune/api/doc/ray.tune.report.html)
"""

    VALID = [
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        for batch in loader:\n"
            "            loss = step(batch)\n        tune.report({'loss': loss})\n",
            "once per epoch, after the inner loop",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        for i, batch in enumerate(loader):\n"
            "            loss = step(batch)\n            if i % 100 == 0:\n                tune.report({'loss': loss})\n",
            "every 100 batches",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for step in range(100):\n        tune.report({'score': objective(step)})\n",
            "a single loop: one report per iteration is the function API's intended use",
        ),
        Valid(
            "from ray import tune\n\ndef sweep(configs):\n    for config in configs:\n        def train_fn(cfg):\n"
            "            for epoch in range(3):\n                tune.report({'loss': epoch})\n        tune.Tuner(train_fn).fit()\n",
            "the outer loop is in another function",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        for batch in loader:\n"
            "            loss = step(batch)\n        logger.report({'loss': loss})\n",
            "another object's report",
        ),
        Valid(
            "from ray import train\nfrom ray.train.torch import TorchTrainer\n\ndef train_loop(config):\n"
            "    for epoch in range(3):\n        for batch in loader:\n            train.report({'loss': step(batch)})\n\n"
            "TorchTrainer(train_loop).fit()\n",
            "a Ray Train loop run on its own: per-step reports are the norm for long steps (LLM fine-tuning)",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        for batch in loader:\n"
            "            loss = step(batch)\n            if converged(loss):\n                tune.report({'loss': loss})\n                break\n",
            "under an if in the inner loop",
        ),
        Valid(
            "from ray import train\n\ndef train_func(config):\n    for stage in config['stages']:\n        for epoch in range(stage):\n"
            "            train_epoch(loader, model)\n            train.report(validate_epoch(model))\n",
            "the inner loop is over epochs (`range`), each a full pass over the data",
        ),
    ]
    INVALID = [
        Invalid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        for x, y in loader:\n"
            "            loss = step(x, y)\n            tune.report({'loss': loss})\n\ntune.Tuner(train_fn).fit()\n",
            7,
        ),
        Invalid(
            "from ray import train, tune\n\ndef train_loop(config):\n    for epoch in range(config['epochs']):\n"
            "        for batch in dataset.iter_batches():\n            train.report({'loss': fit(batch)})\n\ntune.Tuner(train_loop).fit()\n",
            6,
            note="Ray Train's report, in a Tune trainable",
        ),
        Invalid(
            "import ray.tune\n\ndef objective(config):\n    while not done():\n        for i, batch in enumerate(loader):\n"
            "            ray.tune.report({'score': evaluate(batch)})\n\nray.tune.run(objective)\n",
            6,
            note="a for loop over a loader inside a while loop",
        ),
        Invalid(
            "from ray.tune import Tuner, report\n\ndef train_fn(config):\n    for epoch in range(3):\n        for batch in loader:\n"
            "            with timer():\n                loss = step(batch)\n                report({'loss': loss})\n\nTuner(train_fn).fit()\n",
            8,
            note="in a with block, imported by name",
        ),
        Invalid(
            "from ray import tune\nfrom ray.air import session\n\ndef train_fn(config):\n    for epoch in range(3):\n        for shard in shards:\n"
            "            for batch in shard:\n                session.report({'loss': step(batch)})\n\ntune.Tuner(tune.with_parameters(train_fn, shards=shards)).fit()\n",
            8,
            note="the innermost of three loops, in a trainable wrapped by with_parameters",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        facts = model.analysis(TuneFacts)
        trainables = [run.definition.scope for run in facts.runs if isinstance(run.definition, FunctionInfo)]
        for site in facts.reports:
            if not any(scope_within(site.scope, scope) for scope in trainables):
                continue
            inner = site.loop
            if inner is None or not isinstance(inner.node, cst.For) or not _nested(inner):
                continue
            if _over_range(ctx, inner.node.iter, site):
                continue
            if _guarded(ctx, site, inner):
                continue
            ctx.report(
                site.node,
                f"`{ctx.snippet(site.node.func)}()` runs on every pass of an inner loop (every batch): report once per epoch",
            )


def _nested(loop: Loop) -> bool:
    """Whether a `for` or `while` loop of the same function encloses `loop`."""
    outer = loop.parent
    while outer is not None and not isinstance(outer.node, (cst.For, cst.While)):
        outer = outer.parent
    return outer is not None and outer.scope.function is loop.scope.function


def _over_range(ctx: Context, iterable: cst.BaseExpression, site: CallSite) -> bool:
    """`range(...)` or `enumerate(range(...))`: counted passes (epochs, stages), rarely a loader's batches."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate" and iterable.args:
        iterable = iterable.args[0].value
    return (
        isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"
        and ctx.model.reaching_binding("range", site.scope, site.index) is None
    )


def _guarded(ctx: Context, site: CallSite, loop: Loop) -> bool:
    """Whether an `if` inside the loop's body holds the call: it runs on some passes only."""
    path = ctx.model.path_within(loop.node.body, site.node)
    return path is None or any(isinstance(node, cst.If) for node in path)
