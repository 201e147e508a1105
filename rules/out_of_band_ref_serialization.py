"""RAY035 out-of-band-ref-serialization: an ObjectRef pickled, or rebuilt from its bytes, outside Ray's tracking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import REFERENCE_COUNT, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, CallSite, Scope, iter_subtree, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

# Serializers, and whether Ray's reducer runs (only `ray.cloudpickle` has it: the object is pinned for
# the worker's lifetime); the others use `ObjectRef.__reduce__`, which keeps only the ID.
PICKLERS = {
    "pickle.dumps": False,
    "pickle.dump": False,
    "cloudpickle.dumps": False,
    "cloudpickle.dump": False,
    "dill.dumps": False,
    "dill.dump": False,
    "ray.cloudpickle.dumps": True,
    "ray.cloudpickle.dump": True,
}
OBJECT_REF_CLASSES = frozenset({"ray.ObjectRef", "ray._raylet.ObjectRef", "ray.types.ObjectRef"})
# Methods that hand a value to a store or channel outside the process: key-value stores, queues,
# message brokers, sockets, files, databases.
SINK_METHODS = frozenset(
    {
        "set", "setex", "setnx", "mset", "hset", "hmset", "lpush", "rpush", "sadd", "zadd", "xadd", "publish",
        "put", "put_nowait", "send", "send_json", "send_string", "send_pyobj", "sendall", "produce", "write",
        "insert_one", "insert_many", "execute", "upsert",
    }
)
ID_METHODS = ("hex", "binary")

OBJECT = """
import gc
import pickle

@ray.remote
def compute(x):
    return bytes([x]) * 8_000_000  # 8 MB: kept in the object store

@ray.remote
class Consumer:
    def keep(self, refs):
        self.refs = refs  # a ref inside an argument: Ray counts this process as a borrower
        return True

    def read(self):
        return len(ray.get(self.refs[0], timeout=10))

    def drop(self):
        self.refs = None
        return True

ref = compute.remote(1)
ray.wait([ref])
key = ref.hex()
"""
# The ref leaves Ray and comes back (by the finding's route), after the original is dropped.
LOST = {
    "pickle": ("blob = pickle.dumps(ref)", "pickle.loads(blob)"),
    "hex": ("store = {'result': ref.hex()}  # stands for Redis, a queue, a database", "ray.ObjectRef(bytes.fromhex(store['result']))"),
}
FETCH_REBUILT = """
{away}
del ref
gc.collect()
held = counted(key, 2)
rebuilt = {back}
try:
    size = len(ray.get(rebuilt, timeout=3))
    __ray_lint_evidence__ = {{"right": f"the rebuilt ref still read {{size}} bytes"}}
except ray.exceptions.GetTimeoutError:
    owner = "had stopped counting the object" if held is None else f"still counted it ({{held}})"
    __ray_lint_evidence__ = {{
        "wrong": f"`ray.get` on the ref rebuilt from `{back}` was still pending after 3 s; "
        f"once the original ref was dropped the driver, its owner, {{owner}}"
    }}
"""
PINNED = """
blob = ray.cloudpickle.dumps(ref)
del ref
gc.collect()
held = counted(key, 2)
if held:
    __ray_lint_evidence__ = {"wrong": f"2 s after `del ref` the driver still counts a reference to the 8 MB object ({held}): pinned until this process exits"}
else:
    __ray_lint_evidence__ = {"right": "the driver counts no reference to the object once the ref is dropped"}
"""
THROUGH_RAY = """
consumer = Consumer.remote()
ray.get(consumer.keep.remote([ref]), timeout=30)
del ref
gc.collect()
time.sleep(0.5)
size = ray.get(consumer.read.remote(), timeout=30)
ray.get(consumer.drop.remote(), timeout=30)
held = counted(key, 5)
if held:
    __ray_lint_evidence__ = {"wrong": f"the driver still counts a reference after the consumer dropped the ref ({held})"}
else:
    __ray_lint_evidence__ = {
        "right": f"an actor given the ref in a list read its {size} bytes after the driver dropped its own; "
        "once the actor dropped it too, no reference was left"
    }
"""


@dataclass(frozen=True)
class OutOfBand:
    """How the ref leaves Ray: pickled by plain pickle (or cloudpickle, dill), as its hex or bytes
    (or rebuilt from them), or by `ray.cloudpickle`, which pins its object."""

    route: Literal["pickle", "hex", "pinned"]


class OutOfBandExperiment(ReproductionExperiment[OutOfBand]):
    """An 8 MB object whose ref leaves Ray by the finding's route (pickle, hex, `ray.cloudpickle`)
    while the original is dropped: the rebuilt ref's `ray.get` still pending, or the object still
    counted by its owner; against the ref handed to an actor in a list, which Ray tracks."""

    facts_type = OutOfBand

    def model(self, subject: Subject) -> Plan:
        route = self.facts(subject).route
        if route == "pinned":
            flagged, shape = PINNED, "`ray.cloudpickle.dumps(ref)` of an 8 MB object's ref, then `del ref`"
        else:
            away, back = LOST[route]
            flagged = FETCH_REBUILT.format(away=away, back=back)
            shape = f"an 8 MB object's ref sent out of band (`{away.split('  #')[0]}`), dropped, and rebuilt"
        return Plan(
            Variant("out of band", script(REFERENCE_COUNT + OBJECT + flagged)),
            Variant("through Ray", script(REFERENCE_COUNT + OBJECT + THROUGH_RAY)),
            "modelled",
            f"{shape}; and the ref handed to an actor in a list",
        )


class OutOfBandRefSerialization(Rule):
    code = "RAY035"
    name = "out-of-band-ref-serialization"
    message = "An ObjectRef is serialized outside Ray, so Ray loses track of it or pins it forever"
    severity = Severity.ERROR
    category = "correctness"
    tokens = ("pickle", "dill", "ObjectRef(", ".hex()", ".binary()")  # the import of a pickler names it
    also_tokens = (".remote(", "put(", "ObjectRef")
    experiment = OutOfBandExperiment()
    docs = """
## What it does
Finds an ObjectRef that leaves Ray's reference counting:
- `pickle.dump(s)`, `cloudpickle.dump(s)`, `dill.dump(s)` or `ray.cloudpickle.dump(s)` of a ref,
  or of a list, tuple, set or dict display that holds one;
- `ref.hex()` or `ref.binary()` handed to an external store or channel (`redis.set`, `hset`,
  `lpush`, `publish`, `queue.put`, `socket.send`, `file.write`, `cursor.execute`...);
- `ray.ObjectRef(bytes)`, a ref rebuilt from its ID, when the rebuilt ref is then fetched
  (`ray.get`, `ray.wait`) or passed to a task or actor.

Only values the code shows to be refs count: the result of `.remote(...)` or `ray.put(...)`
(directly, through names, in lists), or a parameter annotated `ray.ObjectRef`.

## Why is this bad?
Ray counts references to an object only where it serializes them itself: in task arguments,
return values and `ray.put`. Ray's pattern page "Anti-pattern: Serialize ray.ObjectRef out of
band" describes the two outcomes:
- with plain `pickle` (or a ref's hex or bytes), only the ID is kept. Ray does not know the copy
  exists, so the object can be freed while the bytes still name it, and the rebuilt ref carries
  no owner: a `ray.get` on it hangs or fails;
- with `ray.cloudpickle`, Ray pins the object for the lifetime of the worker that serialized it
  (`_private/serialization.py`), a leak that fills the object store and spills. With
  `RAY_allow_out_of_band_object_ref_serialization=0` Ray raises
  `OufOfBandObjectRefSerializationException` instead.

ray-lint is silent for:
- `ref.hex()` used as a label or key (logging, printing, a dict key, a metric tag): the ref
  itself is still held, so nothing is lost;
- `ray.ObjectRef(...)` built only to compare or display IDs (monitoring tools), or returned by a
  helper;
- values not shown to be refs (an unannotated parameter), `str(ref)`, and `json.dumps` (which
  rejects refs with a `TypeError`).

A rebuilt ref does work while the original is kept alive and also reaches the process through
Ray (Ray's own hex example passes it in a list argument as a keep-alive). That case is still
reported: the process can use the ref it was given instead of the rebuilt one.

## Example
```python
ref = compute.remote(x)
redis_client.set("result", ref.hex())
# ... another process:
ref = ray.ObjectRef(bytes.fromhex(redis_client.get("result")))
value = ray.get(ref)  # may hang: the object may be gone, and the ref has no owner
```

## Use instead
Pass the ref itself through Ray, which keeps the object alive while the receiver holds it:
```python
ref = compute.remote(x)
consumer.handle.remote([ref])  # a ref nested in an argument is tracked
```
or hand the refs to a named actor that holds them (`registry.store.remote(key, [ref])`).

## Fix safety
There is no automatic fix: replacing an external channel with a Ray call changes the design.

## References
- [Anti-pattern: Serialize ray.ObjectRef out of band](https://docs.ray.io/en/latest/ray-core/patterns/out-of-band-object-ref-serialization.html)
- [Serialization: ObjectRefs in arguments](https://docs.ray.io/en/latest/ray-core/objects/serialization.html)
- [Memory management: serialized ObjectRefs](https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html)
"""

    VALID = [
        Valid("import ray\nref = f.remote(1)\nlogger.info('submitted %s', ref.hex())\n", "a ref's hex in a log line"),
        Valid("import ray\nref = f.remote(1)\npending[ref.hex()] = ref\n", "a ref's hex as a dict key; the ref is kept"),
        Valid("import pickle\nimport ray\nblob = pickle.dumps(config)\nref = f.remote(blob)\n", "pickling something that is not a ref"),
        Valid("import pickle\nimport ray\ndef save(ref, path):\n    pickle.dump(ref, open(path, 'wb'))\n", "not shown to be a ref"),
        Valid(
            "import ray\nrows = [ray.ObjectRef(bytes.fromhex(r['id'])) for r in records]\nshow_table(rows)\n",
            "refs rebuilt only to display their IDs",
        ),
        Valid("import ray\ndef to_ref(b):\n    return ray.ObjectRef(b)\n", "a helper that is not seen fetching"),
        Valid("import ray\nref = f.remote(1)\nconsumer.handle.remote([ref])\n", "a ref nested in a task argument: tracked by Ray"),
        Valid("import pickle\nref = f.remote(1)\nblob = pickle.dumps(ref)\n", "no `import ray`: not a Ray ref"),
        Valid("import ray\nref = f.remote(1)\nprint(str(ref), ref.hex())\n", "printing a ref"),
        Valid("import ray\nref = f.remote(1)\nqueue.put(ref)\n", "the ref itself, not its hex"),
    ]
    INVALID = [
        Invalid("import pickle\nimport ray\n\nref = ray.put(1)\nblob = pickle.dumps(ref)\n", 5),
        Invalid("import ray\nfrom ray import cloudpickle\n\nref = compute.remote(1)\ndata = cloudpickle.dumps(ref)\n", 5, note="pins the object"),
        Invalid(
            "import pickle\nimport ray\n\nrefs = [f.remote(i) for i in range(4)]\nwith open('refs.pkl', 'wb') as out:\n"
            "    pickle.dump({'refs': refs}, out)\n",
            6,
            note="a list of refs in a dict",
        ),
        Invalid("import ray\n\nref = compute.remote(1)\nredis_client.set('result', ref.hex())\n", 4),
        Invalid(
            "import ray\n\nhex_id = redis_client.get('result')\nref = ray.ObjectRef(bytes.fromhex(hex_id))\nvalue = ray.get(ref)\n",
            4,
        ),
        Invalid("import ray\n\nvalue = ray.get(ray.ObjectRef(message.body))\n", 3),
        Invalid(
            "import pickle\nimport ray\n\ndef save(ref: ray.ObjectRef, path):\n    with open(path, 'wb') as out:\n"
            "        pickle.dump(ref, out)\n",
            6,
            note="a parameter annotated as a ref",
        ),
        Invalid("import ray\n\nref = ray.put(data)\nqueue.put(ref.binary())\n", 4),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return  # `.remote(...)` alone does not make a Ray ref
        for name, pins in PICKLERS.items():
            for site in model.calls_to(name):
                self._check_pickle(ctx, site, pins)
        for method in ID_METHODS:
            for site in model.calls_by_tail.get(method, ()):
                self._check_id(ctx, site, method)
        for name in OBJECT_REF_CLASSES:
            for site in model.calls_to(name):
                self._check_rebuild(ctx, site)

    def _check_pickle(self, ctx: Context, site: CallSite, pins: bool) -> None:
        args = site.node.args
        value = next((a.value for a in args if a.keyword is not None and a.keyword.value == "obj"), None)
        if value is None and args and args[0].keyword is None and not args[0].star:
            value = args[0].value
        if value is None or not _holds_ref(ctx.model, value, site.scope, site.index):
            return
        outcome = ", pinning its object (a leak)" if pins else ", so its object can be freed early"
        ctx.report(
            site.node,
            f"`{ctx.snippet(site.node.func, 24)}` serializes an ObjectRef outside Ray{outcome}",
            facts=OutOfBand("pinned" if pins else "pickle"),
        )

    def _check_id(self, ctx: Context, site: CallSite, method: str) -> None:
        """`ref.hex()` / `ref.binary()` passed straight to an external store or channel."""
        model = ctx.model
        func = site.node.func
        if site.node.args or not isinstance(func, cst.Attribute):
            return
        origin = model.ref_origin(func.value, site.scope, site.index)
        if origin is None or origin.kind != "ref":
            return
        sink = _sink_taking(model, site.node)
        if sink is None:
            return
        ctx.report(
            site.node,
            f"The ref's `.{method}()` goes to `{ctx.snippet(sink.func, 28)}(...)`, which does not keep its object alive",
            facts=OutOfBand("hex"),
        )

    def _check_rebuild(self, ctx: Context, site: CallSite) -> None:
        model = ctx.model
        positional = [arg for arg in site.node.args if arg.keyword is None and not arg.star]
        if not positional or not _fetched(model, site):
            return
        ctx.report(
            site.node,
            "`ray.ObjectRef(...)` rebuilds a ref from its ID, with no owner to keep the object alive",
            facts=OutOfBand("hex"),
        )


def _annotated_ref(model: SemanticModel, name: cst.Name, scope: Scope, at: int) -> bool:
    """A parameter annotated with `ray.ObjectRef` (also inside `List[...]`, or as a string)."""
    binding = model.reaching_binding(name.value, scope, at)
    if binding is None or binding.kind != "param" or not isinstance(binding.node, cst.Param):
        return False
    annotation = binding.node.annotation
    if annotation is None:
        return False
    outer = binding.scope.parent or model.module_scope
    for node in iter_subtree(annotation.annotation):
        if isinstance(node, (cst.Name, cst.Attribute)) and model.qualified_name(node, outer, AFTER_ALL) in OBJECT_REF_CLASSES:
            return True
        text = literal_string(node) if isinstance(node, cst.SimpleString) else None
        if text is not None and text.strip() in ("ray.ObjectRef", "ObjectRef") and model.imports_module("ray"):
            return True
    return False


def _holds_ref(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> bool:
    """Whether `expr` is shown to be an ObjectRef, or a display (list, tuple, set, dict) holding one."""
    if depth > 3:
        return False
    if model.ref_origin(expr, scope, at) is not None:
        return True
    if isinstance(expr, cst.Name):
        return _annotated_ref(model, expr, scope, at)
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return any(isinstance(e, cst.Element) and _holds_ref(model, e.value, scope, at, depth + 1) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return any(isinstance(e, cst.DictElement) and _holds_ref(model, e.value, scope, at, depth + 1) for e in expr.elements)
    return False


def _sink_taking(model: SemanticModel, value: cst.Call) -> cst.Call | None:
    """The call of an external store or channel that takes `value` as an argument (directly, or in a
    tuple, list or dict display), if there is one."""
    for site in model.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in SINK_METHODS:
            continue
        if "log" in model.module.code_for_node(func.value).lower():
            continue
        for arg in site.node.args:
            candidates = [arg.value]
            if isinstance(arg.value, (cst.List, cst.Tuple)):
                candidates += [e.value for e in arg.value.elements]
            elif isinstance(arg.value, cst.Dict):
                candidates += [e.value for e in arg.value.elements if isinstance(e, cst.DictElement)]
            if any(candidate is value for candidate in candidates):
                return site.node
    return None


def _fetched(model: SemanticModel, rebuild: CallSite) -> bool:
    """Whether a rebuilt ref is fetched or handed to a task: an argument (or an item of a list argument) of
    `ray.get`, `ray.wait` or a `.remote(...)` call, directly or through a name bound to it."""
    consumers = [*model.calls_to("ray.get"), *model.calls_to("ray.wait"), *model.calls_by_tail.get("remote", ())]
    for site in consumers:
        for arg in site.node.args:
            items = [e.value for e in arg.value.elements] if isinstance(arg.value, (cst.List, cst.Tuple)) else [arg.value]
            for item in items:
                if item is rebuild.node:
                    return True
                if isinstance(item, cst.Name):
                    binding = model.reaching_binding(item.value, site.scope, site.index)
                    if binding is not None and binding.value is rebuild.node:
                        return True
    return False
