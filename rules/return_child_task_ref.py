"""RAY034 return-child-task-ref: a task returns the ObjectRef of a child task it submitted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeGuard

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import FunctionInfo, iter_subtree
from ray_lint.rule import Context, Invalid, Rule, Valid


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


def _names_in(node: cst.CSTNode, name: str) -> Iterator[cst.Name]:
    for inner in iter_subtree(node):
        if isinstance(inner, cst.Name) and inner.value == name:
            yield inner


def _receiver_name(call: cst.Call) -> str | None:
    """`f` for `f.remote()`, `mod.f.remote()` and `f.options(...).remote()`."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "options":
        receiver = receiver.func.value
    if isinstance(receiver, cst.Attribute):
        return receiver.attr.value
    if isinstance(receiver, cst.Name):
        return receiver.value
    return None


def _child_ref(model: SemanticModel, expr: cst.BaseExpression) -> TypeGuard[cst.Call]:
    """Whether `expr` is a `.remote(...)` call that returns an ObjectRef: a task of this module, an
    actor method, or an imported remote function (an imported name in CamelCase is taken for an actor
    class, whose `.remote()` returns a handle)."""
    if not isinstance(expr, cst.Call):
        return False
    submission = model.submission(expr)
    if submission is None or not submission.returns_ref:
        return False
    if submission.kind == "unknown":
        name = _receiver_name(expr)
        return name is not None and not name[:1].isupper()
    return True


def _appended_children(model: SemanticModel, info: FunctionInfo, name: str) -> list[tuple[cst.Name, cst.Call]]:
    """For a list bound empty: each `name.append(child.remote(...))` in the function, as (receiver,
    submission); empty when anything else is appended."""
    found: list[tuple[cst.Name, cst.Call]] = []
    for receiver, appended in model.appends_in(info.scope, name):
        if appended is None or not _child_ref(model, appended):
            return []
        found.append((receiver, appended))
    return found


class ChildRefExperiment(ReproductionExperiment[None]):
    """A task that returns its child's ref, and whose worker is then killed (standing for a crash, an
    OOM kill or a lost node) after the child has finished: the caller's `ray.get` of the ref fails with
    Ray's `OwnerDiedError`; the same task returning the child's value keeps it. The driver kills the
    parent's worker only once the parent has returned, so a slow machine cannot kill it mid-task. The
    child's result is 1 MB, so that it lives in the object store (a small one may be cached by the caller)."""

    facts_type = type(None)
    expected = r"OwnerDiedError"
    SETTLE_S = 1.5  # Ray learns of the owner's death and frees its objects within about a second
    RESULT_BYTES = 1_000_000
    beside_others = True  # the model kills the owner itself

    def model(self, subject: Subject) -> Plan:
        tasks = (
            "import signal\nimport tempfile\n\n"
            f"@ray.remote\ndef child():\n    return bytes({self.RESULT_BYTES})\n\n"
            "def note_pid(path):\n    with open(path, 'w') as file:\n        file.write(str(os.getpid()))\n\n"
            "def kill_parent(path):  # the parent's worker dies after it returned\n"
            "    with open(path) as file:\n        os.kill(int(file.read()), signal.SIGKILL)\n\n"
            "pid_path = os.path.join(tempfile.mkdtemp(), 'parent.pid')\n"
        )
        returns_ref = (
            tasks + "@ray.remote\ndef parent(path):\n    note_pid(path)\n    return child.remote()\n\n"
            "ref = ray.get(parent.remote(pid_path))\n"
            "ray.wait([ref], timeout=10, fetch_local=False)  # the child has finished\n"
            "kill_parent(pid_path)\n"
            f"time.sleep({self.SETTLE_S})\n"
            "value = ray.get(ref, timeout=20)\n"
        )
        returns_value = (
            tasks + "@ray.remote\ndef parent(path):\n    note_pid(path)\n    return ray.get(child.remote())\n\n"
            "value = ray.get(parent.remote(pid_path))\n"
            "kill_parent(pid_path)\n"
            f"time.sleep({self.SETTLE_S})\n"
            "__ray_lint_evidence__ = {'right': f'the caller still holds the result, {len(value):,} bytes'}\n"
        )
        return Plan(
            Variant("returns the child's ref", script(returns_ref)),
            Variant("returns the child's value", script(returns_value)),
            "modelled",
            "a task returns a child task's 1 MB result by ref (or by value), then its worker is killed",
        )

class ReturnChildTaskRef(Rule):
    code = "RAY034"
    name = "return-child-task-ref"
    message = "A task returns the ObjectRef of a child task it submitted instead of the child's result"
    severity = Severity.WARNING
    category = "fault-tolerance"
    tokens = (".remote(",)
    experiment = ChildRefExperiment()
    docs = """
## What it does
Finds a remote function that submits a child task (or an actor call) and returns the child's
ObjectRef instead of its result:
- `return child.remote(x)`, also as an item of a returned tuple or list;
- `ref = child.remote(x)` ... `return ref`, when `ref` is used nowhere else in the function;
- `return [child.remote(x) for x in xs]`, or a list filled with `refs.append(child.remote(x))`
  and returned.

The finding is reported on the child's `.remote(...)` call.

## Why is this bad?
The process that calls `.remote()` owns the result: it holds the object's metadata and is the
only one that can have it reconstructed. When a task returns its child's ref, the object
outlives the task that owns it. Ray's fault-tolerance guide asks to "avoid letting an
ObjectRef outlive its owner": the parent's worker process has to stay alive for as long as the
ref is in use, and if it dies, everyone holding the ref gets `OwnerDiedError`; Ray cannot
recover the object, even though the child task itself could be re-run. The caller also needs a
second `ray.get` to reach the value.

ray-lint is silent for:
- a task that waits for its children itself (`return ray.get(refs)`): the nested-task pattern,
  where the caller owns the result;
- a ref the task also uses for anything else (gets, waits on, passes to another task);
- functions annotated to return an `ObjectRef` (a deliberate "future of a future" API);
- actor methods: an actor is a long-lived owner, and a router or supervisor actor that hands
  out refs of the calls it dispatches does so by design;
- `Actor.remote()` (an actor handle, not an ObjectRef), including imported CamelCase names;
- refs that came in as arguments, returns of nested functions, and generator tasks.

## Example
```python
@ray.remote
def preprocess(path):
    return load.remote(path)

data = ray.get(ray.get(preprocess.remote(path)))
```

## Use instead
Wait for the child inside the task, so that the caller owns the result:
```python
@ray.remote
def preprocess(path):
    return ray.get(load.remote(path))

data = ray.get(preprocess.remote(path))
```
or have the caller submit `load.remote(path)` itself.

## Fix safety
There is no automatic fix: waiting inside the task changes when the parent finishes and what
its callers get back, and submitting from the caller moves code across processes.

## References
- [Fault tolerance: avoid letting an ObjectRef outlive its owner](https://docs.ray.io/en/latest/ray-core/fault-tolerance.html)
- [Object fault tolerance: owners and lineage reconstruction](https://docs.ray.io/en/latest/ray-core/fault_tolerance/objects.html)
- [Pattern: Using nested tasks to achieve nested parallelism](https://docs.ray.io/en/latest/ray-core/patterns/nested-tasks.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\ndef leaf(x):\n    return x\n\n@ray.remote\ndef parent(xs):\n"
            "    return ray.get([leaf.remote(x) for x in xs])\n",
            "the nested-task pattern: the parent waits for its children",
        ),
        Valid(
            "import ray\n@ray.remote\ndef leaf(x):\n    return x\n\n@ray.remote\ndef parent(xs):\n"
            "    refs = [leaf.remote(x) for x in xs]\n    ray.wait(refs, num_returns=len(refs))\n    return refs\n",
            "the refs are also used for something else",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Router:\n    def __init__(self, workers):\n        self.workers = workers\n"
            "    def submit(self, x):\n        return self.workers[hash(x) % 4].process.remote(x)\n",
            "an actor method: a router hands out refs by design",
        ),
        Valid(
            "import ray\n@ray.remote\ndef leaf(x):\n    return x\n\n@ray.remote\ndef parent(x) -> ray.ObjectRef:\n    return leaf.remote(x)\n",
            "annotated to return a ref: a deliberate future of a future",
        ),
        Valid(
            "import ray\nfrom workers import Worker\n\n@ray.remote\ndef spawn(config):\n    return Worker.remote(config)\n",
            "an actor handle, not an ObjectRef",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    pass\n\n@ray.remote\ndef spawn():\n    return Worker.options(num_cpus=1).remote()\n",
            "an actor of this module: a handle",
        ),
        Valid("import ray\n@ray.remote\ndef forward(ref):\n    return ref\n", "a ref that came in as an argument"),
        Valid("import ray\n\ndef submit(x):\n    return leaf.remote(x)\n", "a driver helper, not a remote function"),
        Valid("@ray.remote\ndef parent(x):\n    return leaf.remote(x)\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import ray\n@ray.remote\ndef parent(x):\n    def later():\n        return leaf.remote(x)\n    return x\n",
            "the return of a nested function",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\ndef load(path):\n    return open(path).read()\n\n@ray.remote\ndef preprocess(path):\n"
            "    return load.remote(path)\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\ndef leaf(x):\n    return x\n\n@ray.remote\ndef parent(xs):\n    return [leaf.remote(x) for x in xs]\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\ndef leaf(x):\n    return x\n\n@ray.remote\ndef parent(xs):\n    refs = []\n    for x in xs:\n"
            "        refs.append(leaf.options(num_cpus=2).remote(x))\n    return refs\n",
            10,
        ),
        Invalid(
            "import ray\nfrom pipeline.tasks import transform\n\n@ray.remote\ndef stage(x):\n    ref = transform.remote(x)\n"
            "    return ref\n",
            6,
            note="an imported remote function",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef ask(counter, x):\n    return counter.add.remote(x), x\n",
            5,
            note="an actor call's ref, as an item of a returned tuple",
        ),
        Invalid(
            "from ray import remote\n\ndef leaf(x):\n    return x\n\nremote_leaf = remote(leaf)\n\ndef parent(x):\n"
            "    return remote_leaf.remote(x)\n\nremote_parent = remote(num_cpus=1)(parent)\n",
            9,
            note="ray.remote applied to the functions",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote in model.remote_defs:
            if remote.kind != "task" or not isinstance(remote.target, cst.FunctionDef):
                continue
            info = model.function_info(remote.target)
            if info is None or info.owner is not None or info.is_generator or _typed_as_ref(model, info.node):
                continue
            for child in self._returned_children(model, info):
                ctx.report(
                    child,
                    f"The task `{info.node.name.value}` returns the ref of a child task it submitted, not its result",
                )

    def _returned_children(self, model: SemanticModel, info: FunctionInfo) -> list[cst.Call]:
        found: list[cst.Call] = []
        returned_names: dict[str, list[cst.Name]] = {}
        for statement in _own_returns(info.node):
            assert statement.value is not None
            for item in _returned_items(statement.value):
                if _child_ref(model, item):
                    found.append(item)
                elif isinstance(item, cst.ListComp) and _child_ref(model, item.elt):
                    found.append(item.elt)
                elif isinstance(item, cst.Name):
                    returned_names.setdefault(item.value, []).append(item)
        for name, returned in returned_names.items():
            bindings = info.scope.bindings.get(name, [])
            if len(bindings) != 1 or name in info.scope.globals:
                continue
            binding = bindings[0]
            value = binding.value
            if binding.kind != "assign" or value is None:
                continue
            allowed = {id(node) for node in returned} | {id(binding.node)}
            if _child_ref(model, value):
                children = [value]
            elif isinstance(value, cst.ListComp) and _child_ref(model, value.elt):
                children = [value.elt]
            elif isinstance(value, cst.List) and not value.elements:
                appended = _appended_children(model, info, name)
                allowed |= {id(receiver) for receiver, _ in appended}
                children = [child for _, child in appended]
            else:
                continue
            if children and all(id(node) in allowed for node in _names_in(info.node.body, name)):
                found.extend(children)
        return found


def _typed_as_ref(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """Whether the return annotation names `ObjectRef`: returning a ref is the function's contract."""
    return function.returns is not None and "ObjectRef" in model.module.code_for_node(function.returns.annotation)
