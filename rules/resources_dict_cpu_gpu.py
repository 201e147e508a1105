"""RAY046 resources-dict-cpu-gpu: `resources={"CPU": n}` or `{"GPU": n}` instead of `num_cpus` / `num_gpus`."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.model import CallSite, SemanticModel, literal_string
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Keys Ray reserves for `num_cpus` / `num_gpus` (the check in Ray is case-sensitive: "cpu" is a custom resource).
RESERVED = {"CPU": "num_cpus", "GPU": "num_gpus"}
# Ray Data methods whose `resources=` becomes the remote args of their tasks or actors.
DATA_METHODS = ("map_batches", "map", "flat_map", "filter")
TASK_ERROR = "Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' in 'resources' keyword"


class ResourcesDictCpuGpu(Rule):
    code = "RAY046"
    name = "resources-dict-cpu-gpu"
    message = "`resources=` names `CPU` or `GPU`, which Ray rejects: use `num_cpus` / `num_gpus`"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = ("resources",)
    also_tokens = ('"CPU"', "'CPU'", '"GPU"', "'GPU'")  # only literal keys are reported
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
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Model, concurrency=2, resources={'GPU': 1})\n",
            4,
            fixed="import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Model, concurrency=2, num_gpus=1)\n",
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
        for site, where in self._calls(model):
            if id(site.node) in seen:
                continue
            seen.add(id(site.node))
            arg = next((a for a in site.node.args if a.keyword is not None and a.keyword.value == "resources"), None)
            if arg is None:
                continue
            found = self._resources_dict(model, site, arg.value)
            if found is None:
                continue
            dictionary, direct = found
            keys = list(_reserved_keys(dictionary))
            if not keys:
                continue
            fixable = direct and not (where == "init" and any(a.keyword is not None and a.keyword.value == "address" for a in site.node.args))
            ctx.report(site.node, self._message(keys, where), self._fix(ctx, site.node, arg, dictionary) if fixable else None)

    def _calls(self, model: SemanticModel) -> Iterator[tuple[CallSite, str]]:
        for site in model.calls_to("ray.remote"):
            yield site, "remote"
        for site in model.calls_to("ray.init"):
            yield site, "init"
        remote_calls = {id(s.node.func.value) for s in model.calls_by_tail.get("remote", ()) if isinstance(s.node.func, cst.Attribute)}
        for site in model.calls_by_tail.get("options", ()):
            func = site.node.func
            if not isinstance(func, cst.Attribute):
                continue
            if id(site.node) in remote_calls or model.remote_def_of(func.value, site.scope, site.index) is not None:
                yield site, "options"
        for method in DATA_METHODS:
            for site in model.calls_by_tail.get(method, ()):
                if isinstance(site.node.func, cst.Attribute):
                    yield site, "data"

    def _resources_dict(self, model: SemanticModel, site: CallSite, value: cst.BaseExpression) -> tuple[cst.Dict, bool] | None:
        """The dict literal given as `resources=`, and whether it is written in the call itself."""
        if isinstance(value, cst.Dict):
            return value, True
        if not isinstance(value, cst.Name):
            return None
        binding = model.reaching_binding(value.value, site.scope, site.index)
        if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.Dict):
            return None
        if len(binding.scope.bindings.get(value.value, [])) != 1 or value.value in binding.scope.globals:
            return None
        if _changed(model, value.value):
            return None
        return binding.value, False

    def _message(self, keys: list[str], where: str) -> str:
        named = " and ".join(f'`"{key}"`' for key in keys)
        keywords = " / ".join(f"`{RESERVED[key]}`" for key in keys)
        if where == "init":
            return (
                f"`ray.init(resources=...)` names {named}, which are not custom resources: Ray refuses them "
                f"(AssertionError from RayParams when it starts a cluster); use {keywords}"
            )
        when = "when the dataset executes" if where == "data" else "at once"
        return f"`resources=` names {named}, which Ray 2.60 rejects {when} (ValueError: {TASK_ERROR}); use {keywords}"

    def _fix(self, ctx: Context, call: cst.Call, arg: cst.Arg, dictionary: cst.Dict) -> FixPlan | None:
        text = move_entries_to_keywords(ctx, call, arg, dictionary, RESERVED)
        if text is None:
            return None
        return FixPlan("Move `CPU` / `GPU` to `num_cpus` / `num_gpus`", ((call, text),), Applicability.SAFE)


def move_entries_to_keywords(
    ctx: Context, call: cst.Call, arg: cst.Arg, dictionary: cst.Dict, keyword_of: dict[str, str]
) -> str | None:
    """The call's source with each `resources=` entry whose key is in `keyword_of` moved to that keyword
    argument, in the place of `resources=` (dropped when nothing is left in it); None when the call
    unpacks `**kwargs` or already has one of the keywords."""
    if any(a.star == "**" for a in call.args):
        return None
    present = {a.keyword.value for a in call.args if a.keyword is not None}
    position = list(call.args).index(arg)
    previous = call.args[position - 1].comma if position else None
    separator = previous if isinstance(previous, cst.Comma) else cst.MaybeSentinel.DEFAULT  # keeps a multi-line layout
    moved: list[cst.Arg] = []
    kept: list[cst.BaseDictElement] = []
    for element in dictionary.elements:
        key = literal_string(element.key) if isinstance(element, cst.DictElement) else None
        if key is None or key not in keyword_of:
            kept.append(element)
            continue
        keyword = keyword_of[key]
        if keyword in present:
            return None
        present.add(keyword)
        moved.append(cst.Arg(value=element.value, keyword=cst.Name(keyword), equal=arg.equal, comma=separator))
    if kept:
        last = dictionary.elements[-1]
        if kept[-1] is not last:
            kept[-1] = kept[-1].with_changes(comma=last.comma)
        moved.append(arg.with_changes(value=dictionary.with_changes(elements=kept)))
    moved[-1] = moved[-1].with_changes(comma=arg.comma)
    args: list[cst.Arg] = []
    for existing in call.args:
        args.extend(moved if existing is arg else [existing])
    return ctx.code_for(call.with_changes(args=args))


def _reserved_keys(dictionary: cst.Dict) -> Iterator[str]:
    found: list[str] = []
    for element in dictionary.elements:
        if isinstance(element, cst.DictElement):
            key = literal_string(element.key)
            if key in RESERVED and key not in found:
                found.append(key)
    yield from sorted(found)


def _changed(model: SemanticModel, name: str) -> bool:
    """Whether the dict a name holds may be changed in place (`res[k] = ...`, `del res[k]`, `res.pop(...)`)."""
    if any(isinstance(store.target, cst.Subscript) and isinstance(store.target.value, cst.Name) and store.target.value.value == name for store in model.stores):
        return True
    for site in model.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
            return True
    return False
