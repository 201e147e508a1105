"""RAY206 report-in-trainable-class: `tune.report(...)` in a method of a `tune.Trainable` subclass, whose
results are what `step()` returns."""

from __future__ import annotations

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import TUNE_TOKENS
from ray_lint.libraries.tune import REPORT_TOKENS, TuneFacts
from ray_lint.rule import Context, Invalid, Rule, Valid

# A class trainable run by a one-trial `Tuner` for 2 iterations; `{report}` is the line that hands over the
# metric `score`, `{result}` what `step()` returns. The run's last result says whether the metric arrived.
CLASS_TRAINABLE_MODEL = """\
import tempfile

class Counter(tune.Trainable):
    def setup(self, config):
        self.count = 0

    def step(self):
        self.count += 1
        {report}
        return {result}

    def save_checkpoint(self, checkpoint_dir):
        return {{"count": self.count}}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]

tuner = tune.Tuner(
    Counter,
    tune_config=tune.TuneConfig(num_samples=1),
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), stop={{"training_iteration": 2}}, verbose=0),
)
metrics = tuner.fit()[0].metrics
if "score" not in metrics:
    __ray_lint_evidence__ = {{"wrong": "the metric `score` passed to tune.report is missing from the trial's results "
                             f"(Tune recorded only {{sorted(k for k in metrics if k != 'config')[:6]}}...)"}}
else:
    __ray_lint_evidence__ = {{"right": f"score={{metrics['score']}} recorded"}}
"""


class ReportInTrainableClassExperiment(ReproductionExperiment[None]):
    """A class trainable that reports its metric with `tune.report(...)` from `step()`, against the same
    class returning the metric from `step()`; run by Tune for 2 iterations. In Ray 2.60 `tune.report`
    outside a function trainable's session only warns (in the trial's log) and returns None: the metric
    never reaches the results, which is what A shows."""

    facts_type = type(None)
    shares_driver = True
    least_timeout_s = 120.0  # a Tune run: its controller and a trial actor start first

    def model(self, subject: Subject) -> Plan:
        reported = CLASS_TRAINABLE_MODEL.format(report='tune.report({"score": self.count})', result="{}")
        returned = CLASS_TRAINABLE_MODEL.format(report="pass", result='{"score": self.count}')
        return Plan(
            Variant("tune.report in step()", script(reported, ("tune",))),
            Variant("metrics returned by step()", script(returned, ("tune",))),
            "modelled",
            "a class trainable run by Tune for 2 iterations, reporting the metric `score`",
        )


class ReportInTrainableClass(Rule):
    code = "RAY206"
    name = "report-in-trainable-class"
    message = "`report()` in a `tune.Trainable` subclass is dropped: return the metrics from `step()`"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("report(",)
    also_tokens = TUNE_TOKENS + REPORT_TOKENS
    anchor_tokens = ("Trainable",)  # a subclass of `tune.Trainable` is where it reports
    experiment = ReportInTrainableClassExperiment()
    docs = """
## What it does
Finds a call of the session's `report` (`ray.tune.report`, `ray.train.report`, or the old
`ray.air.session.report`, through any import or alias) in a method of a class that subclasses
`ray.tune.Trainable`.

## Why is this bad?
The class API reports through return values: Tune calls `step()` and records the dict it returns
as the iteration's result; `save_checkpoint()` returns the checkpoint. `tune.report()` belongs to
the *function* API, where it talks to the session that Tune opens around the function. A class
trainable runs with no such session, so in Ray 2.60 `tune.report()` there does not raise: it
prints "`report` is meant to only be called inside a function that is executed by a Tuner or
Trainer. Returning `None`." once, in the trial's worker log, and drops the metrics. Schedulers,
searchers and `metric=`/`mode=` never see them, and `stop={"score": ...}` never fires. Tune's
docs say it directly: do not use `tune.report()` inside a `Trainable` class.

ray-lint is silent for `report` calls in functions defined inside a method (a function trainable
built and run from there has its own session), in classes that do not subclass `tune.Trainable`,
and for methods named `report` of other objects (`reporter.report(...)`).

## Example
```python
class Trainer(tune.Trainable):
    def step(self):
        loss = self.train_one_epoch()
        tune.report({"loss": loss})
        return {}
```

## Use instead
```python
class Trainer(tune.Trainable):
    def step(self):
        loss = self.train_one_epoch()
        return {"loss": loss}
```

## Fix safety
There is no automatic fix: the reported dict has to be merged into what `step()` returns, which
may be built elsewhere.

## References
- [Training in Tune: the class API](https://docs.ray.io/en/latest/tune/api/trainable.html)
- [ray.tune.report](https://docs.ray.io/en/latest/tune/api/doc/ray.tune.report.html)
"""

    VALID = [
        Valid(
            "from ray import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n        return {'loss': self.loss()}\n",
            "metrics returned from step()",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    for epoch in range(10):\n        tune.report({'loss': epoch})\n\n"
            "tune.Tuner(train_fn).fit()\n",
            "the function API: report is right here",
        ),
        Valid(
            "from ray import tune\n\nclass Experiment(tune.Trainable):\n    def setup(self, config):\n"
            "        def inner(cfg):\n            tune.report({'loss': 1.0})\n        self.inner = inner\n\n"
            "    def step(self):\n        return {'loss': 0.0}\n",
            "a function trainable defined inside a method has its own session",
        ),
        Valid(
            "from ray import tune\n\nclass Sweep:\n    def objective(self, config):\n        tune.report({'score': config['x']})\n\n"
            "    def run(self):\n        return tune.Tuner(self.objective).fit()\n",
            "a method of a plain class, handed to Tuner as a function trainable",
        ),
        Valid(
            "from ray import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n"
            "        self.reporter.report({'loss': 1.0})\n        return {'loss': 1.0}\n",
            "a `report` method of another object",
        ),
        Valid(
            "import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n        tune.report({'loss': 1.0})\n        return {}\n",
            "a local module named tune, not Ray's",
        ),
    ]
    INVALID = [
        Invalid(
            "from ray import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n        loss = self.train_one_epoch()\n"
            "        tune.report({'loss': loss})\n        return {}\n",
            6,
        ),
        Invalid(
            "import ray.tune\nfrom ray.tune import Trainable\n\nclass Trainer(Trainable):\n    def step(self):\n"
            "        ray.tune.report({'loss': 1.0})\n        return {'done': True}\n",
            6,
            note="imported by name",
        ),
        Invalid(
            "from ray import train, tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n        metrics = self.evaluate()\n"
            "        train.report(metrics)\n        return metrics\n",
            6,
            note="Train's report is the same session call",
        ),
        Invalid(
            "from ray.tune import Trainable, report\n\nclass Trainer(Trainable):\n    def setup(self, config):\n"
            "        self.model = build(config)\n        report({'params': count(self.model)})\n\n    def step(self):\n"
            "        return {'loss': 1.0}\n",
            6,
            note="in setup()",
        ),
        Invalid(
            "from ray.air import session\nfrom ray.tune import Trainable\n\nclass Trainer(Trainable):\n    def step(self):\n"
            "        for batch in self.loader:\n            session.report({'loss': self.fit(batch)})\n        return {}\n",
            7,
            note="the old AIR session, in a loop",
        ),
        Invalid(
            "from ray import tune\n\nclass Base(tune.Trainable):\n    def step(self):\n        return {'loss': 1.0}\n\n"
            "class Logged(Base):\n    def step(self):\n        result = super().step()\n        tune.report(result)\n        return result\n",
            10,
            note="a subclass of a Trainable subclass",
        ),
    ]

    def check(self, ctx: Context) -> None:
        facts = ctx.model.analysis(TuneFacts)
        classes = facts.trainable_classes
        if not classes:
            return
        for site in facts.reports:
            scope = site.scope.function
            if scope is None:
                continue
            owner = next((cls for cls in classes if any(method.scope is scope for method in cls.methods)), None)
            if owner is None:
                continue
            method = scope.node.name.value  # type: ignore[attr-defined]
            ctx.report(
                site.node,
                f"`{ctx.snippet(site.node.func)}()` in `{owner.node.name.value}.{method}` is dropped: return the metrics from `step()`",
            )
