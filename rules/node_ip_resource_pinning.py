"""RAY048 node-ip-resource-pinning: `resources={f"node:{ip}": 0.01}` pins work to one node, so Ray cannot
run it elsewhere when that node dies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import PENDING_S, SCHEDULED_S, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, iter_subtree, literal_string
from ray_lint.ray_api import (
    bundle_dicts,
    placement_group_bundles,
    resource_request_sites,
    resources_dict,
    value_text,
)
from ray_lint.rule import Context, Invalid, Rule, Valid

PREFIX = "node:"
# The head node's marker: the cluster does not outlive the head, so there is nowhere else to go.
HEAD_MARKER = "node:__internal_head__"
GONE_NODE = "node:198.51.100.7"  # a documentation address: the node that died, when the code computes its IP

# The work pinned to a node that is gone: its `node:<ip>` resource has left the cluster with it.
PINNED_TASK = """
KEY = {key!r}
if KEY in ray.cluster_resources():  # the code names a node of this cluster: stand in one that is gone
    KEY = {gone!r}

@ray.remote
def work():
    return ray.get_runtime_context().get_node_id()

ref = work.options(resources={{KEY: 0.01}}).remote()
ready, _ = ray.wait([ref], timeout={wait})
if ready:
    __ray_lint_evidence__ = {{"right": "the task ran"}}
else:
    ray.cancel(ref)
    __ray_lint_evidence__ = {{"wrong": f"pinned to {{KEY}}, a node that is gone: still pending after {wait} s"}}
"""
# The recommended form: node affinity by id, soft, to the same gone node.
SOFT_TASK = """
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

GONE = "ab" * 28  # the id of a node that is not in the cluster

@ray.remote
def work():
    return ray.get_runtime_context().get_node_id()

strategy = NodeAffinitySchedulingStrategy(node_id=GONE, soft=True)
ref = work.options(scheduling_strategy=strategy).remote()
ready, _ = ray.wait([ref], timeout={wait})
if ready:
    __ray_lint_evidence__ = {{"right": f"ran elsewhere, on node {{ray.get(ref)[:8]}}"}}
else:
    ray.cancel(ref)
    __ray_lint_evidence__ = {{"wrong": "still pending after {wait} s"}}
"""
# A placement-group bundle pinned to the gone node, and the same bundle without the pin.
GROUP = """
from ray.util.placement_group import placement_group, remove_placement_group

KEY = {key!r}
if KEY in ray.cluster_resources():  # the code names a node of this cluster: stand in one that is gone
    KEY = {gone!r}

pg = placement_group([{{"CPU": 0.5, KEY: 0.01}}] if KEY else [{{"CPU": 0.5}}])
ready, _ = ray.wait([pg.ready()], timeout={wait})
remove_placement_group(pg)
if ready:
    __ray_lint_evidence__ = {{"right": "the placement group was placed"}}
else:
    __ray_lint_evidence__ = {{"wrong": "a bundle pinned to a node that is gone: not ready after {wait} s"}}
"""


@dataclass(frozen=True)
class PinFacts:
    """The pinning key when the code writes it out (`"node:10.0.0.1"`; None when it computes the IP), and
    whether a placement-group bundle asks for it rather than a task or actor."""

    key: str | None
    bundle: bool = False


class NodeIpResourcePinningExperiment(ReproductionExperiment[PinFacts]):
    """What happens to pinned work once its node is gone, on the verify cluster: A asks for the `node:<ip>`
    resource of a node not in the cluster (the code's own IP when it writes one) and waits a few seconds; B,
    for a task or actor, asks for the gone node with `NodeAffinitySchedulingStrategy(..., soft=True)` and runs
    elsewhere. For a bundle, B is the same bundle without the pin."""

    facts_type = PinFacts
    beside_others = True  # no node of the cluster has the pinned address

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        key = facts.key or GONE_NODE
        if facts.bundle:
            return Plan(
                Variant(f"bundle pinned to {key}", script(GROUP.format(key=key, gone=GONE_NODE, wait=PENDING_S))),
                Variant("the bundle unpinned", script(GROUP.format(key="", gone=GONE_NODE, wait=SCHEDULED_S))),
                "modelled",
                f"a placement group whose bundle asks for {key!r}, a node that is gone (not in this cluster), and the same bundle without it",
            )
        return Plan(
            Variant(f"resources={{{key!r}: 0.01}}", script(PINNED_TASK.format(key=key, gone=GONE_NODE, wait=PENDING_S))),
            Variant("soft node affinity", script(SOFT_TASK.format(wait=SCHEDULED_S))),
            "modelled",
            f"a stand-in task pinned to {key!r}, a node that is gone (not in this cluster), and the same task "
            "given NodeAffinitySchedulingStrategy(<that node's id>, soft=True)",
        )


def node_key(key: cst.BaseExpression) -> bool:
    """Whether a dict key names a `node:<ip>` resource: `"node:10.0.0.1"`, `f"node:{ip}"`,
    `"node:" + ip`, `"node:{}".format(ip)` or `"node:%s" % ip` (not the head node's marker)."""
    text = literal_string(key)
    if text is not None:
        return text.startswith(PREFIX) and text != HEAD_MARKER
    if isinstance(key, cst.FormattedString):
        first = key.parts[0] if key.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith(PREFIX)
    if isinstance(key, cst.BinaryOperation) and isinstance(key.operator, (cst.Add, cst.Modulo)):
        return (literal_string(key.left) or "").startswith(PREFIX)
    if isinstance(key, cst.Call) and isinstance(key.func, cst.Attribute) and key.func.attr.value == "format":
        return (literal_string(key.func.value) or "").startswith(PREFIX)
    return False


def node_entries(dictionary: cst.Dict) -> Iterator[cst.DictElement]:
    for element in dictionary.elements:
        if isinstance(element, cst.DictElement) and node_key(element.key):
            yield element


class NodeIpResourcePinning(Rule):
    code = "RAY048"
    name = "node-ip-resource-pinning"
    message = "Work pinned to one node with a `node:<ip>` resource is not retried elsewhere if that node dies"
    severity = Severity.WARNING
    category = "fault-tolerance"
    preview = True  # on real code its findings were pinning on purpose (a per-host probe, a controller's own placement)
    # A test that pins work to a node of its own multi-node test cluster does so to control placement (a
    # locality test), and no node of that cluster is meant to die.
    in_tests = False
    tokens = ('"node:', "'node:")
    experiment = NodeIpResourcePinningExperiment()
    docs = """
## What it does
Finds a `node:<ip>` key (`"node:10.0.0.1"`, `f"node:{ip}"`, `"node:" + ip`,
`"node:{}".format(ip)`) in a `resources=` dict (written in the call, or a name bound once to a
dict literal in the same scope) given to `@ray.remote(...)` / `ray.remote(...)(f)`, to
`.options(...)` of a remote function or actor class, or to a Ray Data map call in a file that
uses Ray Data; and in a `placement_group([...])` bundle.

ray-lint is silent for `"node:__internal_head__"`, the head node's marker: the cluster does not
survive its head, so there is no other node to go to.

## Why is this bad?
Every node has a custom resource named after its IP address, and asking for a sliver of it
(`{f"node:{ip}": 0.01}`) runs the work only there. That is a hard constraint the scheduler knows
nothing else about: when the node dies, a task's retries and an actor's restarts can only wait
for a node with that IP, which usually never comes back (a replacement node gets a new address),
so the work hangs instead of recovering. Ray's fault-tolerance guide recommends
`NodeAffinitySchedulingStrategy` instead, which names the node by id and, with `soft=True`, lets
Ray run the work elsewhere when that node is gone.

Pinning is sometimes the point (a per-node daemon, a reader of a node-local disk). Then a hard
`NodeAffinitySchedulingStrategy(node_id, soft=False)` says so explicitly, and fails fast instead
of waiting when the node is gone. ray-lint is silent for the plainest cases of it, where running
anywhere else would be wrong: an actor started once per node, in a loop whose variable names the
node (`for host in hosts:` ... `f"node:{host}"`, in `.options(...)` or in
`ray.remote(...)(Store)`), and a task or actor stored under the node it is pinned to
(`listeners[ip] = watch.options(resources={f"node:{ip}": 0.01}).remote()`, a watcher of that
node's spot termination).

Test files (`test-files`) are not checked: a test pins work to a node of its own test cluster to
control placement (where a shard is read, which node holds an object), and no node of that cluster
is meant to die.

## Example
```python
ip = ray.util.get_node_ip_address()
cache = CacheActor.options(resources={f"node:{ip}": 0.01}).remote()
```

## Use instead
```python
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

node_id = ray.get_runtime_context().get_node_id()
cache = CacheActor.options(
    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=True),
).remote()
```

## Fix safety
There is no automatic fix: the node id is not in the code, and whether the work may move is a
design decision.

## References
- [Fault tolerance: best practices](https://docs.ray.io/en/latest/ray-core/fault-tolerance.html)
- [Node affinity scheduling strategy](https://docs.ray.io/en/latest/ray-core/scheduling/index.html#node-affinity-scheduling-strategy)
- [NodeAffinitySchedulingStrategy](https://docs.ray.io/en/latest/ray-core/api/doc/ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy.html)
"""

    VALID = [
        Valid(
            "import ray\n\nclass LocalStore:\n    def put(self, idx, part):\n        pass\n\n"
            "for node, part_ids in parts_by_node.items():\n"
            "    store = ray.remote(num_cpus=0, resources={f'node:{node}': 1e-4})(LocalStore).options(name=f'store:{node}').remote()\n"
            "    for idx in part_ids:\n        store.put.remote(idx, refs[idx])\n",
            "a store actor made remote in the loop, one per node: it holds the partitions that live on that node",
        ),
        Valid(
            "import ray\nfrom ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy\n\n"
            "@ray.remote\ndef f():\n    pass\n\nf.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=True)).remote()\n",
            "node affinity by id",
        ),
        Valid("import ray\n@ray.remote(resources={'node:__internal_head__': 0.001})\ndef f():\n    pass\n", "the head node"),
        Valid("import ray\n@ray.remote(resources={'nodes': 1, 'node_local_disk': 1})\ndef f():\n    pass\n", "other custom resources"),
        Valid("import ray\nip_key = f'node:{ip}'\nprint(ray.available_resources()[ip_key])\n", "reading a node's resources"),
        Valid("import ray\nalive = [n for n in ray.nodes() if n['Resources'].get(f'node:{ip}')]\n", "looking nodes up"),
        Valid("def schedule(job, resources):\n    pass\n\nschedule('x', resources={f'node:{ip}': 1})\n", "not a Ray call"),
        Valid("@ray.remote(resources={'node:10.0.0.1': 0.01})\ndef f():\n    pass\n", "no `import ray`"),
        Valid(
            "import ray\n\nclass _Probe:\n    def run(self, fn):\n        return fn(self)\n\n"
            "def probes(hosts):\n    Probe = ray.remote(_Probe)\n    out = []\n    for host in hosts:\n"
            "        pin = {f'node:{host}': 0.001}\n        out.append(Probe.options(resources=pin, num_cpus=0).remote())\n"
            "    return out\n",
            "a probe actor on each host in turn: per-node by design",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef watch_for_spot_termination():\n    pass\n\n"
            "def register_worker(listeners, ip):\n    if ip not in listeners:\n"
            "        listeners[ip] = watch_for_spot_termination.options(num_cpus=0.1, resources={f'node:{ip}': 0.01}).remote()\n",
            "a watcher kept per node, under the node it watches",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Daemon:\n    pass\n\n"
            "daemons = [Daemon.options(resources={f'node:{n[\"NodeManagerAddress\"]}': 0.01}).remote() for n in ray.nodes()]\n",
            "a daemon actor per node",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\n@ray.remote(resources={'node:10.0.0.1': 0.01})\ndef f():\n    pass\n", 3),
        Invalid(
            "import ray\n\ndef work(chunk):\n    return len(chunk)\n\n"
            "refs = [ray.remote(resources={f'node:{ip}': 0.01})(work).remote(chunk) for ip, chunk in zip(ips, chunks)]\n",
            6,
            note="a task, not an actor, pinned to each node in turn: spreading work by IP, which SPREAD scheduling does",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Cache:\n    pass\n\nip = ray.util.get_node_ip_address()\ncache = Cache.options(resources={f'node:{ip}': 0.01}).remote()\n",
            7,
        ),
        Invalid("import ray\n@ray.remote\ndef f():\n    pass\n\nrefs = [f.options(resources={'node:' + ip: 0.001}).remote() for ip in ips]\n", 6),
        Invalid("import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(resources={'node:{}'.format(ip): 1}).remote()\n", 6),
        Invalid(
            "import ray\nfrom ray.util.placement_group import placement_group\n\npg = placement_group([{'CPU': 1, f'node:{ip}': 0.01} for ip in ips])\n",
            4,
            note="placement-group bundles",
        ),
        Invalid("import ray\nPIN = {'node:10.0.0.7': 0.01}\n\n@ray.remote(resources=PIN)\nclass A:\n    pass\n", 4, note="through a name"),
        Invalid(
            "import ray\n@ray.remote\ndef f():\n    pass\n\nresults[job] = f.options(resources={f'node:{ip}': 0.01}).remote(job)\n",
            6,
            note="stored under the job, not under the node",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Cache:\n    pass\n\nip = ray.util.get_node_ip_address()\n"
            "caches = [Cache.options(resources={f'node:{ip}': 0.01}).remote() for _ in range(4)]\n",
            7,
            note="actors in a loop, all on the one node named before it",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        reported: set[int] = set()
        for site, _ in resource_request_sites(model):
            found = resources_dict(model, site)
            if found is None:
                continue
            arg, dictionary, direct = found
            entry = next(node_entries(dictionary), None)
            node = entry if direct else arg.value
            if entry is None or id(node) in reported or self._actor_per_node(model, site, entry) or _kept_per_node(site, entry):
                continue
            reported.add(id(node))
            ctx.report(node, self._message(entry, "the task or actor"), facts=PinFacts(literal_string(entry.key)))
        for _, bundles in placement_group_bundles(model):
            for bundle in bundle_dicts(bundles):
                entry = next(node_entries(bundle), None)
                if entry is not None:
                    facts = PinFacts(literal_string(entry.key), bundle=True)
                    ctx.report(entry, self._message(entry, "this placement-group bundle"), facts=facts)

    def _actor_per_node(self, model: SemanticModel, site: CallSite, entry: cst.DictElement) -> bool:
        """An actor started on each node in turn (`for host in hosts: Probe.options(resources={f"node:{host}": ...})`,
        or `ray.remote(resources=...)(Store)` in the loop): a per-node daemon, store or probe, for which running
        anywhere else would be wrong."""
        func = site.node.func
        if site.loop is None:
            return False
        # what `.options(...)` is called on, or `ray.remote(...)` itself, applied to a class of the module
        made = func.value if isinstance(func, cst.Attribute) and func.attr.value == "options" else site.node
        remote = model.remote_def_of(made, site.scope, site.index)
        if remote is None or remote.kind != "actor":
            return False
        for name in iter_subtree(entry.key):
            if isinstance(name, cst.Name):
                binding = model.reaching_binding(name.value, site.scope, site.index)
                if binding is not None and binding.loop is not None and binding.loop.encloses(site.loop):
                    return True
        return False

    def _message(self, entry: cst.DictElement, what: str) -> str:
        key = value_text(entry.key)
        key = key if len(key) <= 30 else key[:27] + "..."
        return f"`{key}` pins {what} to one node's IP, with no fallback if it dies"


def _kept_per_node(site: CallSite, entry: cst.DictElement) -> bool:
    """The task or actor is stored under the node it is pinned to (`listeners[ip] = watch.options(
    resources={f"node:{ip}": 0.01}).remote()`): one per node, a daemon or a watcher of that node, for
    which running anywhere else would be wrong."""
    statement = site.statement
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    target = statement.targets[0].target
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    key = target.slice[0].slice.value
    if not isinstance(key, cst.Name) or not any(node is site.node for node in iter_subtree(statement.value)):
        return False
    return any(isinstance(name, cst.Name) and name.value == key.value for name in iter_subtree(entry.key))

