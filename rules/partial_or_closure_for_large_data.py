"""RAY202 partial-or-closure-for-large-data: a Tune trainable that carries a large object in a
`functools.partial` argument or in a lambda's or nested function's free variables, instead of
`tune.with_parameters`."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.analyses.captures import large_outside_reads, runs_as_main
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import TUNE_RUN_TOKENS
from ray_lint.libraries.tune import PARTIAL, SWEEP_MODEL, TuneFacts, TuneRun, short_size
from ray_lint.model import SemanticModel
from ray_lint.python_model import FunctionInfo, Scope
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import (
    LARGE_OBJECT_OPTION,
    LOADERS_OPTION,
    SIZE_TOKENS,
    Size,
    size_of,
    threshold_bytes,
)


class PickledTrainableExperiment(Experiment[None]):
    """A Tune sweep whose function trainable gets an array through `functools.partial` (pickled into the
    trainable, which every trial's worker fetches and unpickles) against the same array handed over with
    `tune.with_parameters` (put in the object store once); timed from `fit()` on. A closure is pickled the
    same way as a partial."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # the trials are the same; A pays for copies of the trainable, not for less overlap
    MB = 40
    TRIALS = 4
    REPORTS = 1

    def plan(self, subject: Subject) -> Plan:
        grid = [round(0.1 * (i + 1), 1) for i in range(self.TRIALS)]
        shared = {"mb": self.MB, "grid": grid, "reports": self.REPORTS, "config": ""}
        partial = SWEEP_MODEL.format(**shared, trainable="functools.partial(train_fn, data=DATA)")
        with_parameters = SWEEP_MODEL.format(**shared, trainable="tune.with_parameters(train_fn, data=DATA)")
        fit = timed("return sorted(result.metrics['score'] for result in tuner.fit())")
        return Plan(
            Variant("functools.partial", script(partial + fit, ("tune",))),
            Variant("tune.with_parameters", script(with_parameters + fit, ("tune",))),
            "modelled",
            f"a Tune sweep of {self.TRIALS} trials whose trainable reads a {self.MB} MB array",
        )


class PartialOrClosureForLargeData(Rule):
    code = "RAY202"
    name = "partial-or-closure-for-large-data"
    message = "A large object reaches a Tune trainable through `functools.partial` or a closure"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("partial", "lambda", "def ")
    also_tokens = SIZE_TOKENS  # something large to hand over
    anchor_tokens = TUNE_RUN_TOKENS
    experiment = PickledTrainableExperiment()
    options = (LARGE_OBJECT_OPTION, LOADERS_OPTION)
    docs = """
## What it does
Finds the trainable of `tune.Tuner(...)` / `tune.run(...)` (followed through
`tune.with_resources`, `tune.with_parameters` and names bound once) when it carries an object
that is certainly large (an allocation with a literal shape of at least `large-object-mb`
megabytes, 10 by default; a value whose line says `# ray-lint: large`; data loaded from a file,
the `large-loaders` option, or derived from it: `df.drop("label", axis=1)`, `.astype(...)`,
`.values`, the parts of `train_test_split`, what a function or static method of the module that
loads it returns):
- as an argument of `functools.partial(train_fn, ..., data=X)`;
- as a name a `lambda` trainable reads from outside it (`lambda config: train(config, X)`);
- as a name a trainable function defined inside another function reads from outside it;
- as a global a module-level trainable function reads, when the module runs as `__main__` (a
  script or a notebook): the Tune run is in its top-level code, or in a function that code calls.

## Why is this bad?
Tune pickles the trainable with cloudpickle when it registers it, and a partial's arguments, a
lambda's globals and a nested function's closure are pickled *by value* with it. The object then
travels inside the trainable's definition, outside the object store: Ray stores the definition
in the GCS and exports it as the trial actors' class, and every trial's worker process fetches
and unpickles its own copy (Ray warns from 10 MB, refuses from 100 MB, and Tune says "The
Trainable/training function is too large for grpc resource limit … use tune.with_parameters()").
`tune.with_parameters(train_fn, data=X)` puts `X` in the object store once; each trial reads it
from there, without a copy for numpy arrays.

ray-lint is silent for small arguments (epochs, flags, paths), for `ray.put` refs, for objects
passed with `tune.with_parameters` (a parameter that shadows the global included), for values whose
size is not in the code (a column or a filtered subset of a loaded frame, a function's result that
is not loaded data), for data the trainable loads itself (calling a loader helper), and for a
module-level trainable function of a module that runs the Tune run only from a function its own
top-level code never calls: cloudpickle pickles such a function by reference, as the module can be
imported (see RAY031 for remote functions).

## Example
```python
data = np.load("train.npy")
tuner = tune.Tuner(functools.partial(train_fn, data=data), param_space=space)
```
or, in a notebook:
```python
df = pd.read_csv("creditcard.csv")
X_train, X_test, y_train, y_test = train_test_split(df.drop("Class", axis=1), df["Class"])


def train_model(config):
    model = xgb.train(config, xgb.DMatrix(X_train, label=y_train))
```

## Use instead
```python
data = np.load("train.npy")
tuner = tune.Tuner(tune.with_parameters(train_fn, data=data), param_space=space)
```
and `tune.with_parameters(train_model, X_train=X_train, y_train=y_train)`, with the data as
parameters of `train_model`.

## Fix safety
There is no automatic fix here yet: the rewrite is mechanical for a keyword-only `partial`, but a
closure has to become a parameter.

## Options
- `large-object-mb`: the size, in megabytes, from which an object counts as large.
- `large-loaders`: qualified names of data loaders whose result counts as large.

## References
- [Tune FAQ: How can I use large datasets in Tune?](https://docs.ray.io/en/latest/tune/faq.html#how-can-i-use-large-datasets-in-tune)
- [ray.tune.with_parameters](https://docs.ray.io/en/latest/tune/api/doc/ray.tune.with_parameters.html)
"""

    VALID = [
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndata = np.zeros((5000, 5000))\n\n"
            "tune.Tuner(tune.with_parameters(train_fn, data=data)).fit()\n",
            "tune.with_parameters",
        ),
        Valid(
            "import functools\nfrom ray import tune\n\ntune.Tuner(functools.partial(train_fn, epochs=10, path='data.csv')).fit()\n",
            "small partial arguments",
        ),
        Valid(
            "import functools\nimport numpy as np\nimport ray\nfrom ray import tune\n\ndata_ref = ray.put(np.zeros((5000, 5000)))\n\n"
            "tune.Tuner(functools.partial(train_fn, data_ref=data_ref)).fit()\n",
            "a ref: a few bytes",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndef sweep():\n    data = np.zeros((5000, 5000))\n\n"
            "    def train_fn(config):\n        local = np.zeros((5000, 5000))\n        return local.sum()\n\n"
            "    tune.Tuner(train_fn).fit()\n    return data\n",
            "the nested trainable makes its own array",
        ),
        Valid(
            "import numpy as np\nfrom ray import tune\n\ndata = np.zeros((5000, 5000))\n\ndef train_fn(config):\n"
            "    tune.report({'score': float(data[0, 0])})\n\ndef sweep():\n    return tune.Tuner(train_fn).fit()\n",
            "a module-level function of a module that only defines the sweep: pickled by reference",
        ),
        Valid(
            "import pandas as pd\nfrom sklearn.model_selection import train_test_split\nfrom ray import tune\n\n"
            "df = pd.read_csv('creditcard.csv')\nX_train, X_test, y_train, y_test = train_test_split(df.drop('Class', axis=1), df['Class'])\n\n"
            "def train_model(config, X_train=None, y_train=None):\n    return fit(config, X_train, y_train)\n\n"
            "tune.run(tune.with_parameters(train_model, X_train=X_train, y_train=y_train), config={'eta': 0.1})\n",
            "the split data passed with with_parameters; the parameters shadow the globals",
        ),
        Valid(
            "import pandas as pd\nfrom ray import tune\n\ndef load_data(path):\n    return pd.read_csv(path).drop('Class', axis=1)\n\n"
            "def train_model(config):\n    frame = load_data('creditcard.csv')\n    return fit(config, frame)\n\n"
            "tune.run(train_model, config={'eta': 0.1})\n",
            "the trainable calls the loader helper: the data is loaded in each trial, not pickled",
        ),
        Valid(
            "import pandas as pd\nfrom ray import tune\n\ndf = pd.read_csv('creditcard.csv')\nfraud = df[df['Class'] == 1]\n\n"
            "def train_model(config):\n    return fit(config, fraud)\n\ntune.run(train_model, config={'eta': 0.1})\n",
            "a filtered subset of the loaded frame: size unknown",
        ),
        Valid(
            "import functools\nfrom ray import tune\n\ndef sweep(data):\n    tune.Tuner(functools.partial(train_fn, data=data)).fit()\n",
            "a parameter: size unknown",
        ),
    ]
    INVALID = [
        Invalid(
            "import functools\nimport numpy as np\nfrom ray import tune\n\ndata = np.load('train.npy')\n\n"
            "tuner = tune.Tuner(functools.partial(train_fn, data=data), param_space={'lr': 0.1})\n",
            7,
            note="loaded data in a partial",
        ),
        Invalid(
            "from functools import partial\nimport torch\nfrom ray import tune\n\nembeddings = torch.zeros(50_000, 512)\n"
            "trainable = partial(train_fn, embeddings)\n\ntune.run(trainable, config={'lr': 0.1})\n",
            6,
            note="positional, through a name",
        ),
        Invalid(
            "import numpy as np\nfrom ray import tune\n\nfeatures = np.random.rand(4000, 1000)\n\n"
            "tune.Tuner(lambda config: train(config, features)).fit()\n",
            6,
            note="a lambda reads a global",
        ),
        Invalid(
            "import numpy as np\nfrom ray import tune\n\ndef sweep(space):\n    table = np.zeros((4000, 4000))\n\n"
            "    def objective(config):\n        tune.report({'score': float(table[0, 0]) + config['x']})\n\n"
            "    return tune.Tuner(objective, param_space=space).fit()\n",
            8,
            note="a nested function's closure",
        ),
        Invalid(
            "import functools\nimport pandas as pd\nfrom ray import tune\n\nframe = pd.read_parquet('train.parquet')\n\n"
            "tune.Tuner(tune.with_resources(functools.partial(train_fn, frame=frame), {'cpu': 1})).fit()\n",
            7,
            note="inside with_resources",
        ),
        Invalid(
            "import pandas as pd\nfrom sklearn.model_selection import train_test_split\nfrom ray import tune\n\n"
            "df = pd.read_csv('creditcard.csv')\nX = df.drop('Class', axis=1)\n"
            "X_train, X_test, y_train, y_test = train_test_split(X, df['Class'], test_size=0.33)\n\n"
            "def train_model(config):\n    return fit(config, X_train, y_train)\n\ntune.run(train_model, config={'eta': 0.1})\n",
            10,
            note="a script's module-level trainable reads a split of a loaded frame",
        ),
        Invalid(
            "import pandas as pd\nfrom ray import tune\n\nclass DataUtils:\n    @staticmethod\n    def get_data(path):\n"
            "        df = pd.read_csv(path)\n        return df\n\n    @staticmethod\n    def features(df):\n"
            "        return df.drop('Class', axis=1).values\n\nfeatures = DataUtils.features(DataUtils.get_data('cc.csv'))\n\n"
            "def train_model(config):\n    return fit(config, features)\n\ndef sweep():\n"
            "    return tune.run(train_model, config={'eta': 0.1})\n\nanalysis = sweep()\n",
            17,
            note="loaded data returned by static methods; the run is in a function the top-level code calls",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        threshold = threshold_bytes(self.settings)
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        for run in model.analysis(TuneFacts).runs:
            for call, name, scope, at in run.wrappers:
                if name != PARTIAL:
                    continue
                for arg in call.args[1:]:
                    size = size_of(model, arg.value, scope, at, loaders)
                    if size is not None and size.at_least(threshold):
                        ctx.report(arg.value, _message(arg.value, ctx, size))
            for use, size in _large_captures(model, run, threshold, loaders):
                ctx.report(use, _message(use, ctx, size))


def _message(node: cst.BaseExpression, ctx: Context, size: Size) -> str:
    return f"`{ctx.snippet(node, 24)}` ({short_size(size)}) is pickled into the trainable: use `tune.with_parameters`"


def _large_captures(
    model: SemanticModel, run: TuneRun, threshold: int, loaders: frozenset[str]
) -> Iterator[tuple[cst.Name, Size]]:
    """Names a lambda trainable, or a trainable function nested in another function or defined in a module
    run as `__main__`, reads from outside itself (pickled by value with it), bound once to a large object."""
    body: cst.CSTNode
    if isinstance(run.inner, cst.Lambda) and run.inner_scope is not None:
        body, own = run.inner.body, _lambda_scope(model, run.inner, run.inner_scope)
    elif isinstance(run.definition, FunctionInfo) and (
        run.definition.parent_scope.function is not None
        or (run.definition.parent_scope is model.module_scope and runs_as_main(model, run.site.scope))
    ):
        body, own = run.definition.node.body, run.definition.scope
    else:
        return
    if own is not None:
        yield from large_outside_reads(model, body, own, threshold, loaders)


def _lambda_scope(model: SemanticModel, node: cst.Lambda, enclosing: Scope) -> Scope | None:
    """The scope the model made for a lambda."""
    for scope in model.scopes[enclosing.first:]:
        if scope.node is node:
            return scope
    return None
