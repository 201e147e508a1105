"""RAY042 driver-env-thread-override: a thread-count environment variable raised for every Ray worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from ray_lint.analyses.env_writes import EnvWrite, environ_writes, runtime_env_writes
from ray_lint.diagnostics import Severity
from ray_lint.experiment import (
    EvidenceExperiment,
    Outcome,
    Plan,
    Subject,
    Variant,
    script,
)
from ray_lint.model import ALL_CORES, SemanticModel
from ray_lint.python_model import CallSite, Scope, literal_number, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

THREAD_VARIABLES = frozenset(
    {
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
        "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS",
    }
)
# Threads per requested CPU that a value may give before it is reported: two per CPU is a cap that
# frameworks set on purpose (smallpond gives every worker OMP_NUM_THREADS=2 beside its Arrow and
# Polars pools), and costs little; the measured cost is of several times the CPUs.
TOLERATED_THREADS_PER_CPU = 2


ENV_PROBE = """
@ray.remote{options}
def probe():
    return {{name: os.environ.get(name) for name in {variables!r}}}

__ray_lint_evidence__ = ray.get(probe.remote())
"""


@dataclass(frozen=True)
class SettingFacts:
    """The variable the driver sets, and its value (None: the core count)."""

    variable: str
    value: int | None


class DriverEnvThreadOverrideExperiment(EvidenceExperiment[SettingFacts]):
    """What a default task sees of the variable when it is set for the workers, next to Ray's own
    default. The verifier's cluster already runs, so the setting is applied through `runtime_env`
    (what `ray.init` after `os.environ[...] = ...` gives a local cluster's workers)."""

    facts_type = SettingFacts
    beside_others = True  # the setting is read back as given, not counted

    def plan(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        variable, value = facts.variable, facts.value
        shown = repr(str(value)) if value is not None else "str(os.cpu_count())"
        variables = sorted({variable, "OMP_NUM_THREADS"})
        options = f"(runtime_env={{'env_vars': {{{variable!r}: {shown}}}}})"
        return Plan(
            Variant(f"{variable} set", script(ENV_PROBE.format(options=options, variables=variables))),
            Variant("Ray's default", script(ENV_PROBE.format(options="", variables=variables))),
            "evidence",
            f"a default task (num_cpus=1) with {variable}={value if value is not None else 'the core count'} for its worker",
        )

    def read(self, subject: Subject, flagged: Any, compared: Any) -> tuple[Outcome, str]:
        variable = self.facts(subject).variable
        value = flagged.get(variable)
        numbers = f"with the setting the task saw {flagged}; by default {compared}"
        if value is not None and value.isdigit() and int(value) > 1:
            return "confirmed", f"{variable}={value} reached a task that requested 1 CPU ({numbers})"
        return "not reproduced", numbers


class DriverEnvThreadOverride(Rule):
    code = "RAY042"
    name = "driver-env-thread-override"
    message = "A thread-count environment variable is raised for every Ray worker"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("_THREADS",)
    experiment = DriverEnvThreadOverrideExperiment()
    docs = """
## What it does
In a module that uses Ray, finds `OMP_NUM_THREADS`, `MKL_NUM_THREADS`,
`OPENBLAS_NUM_THREADS`, `NUMEXPR_NUM_THREADS`, `NUMEXPR_MAX_THREADS` or
`VECLIB_MAXIMUM_THREADS` set to more than 1 (or to `os.cpu_count()`): through
`os.environ[...] = ...`, `os.environ.setdefault/update`, `os.putenv`, or the `env_vars` of a
`runtime_env` given to `ray.init`, `@ray.remote` or `.options`.

## Why is this bad?
Workers of a local cluster inherit the driver's environment, and a `runtime_env` sets the
variables in every worker it applies to. Ray sets `OMP_NUM_THREADS` to each task's
`num_cpus` (1 by default) *only when it is unset*, and never sets `MKL_NUM_THREADS` or
`OPENBLAS_NUM_THREADS`. So a value set here wins: every worker starts that many BLAS threads,
and with one worker per CPU the node runs workers × value threads on its cores. Measured on a
2-core machine with Ray 2.60: `os.environ["OMP_NUM_THREADS"] = "8"` before `ray.init()`
reached a default task unchanged, and 4 tasks of 3 matrix products (1500 × 1500) took 1.87 s
with 8 threads and 1.43 s with Ray's default (1.3×); the gap grows with the node's size.

ray-lint is silent on values it cannot read (variables, configuration), and on values of at
most two threads per CPU the tasks request: a cap of two per CPU is often set on purpose
(smallpond gives every worker `OMP_NUM_THREADS=2`), and the cost measured above is of several
times the CPUs. The CPUs are those of a `num_cpus` next to the `runtime_env` in the same
decorator or `.options` call, or, for the driver's environment, the smallest request of the
remote functions and actors in the module (1 when there are none).

## Example
```python
os.environ["OMP_NUM_THREADS"] = str(os.cpu_count())
ray.init()
```

## Use instead
```python
ray.init()  # Ray sets OMP_NUM_THREADS to each task's num_cpus
```
or, for a task that really uses several cores:
```python
@ray.remote(num_cpus=8, runtime_env={"env_vars": {"OMP_NUM_THREADS": "8"}})
def solve(matrix): ...
```

## Fix safety
There is no automatic fix: the right value depends on how many CPUs the tasks request.

## References
- [Resources: CPUs and OMP_NUM_THREADS](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Optimizing performance: multi-threaded libraries](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/optimize-performance.html)
"""

    VALID = [
        Valid('import os\nimport ray\nos.environ["OMP_NUM_THREADS"] = "1"\nray.init()\n', "one thread"),
        Valid('import os\nos.environ["OMP_NUM_THREADS"] = "8"\n', "no Ray in this module"),
        Valid('import os\nimport ray\nos.environ["OMP_NUM_THREADS"] = str(n)\n', "value unknown"),
        Valid('import os\nimport ray\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n', "not a thread count"),
        Valid('import os\nimport ray\nthreads = os.environ.get("OMP_NUM_THREADS", "8")\nos.environ.pop("MKL_NUM_THREADS")\n', "reads and removals"),
        Valid(
            'import ray\n@ray.remote(num_cpus=4, runtime_env={"env_vars": {"OMP_NUM_THREADS": "4"}})\ndef f():\n    pass\n',
            "the task requests the CPUs its threads use",
        ),
        Valid(
            'import os\nimport ray\nos.environ["MKL_NUM_THREADS"] = "4"\n\n@ray.remote(num_cpus=4)\ndef f():\n    pass\n',
            "every task in the module requests 4 CPUs",
        ),
        Valid('import ray\nray.init(runtime_env={"env_vars": {"OMP_NUM_THREADS": f"{n}"}})\n', "f-string: unknown"),
        Valid('import ray\nray.init(runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "false"}})\n', "another variable"),
        Valid(
            'import ray\nray.init(runtime_env={"env_vars": {"OMP_NUM_THREADS": "2", "POLARS_MAX_THREADS": "2"}})\n',
            "two threads per CPU: a deliberate cap",
        ),
        Valid(
            'import ray\n@ray.remote(num_cpus=2, runtime_env={"env_vars": {"MKL_NUM_THREADS": "4"}})\ndef f():\n    pass\n',
            "two threads for each of the task's CPUs",
        ),
    ]
    INVALID = [
        Invalid('import os\nimport ray\nos.environ["OMP_NUM_THREADS"] = "8"\nray.init()\n', 3),
        Invalid('import os\nimport ray\nos.environ["MKL_NUM_THREADS"] = str(os.cpu_count())\n', 3),
        Invalid('import os\nimport ray\nos.environ.setdefault("OPENBLAS_NUM_THREADS", "16")\n', 3),
        Invalid('import os\nimport ray\nos.environ.update({"NUMEXPR_MAX_THREADS": "8"})\n', 3),
        Invalid('import os\nimport ray\nos.putenv("OMP_NUM_THREADS", "4")\n', 3),
        Invalid('import ray\nray.init(\n    runtime_env={"env_vars": {\n        "OMP_NUM_THREADS": "8",\n    }},\n)\n', 4),
        Invalid('import ray\n@ray.remote(runtime_env={"env_vars": {"MKL_NUM_THREADS": "4"}})\ndef f():\n    pass\n', 2),
        Invalid(
            'import ray\nenv = {"env_vars": {"VECLIB_MAXIMUM_THREADS": "8"}}\nref = f.options(runtime_env=env).remote()\n',
            2,
        ),
        Invalid('from os import environ\nimport ray\nenviron["OMP_NUM_THREADS"] = "3"\n', 3),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        driver_share = self._smallest_share(model)
        for write in environ_writes(model):
            self._judge(ctx, write, driver_share, "every Ray worker started from here")
        for write in runtime_env_writes(model):
            assert write.site is not None
            is_init = model.call_name(write.site) == "ray.init"
            share = driver_share if is_init else _call_share(write.site)
            reach = "every worker of this cluster" if is_init else "every worker that runs this task or actor"
            self._judge(ctx, write, share, reach)

    def _judge(self, ctx: Context, write: EnvWrite, share: float, reach: str) -> None:
        key = write.variable
        if key not in THREAD_VARIABLES:
            return
        count = _thread_value(ctx.model, write.value, write.scope, write.at)
        if count is None or count <= 1 or count <= TOLERATED_THREADS_PER_CPU * share:
            return
        shown = "all cores" if count == ALL_CORES else f"{count:g}"
        ctx.report(
            write.node,
            f"`{key}` set to {shown} reaches {reach}",
            facts=SettingFacts(key, None if count == ALL_CORES else int(count)),
        )

    def _smallest_share(self, model: SemanticModel) -> float:
        """The CPUs of the smallest task in the module (1 when there are none or one is unknown)."""
        shares = [model.cpu_share(remote) for remote in model.remote_defs]
        if not shares or any(share is None for share in shares):
            return 1.0
        return min(share for share in shares if share is not None)


def _call_share(site: CallSite) -> float:
    """The `num_cpus` given in the same decorator or `.options(...)` call, else Ray's default of 1."""
    for arg in site.node.args:
        if arg.keyword is not None and arg.keyword.value == "num_cpus":
            return literal_number(arg.value) or 1.0
    return 1.0


def _thread_value(model: SemanticModel, value: cst.BaseExpression, scope: Scope, at: int) -> float | None:
    if model.is_cpu_count(value, scope, at):
        return ALL_CORES
    text = literal_string(value)
    if text is not None:
        return float(text) if text.strip().isdigit() else None
    return literal_number(value)
