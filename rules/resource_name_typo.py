"""RAY081 resource-name-typo: `resources={"num_gpus": 1}` (or "num_cpus", "cpu", "gpu", "memory") names a
custom resource, or one Ray refuses there, instead of using the keyword option."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import PENDING_S, SCHEDULED_S, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, literal_number
from ray_lint.ray_api import (
    BUNDLE_KEY_OF,
    KEYWORD_OF,
    bundle_dicts,
    dict_entries,
    entries_moved_to_keywords,
    expected_to_raise,
    keyword_arg,
    placement_group_bundles,
    resource_request_sites,
    resources_dict,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid


# A stand-in task given `options`, submitted; it runs, or stays pending for lack of `KEYS`.
TASK = """
KEYS = {keys!r}

def work():
    return ray.get_gpu_ids()

work = ray.remote({options})(work)
ref = work.remote()
ready, _ = ray.wait([ref], timeout={wait})
if ready:
    __ray_lint_evidence__ = {{"right": f"the task ran, with ray.get_gpu_ids()={{ray.get(ref)}}"}}
else:
    ray.cancel(ref)
    missing = [key for key in KEYS if key not in ray.cluster_resources()]
    if missing:
        __ray_lint_evidence__ = {{"wrong": f"still pending after {wait} s: no node has {{missing}}"}}
    else:
        __ray_lint_evidence__ = {{"right": "accepted; the task waits for more than this cluster has"}}
"""
# A placement group of one bundle; it is placed, or never ready for lack of `KEYS`.
GROUP = """
from ray.util.placement_group import placement_group, remove_placement_group

KEYS = {keys!r}

pg = placement_group([{bundle}])
ready, _ = ray.wait([pg.ready()], timeout={wait})
remove_placement_group(pg)
if ready:
    __ray_lint_evidence__ = {{"right": "the placement group was placed"}}
else:
    missing = [key for key in KEYS if key not in ray.cluster_resources()]
    if missing:
        __ray_lint_evidence__ = {{"wrong": f"not ready after {wait} s: no node has {{missing}}"}}
    else:
        __ray_lint_evidence__ = {{"right": "accepted; the group waits for more than this cluster has"}}
"""


@dataclass(frozen=True)
class TypoFacts:
    """The misnamed entries, replayable: each key and its quantity (as written when a literal number, else 1),
    and where they are: "remote", "options", "data" (a task's or actor's `resources=`) or "bundle"."""

    entries: tuple[tuple[str, str], ...]
    where: str


class ResourceNameTypoExperiment(ReproductionExperiment[TypoFacts]):
    """The misnamed entries on a stand-in task (or in a placement-group bundle): A asks for them in `resources=`
    and waits a few seconds (a `"memory"` key is refused at submission instead); B gives them as `num_cpus=` /
    `num_gpus=` / `memory=` (or `"CPU"` / `"GPU"`), CPUs and GPUs at most what the verify cluster has, and
    runs. The user's script runs instead for a `"memory"` key alone, when it has an entry point and this is
    its only finding: a custom-resource typo hangs the script, which the verifier could only time out."""

    facts_type = TypoFacts
    expected = r"must not contain the key 'memory'"
    beside_others = True  # the misspelled resource is in none of the cluster's totals

    def plan(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        if facts.where == "bundle" or any(key != "memory" for key, _ in facts.entries):
            return self.model(subject)
        return super().plan(subject)

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        keys = [key for key, _ in facts.entries]
        cpus, gpus = subject.cluster_cpus, subject.cluster_gpus
        caps = {"num_cpus": cpus, "num_gpus": gpus, "CPU": cpus, "GPU": gpus, "memory": float("inf")}
        if facts.where == "bundle":
            flagged = "{" + ", ".join(f"{key!r}: {quantity}" for key, quantity in facts.entries) + "}"
            renamed = _renamed(facts.entries, BUNDLE_KEY_OF, caps)
            fixed = "{" + ", ".join(f"{key!r}: {quantity}" for key, quantity in renamed.items()) + "}"
            return Plan(
                Variant(flagged, script(GROUP.format(keys=keys, bundle=flagged, wait=PENDING_S))),
                Variant(fixed, script(GROUP.format(keys=list(renamed), bundle=fixed, wait=SCHEDULED_S))),
                "modelled",
                f"a placement group of one bundle {flagged}, and of {fixed} (CPUs and GPUs at most what this cluster has)",
            )
        flagged = "resources={" + ", ".join(f"{key!r}: {quantity}" for key, quantity in facts.entries) + "}"
        moved = _renamed(facts.entries, KEYWORD_OF, caps)
        fixed = ", ".join(f"{keyword}={quantity}" for keyword, quantity in moved.items())
        data = " (Ray Data makes its tasks with `ray.remote(**ray_remote_args)`)" if facts.where == "data" else ""
        return Plan(
            Variant(flagged, script(TASK.format(keys=keys, options=flagged, wait=PENDING_S))),
            Variant(fixed, script(TASK.format(keys=list(moved), options=fixed, wait=SCHEDULED_S))),
            "modelled",
            f"a stand-in task given {flagged}{data}, and the same with {fixed} (CPUs and GPUs at most what this cluster has)",
        )


def _renamed(entries: tuple[tuple[str, str], ...], name_of: dict[str, str], caps: dict[str, float]) -> dict[str, str]:
    """Each entry under the name it should have had, its quantity at most what the verify cluster has (the
    first entry wins where two mean the same)."""
    renamed: dict[str, str] = {}
    for key, quantity in entries:
        number = float(min(float(quantity), caps[name_of[key]]))
        renamed.setdefault(name_of[key], str(int(number)) if number.is_integer() else f"{number:g}")
    return renamed



def declared_resources(model: SemanticModel) -> set[str] | None:
    """Custom resources the module's `ray.init(resources={...})` calls declare; None when one of them
    passes a dict that is not a literal (or `**kwargs`), so any name may be declared."""
    declared: set[str] = set()
    for site in model.calls_to("ray.init"):
        if any(a.star == "**" for a in site.node.args):
            return None
        arg = keyword_arg(site.node, "resources")
        if arg is None:
            continue
        if not isinstance(arg.value, cst.Dict) or any(not isinstance(e, cst.DictElement) for e in arg.value.elements):
            return None
        declared |= {key for key, _ in dict_entries(arg.value)}
    return declared


class ResourceNameTypo(Rule):
    code = "RAY081"
    name = "resource-name-typo"
    message = "`resources=` names `num_cpus`, `num_gpus`, `cpu`, `gpu` or `memory`: use the keyword option"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = tuple(f"{quote}{key}{quote}:" for key in KEYWORD_OF for quote in ("'", '"'))  # a dict key
    also_tokens = ("resources", "placement_group")
    experiment = ResourceNameTypoExperiment()
    docs = """
## What it does
Finds a `resources=` dict with a literal key `"num_cpus"`, `"num_gpus"`, `"cpu"`, `"gpu"` or
`"memory"` (written in the call, or a name bound once to a dict literal in the same scope), given
to `@ray.remote(...)` / `ray.remote(...)(f)`, to `.options(...)` of a remote function or actor
class, or to a Ray Data `map_batches` / `map` / `flat_map` / `filter` call in a file that uses
Ray Data; and a placement-group bundle (`placement_group([{"cpu": 1}])`) keyed `"num_cpus"`,
`"num_gpus"`, `"cpu"` or `"gpu"`.

ray-lint is silent for:
- a name that a `ray.init(resources={...})` of the module declares as a custom resource (and for
  every name but `"memory"` when a `ray.init` passes a `resources=` it cannot read);
- `"CPU"` / `"GPU"` keys: RAY046;
- `"memory"` in a placement-group bundle, which is how a bundle reserves memory;
- Ray Tune's `tune.with_resources(fn, {"cpu": 2, "gpu": 1})` and `resources_per_trial`, which
  take these lowercase keys on purpose;
- code under `with pytest.raises(...)` or `with self.assertRaises(...)`.

## Why is this bad?
`resources=` holds *custom* resources, matched by exact name. `{"num_gpus": 1}`, `{"gpu": 1}` or
`{"cpu": 4}` asks for a custom resource of that name, which no node has unless someone declared
it, so the task or actor is infeasible: it stays pending forever, and Ray only logs once that
"the cluster currently cannot provide the requested resources". A placement group with such a
bundle is never ready. The GPU is not reserved either, so nothing isolates the device even where
the name happens to exist.

`"memory"` fails loudly instead: Ray refuses it when the task or actor is submitted
(`ValueError: The resources dictionary must not contain the key 'memory' or
'object_store_memory'`).

## Example
```python
@ray.remote(resources={"num_gpus": 1, "accelerator_type:A100": 1})
def train(config):
    ...

pg = placement_group([{"cpu": 4, "gpu": 1}])
```

## Use instead
```python
@ray.remote(num_gpus=1, resources={"accelerator_type:A100": 1})
def train(config):
    ...

pg = placement_group([{"CPU": 4, "GPU": 1}])
```

## Fix safety
The fix moves each entry to the keyword argument (`num_cpus=`, `num_gpus=`, `memory=`) in the same
call, keeping the other keys in `resources=` and dropping it when nothing is left; in a bundle it
renames the key to `"CPU"` / `"GPU"`. Moving `"memory"` alone is safe: the call could not run
before. The others are unsafe: a cluster started with `ray start --resources='{"gpu": 1}'` does
have such a custom resource, and the fix changes where the task may run and what it reserves.
There is no fix when the call already has the keyword, unpacks `**kwargs`, or when the dict is a
name bound elsewhere.

## References
- [Specifying task or actor resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Custom resources](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html#custom-resources)
- [Placement groups](https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html)
- [ray.remote](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
"""

    VALID = [
        Valid("import ray\n@ray.remote(num_cpus=2, num_gpus=1, memory=4 * 1024**3)\ndef f():\n    pass\n", "keyword options"),
        Valid(
            "import ray\nray.init(num_cpus=8, resources={'gpu': 2})\n\n@ray.remote(resources={'gpu': 1})\ndef f():\n    pass\n",
            "a custom resource this module declares",
        ),
        Valid(
            "import ray\nfrom ray.util.placement_group import placement_group\n\npg = placement_group([{'CPU': 2, 'memory': 2 * 1024**3}])\n",
            "memory is a bundle key",
        ),
        Valid("import ray\nfrom ray import tune\n\ntrainable = tune.with_resources(train_fn, {'cpu': 2, 'gpu': 1})\n", "Ray Tune's lowercase keys"),
        Valid("import ray\ntuner = run(train_fn, resources_per_trial={'cpu': 1, 'gpu': 1})\n", "resources_per_trial"),
        Valid("def submit(job, resources):\n    pass\n\nsubmit('train', resources={'gpu': 1})\n", "not a Ray call"),
        Valid("@ray.remote(resources={'num_gpus': 1})\ndef f():\n    pass\n", "no `import ray`"),
        Valid(
            "import ray\nray.init(resources=load_resources())\n\n@ray.remote(resources={'gpu': 1})\ndef f():\n    pass\n",
            "ray.init declares resources the linter cannot read",
        ),
        Valid(
            "import ray\nimport unittest\n\nclass T(unittest.TestCase):\n    def test_memory(self):\n"
            "        with self.assertRaises(ValueError):\n            ray.get(f.options(resources={'memory': 1}).remote())\n",
            "a test that expects Ray's error",
        ),
        Valid("import ray\nres = {'gpu': 1}\nres = {'accelerator': 1}\n@ray.remote(resources=res)\ndef f():\n    pass\n", "name bound twice"),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote(resources={'num_gpus': 1})\ndef f():\n    pass\n",
            3,
            fixed="import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    pass\n",
        ),
        Invalid(
            "import ray\n@ray.remote(resources={'cpu': 4, 'accelerator_type:A100': 1}, max_restarts=2)\nclass A:\n    pass\n",
            2,
            fixed="import ray\n@ray.remote(num_cpus=4, resources={'accelerator_type:A100': 1}, max_restarts=2)\nclass A:\n    pass\n",
        ),
        Invalid(
            "import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(resources={'memory': 2 * 1024**3}).remote()\n",
            6,
            fixed="import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(memory=2 * 1024**3).remote()\n",
            note="memory: refused at submission, a safe fix",
        ),
        Invalid(
            "import ray\n\ndef f():\n    pass\n\ng = ray.remote(resources={'gpu': 0.5, 'cpu': 2})(f)\n",
            6,
            fixed="import ray\n\ndef f():\n    pass\n\ng = ray.remote(num_gpus=0.5, num_cpus=2)(f)\n",
        ),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Embed, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2), resources={'num_gpus': 1})\n",
            4,
            fixed="import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Embed, batch_size=64, compute=ray.data.ActorPoolStrategy(size=2), num_gpus=1)\n",
        ),
        Invalid(
            "import ray\nfrom ray.util.placement_group import placement_group\n\npg = placement_group([{'cpu': 4, \"gpu\": 1}, {'CPU': 1}])\n",
            4,
            fixed="import ray\nfrom ray.util.placement_group import placement_group\n\npg = placement_group([{'CPU': 4, \"GPU\": 1}, {'CPU': 1}])\n",
        ),
        Invalid("import ray\n@ray.remote(num_gpus=1, resources={'gpu': 1})\ndef f():\n    pass\n", 2, note="already has num_gpus: no fix"),
        Invalid("import ray\nRES = {'num_cpus': 2}\n@ray.remote(resources=RES)\ndef f():\n    pass\n", 3, note="through a name: no fix"),
        Invalid(
            "import ray\n\nhandle = Worker.options(\n    name='w',\n    resources={\n        'num_cpus': 2,\n    },\n).remote()\n",
            6,
            fixed="import ray\n\nhandle = Worker.options(\n    name='w',\n    num_cpus=2,\n).remote()\n",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        declared = declared_resources(model)
        reported: set[int] = set()
        expected = expected_to_raise(model)
        for site, where in resource_request_sites(model):
            found = resources_dict(model, site)
            if found is None or id(site.node) in expected:
                continue
            arg, dictionary, direct = found
            typos = [
                (key, element) for key, element in dict_entries(dictionary) if key in KEYWORD_OF and _undeclared(key, declared)
            ]
            if not typos:
                continue
            node = typos[0][1] if direct else arg.value
            if id(node) in reported:
                continue
            reported.add(id(node))
            fix = self._fix(ctx, site, arg, dictionary, typos) if direct else None
            ctx.report(node, self._message([key for key, _ in typos], where), fix, facts=TypoFacts(_entries(typos), where))
        bundles = [bundle for _, value in placement_group_bundles(model) for bundle in bundle_dicts(value)]
        for bundle in bundles:
            typos = [
                (key, element) for key, element in dict_entries(bundle) if key in BUNDLE_KEY_OF and _undeclared(key, declared)
            ]
            if typos:
                facts = TypoFacts(_entries(typos), "bundle")
                ctx.report(typos[0][1], self._bundle_message([key for key, _ in typos]), self._bundle_fix(bundle, typos), facts=facts)

    def _message(self, keys: list[str], where: str) -> str:
        custom = [key for key in keys if key != "memory"]
        named = " and ".join(f'`"{key}"`' for key in custom)
        if custom and "memory" in keys:
            keywords = " / ".join(sorted({f"`{KEYWORD_OF[key]}=`" for key in keys}))
            return f'`resources=` names {named} and `"memory"`, which belong in {keywords}'
        if custom:
            kind = "a custom resource" if len(custom) == 1 else "custom resources"
            return f"`resources=` asks for {named}, {kind} no node has unless declared"
        return '`resources=` names `"memory"`, which Ray refuses when the task or actor is submitted'

    def _bundle_message(self, keys: list[str]) -> str:
        named = " and ".join(f'`"{key}"`' for key in keys)
        return f"This placement-group bundle asks for {named}, which no node has unless declared"

    def _fix(
        self, ctx: Context, site: CallSite, arg: cst.Arg, dictionary: cst.Dict, typos: list[tuple[str, cst.DictElement]]
    ) -> FixPlan | None:
        keyword_of = {key: KEYWORD_OF[key] for key, _ in typos}
        moved = entries_moved_to_keywords(site.node, arg, dictionary, keyword_of)
        if moved is None:
            return None
        safe = set(keyword_of) == {"memory"}
        keywords = ", ".join(f"`{keyword}=`" for keyword in dict.fromkeys(keyword_of.values()))
        return FixPlan(f"Move to {keywords}", ((site.node, ctx.code_for(moved)),), Applicability.SAFE if safe else Applicability.UNSAFE)

    def _bundle_fix(self, bundle: cst.Dict, typos: list[tuple[str, cst.DictElement]]) -> FixPlan | None:
        keys = [key for key, _ in dict_entries(bundle)]
        renamed = [BUNDLE_KEY_OF[key] for key, _ in typos]
        if len(set(renamed)) != len(renamed) or set(renamed) & set(keys):
            return None
        replacements: list[tuple[cst.CSTNode, str]] = []
        for key, element in typos:
            string = element.key
            if not isinstance(string, cst.SimpleString):
                return None
            replacements.append((string, f"{string.prefix}{string.quote}{BUNDLE_KEY_OF[key]}{string.quote}"))
        return FixPlan(f"Rename to {', '.join(repr(name) for name in renamed)}", tuple(replacements), Applicability.UNSAFE)


def _entries(typos: list[tuple[str, cst.DictElement]]) -> tuple[tuple[str, str], ...]:
    """(key, quantity) of each entry: the quantity when it is a positive literal number, else 1."""
    found = []
    for key, element in typos:
        number = literal_number(element.value) or 0.0
        found.append((key, (str(int(number)) if number.is_integer() else repr(number)) if number > 0 else "1"))
    return tuple(found)


def _undeclared(key: str, declared: set[str] | None) -> bool:
    """Whether a key cannot be a custom resource this module declares (`"memory"` never can)."""
    if key == "memory":
        return True
    return declared is not None and key not in declared
