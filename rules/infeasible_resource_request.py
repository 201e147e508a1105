"""RAY050 infeasible-resource-request: a literal request that the local cluster the module starts with
`ray.init(num_cpus=..., num_gpus=..., resources={...})` can never satisfy, so the work waits forever."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import PENDING_S, SCHEDULED_S, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import CallSite, literal_number, literal_string
from ray_lint.ray_api import (
    BUNDLE_KEY_OF,
    KEYWORD_OF,
    RESERVED_RESOURCES,
    WHOLE_ABOVE_ONE,
    WHOLE_ONLY,
    bundle_dicts,
    dict_entries,
    expected_to_raise,
    keyword_arg,
    placement_group_bundles,
    quantity_problem,
    resource_request_sites,
    resources_dict,
    value_text,
)
from ray_lint.rule import Context, Invalid, Rule, Valid

# Resources a node gets without being told: memory, accelerators it detects, its `node:<ip>` and
# `accelerator_type:<type>` markers, TPU pod names.
DETECTED = frozenset({"memory", "object_store_memory", "TPU", *WHOLE_ONLY, *WHOLE_ABOVE_ONE})
# Modules that start more nodes than `ray.init` does.
MULTI_NODE_MODULES = ("ray.cluster_utils", "ray.autoscaler")
STRATEGY_STRICT_SPREAD = "STRICT_SPREAD"
TIMEOUT_ERROR = "ray.exceptions.GetTimeoutError"

# A stand-in task with a resource request; it runs, or stays pending.
TASK = """
def work():
    return "ran"

{make}
ref = work.remote()
ready, _ = ray.wait([ref], timeout={wait})
if ready:
    __ray_lint_evidence__ = {{"right": "the task ran"}}
else:
    ray.cancel(ref)
    __ray_lint_evidence__ = {{"wrong": "still pending after {wait} s: {need}"}}
"""
# A placement group; it is placed, or never ready.
GROUP = """
from ray.util.placement_group import placement_group, remove_placement_group

pg = placement_group({bundles}, strategy={strategy!r})
ready, _ = ray.wait([pg.ready()], timeout={wait})
remove_placement_group(pg)
if ready:
    __ray_lint_evidence__ = {{"right": "the placement group was placed"}}
else:
    __ray_lint_evidence__ = {{"wrong": "not ready after {wait} s: {need}"}}
"""


@dataclass(frozen=True)
class ShortfallFacts:
    """What can never be scheduled: the resource (`CPU`, `GPU` or a custom one), how much is asked, how much the
    module's `ray.init` gives the node, and what asks: "task" (a task or actor), "bundle" (one bundle), "bundles"
    (`count` bundles together) or "spread" (a STRICT_SPREAD group of `count` bundles, one node each)."""

    resource: str
    requested: float
    capacity: float
    what: str = "task"
    count: int = 1


class InfeasibleResourceRequestExperiment(ReproductionExperiment[ShortfallFacts]):
    """The request on the verify cluster (one node, like the one `ray.init` starts): A asks for the code's
    quantity (or, where this cluster is bigger than the code's, one more than it has) and waits a few seconds;
    B asks for what the code's node has (at most what this cluster has) and runs. For a placement group, the
    same with its bundles; a STRICT_SPREAD group of several bundles against the same group packed."""

    facts_type = ShortfallFacts
    beside_others = True  # the flagged request exceeds the cluster's total, not what is free

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        has = {"CPU": subject.cluster_cpus, "GPU": subject.cluster_gpus}.get(facts.resource, 0.0)
        if facts.what == "spread":
            bundles = repr([{"CPU": 0.01}] * facts.count)
            need = f"STRICT_SPREAD puts each of the {facts.count} bundles on its own node, and there is one"
            return Plan(
                Variant("STRICT_SPREAD", script(GROUP.format(bundles=bundles, strategy="STRICT_SPREAD", wait=PENDING_S, need=need))),
                Variant("PACK", script(GROUP.format(bundles=bundles, strategy="PACK", wait=SCHEDULED_S, need=""))),
                "modelled",
                f"a placement group of {facts.count} small bundles on this one-node cluster, STRICT_SPREAD and PACK",
            )
        asked = facts.requested if facts.requested > has else has + 1
        fits = min(facts.capacity, has)
        asks = "the bundles ask for" if facts.what == "bundles" else "it asks for"
        need = f"{asks} {_number(asked)} {facts.resource!r}, and the node has {_number(has)}"
        if facts.resource not in ("CPU", "GPU"):
            scaled = f" (this cluster has no {facts.resource!r}; the code's node has {_number(facts.capacity)})"
        elif asked != facts.requested:
            scaled = f" (this cluster has {_number(has)}, more than the code's node: it asks for one more)"
        else:
            scaled = ""
        if facts.what == "task":
            flagged, fixed = _request(facts.resource, asked), _request(facts.resource, fits)
            return Plan(
                Variant(flagged, script(TASK.format(make=_make(flagged), wait=PENDING_S, need=need))),
                Variant(fixed or "no request", script(TASK.format(make=_make(fixed), wait=SCHEDULED_S, need=""))),
                "modelled",
                f"a stand-in task given {flagged}{scaled}, and given {fixed or 'nothing'}, which both nodes have",
            )
        count = facts.count if facts.what == "bundles" else 1
        flagged, fixed = _bundles(facts.resource, asked, count), _bundles(facts.resource, fits, count)
        return Plan(
            Variant(flagged, script(GROUP.format(bundles=flagged, strategy="PACK", wait=PENDING_S, need=need))),
            Variant(fixed, script(GROUP.format(bundles=fixed, strategy="PACK", wait=SCHEDULED_S, need=""))),
            "modelled",
            f"a placement group of bundles {flagged}{scaled}, and of {fixed}, which both nodes have",
        )


def _request(resource: str, quantity: float) -> str:
    """The options that ask for `quantity` of `resource` ("" for none of a custom resource)."""
    if resource in ("CPU", "GPU"):
        return f"num_{resource.lower()}s={_number(quantity)}"
    return f"resources={{{resource!r}: {_number(quantity)}}}" if quantity > 0 else ""


def _make(options: str) -> str:
    return f"work = ray.remote({options})(work)" if options else "work = ray.remote(work)"


def _bundles(resource: str, total: float, count: int) -> str:
    """`count` bundles asking for `total` of `resource` together (a small CPU bundle where that is none)."""
    each = math.floor(total / count * 10000) / 10000
    bundle = f"{{{resource!r}: {_number(each)}}}" if each > 0 else "{'CPU': 0.01}"
    return "[" + ", ".join([bundle] * count) + "]"


@dataclass
class LocalCluster:
    """What the module's one `ray.init(...)` starts: a single node with these literal resources
    (None: not given, so detected from the machine)."""

    init: cst.Call
    cpus: float | None
    gpus: float | None
    custom: dict[str, float | None] | None  # declared custom resources (None: not readable)
    named: dict[str, cst.BaseExpression] = field(default_factory=dict)  # the init's literal keywords, for messages

    def capacity(self, resource: str) -> tuple[float | None, bool]:
        """How much of `resource` the node has, and whether that is known from the code."""
        if resource == "CPU":
            return self.cpus, self.cpus is not None
        if resource == "GPU":
            return self.gpus, self.gpus is not None
        if self.custom is None or resource in DETECTED or ":" in resource or "TPU" in resource:
            return None, False
        if resource not in self.custom:
            return 0.0, True
        value = self.custom[resource]
        return value, value is not None


def local_cluster(model: SemanticModel) -> LocalCluster | None:
    """The single-node cluster the module starts, when its only `ray.init` call gives a literal `num_cpus`,
    `num_gpus` or `resources` (Ray refuses those when connecting to an existing cluster)."""
    inits = model.calls_to("ray.init")
    if len(inits) != 1 or any(model.imports_module(name) for name in MULTI_NODE_MODULES):
        return None
    call = inits[0].node
    if any(a.keyword is None for a in call.args) or keyword_arg(call, "address") is not None:
        return None  # positional address, **kwargs, or an address: maybe an existing cluster
    values = {name: arg.value for name in ("num_cpus", "num_gpus", "resources") if (arg := keyword_arg(call, name)) is not None}
    cpus = literal_number(values.get("num_cpus"))
    gpus = literal_number(values.get("num_gpus"))
    declared = values.get("resources")
    custom = {} if declared is None else _literal_resources(declared)
    literal = {name for name, value in values.items() if name != "resources" and literal_number(value) is not None}
    if not literal and not (declared is not None and custom is not None):
        return None
    named = {name: value for name, value in values.items() if name in literal or name == "resources"}
    return LocalCluster(call, cpus, gpus, custom, named)


def _literal_resources(expr: cst.BaseExpression) -> dict[str, float | None] | None:
    """`{name: quantity}` of a dict literal with plain string keys (a quantity None when not literal); None for
    anything else."""
    if not isinstance(expr, cst.Dict):
        return None
    if any(not isinstance(e, cst.DictElement) or literal_string(e.key) is None for e in expr.elements):
        return None
    return {key: literal_number(element.value) for key, element in dict_entries(expr)}


def _requests(model: SemanticModel, site: CallSite) -> Iterator[tuple[str, cst.BaseExpression, str]]:
    """(resource, quantity expression, how the code names it) for a call's literal resource options."""
    for keyword, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        arg = keyword_arg(site.node, keyword)
        if arg is not None:
            yield resource, arg.value, f"`{keyword}={value_text(arg.value)}`"
    found = resources_dict(model, site)
    if found is not None:
        for key, element in dict_entries(found[1]):
            if key not in RESERVED_RESOURCES and key not in KEYWORD_OF:  # RAY046's and RAY081's
                yield key, element.value, f"`resources={{{key!r}: {value_text(element.value)}}}`"


def _expects_pending(model: SemanticModel) -> bool:
    """Whether the module waits for something not to finish: it imports `GetTimeoutError`, or a test expects
    an error from `ray.get` / `ray.wait` (`with pytest.raises(GetTimeoutError): ray.get(ref, timeout=1)`)."""
    if model.imports_module(TIMEOUT_ERROR):
        return True
    expected = expected_to_raise(model)
    return any(id(site.node) in expected for name in ("ray.get", "ray.wait") for site in model.calls_to(name))


def _overridden(remote: RemoteDef | None, keyword: str) -> bool:
    """Whether a decorator's option may not be what the work runs with: `.options(...)` sets it again
    (or the function is handed to code that may), so the decorator's value may never be used."""
    if remote is None:
        return False
    if remote.escapes or any(o.has_unpacked for o in remote.call_options):
        return True
    return any(keyword in options.values for options in remote.call_options)


class InfeasibleResourceRequest(Rule):
    code = "RAY050"
    name = "infeasible-resource-request"
    message = "A literal resource request exceeds what the local cluster started by `ray.init(...)` has"
    severity = Severity.ERROR
    category = "resource"
    tokens = ("init(",)
    also_tokens = ("num_cpus", "num_gpus", "resources")
    experiment = InfeasibleResourceRequestExperiment()
    docs = """
## What it does
In a module whose only `ray.init(...)` call starts a local cluster with a literal `num_cpus=`,
`num_gpus=` or `resources={...}`, finds literal requests that this one node can never satisfy:
- `num_cpus=` / `num_gpus=` above the node's, in `@ray.remote(...)`, `ray.remote(...)(f)` or
  `.options(...)`;
- a custom resource in `resources={...}` that `ray.init` does not declare, or more of it than
  declared;
- a `placement_group([...])` bundle that does not fit the node, bundles that together do not fit
  it, or a `STRICT_SPREAD` group of several bundles (which needs as many nodes).

ray-lint is silent when:
- `ray.init` connects to a cluster (`address=`, a positional argument, `**kwargs`), is called
  more than once in the module, or gives no literal resources (the node then has what the machine
  has); or the module uses `ray.cluster_utils` or the autoscaler, which add nodes;
- a resource is detected rather than declared: GPUs without `num_gpus=`, accelerators (`TPU`,
  `neuron_cores`, ...), `memory`, `node:<ip>` and `accelerator_type:<type>` markers;
- a decorator's value is set again by `.options(...)` somewhere in the module (the decorator's
  may never be used), or the remote function is handed to other code that may set options;
- a Ray Data map asks for the resources (Ray Data reports it);
- the module expects work to stay pending: it imports `GetTimeoutError`, or a test expects an
  error from `ray.get` / `ray.wait` (`with pytest.raises(...)`).

## Why is this bad?
Ray does not refuse a request that no node can meet: the task, actor or placement group waits for
a node that will never come. The raylet logs once that "The lease with ID ... cannot be scheduled
right now. It requires ... however the cluster currently cannot provide the requested
resources", and for a placement group not even that. The driver hangs in `ray.get` (or
`pg.ready()`) with no error. On an autoscaling cluster the same request would wait for a node
type that has it; a local cluster started by `ray.init` never grows.

## Example
```python
ray.init(num_cpus=4)

@ray.remote(num_cpus=8)
def simulate(seed):
    ...
```

## Use instead
```python
ray.init(num_cpus=8)  # or ask for at most what the node has

@ray.remote(num_cpus=4)
def simulate(seed):
    ...
```

## Fix safety
There is no automatic fix: whether the request or the cluster is wrong is not in the code.

## References
- [Specifying task or actor resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Custom resources](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html#custom-resources)
- [Placement groups](https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html)
- [Ray Tune FAQ: trials that never start](https://docs.ray.io/en/latest/tune/faq.html)
"""

    VALID = [
        Valid("import ray\nray.init(num_cpus=8)\n\n@ray.remote(num_cpus=8)\ndef f():\n    pass\n", "fits exactly"),
        Valid("import ray\nray.init(address='auto')\n\n@ray.remote(num_cpus=64, resources={'big_node': 1})\ndef f():\n    pass\n", "an existing cluster"),
        Valid("import ray\nray.init()\n\n@ray.remote(num_gpus=4)\ndef f():\n    pass\n", "no literal resources: detected"),
        Valid("import ray\nray.init(num_cpus=2)\n\n@ray.remote(num_gpus=1, resources={'accelerator_type:A100': 0.01})\ndef f():\n    pass\n", "GPUs detected"),
        Valid(
            "import ray\nray.init(num_cpus=2)\n\n@ray.remote(num_cpus=8)\ndef f():\n    pass\n\nrefs = [f.options(num_cpus=1).remote() for _ in range(4)]\n",
            "the decorator's value is always overridden",
        ),
        Valid(
            "import ray\n\ndef test_small():\n    ray.init(num_cpus=1)\n\ndef test_big():\n    ray.init(num_cpus=16)\n\n@ray.remote(num_cpus=8)\ndef f():\n    pass\n",
            "two ray.init calls",
        ),
        Valid(
            "import ray\nfrom ray.cluster_utils import Cluster\n\ncluster = Cluster()\ncluster.add_node(num_cpus=8)\nray.init(num_cpus=1)\n\n@ray.remote(num_cpus=8)\ndef f():\n    pass\n",
            "more nodes from cluster_utils",
        ),
        Valid(
            "import ray\nfrom ray.util.placement_group import placement_group\nray.init(num_cpus=4, resources={'disk': 2})\n\n"
            "pg = placement_group([{'CPU': 2, 'disk': 1}, {'CPU': 2, 'disk': 1}])\n",
            "bundles fit together",
        ),
        Valid(
            "import pytest\nimport ray\nfrom ray.exceptions import GetTimeoutError\nray.init(num_cpus=1)\n\n"
            "@ray.remote(num_cpus=2)\ndef f():\n    pass\n\ndef test_pending():\n    with pytest.raises(GetTimeoutError):\n"
            "        ray.get(f.remote(), timeout=1)\n",
            "a test that expects the work to stay pending",
        ),
        Valid("def init(num_cpus):\n    pass\n\ninit(num_cpus=1)\n\n@remote(num_cpus=8)\ndef f():\n    pass\n", "not Ray"),
    ]
    INVALID = [
        Invalid("import ray\nray.init(num_cpus=4)\n\n@ray.remote(num_cpus=8)\ndef simulate(seed):\n    pass\n", 4),
        Invalid("import ray\nray.init(num_cpus=4, num_gpus=0)\n\n@ray.remote(num_gpus=1)\nclass Model:\n    pass\n", 4, note="no GPUs declared"),
        Invalid(
            "import ray\n\n@ray.remote\ndef f():\n    pass\n\nif __name__ == '__main__':\n    ray.init(num_cpus=2)\n    ray.get(f.options(num_cpus=4).remote())\n",
            9,
            note=".options at the submission",
        ),
        Invalid("import ray\nray.init(num_cpus=8, resources={'db': 1})\n\n@ray.remote(resources={'database': 1})\ndef f():\n    pass\n", 4, note="undeclared custom resource"),
        Invalid("import ray\nray.init(num_cpus=8, resources={'licence': 2})\n\n@ray.remote(resources={'licence': 4})\ndef f():\n    pass\n", 4, note="more than declared"),
        Invalid(
            "import ray\nfrom ray.util.placement_group import placement_group\nray.init(num_cpus=4)\n\npg = placement_group([{'CPU': 2}, {'CPU': 2}, {'CPU': 2}])\n",
            5,
            note="the bundles together exceed the node",
        ),
        Invalid(
            "import ray\nfrom ray.util.placement_group import placement_group\nray.init(num_cpus=16)\n\npg = placement_group([{'CPU': 1}, {'CPU': 1}], 'STRICT_SPREAD')\n",
            5,
            note="STRICT_SPREAD on one node",
        ),
        Invalid(
            "import ray\nfrom ray.util.placement_group import placement_group\nray.init(num_cpus=4)\n\npg = placement_group([{'CPU': 8}])\n",
            5,
            note="one bundle too big",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        cluster = local_cluster(model)
        if cluster is None or _expects_pending(model):
            return
        reported: set[int] = set()
        for site, where in resource_request_sites(model):
            if where == "data":
                continue
            remote = model.remote_declared_by(site.node) if where == "remote" else None
            for resource, value, named in _requests(model, site):
                keyword = {"CPU": "num_cpus", "GPU": "num_gpus"}.get(resource, "resources")
                if id(value) in reported or _overridden(remote, keyword):
                    continue
                if quantity_problem(keyword if keyword != "resources" else resource, value, keyword != "resources"):
                    continue  # Ray refuses it before scheduling: RAY047
                requested = literal_number(value)
                problem = self._shortfall(cluster, resource, requested)
                if problem is not None and requested is not None:
                    reported.add(id(value))
                    facts = ShortfallFacts(resource, requested, cluster.capacity(resource)[0] or 0.0)
                    ctx.report(value, f"{named} can never be scheduled: {problem}", facts=facts)
        for site, bundles in placement_group_bundles(model):
            self._check_group(ctx, cluster, site, bundles)

    def _shortfall(self, cluster: LocalCluster, resource: str, requested: float | None) -> str | None:
        if requested is None or requested <= 0:
            return None
        capacity, known = cluster.capacity(resource)
        if not known or capacity is None or requested <= capacity:
            return None
        if resource in ("CPU", "GPU"):
            return f"the local node has {_number(capacity)} {resource}{'s' if capacity != 1 else ''}"
        if capacity == 0:
            return f"no node has {resource!r}"
        return f"the local node has {_number(capacity)} of {resource!r}"

    def _check_group(self, ctx: Context, cluster: LocalCluster, site: CallSite, bundles: cst.BaseExpression) -> None:
        dicts = bundle_dicts(bundles)
        for bundle in dicts:
            for resource, element in dict_entries(bundle):
                if resource in BUNDLE_KEY_OF:
                    continue  # RAY081's
                requested = literal_number(element.value)
                problem = self._shortfall(cluster, resource, requested)
                if problem is not None and requested is not None:
                    facts = ShortfallFacts(resource, requested, cluster.capacity(resource)[0] or 0.0, "bundle")
                    ctx.report(element, f"This placement-group bundle can never be placed: {problem}", facts=facts)
                    return
        if not isinstance(bundles, cst.List) or len(dicts) != len(bundles.elements) or len(dicts) < 2:
            return
        strategy_arg = keyword_arg(site.node, "strategy")
        positional = [a for a in site.node.args if a.keyword is None and not a.star]
        strategy = strategy_arg.value if strategy_arg is not None else positional[1].value if len(positional) > 1 else None
        if strategy is not None and literal_string(strategy) == STRATEGY_STRICT_SPREAD:
            ctx.report(
                strategy,
                f"A `STRICT_SPREAD` placement group of {len(dicts)} bundles needs {len(dicts)} nodes, but `ray.init` starts one",
                facts=ShortfallFacts("CPU", 0.0, 0.0, "spread", len(dicts)),
            )
            return
        totals: dict[str, float] = {}
        for bundle in dicts:
            for resource, element in dict_entries(bundle):
                number = literal_number(element.value)
                if number is not None and resource not in BUNDLE_KEY_OF:
                    totals[resource] = totals.get(resource, 0.0) + number
        for resource, total in totals.items():
            problem = self._shortfall(cluster, resource, total)
            if problem is not None:
                ctx.report(
                    bundles,
                    f"These placement-group bundles need {_number(total)} {resource!r} in all, but {problem}",
                    facts=ShortfallFacts(resource, total, cluster.capacity(resource)[0] or 0.0, "bundles", len(dicts)),
                )
                return


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"
