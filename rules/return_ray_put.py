"""RAY033 return-ray-put: a task or actor method returns `ray.put(value)` instead of the value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, TypeGuard

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.model import SemanticModel
from ray_lint.python_model import Binding, FunctionInfo, iter_subtree
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

# Arguments that need brackets of their own once `ray.put(...)` no longer wraps them in a `return` or `=`.
_NEEDS_PARENS = (cst.Lambda, cst.NamedExpr, cst.Yield)

Shape = Literal["whole", "item", "list"]  # the ref is the returned value, an item of a returned tuple, or in a list


def _own_returns(function: cst.FunctionDef) -> Iterator[cst.Return]:
    """The `return value` statements of the function itself (not of nested functions or classes)."""
    for node in iter_subtree(function.body, into_functions=False):
        if isinstance(node, cst.Return) and node.value is not None:
            yield node


def _returned_items(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a `return` hands back: the value, or each item of a tuple or list display."""
    if isinstance(value, (cst.Tuple, cst.List)):
        return [element.value for element in value.elements if isinstance(element, cst.Element)]
    return [value]


def _sole_binding(info: FunctionInfo, name: str) -> Binding | None:
    """The one binding of `name` in the function's own scope, if there is exactly one and it is local."""
    bindings = info.scope.bindings.get(name, [])
    if len(bindings) != 1 or name in info.scope.globals:
        return None
    return bindings[0]


def _names_in(node: cst.CSTNode, name: str) -> Iterator[cst.Name]:
    for inner in iter_subtree(node):
        if isinstance(inner, cst.Name) and inner.value == name:
            yield inner


def _read_from_self(value: cst.BaseExpression) -> bool:
    """Whether a returned value is read from what the instance holds (`self.ready.pop(0)`, `self.refs[key]`,
    `self.ref`), not computed by one of its methods (`self.compute(x)`)."""
    called = False  # whether the expression just stepped through is a call of its `func`
    while isinstance(value, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(value, cst.Attribute) and called and isinstance(value.value, cst.Name) and value.value.value == "self":
            return False  # `self.compute(...)`: a method's result
        called = isinstance(value, cst.Call)
        value = value.func if isinstance(value, cst.Call) else value.value
    return isinstance(value, cst.Name) and value.value == "self"


def _mentions_object_ref(model: SemanticModel, annotation: cst.Annotation | None) -> bool:
    """Whether a return annotation names `ObjectRef` (`ray.ObjectRef`, `List[ObjectRef]`, a string)."""
    return annotation is not None and "ObjectRef" in model.module.code_for_node(annotation.annotation)


class ReturnRayPutExperiment(Experiment[None]):
    """500 small tasks that return `ray.put(value)`, whose refs the driver then gets a second time,
    against the same tasks returning the value (the fix). The model only: the fixed task returns the value,
    so the user's code, which gets the result twice, would fail."""

    facts_type = type(None)
    shares_driver = True
    # By wall time alone: both variants run the same tasks, so Ray's timeline shows no more running at once in
    # B; what B saves is a `ray.put` per task, a second `ray.get` per result, and values that are no longer
    # inlined in the task's reply.
    more_parallelism = False
    TASKS = 500

    model_only = "the fix changes what the task returns, so code that gets its result twice would fail on the value"

    def plan(self, subject: Subject) -> Plan:
        put = "@ray.remote\ndef square(i):\n    return ray.put(i * i)\n\n"
        value = "@ray.remote\ndef square(i):\n    return i * i\n\n"
        calls = f"[square.remote(i) for i in range({self.TASKS})]"
        return Plan(
            Variant("return ray.put(value)", script(put + timed(f"return ray.get(ray.get({calls}))"))),
            Variant("return value", script(value + timed(f"return ray.get({calls})"))),
            "modelled",
            f"{self.TASKS} tasks returning a small value",
        )



class ReturnRayPut(Rule):
    code = "RAY033"
    name = "return-ray-put"
    message = "A task or actor method returns `ray.put(value)` instead of the value"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = ("put(",)
    also_tokens = REMOTE_MADE
    experiment = ReturnRayPutExperiment()
    docs = """
## What it does
Finds a remote function or actor method that stores its result with `ray.put(...)` and returns
the ObjectRef instead of the value:
- `return ray.put(value)`, also as an item of a returned tuple or list;
- `ref = ray.put(value)` ... `return ref`, when `ref` is used nowhere else in the function;
- `return [ray.put(chunk) for chunk in chunks]`, or a list filled with
  `refs.append(ray.put(chunk))` and returned.

The finding is reported on the `ray.put(...)` call.

## Why is this bad?
Ray's pattern page "Returning ray.put() ObjectRefs from a task harms performance and fault
tolerance" gives three costs:
- small return values (up to 100 KB) are normally sent inline to the caller; `ray.put` always
  goes through the object store;
- the caller gets a ref to a ref, which costs an extra round of distributed reference counting
  and a second `ray.get`;
- the worker that called `ray.put` owns the object, so the value is lost when that worker dies
  (`OwnerDiedError`, and no lineage reconstruction: Ray's `ObjectReconstructionFailedError`
  says "return the value from a task instead"). A returned value is owned by the caller.

Measured on a 2-core machine with Ray 2.60: 500 tasks returning `ray.put(1)` take 1.01 s
(with the double get) against 0.287 s returning `1` (3.5×).

ray-lint is silent for:
- a ref the function also uses for anything else (passes to another task, gets, logs, keeps
  in `self`), and a ref kept in actor state (`self.ref = ray.put(x); return self.ref`): an actor
  that puts a value once and hands out the same ref is a deliberate cache;
- a method that also returns something it reads from the actor (`return self.ready.pop(0)`, not
  a method's result such as `self.compute(x)`): it hands out refs the actor put ahead (a
  prefetcher), and its fallback's `ray.put` keeps the contract that its callers, who get
  twice, rely on;
- `ray.put(value, _owner=...)` or any other keyword (an explicit ownership transfer or a
  tensor transport);
- refs that came in as arguments (a pass-through), and returns of nested functions;
- generator tasks, and functions that are not remote (a driver helper may return `ray.put`).

## Example
```python
@ray.remote
def make_batch(n):
    batch = np.arange(n)
    return ray.put(batch)

batch = ray.get(ray.get(make_batch.remote(10)))
```

## Use instead
```python
@ray.remote
def make_batch(n):
    return np.arange(n)

batch = ray.get(make_batch.remote(10))
```
To return several values, declare `num_returns=N` and return a tuple, or `yield` them from a
generator task so that each one can be freed once it is stored.

## Fix safety
The fix replaces `ray.put(value)` with `value` where the ref is the whole returned value (in the
`return`, or in the assignment of the name that is returned). It is unsafe: callers now get the
value where they got a ref, so a caller that calls `ray.get` twice (or passes the inner ref on)
must drop one level. It is not offered for an item of a returned tuple (the caller may fetch the
small items without the large one: declare `num_returns=N` instead), for lists of refs (which
need `num_returns` or a generator), or when the function is annotated to return an `ObjectRef`.

## References
- [Anti-pattern: Returning ray.put() ObjectRefs from a task harms performance and fault tolerance](https://docs.ray.io/en/latest/ray-core/patterns/return-ray-put.html)
- [Fault tolerance: avoid letting an ObjectRef outlive its owner](https://docs.ray.io/en/latest/ray-core/fault-tolerance.html)
- [Pattern: Using generators to reduce heap memory usage](https://docs.ray.io/en/latest/ray-core/patterns/generators.html)
"""

    VALID = [
        Valid("import ray\n@ray.remote\ndef f(n):\n    return list(range(n))\n", "returns the value"),
        Valid(
            "import ray\n\n@ray.remote\nclass Prefetcher:\n    def __init__(self):\n        self.ready = []\n\n"
            "    def next_batch(self):\n        if not self.ready:\n            batch_ref = ray.put(self.sample())\n"
            "            return batch_ref\n        return self.ready.pop(0)\n",
            "the method hands out refs the actor put ahead; the fallback's put keeps that contract",
        ),
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    ref = ray.put(x)\n    return ray.get(g.remote(ref))\n",
            "the ref is handed to a child task, the value is returned",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Store:\n    def publish(self, weights):\n        self.ref = ray.put(weights)\n        return self.ref\n",
            "a ref kept in actor state and handed out again: a cache",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Store:\n    def publish(self, weights):\n        ref = ray.put(weights)\n"
            "        self.refs.append(ref)\n        return ref\n",
            "the ref is also kept in actor state",
        ),
        Valid("import ray\n\ndef upload(x):\n    return ray.put(x)\n", "a driver helper, not a remote function"),
        Valid("import ray\n@ray.remote\ndef forward(ref):\n    return ref\n", "a ref that came in as an argument"),
        Valid(
            "import ray\n@ray.remote\ndef f(x, owner):\n    return ray.put(x, _owner=owner)\n",
            "an explicit ownership transfer",
        ),
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    def helper():\n        return ray.put(x)\n    return len(x)\n",
            "the return of a nested function",
        ),
        Valid("@ray.remote\ndef f():\n    return ray.put(1)\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import queue\nimport ray\n@ray.remote\ndef f(q: queue.Queue, x):\n    return q.put(x)\n",
            "a `put` that is not Ray's",
        ),
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    ref = ray.put(x)\n    print(ref.hex())\n    return ref\n",
            "the ref is used for something else too",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass Scorer:\n    def score(self, rows, cached):\n        if cached:\n"
            "            return ray.put(self.table[rows])\n        return self.compute(rows)\n",
            7,
            fixed="import ray\n\n@ray.remote\nclass Scorer:\n    def score(self, rows, cached):\n        if cached:\n"
            "            return self.table[rows]\n        return self.compute(rows)\n",
            note="the other return is a method's result, not something the actor holds",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef f():\n    return ray.put(1)\n",
            5,
            fixed="import ray\n\n@ray.remote\ndef f():\n    return 1\n",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef make(n):\n    batch = ray.put(np.arange(n))\n    return batch\n",
            6,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef make(n):\n    batch = np.arange(n)\n    return batch\n",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass PS:\n    def get_weights(self):\n        return ray.put(self.weights)\n",
            6,
            fixed="import ray\n\n@ray.remote\nclass PS:\n    def get_weights(self):\n        return self.weights\n",
            note="an actor method",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return ray.put(x * 2), len(x)\n",
            5,
            note="an item of a returned tuple: no fix (the caller may want to fetch the items apart)",
        ),
        Invalid("import ray\n\n@ray.remote\ndef split(xs):\n    return [ray.put(x) for x in xs]\n", 5, note="a list of refs: no fix"),
        Invalid(
            "import ray\n\n@ray.remote\ndef split(xs, n):\n    refs = []\n    for i in range(0, len(xs), n):\n"
            "        refs.append(ray.put(xs[i : i + n]))\n    return refs\n",
            7,
            note="a list filled with refs",
        ),
        Invalid(
            "from ray import remote\nfrom ray import put\n\n@remote(num_cpus=2)\ndef f(x):\n    return put(x +\n               1)\n\nseed = put(0)\n",
            6,
            fixed="from ray import remote\nfrom ray import put\n\n@remote(num_cpus=2)\ndef f(x):\n    return (x +\n               1)\n\nseed = put(0)\n",
            note="imported names; a multi-line argument keeps brackets",
        ),
        Invalid(
            "import ray as r\n\ndef f(x):\n    return r.put(lambda: x)\n\nremote_f = r.remote(f)\n",
            4,
            fixed="import ray as r\n\ndef f(x):\n    return (lambda: x)\n\nremote_f = r.remote(f)\n",
            note="ray.remote applied to the function",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef f(x) -> ray.ObjectRef:\n    return ray.put(x)\n",
            5,
            note="annotated to return a ref: reported, no fix",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.calls_to("ray.put"):
            return
        for remote in model.remote_defs:
            for info in model.remote_functions(remote):
                if not info.is_generator:
                    self._check_function(ctx, info)

    def _check_function(self, ctx: Context, info: FunctionInfo) -> None:
        model = ctx.model
        typed_as_ref = _mentions_object_ref(model, info.node.returns)
        returns = list(_own_returns(info.node))
        if any(_read_from_self(statement.value) for statement in returns if statement.value is not None):
            return  # it hands out what the actor holds (refs it put ahead); a fresh put keeps that contract
        returned_names: dict[str, list[tuple[cst.Name, Shape]]] = {}
        for statement in returns:
            assert statement.value is not None
            items = _returned_items(statement.value)
            shape: Shape = "whole" if len(items) == 1 and items[0] is statement.value else "item"
            for item in items:
                if _is_put(model, item):
                    self._report(ctx, info, item, shape, fixable=shape == "whole" and not typed_as_ref)
                elif isinstance(item, cst.ListComp) and _is_put(model, item.elt):
                    self._report(ctx, info, item.elt, "list", fixable=False)
                elif isinstance(item, cst.Name):
                    returned_names.setdefault(item.value, []).append((item, shape))
        for name, returned in returned_names.items():
            binding = _sole_binding(info, name)
            if binding is None or binding.kind != "assign" or binding.value is None:
                continue
            allowed = {id(node) for node, _ in returned} | {id(binding.node)}
            value = binding.value
            shape = "whole" if all(shape == "whole" for _, shape in returned) else "item"
            if _is_put(model, value):
                puts = [value]
            elif isinstance(value, cst.ListComp) and _is_put(model, value.elt):
                puts, shape = [value.elt], "list"
            elif isinstance(value, cst.List) and not value.elements:
                appended = _appended_puts(model, info, name)
                allowed |= {id(receiver) for receiver, _ in appended}
                puts, shape = [put for _, put in appended], "list"
            else:
                continue
            if puts and all(id(node) in allowed for node in _names_in(info.node.body, name)):
                fixable = shape == "whole" and not typed_as_ref and not isinstance(binding.statement, cst.AnnAssign)
                for put in puts:
                    self._report(ctx, info, put, shape, fixable=fixable)

    def _report(self, ctx: Context, info: FunctionInfo, put: cst.Call, shape: Shape, fixable: bool) -> None:
        kind = "actor method" if info.owner is not None else "task"
        name = info.node.name.value
        ctx.report(
            put,
            f"The {kind} `{name}` returns the ref of this `ray.put(...)` instead of the value",
            fix=_fix(ctx, put) if fixable else None,
        )


def _is_put(model: SemanticModel, expr: cst.BaseExpression) -> TypeGuard[cst.Call]:
    """`ray.put(value)` with one positional argument and no keywords (`_owner=` transfers ownership on purpose)."""
    if not isinstance(expr, cst.Call):
        return False
    site = model.call_site(expr)
    if site is None or model.call_name(site) != "ray.put":
        return False
    return all(arg.keyword is None and not arg.star for arg in expr.args) and len(expr.args) == 1


def _appended_puts(model: SemanticModel, info: FunctionInfo, name: str) -> list[tuple[cst.Name, cst.Call]]:
    """For a list bound empty: each `name.append(ray.put(...))` in the function, as (receiver, put);
    empty when anything else is appended."""
    found: list[tuple[cst.Name, cst.Call]] = []
    for receiver, appended in model.appends_in(info.scope, name):
        if appended is None or not _is_put(model, appended):
            return []
        found.append((receiver, appended))
    return found


def _fix(ctx: Context, put: cst.Call) -> FixPlan:
    argument = put.args[0].value
    text = ctx.model.source_of(argument)
    if isinstance(argument, _NEEDS_PARENS) or "\n" in text:
        text = f"({text})"
    return FixPlan("Return the value instead of `ray.put(value)`", ((put, text),), Applicability.UNSAFE)
