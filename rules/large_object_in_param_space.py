"""RAY201 large-object-in-param-space: a large array, tensor or loaded dataset is a value of a Tune
`param_space` (or `tune.run(config=...)`), which Tune copies into every trial's config and result."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import TUNE_RUN_TOKENS
from ray_lint.libraries.tune import SWEEP_MODEL, TuneFacts, short_size
from ray_lint.model import SemanticModel
from ray_lint.python_model import Scope, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import (
    LARGE_OBJECT_OPTION,
    LOADERS_OPTION,
    SIZE_TOKENS,
    Size,
    size_of,
    threshold_bytes,
)

# Search-space helpers whose list argument holds candidate values, each of which becomes a trial's config value.
SEARCH_SPACES = frozenset({"ray.tune.grid_search", "ray.tune.choice"})
MAX_NESTING = 4  # how many dict levels deep a config is searched (`{"train_loop_config": {...}}`)


class LargeObjectInParamSpaceExperiment(Experiment[None]):
    """A Tune sweep of 2 trials, each reporting 3 results, whose function trainable reads an array handed
    over in `param_space`, against the same array handed over once with `tune.with_parameters`; timed from
    `fit()` on. Small enough to finish in the verifier's 60 s on a busy 2-core machine."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # the trials are the same; A pays for copies of the config, not for less overlap
    MB = 8
    TRIALS = 2
    REPORTS = 3

    def plan(self, subject: Subject) -> Plan:
        grid = [round(0.1 * (i + 1), 1) for i in range(self.TRIALS)]
        shared = {"mb": self.MB, "grid": grid, "reports": self.REPORTS}
        in_config = SWEEP_MODEL.format(**shared, trainable="train_fn", config=', "data": DATA')
        with_parameters = SWEEP_MODEL.format(**shared, trainable="tune.with_parameters(train_fn, data=DATA)", config="")
        fit = timed("return sorted(result.metrics['score'] for result in tuner.fit())")
        return Plan(
            Variant("array in param_space", script(in_config + fit, ("tune",))),
            Variant("tune.with_parameters", script(with_parameters + fit, ("tune",))),
            "modelled",
            f"a Tune sweep of {self.TRIALS} trials of {self.REPORTS} results each, reading a {self.MB} MB array",
        )


class LargeObjectInParamSpace(Rule):
    code = "RAY201"
    name = "large-object-in-param-space"
    message = "A large object in Tune's `param_space` is copied into every trial's config and result"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("param_space", "config")
    also_tokens = SIZE_TOKENS  # something large to hand over
    anchor_tokens = TUNE_RUN_TOKENS
    experiment = LargeObjectInParamSpaceExperiment()
    options = (LARGE_OBJECT_OPTION, LOADERS_OPTION)
    docs = """
## What it does
Finds a value of the `param_space` of `tune.Tuner(...)` (or of the `config` of `tune.run(...)`)
that is certainly large: an allocation with a literal shape (`np.zeros((5000, 5000))`,
`torch.randn(4096, 4096)`, `bytes(200 * 10**6)`, ...) of at least `large-object-mb` megabytes (10
by default), a value whose line says `# ray-lint: large`, or data loaded from a file
(`pd.read_csv`, `np.load`, `torch.load`, ...: the `large-loaders` option). The space may be a dict
literal or a name bound once to one; nested dicts (`{"train_loop_config": {...}}`) and the
candidates of `tune.grid_search([...])` / `tune.choice([...])` are searched too.

## Why is this bad?
Tune treats the config as a small set of hyperparameters. Every trial gets its own copy of the
resolved config: it is pickled into the trial, sent to the trial's actor, stored with the
experiment's state (which Tune checkpoints to disk again and again) and attached to *every
result* the trial reports, which the driver's loggers then process and write out (JSON, CSV,
TensorBoard). Tune's FAQ says to keep configs to primitives and to pass data with
`tune.with_parameters`, which puts the object in Ray's object store once; each trial then reads
it from there (without a copy, for numpy arrays). On Ray 2.60 Tune warns, for a 50 MB array in the
config of 4 trials, "Processing trial results took 6.663 s, which may be a performance bottleneck";
measured on a loaded 2-core machine, that sweep took 64 s to fit against 11-18 s with
`tune.with_parameters`.

ray-lint is silent for values whose size is not in the code (a function's result, a parameter),
for `ray.put(...)` refs, small lists and grid values, and for objects passed with
`tune.with_parameters`.

## Example
```python
features = np.load("features.npy")
tuner = tune.Tuner(train_fn, param_space={"lr": tune.loguniform(1e-4, 1e-1), "data": features})
```

## Use instead
```python
features = np.load("features.npy")


def train_fn(config, data):
    ...


tuner = tune.Tuner(tune.with_parameters(train_fn, data=features), param_space={"lr": tune.loguniform(1e-4, 1e-1)})
```

## Fix safety
There is no automatic fix: the trainable's signature changes, and every read of
`config["data"]` in it.

## Options
- `large-object-mb`: the size, in megabytes, from which an object counts as large.
- `large-loaders`: qualified names of data loaders whose result counts as large.

## References
- [Tune FAQ: How can I avoid bottlenecks?](https://docs.ray.io/en/latest/tune/faq.html#how-can-i-avoid-bottlenecks)
- [Tune FAQ: How can I use large datasets in Tune?](https://docs.ray.io/en/latest/tune/faq.html#how-can-i-use-large-datasets-in-tune)
- [ray.tune.with_parameters](https://docs.ray.io/en/latest/tune/api/doc/ray.tune.with_parameters.html)
"""

    VALID = [
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndata = np.zeros((5000, 5000))\n\ndef train_fn(config, data):\n"
            "    return data.sum() * config['lr']\n\ntune.Tuner(tune.with_parameters(train_fn, data=data), "
            "param_space={'lr': tune.grid_search([0.1, 0.01])}).fit()\n",
            "passed with tune.with_parameters",
        ),
        Valid(
            "import numpy as np\nimport ray\nfrom ray import tune\n\ndata_ref = ray.put(np.zeros((5000, 5000)))\n\n"
            "tune.Tuner(train_fn, param_space={'data_ref': data_ref, 'lr': 0.1}).fit()\n",
            "an ObjectRef in the config: a few bytes",
        ),
        Valid(
            "from ray import tune\n\ntune.Tuner(train_fn, param_space={'layers': [64, 64, 32], "
            "'lr': tune.grid_search([0.1, 0.01, 0.001]), 'seed': tune.choice(range(100))}).fit()\n",
            "small lists and grid values",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\nbias = np.zeros(1000)\n\ntune.Tuner(train_fn, param_space={'bias': bias}).fit()\n",
            "8 KB",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndef sweep(data):\n    return tune.Tuner(train_fn, param_space={'data': data}).fit()\n",
            "a parameter: size unknown",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndata = np.zeros((5000, 5000))\nconfig = {'lr': 0.1}\n"
            "tune.Tuner(train_fn, param_space=config).fit()\nprint(data.sum())\n",
            "the array is never put in the space",
        ),
        Valid(
            "import pandas as pd\nfrom ray import tune\n\ntune.Tuner(train_fn, param_space={'path': 'data.csv', "
            "'loader': pd.read_csv}).fit()\n",
            "a path and a function: the trainable loads the data itself",
        ),
    ]
    INVALID = [
        Invalid(
            "import numpy as np\nfrom ray import tune\n\nfeatures = np.random.rand(2000, 1000)\n\n"
            "tuner = tune.Tuner(train_fn, param_space={'lr': tune.loguniform(1e-4, 1e-1), 'data': features})\n",
            6,
            note="16 MB",
        ),
        Invalid(
            "import pandas as pd\nfrom ray import tune\n\nframe = pd.read_csv('train.csv')\nspace = {'lr': 0.1, 'frame': frame}\n"
            "tune.Tuner(train_fn, param_space=space).fit()\n",
            5,
            note="a loaded DataFrame, in a space bound to a name",
        ),
        Invalid(
            "import torch\nfrom ray import tune\nfrom ray.tune import Tuner\n\nTuner(train_fn, param_space={'train_loop_config': "
            "{'embeddings': torch.zeros(50_000, 512), 'lr': 0.1}}).fit()\n",
            5,
            note="a nested config, with the allocation inline",
        ),
        Invalid(
            "import numpy as np\nfrom ray import tune\n\nsmall = np.zeros((100, 100))\nlarge = np.zeros((4000, 4000))\n\n"
            "tune.Tuner(train_fn, param_space={'weights': tune.grid_search([small, large])}).fit()\n",
            7,
            note="a grid search over arrays",
        ),
        Invalid(
            "import numpy as np\nfrom ray import tune\n\ntable = np.load('table.npy')\n\n"
            "tune.run(train_fn, config=dict(lr=0.1, table=table))\n",
            6,
            note="tune.run's config, as a dict(...) call",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        threshold = threshold_bytes(self.settings)
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        for run in model.analysis(TuneFacts).runs:
            if run.param_space is None:
                continue
            space, scope, at = _space_value(model, run.param_space, run.site.scope, run.site.index)
            for key, value in _config_values(model, space, scope, at, 0):
                size = size_of(model, value, scope, at, loaders)
                if size is not None and size.at_least(threshold):
                    ctx.report(value, _message(key, size))


def _message(key: str | None, size: Size) -> str:
    named = f"`{key}`" if key else "entry"
    return f"Config {named} ({short_size(size)}) is copied into every trial's results: use `tune.with_parameters`"


def _space_value(
    model: SemanticModel, space: cst.BaseExpression, scope: Scope, at: int
) -> tuple[cst.BaseExpression, Scope, int]:
    """The space itself, through a name bound once to it."""
    if isinstance(space, cst.Name):
        binding = model.sole_assignment(space.value, scope, at)
        if binding is not None and binding.value is not None:
            return binding.value, binding.scope, binding.index
    return space, scope, at


def _config_values(
    model: SemanticModel, space: cst.BaseExpression, scope: Scope, at: int, depth: int
) -> Iterator[tuple[str | None, cst.BaseExpression]]:
    """(key, value) of each leaf of a config written out as dict literals or `dict(...)` calls: nested dicts
    are entered, and each candidate of `tune.grid_search([...])` / `tune.choice([...])` is a value of its key."""
    if depth > MAX_NESTING:
        return
    entries: list[tuple[str | None, cst.BaseExpression]] = []
    if isinstance(space, cst.Dict):
        entries = [(literal_string(e.key), e.value) for e in space.elements if isinstance(e, cst.DictElement)]
    elif isinstance(space, cst.Call) and _is_config(model, space, scope, at):
        entries = [(arg.keyword.value, arg.value) for arg in space.args if arg.keyword is not None]
    for key, value in entries:
        if isinstance(value, (cst.Dict, cst.Call)) and _is_config(model, value, scope, at):
            yield from _config_values(model, value, scope, at, depth + 1)
        elif isinstance(value, cst.Call) and model.qualified_name(value.func, scope, at) in SEARCH_SPACES:
            candidates = value.args[0].value if value.args else None
            if isinstance(candidates, (cst.List, cst.Tuple)):
                yield from ((key, e.value) for e in candidates.elements if isinstance(e, cst.Element))
        else:
            yield key, value


def _is_config(model: SemanticModel, value: cst.Dict | cst.Call, scope: Scope, at: int) -> bool:
    """A nested dict literal, or a call of the builtin `dict`."""
    if isinstance(value, cst.Dict):
        return True
    return isinstance(value.func, cst.Name) and value.func.value == "dict" and model.reaching_binding("dict", scope, at) is None
