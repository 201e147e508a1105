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
from ray_lint.python_model import FunctionInfo, Scope, iter_subtree, literal_string
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
    shares_driver = True
    more_parallelism = False  # the trials are the same; A pays for moving and logging results, not for less overlap
    MB = 8
    TRIALS = 2
    REPORTS = 3

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
`large-loaders` option). The metrics may be a dict literal, a name bound once to one, or what a
helper of the module (or a method of the same class) returns when every `return` of it gives such
a dict (`result = validate_epoch(model)`, then `train.report(result)`): that finding is on the
report, since the helper may serve other callers. Ray 1's `report(**metrics)` reads the same.

## Why is this bad?
A result is meant to hold a few numbers. Each one is sent from the trial to Tune's driver, kept
in the trial's state, handed to the searcher, the scheduler and every logger callback, and written
to disk by them (`result.json`, `progress.csv`, TensorBoard), on every report. Weights or arrays
there make every iteration pay for serializing and writing them, and the JSON logger turns an
array into a list of numbers. Tune's FAQ ("The Trial result is very large") says to save such
objects in a checkpoint, which Tune persists only when asked and keeps out of the metrics.

ray-lint is silent for small values (a loss, per-class accuracies), for values whose size is
not in the code, and for `checkpoint=` arguments, which are where weights belong. A helper's
result is not followed when the code reads it before reporting it (`result.pop("model")`), or
when only some of its entries are reported (`{"loss": result["loss"]}`).

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
        Valid(
            "from ray import train\n\ndef validate(model):\n    return {'loss': 0.1, 'model': model.state_dict()}\n\n"
            "def train_fn(config):\n    model = build()\n    result = validate(model)\n    train.report({'loss': result['loss']})\n",
            "only the helper's scalar entry is reported",
        ),
        Valid(
            "from ray import train\n\ndef validate(model):\n    result = {'loss': 0.1, 'model': model.state_dict()}\n    return result\n\n"
            "def train_fn(config):\n    model = build()\n    result = validate(model)\n    weights = result.pop('model')\n"
            "    train.report(result)\n",
            "the weights are taken out of the helper's result before the report",
        ),
        Valid(
            "from ray import train\n\ndef validate(model, with_weights):\n    if with_weights:\n        return model.state_dict()\n"
            "    return {'loss': 0.1}\n\ndef train_fn(config):\n    result = validate(build(), False)\n    train.report(result)\n",
            "a helper that returns weights only on another path, and not as a metrics dict",
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
        Invalid(
            "import copy\nfrom ray import train\n\ndef validate_epoch(model):\n    model_copy = copy.deepcopy(model)\n"
            "    result = {'model': model_copy.cpu().state_dict(), 'loss': 0.1}\n    return result\n\n"
            "def train_func(config):\n    model = build()\n    for epoch in range(10):\n        result = validate_epoch(model)\n"
            "        train.report(result)\n",
            13,
            note="a helper's returned dict holds the weights",
        ),
        Invalid(
            "from ray import tune\n\ndef evaluate(model):\n    return {'loss': 0.1, 'weights': model.state_dict()}\n\n"
            "def train_fn(config):\n    model = build()\n    tune.report(**evaluate(model))\n",
            8,
            note="Ray 1's `report(**metrics)`, of a helper's call",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        facts = model.analysis(TuneFacts)
        threshold = threshold_bytes(self.settings)
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        payloads: list[tuple[cst.BaseExpression, Scope, int]] = []
        for site in facts.reports:
            metrics = _metrics_argument(site.node)
            if metrics is not None:
                payloads.append((metrics, site.scope, site.index))
        for cls in facts.trainable_classes:
            step = model.method(cls, "step")
            if step is not None:
                payloads.extend(_returned(model, step.node, step.scope))
        for metrics, scope, at in payloads:
            for key, value, helper in _metric_values(model, metrics, scope, at):
                value_scope, value_at = (helper.scope, helper.scope.end - 1) if helper is not None else (scope, at)
                what = "model weights" if _weights(value) else None
                if what is None:
                    size = size_of(model, value, value_scope, value_at, loaders)
                    what = short_size(size) if size is not None and size.at_least(threshold) else None
                if what is None:
                    continue
                if helper is None:
                    ctx.report(value, f"Metric `{key}` ({what}) is sent and logged with every result: save it in a checkpoint")
                else:  # the value is in the helper, which may serve other callers: the report is the mistake
                    ctx.report(
                        metrics,
                        f"`{helper.node.name.value}`'s metric `{key}` ({what}) is sent with every result: save it in a checkpoint",
                    )


def _metrics_argument(call: cst.Call) -> cst.BaseExpression | None:
    """`report(metrics=m)`, `report(m)`, or `report(**m)` (Ray 1's `train.report(**metrics)`)."""
    given = keyword_value(call, "metrics")
    if given is not None:
        return given
    for arg in call.args:
        if arg.star == "**" or (arg is call.args[0] and arg.keyword is None and not arg.star):
            return arg.value
    return None


def _returned(model: SemanticModel, function: cst.FunctionDef, scope: Scope) -> Iterator[tuple[cst.BaseExpression, Scope, int]]:
    """The values of the function's own `return` statements, with the event just after the function's last."""
    for node in iter_subtree(function.body, into_functions=False):
        if isinstance(node, cst.Return) and node.value is not None:
            yield node.value, scope, scope.end - 1


def _metric_values(
    model: SemanticModel, metrics: cst.BaseExpression, scope: Scope, at: int
) -> Iterator[tuple[str, cst.BaseExpression, FunctionInfo | None]]:
    """(key, value, None) of a metrics dict literal, or of the dict literal a name is bound to once; or
    (key, value, helper) when that name is bound once to the call of a helper of the module (or of the
    class) whose every `return` gives such a dict (`result = validate_epoch(...)`, then `report(result)`),
    and nothing reads the name in between (it may drop the entry)."""
    untouched = True  # the name is not read between its binding and the report (`result.pop("model")`)
    if isinstance(metrics, cst.Name):
        binding = model.sole_assignment(metrics.value, scope, at)
        if binding is not None and binding.value is not None:
            reads = binding.scope.reads.get(metrics.value, [])
            untouched = not any(binding.index < read < at for read in reads)
            metrics = binding.value
    if isinstance(metrics, cst.Dict):
        yield from ((key, value, None) for key, value in _entries(model, metrics))
        return
    function = scope.function
    caller = model.function_info(function.node) if function is not None and isinstance(function.node, cst.FunctionDef) else None
    helper = model.local_callee(caller, metrics) if caller is not None and isinstance(metrics, cst.Call) and untouched else None
    if helper is None:
        return
    dicts: list[cst.Dict] = []
    for returned, helper_scope, end in _returned(model, helper.node, helper.scope):
        if isinstance(returned, cst.Name):
            binding = model.sole_assignment(returned.value, helper_scope, end)
            returned = binding.value if binding is not None and binding.scope is helper_scope and binding.value is not None else returned
        if not isinstance(returned, cst.Dict):
            return  # another path returns something else: not known to be these metrics
        dicts.append(returned)
    for found in dicts:
        yield from ((key, value, helper) for key, value in _entries(model, found))


def _entries(model: SemanticModel, metrics: cst.Dict) -> Iterator[tuple[str, cst.BaseExpression]]:
    for element in metrics.elements:
        if isinstance(element, cst.DictElement):
            yield literal_string(element.key) or model.source_of(element.key), element.value


def _weights(value: cst.BaseExpression) -> bool:
    """`model.state_dict()` / `model.get_weights()`: a model's weights, whatever their size."""
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in WEIGHTS_METHODS
        and not value.args
    )
