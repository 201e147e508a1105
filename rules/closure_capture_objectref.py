"""RAY032 closure-capture-objectref: a remote function or actor class reads an ObjectRef from an enclosing
scope, so the ref is pickled with the definition and its object stays pinned until the job ends."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.captures import Capture, captured_by_remotes
from ray_lint.diagnostics import Severity
from ray_lint.experiment import REFERENCE_COUNT, Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RefOrigin, SemanticModel
from ray_lint.ray_api import remote_kind
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

# A ref comes from `.remote(...)` or `ray.put(...)` (also `from ray import put`).
REF_TOKENS = (".remote(", "put(", " put")


# An 8 MB object that a task reads, through `{read}`, before the driver drops its ref; then the driver's
# count of references to it.
CAPTURE_MODEL = """
import gc

@ray.remote
def compute(x):
    return bytes([x]) * 8_000_000  # 8 MB: kept in the object store

ref = compute.remote(1)
ray.wait([ref])
key = ref.hex()

@ray.remote
def use({parameter}):
    return len({read})

size = ray.get(use.remote({argument}))
del ref
gc.collect()
held = counted(key, 2)
if held:
    __ray_lint_evidence__ = {{"wrong": (
        f"the task read the {{size}}-byte object through its closure; 2 s after `del ref` the driver still counts "
        f"a reference to it ({{held}}): pinned until the job ends"
    )}}
else:
    __ray_lint_evidence__ = {{"right": f"the task read {{size}} bytes; once the driver dropped its ref no reference was left"}}
"""


class PinnedByClosureExperiment(ReproductionExperiment[None]):
    """Runs the pin: a task that reads an 8 MB object through a ref its closure captures, against the
    same ref passed as an argument; after the driver's `del ref`, Ray still counts a reference to the
    captured one and none to the passed one."""

    facts_type = type(None)
    shares_driver = True  # the pinned object stays in the shared driver's job: 8 MB until it ends

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("captured", script(REFERENCE_COUNT + CAPTURE_MODEL.format(parameter="", read="ray.get(ref)", argument=""))),
            Variant("passed as an argument", script(REFERENCE_COUNT + CAPTURE_MODEL.format(parameter="block", read="block", argument="ref"))),
            "modelled",
            "a task reads an 8 MB object through a captured ref, then the driver drops its own",
        )


class ClosureCaptureObjectRef(Rule):
    code = "RAY032"
    name = "closure-capture-objectref"
    message = "A remote function or actor class captures an ObjectRef, which pins its object until the job ends"
    severity = Severity.INFO
    category = "resource"
    preview = True
    tokens = REMOTE_MADE
    also_tokens = REF_TOKENS
    experiment = PinnedByClosureExperiment()
    docs = """
## What it does
Finds a remote function or actor class whose body reads a name from the module or from an
enclosing function (a *free variable*) that holds an ObjectRef, or a list of them: the result of
`ray.put(...)` or of a task or actor-method `.remote(...)` call, also through other names,
list literals, comprehensions and `.append`. Reads in nested functions, lambdas and
comprehensions of the body count, and so do every method of an actor class; a parameter default
that is a ref is reported too.

This rule is in preview: Ray's docs present closure capture of a ref as a convenient way to
share one object with many tasks, so a finding is often deliberate. It matters when the object
is large or the job runs long.

## Why is this bad?
cloudpickle serializes a ref captured by a remote definition out of band, outside the task
arguments that Ray's reference counting tracks. Ray then keeps a permanent reference to it
(`ray/_private/serialization.py`), so the object is pinned in the object store until the job
ends: it is never evicted, even after every task that used it is done and the driver deleted
its own name for it. Ray's docs: "defining a task that closes over an object ref will pin the
object via reference-counting, so the object will not be evicted until the job completes". With
`RAY_allow_out_of_band_object_ref_serialization=0` Ray raises
`OufOfBandObjectRefSerializationException` instead. A ref passed as an argument is tracked
normally and freed when no longer used; as a top-level argument, Ray also resolves it to its
value before the task starts.

ray-lint is silent for:
- refs passed as arguments, and refs the body creates itself;
- actor handles (`Actor.remote()` returns a handle, not an ObjectRef);
- a name bound more than once in its scope unless every binding is a ref;
- imported names and names the body declares `global`;
- `g = ray.remote(f)` of a module-level `f` kept under its own name: cloudpickle pickles `f` by
  reference, and the worker imports its module instead.

## Example
```python
table_ref = ray.put(load_table())


@ray.remote
def lookup(key):
    return ray.get(table_ref)[key]
```

## Use instead
```python
table_ref = ray.put(load_table())


@ray.remote
def lookup(table, key):
    return table[key]


refs = [lookup.remote(table_ref, key) for key in keys]
```

## Fix safety
There is no automatic fix: passing the ref as an argument changes the function's signature and
every call site, and Ray resolves a top-level ref argument to its value, so the body changes too.

## References
- [Objects: closure capture of objects](https://docs.ray.io/en/latest/ray-core/objects.html#closure-capture-of-objects)
- [Anti-pattern: Serialize ray.ObjectRef out of band](https://docs.ray.io/en/latest/ray-core/patterns/out-of-band-object-ref-serialization.html)
- [Anti-pattern: Closure capturing large objects harms performance](https://docs.ray.io/en/latest/ray-core/patterns/closure-capture-large-objects.html)
"""

    VALID = [
        Valid(
            "import ray\n\ntable_ref = ray.put(load_table())\n\n@ray.remote\ndef lookup(table, key):\n    return table[key]\n\n"
            "refs = [lookup.remote(table_ref, k) for k in keys]\n",
            "the ref is passed as an argument",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef square(x):\n    return x * x\n\n@ray.remote\ndef total(n):\n"
            "    refs = [square.remote(i) for i in range(n)]\n    return sum(ray.get(refs))\n",
            "refs created inside the body",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def add(self, n):\n        return n\n\ncounter = Counter.remote()\n\n"
            "@ray.remote\ndef work(i):\n    return ray.get(counter.add.remote(i))\n",
            "an actor handle is not an ObjectRef",
        ),
        Valid(
            "import ray\n\nstate = ray.put(initial())\nstate = None\n\n@ray.remote\ndef step(x):\n    return x if state is None else state\n",
            "rebound to a value that is not a ref",
        ),
        Valid(
            "table_ref = ray.put(load_table())\n\n@ray.remote\ndef lookup(key):\n    return ray.get(table_ref)[key]\n",
            "no `import ray`: not Ray's remote",
        ),
        Valid(
            "import ray\n\ntable_ref = ray.put(load_table())\n\n@ray.remote\ndef lookup(key, table_ref=None):\n    return table_ref\n",
            "a parameter of the same name",
        ),
        Valid(
            "import ray\n\ntable_ref = ray.put(load_table())\n\ndef lookup(key):\n    return ray.get(table_ref)[key]\n\n"
            "remote_lookup = ray.remote(lookup)\n",
            "a module-level function kept under its own name is pickled by reference",
        ),
        Valid(
            "import ray\n\ntable_ref = ray.put(load_table())\nprint(ray.get(table_ref))\n\n@ray.remote\ndef work(x):\n    return x\n",
            "the ref is used by driver code only",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\na = ray.put(list(range(10**6)))\n\n@ray.remote\ndef f():\n    return len(ray.get(a))\n",
            7,
            note="Ray's docs example",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef load(path):\n    return read(path)\n\ndef main(paths):\n    data = load.remote(paths[0])\n\n"
            "    @ray.remote\n    def process(i):\n        return ray.get(data)[i]\n\n    return [process.remote(i) for i in range(10)]\n",
            12,
            note="a task's result, captured from the enclosing function",
        ),
        Invalid(
            "import ray\n\nshards = [ray.put(load_shard(i)) for i in range(4)]\n\n@ray.remote\ndef merge():\n"
            "    return sum(len(s) for s in ray.get(shards))\n",
            7,
            note="a list of refs, read in a generator expression",
        ),
        Invalid(
            "from ray import remote, put\n\nmodel_ref = put(load_model())\n\n@remote\nclass Predictor:\n    def __init__(self):\n"
            "        self.model = None\n\n    def predict(self, x):\n        if self.model is None:\n"
            "            self.model = ray_get(model_ref)\n        return self.model(x)\n",
            12,
            note="an actor method, with `from ray import remote, put`",
        ),
        Invalid(
            "import ray\n\nrefs = []\nfor i in range(8):\n    refs.append(ray.put(i))\n\n@ray.remote\ndef gather():\n"
            "    return ray.get(refs)\n",
            9,
            note="a list filled with `append`",
        ),
        Invalid(
            "import ray\n\nconfig_ref = ray.put({'lr': 0.1})\n\n@ray.remote\ndef train(step, config=config_ref):\n    return step\n",
            6,
            note="a ref as a parameter default",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote, captured in captured_by_remotes(model):
            for capture in captured:
                origin = self._captured_ref(model, capture)
                if origin is not None:
                    ctx.report(
                        capture.use,
                        f"The {remote_kind(remote)} `{remote.name}` captures `{capture.name}`, {_describe(ctx, origin)}",
                    )
            for function, param, default, at in model.parameter_defaults(remote):
                if model.ref_origin(default, function.parent_scope, at) is not None:
                    ctx.report(
                        default,
                        f"The default of parameter `{param.name.value}` of the {remote_kind(remote)} `{remote.name}` is an ObjectRef",
                    )

    def _captured_ref(self, model: SemanticModel, capture: Capture) -> RefOrigin | None:
        """Where the captured name's ref comes from, when every binding of the name holds one."""
        origins = []
        for binding in capture.bindings:
            if binding.kind != "assign":
                return None
            origin = model.ref_origin(capture.use, binding.scope, binding.index + 1)
            if origin is None:
                return None
            origins.append(origin)
        return origins[0] if origins else None


def _describe(ctx: Context, origin: RefOrigin) -> str:
    """What the captured name holds, and where it was made."""
    where = ctx.line_of(origin.producer)
    if isinstance(origin.producer, cst.List) and not origin.producer.elements:
        return f"a list of ObjectRefs made on {where}"
    held = "a list of ObjectRefs" if origin.kind == "ref-list" else "an ObjectRef"
    return f"{held} made on {where}"
