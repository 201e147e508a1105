"""RAY046 resources-dict-cpu-gpu: `resources={"CPU": n}` or `{"GPU": n}` instead of `num_cpus` / `num_gpus`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.python_model import literal_number, literal_string
from ray_lint.ray_api import (
    RESERVED_RESOURCES,
    dict_entries,
    entries_moved_to_keywords,
    keyword_arg,
    resource_option_calls,
    resources_dict,
    value_text,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# The stand-in task: the GPUs Ray gives it show that `num_gpus` reached the scheduler.
TASK = """
def work():
    return ray.get_gpu_ids()
"""
# B's ending: the task ran, or Ray accepted it and it waits for more than the verify cluster has.
RUN = """
ref = work.remote()
ready, _ = ray.wait([ref], timeout=5)
if ready:
    __ray_lint_evidence__ = {"right": f"the task ran, with ray.get_gpu_ids()={ray.get(ref)}"}
else:
    ray.cancel(ref)
    __ray_lint_evidence__ = {"right": "accepted; the task waits for more than this cluster has"}
"""


@dataclass(frozen=True)
class ResourcesFacts:
    """The flagged `resources=` dict, replayable: each entry's key and quantity (a literal as written, else 1),
    and where Ray reads it ("remote", "options", "data" or "init"; `connects` when `ray.init` has an address)."""

    entries: tuple[tuple[str, str], ...]
    where: str
    connects: bool = False


class ResourcesDictCpuGpuExperiment(ReproductionExperiment[ResourcesFacts]):
    """The flagged `resources=` dict on a stand-in task (at decoration, or at `.options(...)`), or in the
    parameters `ray.init` checks before it starts a node; B moves `CPU` / `GPU` to `num_cpus` / `num_gpus` and runs
    the task. The user's script runs instead when it has an entry point and this is the file's only such dict."""

    facts_type = ResourcesFacts
    shares_driver = True
    expected = (
        r"Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' in 'resources' keyword"
        r"|cannot be a custom resource because it is one of the default resources"
    )

    def plan(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        if facts.where == "init":
            return self.model(subject)  # the probe's `ray.init` is the verifier's; Ray stops at the first refused dict
        return super().plan(subject)

    def model(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        if facts.connects:
            return "`ray.init(address=...)` here: connecting refuses `resources=` altogether, which the verifier cannot replay on its own cluster"
        flagged = "resources={" + ", ".join(f"{key!r}: {quantity}" for key, quantity in facts.entries) + "}"
        moved = [f"{RESERVED_RESOURCES[key]}={quantity}" for key, quantity in facts.entries if key in RESERVED_RESOURCES]
        kept = [f"{key!r}: {quantity}" for key, quantity in facts.entries if key not in RESERVED_RESOURCES]
        fixed = ", ".join(moved + (["resources={" + ", ".join(kept) + "}"] if kept else []))
        if facts.where == "init":
            check = "from ray._private.parameter import RayParams\n\nRayParams({options})\n"
            return Plan(
                Variant(flagged, script(check.format(options=flagged))),
                Variant(fixed, script(check.format(options=fixed) + "__ray_lint_evidence__ = {'right': 'accepted'}\n")),
                "modelled",
                "the parameters `ray.init` checks before it starts a local node (RayParams), with the dict as written and moved to keywords",
            )
        if facts.where == "options":
            a, b = f"work = ray.remote(work).options({flagged})", f"work = ray.remote(work).options({fixed})"
        else:
            a, b = f"work = ray.remote({flagged})(work)", f"work = ray.remote({fixed})(work)"
        how = {
            "options": "at `.options(...)`",
            "data": "by `ray.remote` (Ray Data makes its tasks with `ray.remote(**ray_remote_args)`)",
        }.get(facts.where, "by `ray.remote`")
        return Plan(
            Variant(flagged, script(TASK + a + "\n")),
            Variant(fixed, script(TASK + b + "\n" + RUN)),
            "modelled",
            f"a stand-in task given {flagged} {how}, and the same with {fixed}",
        )



class ResourcesDictCpuGpu(Rule):
    code = "RAY046"
    name = "resources-dict-cpu-gpu"
    message = "`resources=` names `CPU` or `GPU`, which Ray rejects: use `num_cpus` / `num_gpus`"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = ("resources",)
    also_tokens = ('"CPU"', "'CPU'", '"GPU"', "'GPU'")  # only literal keys are reported
    experiment = ResourcesDictCpuGpuExperiment()
    docs = """
## What it does
Finds a `resources=` dict with a literal `"CPU"` or `"GPU"` key (directly, or through a name
bound once to a dict literal in the same scope) passed to:
- `@ray.remote(...)` or `ray.remote(...)(f)`, for a task or an actor class;
- `.options(...)` of a remote function or actor class (or any `x.options(...).remote(...)`);
- a Ray Data map call: `map_batches`, `map`, `flat_map`, `filter`;
- `ray.init(...)`.

## Why is this bad?
`CPU` and `GPU` are Ray's built-in resources, and the only way to request them is `num_cpus` and
`num_gpus`. Ray 2.60 rejects them in `resources` (`_common/ray_option_utils.py`,
`_validate_resources`), with
`ValueError: Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' in 'resources' keyword`:
- at decoration for `@ray.remote(...)`, and at the `.options(...)` call;
- for Ray Data, when the dataset executes: its tasks are made with `ray.remote(**ray_remote_args)`
  and its actors with `cls.options(**ray_remote_args)`, which run the same check.

`ray.init(resources={"CPU": n})` fails too, with an `AssertionError` from `RayParams`
("`CPU` cannot be a custom resource because it is one of the default resources... Use
`num_cpus` instead"), and with a `ValueError` when connecting to an existing cluster, where
`resources` must not be given at all.

The check is case-sensitive: `{"cpu": 1}` or `{"gpu": 1}` is accepted as a *custom* resource
that no node provides unless it was declared, so such a task waits forever (not reported here).
Placement-group bundles (`placement_group([{"CPU": 1, "GPU": 1}])`), Ray Train's
`resources_per_worker={"CPU": ...}` and Ray Tune's `tune.with_resources(...)` do use these keys
and are not reported.

## Example
```python
@ray.remote(resources={"GPU": 1, "CPU": 4})
def train(config):
    ...
```

## Use instead
```python
@ray.remote(num_gpus=1, num_cpus=4)
def train(config):
    ...
```
Custom resources stay in `resources=`: `resources={"GPU": 1, "accelerator_type:A100": 1}`
becomes `num_gpus=1, resources={"accelerator_type:A100": 1}`.

## Fix safety
The fix moves each `"CPU": n` to `num_cpus=n` and each `"GPU": n` to `num_gpus=n` in the same
call, keeping the other keys in `resources=` (and dropping it when nothing is left). It is safe:
the quantity is the same expression, and the call could not run before. It is not offered when
the call already has the keyword it would add, unpacks `**kwargs`, or when the dict is a name
bound elsewhere.

## References
- [Specifying task or actor resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [ray.remote](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
- [Ray Data: configuring resources](https://docs.ray.io/en/latest/data/performance-tips.html)
"""

    VALID = [
        Valid("import ray\n@ray.remote(num_cpus=2, num_gpus=1)\ndef f():\n    pass\n", "num_cpus / num_gpus"),
        Valid(
            "import ray\nfrom ray.util.placement_group import placement_group\n"
            "from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n"
            "pg = placement_group([{'CPU': 1, 'GPU': 1}], strategy='PACK')\n\n"
            "@ray.remote(num_cpus=1, num_gpus=1)\ndef f():\n    pass\n\n"
            "f.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg)).remote()\n",
            "placement-group bundles do use CPU / GPU keys",
        ),
        Valid("import ray\n@ray.remote(num_gpus=1, resources={'accelerator_type:A100': 1})\nclass A:\n    pass\n", "custom resource"),
        Valid("import ray\n@ray.remote\ndef f():\n    pass\n\nf.options(resources={'custom': 1}).remote()\n", "custom resource in .options"),
        Valid("import ray\n@ray.remote(resources={'cpu': 1, 'gpu': 1})\ndef f():\n    pass\n", "lowercase: custom resources to Ray"),
        Valid("def schedule(job, resources):\n    pass\n\nschedule('train', resources={'CPU': 4, 'GPU': 1})\n", "not a Ray call"),
        Valid("import ray\nray.init(num_cpus=4, num_gpus=1, resources={'special': 2})\n", "ray.init with custom resources"),
        Valid(
            "import ray\nfrom ray.train import ScalingConfig\n\n"
            "config = ScalingConfig(num_workers=2, resources_per_worker={'CPU': 4, 'GPU': 1})\n",
            "Ray Train's resources_per_worker uses CPU / GPU keys",
        ),
        Valid("import ray\nfrom ray import tune\n\ntrainable = tune.with_resources(train_fn, resources={'CPU': 2, 'GPU': 1})\n", "Ray Tune"),
        Valid("import ray\nres = get_resources()\n@ray.remote(resources=res)\ndef f():\n    pass\n", "resources unknown"),
        Valid(
            "import ray\nres = {'CPU': 1}\nres = {'custom': 1}\n@ray.remote(resources=res)\ndef f():\n    pass\n",
            "name bound twice: not followed",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote(resources={'GPU': 1})\ndef f():\n    pass\n",
            3,
            fixed="import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    pass\n",
        ),
        Invalid(
            "import ray\n@ray.remote(resources={'CPU': 4, 'accelerator_type:A100': 1}, max_retries=2)\nclass A:\n    pass\n",
            2,
            fixed="import ray\n@ray.remote(num_cpus=4, resources={'accelerator_type:A100': 1}, max_retries=2)\nclass A:\n    pass\n",
        ),
        Invalid(
            "import ray\n\ndef f():\n    pass\n\ng = ray.remote(resources={'CPU': 2, 'GPU': 0.5})(f)\n",
            6,
            fixed="import ray\n\ndef f():\n    pass\n\ng = ray.remote(num_cpus=2, num_gpus=0.5)(f)\n",
        ),
        Invalid(
            "import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(resources={'custom': 1, 'GPU': 1}).remote()\n",
            6,
            fixed="import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(num_gpus=1, resources={'custom': 1}).remote()\n",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Actor:\n    pass\n\nactor = Actor.options(name='a', resources={'CPU': 1}).remote()\n",
            6,
            fixed="import ray\n@ray.remote\nclass Actor:\n    pass\n\nactor = Actor.options(name='a', num_cpus=1).remote()\n",
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Model, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2), resources={'GPU': 1})\n",
            4,
            fixed="import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Model, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2), num_gpus=1)\n",
        ),
        Invalid(
            "import ray\nray.init(resources={'CPU': 8, 'special': 1})\n",
            2,
            fixed="import ray\nray.init(num_cpus=8, resources={'special': 1})\n",
        ),
        Invalid("import ray\n@ray.remote(num_gpus=1, resources={'GPU': 1})\ndef f():\n    pass\n", 2, note="already has num_gpus: no fix"),
        Invalid("import ray\nray.init(address='auto', resources={'GPU': 1})\n", 2, note="connecting to a cluster: num_gpus is refused too, no fix"),
        Invalid("import ray\nRES = {'GPU': 1}\n@ray.remote(resources=RES)\ndef f():\n    pass\n", 3, note="through a name: no fix"),
        Invalid("import ray\nfrom ray import remote\n@remote(resources={'CPU': 1}, **opts)\ndef f():\n    pass\n", 3, note="**kwargs: no fix"),
        Invalid(
            "import ray\n\nhandle = get_actor_class().options(\n    resources={\n        'CPU': 2,\n    },\n).remote()\n",
            3,
            fixed="import ray\n\nhandle = get_actor_class().options(\n    num_cpus=2,\n).remote()\n",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        seen: set[int] = set()
        for site, where in resource_option_calls(model):
            if id(site.node) in seen:
                continue
            seen.add(id(site.node))
            found = resources_dict(model, site)
            if found is None:
                continue
            arg, dictionary, direct = found
            keys = list(_reserved_keys(dictionary))
            if not keys:
                continue
            connects = where == "init" and keyword_arg(site.node, "address") is not None
            fix = self._fix(ctx, site.node, arg, dictionary) if direct and not connects else None
            ctx.report(site.node, self._message(keys, where), fix, facts=ResourcesFacts(_entries(dictionary), where, connects))

    def _message(self, keys: list[str], where: str) -> str:
        named = " and ".join(f'`"{key}"`' for key in keys)
        if where == "init":
            return f"`ray.init(resources=...)` names {named}, which Ray refuses as custom resources"
        when = "when the dataset executes" if where == "data" else "at once"
        return f"`resources=` names {named}, which Ray rejects {when}"

    def _fix(self, ctx: Context, call: cst.Call, arg: cst.Arg, dictionary: cst.Dict) -> FixPlan | None:
        moved = entries_moved_to_keywords(call, arg, dictionary, RESERVED_RESOURCES)
        if moved is None:
            return None
        return FixPlan("Move `CPU` / `GPU` to `num_cpus` / `num_gpus`", ((call, ctx.code_for(moved)),), Applicability.SAFE)


def _entries(dictionary: cst.Dict) -> tuple[tuple[str, str], ...]:
    """(key, quantity) of each entry, the quantity as written when it is a literal number, else 1."""
    return tuple(
        (key, value_text(element.value) if literal_number(element.value) is not None else "1")
        for key, element in dict_entries(dictionary)
    )


def _reserved_keys(dictionary: cst.Dict) -> Iterator[str]:
    found: list[str] = []
    for element in dictionary.elements:
        if isinstance(element, cst.DictElement):
            key = literal_string(element.key)
            if key in RESERVED_RESOURCES and key not in found:
                found.append(key)
    yield from sorted(found)
