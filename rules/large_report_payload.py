"""RAY203 large-report-payload: model weights or a large array among the metrics handed to `tune.report` /
`train.report`, or returned from a class trainable's `step()`."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import TRAIN_TOKENS, TUNE_TOKENS, keyword_value
from ray_lint.libraries.tune import REPORT_TOKENS, TuneFacts, short_size
from ray_lint.model import SemanticModel
from ray_lint.python_model import Scope, iter_subtree, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import LARGE_OBJECT_OPTION, LOADERS_OPTION, SIZE_TOKENS, size_of, threshold_bytes

# Methods whose result is a model's weights (torch, Keras, scikit-learn's Ray-friendly wrappers).
WEIGHTS_METHODS = frozenset({"state_dict", "get_weights"})
# A Tune sweep over the learning rates `{grid}` whose trials report `{reports}` times, each result holding
# `{payload}`: the score alone, or the score and a `{mb}` MB array. `timed` covers only `fit()`.
REPORTING_MODEL = """\
import tempfile

import numpy as np

def train_fn(config):
    weights = np.full({mb} * 10**6 // 8, config["lr"])
    for epoch in range({reports}):
        score = float(weights[0]) + epoch
        tune.report({payload})

tuner = tune.Tuner(
    train_fn,
    param_space={{"lr": tune.grid_search({grid})}},
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
)
"""


class ReportPayloadExperiment(Experiment[None]):
    """A Tune sweep whose trials report an array with every result against the same trials reporting the
    score alone; timed from `fit()` on. Tune's driver handles and logs (JSON, CSV) every result."""

    facts_type = type(None)
    more_parallelism = False  # the trials are the same; A pays for moving and logging results, not for less overlap
    MB = 8
    TRIALS = 2
    REPORTS = 5

    def plan(self, subject: Subject) -> Plan:
        grid = [round(0.1 * (i + 1), 1) for i in range(self.TRIALS)]
        shared = {"mb": self.MB, "grid": grid, "reports": self.REPORTS}
        fit = timed("return sorted(result.metrics['score'] for result in tuner.fit())")

        def variant(payload: str) -> str:
            return script(REPORTING_MODEL.format(**shared, payload=payload) + fit, ("tune",))

        return Plan(
            Variant("array in every result", variant('{"score": score, "weights": weights}')),
            Variant("score alone", variant('{"score": score}')),
            "modelled",
            f"a Tune sweep of {self.TRIALS} trials of {self.REPORTS} results each, with or without an array of {self.MB} MB",
        )


class LargeReportPayload(Rule):
    code = "RAY203"
    name = "large-report-payload"
    message = "Model weights or a large array reported as a metric is copied into every result Tune stores"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("report(", "def step(")
    anchor_tokens = (*(f"{method}(" for method in sorted(WEIGHTS_METHODS)), *SIZE_TOKENS)  # what it reports
    also_tokens = TUNE_TOKENS + TRAIN_TOKENS + REPORT_TOKENS
    experiment = ReportPayloadExperiment()
    options = (LARGE_OBJECT_OPTION, LOADERS_OPTION)
    docs = """
## What it does
Finds, among the metrics of a `report` call (`ray.tune.report`, `ray.train.report`,
`ray.air.session.report`) or of the dict a `tune.Trainable` subclass's `step()` returns, a value
that is model weights (`model.state_dict()`, `model.get_weights()`) or an object that is
certainly large: an allocation with a literal shape of at least `large-object-mb` megabytes (10
by default), a value whose line says `# ray-lint: large`, or data loaded from a file (the
`large-loaders` option). The metrics may be a dict literal or a name bound once to one.

## Why is this bad?
A result is meant to hold a few numbers. Each one is sent from the trial to Tune's driver, kept
in the trial's state, handed to the searcher, the scheduler and every logger callback, and written
to disk by them (`result.json`, `progress.csv`, TensorBoard), on every report. Weights or arrays
there make every iteration pay for serializing and writing them, and the JSON logger turns an
array into a list of numbers. Tune's FAQ ("The Trial result is very large") says to save such
objects in a checkpoint, which Tune persists only when asked and keeps out of the metrics.

ray-lint is silent for small values (a loss, per-class accuracies), for values whose size is
not in the code, and for `checkpoint=` arguments, which are where weights belong.

## Example
```python
tune.report({"loss": loss, "weights": model.state_dict()})
```

## Use instead
```python
with tempfile.TemporaryDirectory() as directory:
    torch.save(model.state_dict(), os.path.join(directory, "model.pt"))
    tune.report({"loss": loss}, checkpoint=tune.Checkpoint.from_directory(directory))
```

## Fix safety
There is no automatic fix: a checkpoint needs a directory and a format.

## Options
- `large-object-mb`: the size, in megabytes, from which an object counts as large.
- `large-loaders`: qualified names of data loaders whose result counts as large.

## References
- [Tune FAQ: How can I avoid bottlenecks?](https://docs.ray.io/en/latest/tune/faq.html#how-can-i-avoid-bottlenecks)
- [Tune: Saving and loading checkpoints](https://docs.ray.io/en/latest/tune/tutorials/tune-trial-checkpoints.html)
"""

    VALID = [
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    model = build()\n    tune.report({'loss': 0.1, "
            "'per_class_accuracy': [0.9, 0.8, 0.7]})\n",
            "a small list",
        ),
        Valid(
            "import os, tempfile, torch\nfrom ray import tune\n\ndef train_fn(config):\n    model = build()\n"
            "    with tempfile.TemporaryDirectory() as d:\n        torch.save(model.state_dict(), os.path.join(d, 'm.pt'))\n"
            "        tune.report({'loss': 0.1}, checkpoint=tune.Checkpoint.from_directory(d))\n",
            "the weights go into a checkpoint",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    predictions = model(inputs)\n"
            "    tune.report({'loss': loss_fn(predictions), 'mean': predictions.mean().item()})\n",
            "scalars computed from an array",
        ),
        Valid(
            "from ray import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n        return {'loss': self.loss}\n\n"
            "    def save_checkpoint(self, checkpoint_dir):\n        return {'weights': self.model.state_dict()}\n",
            "weights returned from save_checkpoint, not step",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndef train_fn(config):\n    errors = np.zeros(100)\n"
            "    tune.report({'errors': errors})\n",
            "800 bytes",
        ),
        Valid(
            "from ray import tune\n\ndef train_fn(config):\n    logger.report({'weights': model.state_dict()})\n",
            "another object's report",
        ),
    ]
    INVALID = [
        Invalid(
            "from ray import tune\n\ndef train_fn(config):\n    model = build()\n    tune.report({'loss': 0.1, 'weights': model.state_dict()})\n",
            5,
        ),
        Invalid(
            "import numpy as np\nfrom ray import train\n\ndef train_fn(config):\n    embeddings = np.zeros((20000, 512))\n"
            "    metrics = {'loss': 0.1, 'embeddings': embeddings}\n    train.report(metrics)\n",
            6,
            note="41 MB, in a dict bound to a name",
        ),
        Invalid(
            "from ray import tune\n\nclass Trainer(tune.Trainable):\n    def step(self):\n"
            "        return {'loss': self.loss, 'model': self.model.state_dict()}\n",
            5,
            note="a class trainable's step() result",
        ),
        Invalid(
            "import pandas as pd\nfrom ray.tune import report\n\ndef evaluate(config):\n    table = pd.read_parquet('predictions.parquet')\n"
            "    report(metrics={'score': 0.5, 'predictions': table})\n",
            6,
            note="a loaded DataFrame, as metrics=",
        ),
        Invalid(
            "from ray import tune\n\ndef train_fn(config):\n    net = build()\n    for epoch in range(3):\n"
            "        tune.report({'loss': 0.1, 'weights': net.get_weights()})\n",
            6,
            note="Keras weights",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        facts = model.analysis(TuneFacts)
        threshold = threshold_bytes(self.settings)
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        payloads: list[tuple[cst.BaseExpression, Scope, int]] = []
        for site in facts.reports:
            metrics = keyword_value(site.node, "metrics")
            if metrics is None and site.node.args and site.node.args[0].keyword is None:
                metrics = site.node.args[0].value
            if metrics is not None:
                payloads.append((metrics, site.scope, site.index))
        for cls in facts.trainable_classes:
            step = model.method(cls, "step")
            if step is not None:
                payloads.extend(_returned(model, step.node, step.scope))
        for metrics, scope, at in payloads:
            for key, value in _metric_values(model, metrics, scope, at):
                what = "model weights" if _weights(value) else None
                if what is None:
                    size = size_of(model, value, scope, at, loaders)
                    what = short_size(size) if size is not None and size.at_least(threshold) else None
                if what is not None:
                    ctx.report(value, f"Metric `{key}` ({what}) is sent and logged with every result: save it in a checkpoint")


def _returned(model: SemanticModel, function: cst.FunctionDef, scope: Scope) -> Iterator[tuple[cst.BaseExpression, Scope, int]]:
    """The values of the function's own `return` statements, with the event just after the function's last."""
    for node in iter_subtree(function.body, into_functions=False):
        if isinstance(node, cst.Return) and node.value is not None:
            yield node.value, scope, scope.end - 1


def _metric_values(
    model: SemanticModel, metrics: cst.BaseExpression, scope: Scope, at: int
) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(key, value) of a metrics dict literal, or of the dict literal a name is bound to once."""
    if isinstance(metrics, cst.Name):
        binding = model.sole_assignment(metrics.value, scope, at)
        metrics = binding.value if binding is not None and binding.value is not None else metrics
    if not isinstance(metrics, cst.Dict):
        return
    for element in metrics.elements:
        if isinstance(element, cst.DictElement):
            yield literal_string(element.key) or model.source_of(element.key), element.value


def _weights(value: cst.BaseExpression) -> bool:
    """`model.state_dict()` / `model.get_weights()`: a model's weights, whatever their size."""
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in WEIGHTS_METHODS
        and not value.args
    )
