"""Ray Tune: `Tuner(...)` / `tune.run(...)` calls, what their trainables are, and `report` calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from ray_lint.libraries import defined_function_or_class, keyword_value
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, CallSite, ClassInfo, FunctionInfo, Scope
from ray_lint.sizes import Size, format_bytes

TUNERS = frozenset({"ray.tune.Tuner", "ray.tune.run", "ray.tune.tuner.Tuner"})
TRAINABLE_BASES = frozenset({"ray.tune.Trainable", "ray.tune.trainable.Trainable"})
# Calls that wrap a trainable and hand Tune another one: the wrapped trainable is their first argument.
WITH_PARAMETERS = frozenset({"ray.tune.with_parameters", "ray.tune.trainable.util.with_parameters"})
WITH_RESOURCES = frozenset({"ray.tune.with_resources", "ray.tune.trainable.util.with_resources"})
PARTIAL = "functools.partial"
TRAINABLE_WRAPPERS = WITH_PARAMETERS | WITH_RESOURCES | {PARTIAL}
# The session's `report`: Tune's, Train's (the same session inside a Tune trial) and the old AIR one.
REPORTS = frozenset({"ray.tune.report", "ray.train.report", "ray.air.session.report"})
REPORT_TOKENS = ("ray.air",)  # with the library tokens: a file may reach `report` through `from ray.air import session`


@dataclass(eq=False, repr=False)
class TuneRun:
    """A `Tuner(trainable, param_space=...)` or `tune.run(trainable, config=...)` call."""

    site: CallSite
    trainable: cst.BaseExpression | None
    param_space: cst.BaseExpression | None
    # The `with_parameters(...)`, `with_resources(...)` and `functools.partial(...)` calls the trainable goes
    # through, outermost first, followed through names bound once; each with the scope and event it runs at.
    wrappers: list[tuple[cst.Call, str, Scope, int]] = field(default_factory=list)
    # What is left inside them: a name, a lambda... with the scope and event it is evaluated at.
    inner: cst.BaseExpression | None = None
    inner_scope: Scope | None = None
    inner_at: int = 0
    definition: FunctionInfo | ClassInfo | None = None  # the module's function or class that `inner` names
    # What each trial reserves: `with_resources(trainable, resources)`'s second argument or `tune.run`'s
    # `resources_per_trial=`, with the scope and event it is evaluated at; None when the code gives none.
    resources: tuple[cst.BaseExpression, Scope, int] | None = None


class TuneFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def runs(self) -> list[TuneRun]:
        runs = []
        for name in sorted(TUNERS):
            for site in self.model.calls_to(name):
                trainable = keyword_value(site.node, "trainable") or keyword_value(site.node, "run_or_experiment")
                if trainable is None and site.node.args and site.node.args[0].keyword is None:
                    trainable = site.node.args[0].value
                space = keyword_value(site.node, "param_space" if name.endswith("Tuner") else "config")
                run = TuneRun(site, trainable, space)
                per_trial = keyword_value(site.node, "resources_per_trial")
                if per_trial is not None:
                    run.resources = (per_trial, site.scope, site.index)
                if trainable is not None:
                    self._unwrap(run, trainable, site.scope, site.index)
                runs.append(run)
        return runs

    def _unwrap(self, run: TuneRun, expr: cst.BaseExpression, scope: Scope, at: int) -> None:
        """Follows the trainable through wrapper calls and names bound once (`trainable = tune.with_parameters(
        train_fn, data=data)`), so rules see both the wrappers and the function or class inside them, and
        what `with_resources` reserves for each trial."""
        for _ in range(8):
            if isinstance(expr, cst.Name):
                binding = self.model.sole_assignment(expr.value, scope, at)
                if binding is not None and binding.value is not None:
                    expr, scope, at = binding.value, binding.scope, binding.index
                    continue
            if isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
                name = self.model.qualified_name(expr.func, scope, at)
                if name in TRAINABLE_WRAPPERS:
                    run.wrappers.append((expr, name, scope, at))
                    if name in WITH_RESOURCES:
                        resources = keyword_value(expr, "resources")
                        if resources is None and len(expr.args) > 1 and expr.args[1].keyword is None:
                            resources = expr.args[1].value
                        if resources is not None:
                            run.resources = (resources, scope, at)
                    expr = expr.args[0].value
                    continue
            break
        run.inner, run.inner_scope, run.inner_at = expr, scope, at
        run.definition = defined_function_or_class(self.model, expr, scope, at)

    @cached_property
    def trainable_classes(self) -> list[ClassInfo]:
        """Classes that subclass `ray.tune.Trainable`, directly or through classes of this module."""
        found: list[ClassInfo] = []
        for info in self.model.classes:  # in source order: a base class comes before its subclasses
            scope = info.scope.parent or self.model.module_scope
            for base in info.node.bases:
                if self.model.qualified_name(base.value, scope, AFTER_ALL) in TRAINABLE_BASES:
                    found.append(info)
                    break
                inherited = defined_function_or_class(self.model, base.value, scope, AFTER_ALL)
                if isinstance(inherited, ClassInfo) and inherited in found:
                    found.append(info)
                    break
        return found

    @cached_property
    def reports(self) -> list[CallSite]:
        """Calls of the session's `report` (`tune.report`, `train.report`, `session.report`), in file order."""
        return sorted((site for name in REPORTS for site in self.model.calls_to(name)), key=lambda site: site.index)


def short_size(size: Size) -> str:
    """A size in a few words, for a one-line message: "80 MB", "loaded data", "marked large"."""
    if size.bytes is not None:
        return format_bytes(size.bytes)
    return "loaded data" if size.loader is not None else "marked large"


# Put before a timed Tune model, in both forms: Tune's first sweep in a process sets up what later ones
# reuse, which would otherwise slow whichever form runs first.
TUNE_WARM_UP = """\
import tempfile

def warm_up(config):
    tune.report({"score": 0.0})

tune.Tuner(warm_up, run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0)).fit()

"""

# A model for experiments (text; nothing here runs): a Tune sweep over the learning rates `{grid}` whose function
# trainable reads a `{mb}` MB array from its config or from its `data` argument. `{config}` is either the
# array's entry in the space or nothing; `{trainable}` what the Tuner gets (`train_fn`, or it wrapped by
# `tune.with_parameters` or `functools.partial`). Each trial reads the array's first item and reports
# `{reports}` times; `timed` covers only `fit()`.
SWEEP_MODEL = """\
import functools
import tempfile

import numpy as np

DATA = np.zeros({mb} * 10**6 // 8)

def train_fn(config, data=None):
    data = config["data"] if data is None else data
    for epoch in range({reports}):
        tune.report({{"score": float(data[0]) + config["lr"] + epoch}})

tuner = tune.Tuner(
    {trainable},
    param_space={{"lr": tune.grid_search({grid}){config}}},
    run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0),
)
"""

