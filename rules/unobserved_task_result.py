"""RAY077 unobserved-task-result: a task's ObjectRef is thrown away, so nothing ever sees its result or its error."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import Binding, CallSite, Scope, iter_subtree, literal_number
from ray_lint.ray_api import declared_num_returns, expected_to_raise
from ray_lint.rule import Context, Invalid, Rule, Valid


# 4 tasks, of which the third raises; `{submit}` submits them and does what the driver does with the refs.
# The driver's log of Ray's "Unhandled error" (logger `ray._private.worker`) is read, and then left as it was.
DROPPED_REF_MODEL = """\
import logging

class Logged(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())

@ray.remote
def upload(i):
    time.sleep(0.1)
    if i == 2:
        raise ValueError(f"upload {{i}} failed")
    return i

logged = Logged()
logging.getLogger("ray._private.worker").addHandler(logged)
try:
{submit}
finally:
    logging.getLogger("ray._private.worker").removeHandler(logged)
"""
REFS_DROPPED = """\
    for i in range(4):
        upload.remote(i)
    deadline = time.time() + 10  # the driver goes on; Ray logs the error once the task has failed
    while not logged.messages and time.time() < deadline:
        time.sleep(0.05)
    unhandled = [m.splitlines()[0] for m in logged.messages if m.startswith("Unhandled error")]
    if unhandled:
        __ray_lint_evidence__ = {"wrong": (
            "task 2 of 4 raised ValueError, and the driver went on past its loop without an error: "
            f"only Ray's log said so ({unhandled[0][:60]}...)"
        )}"""
REFS_FETCHED = """\
    try:
        ray.get([upload.remote(i) for i in range(4)])
    except ray.exceptions.RayTaskError as error:
        __ray_lint_evidence__ = {"right": f"the driver got {type(error).__name__}: {str(error).splitlines()[-1]}"}"""


class DroppedErrorExperiment(ReproductionExperiment[None]):
    """Runs the lost error: 4 tasks, of which one raises, submitted with their refs thrown away (the
    driver goes on, and only Ray's log reports "Unhandled error") against refs passed to `ray.get` (the
    driver gets the task's error)."""

    facts_type = type(None)
    shares_driver = True

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("refs thrown away", script(DROPPED_REF_MODEL.format(submit=REFS_DROPPED))),
            Variant("refs fetched", script(DROPPED_REF_MODEL.format(submit=REFS_FETCHED))),
            "modelled",
            "4 tasks submitted, of which the third raises",
        )


class UnobservedTaskResult(Rule):
    code = "RAY077"
    name = "unobserved-task-result"
    message = "A task's ObjectRef is thrown away: its result and any error it raises are never seen"
    severity = Severity.INFO
    category = "correctness"
    preview = True
    tokens = (".remote(",)
    experiment = DroppedErrorExperiment()
    docs = """
## What it does
Finds a call of a remote function defined in this file whose ObjectRef is thrown away:
- a bare statement, `process.remote(item)` or `process.options(...).remote(item)`;
- a plain name assigned from it, `ref = process.remote(item)`, that is never read in its
  function (or module).

## Why is this bad?
The ObjectRef is the only way to learn how a task ended. When it is dropped:
- an exception raised by the task is never raised in your code; Ray only logs
  `Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1')` when the ref is
  garbage-collected (`_private/worker.py`, checked on Ray 2.60), which is easy to miss in the
  logs of a job;
- nothing can wait for the task: a driver that reaches its end kills its unfinished tasks, so
  work submitted last may never run;
- a returned value is computed and then discarded.

The rule is in preview because fire-and-forget is sometimes what the author wants: a task that
reports its progress to an actor or a queue, or a driver that runs for as long as its tasks.
The severity is info.

ray-lint is silent for:
- actor method calls (`counter.increment.remote()`): fire-and-forget to an actor is common and
  often intended, and the actor outlives the call (RAY072 reports calls on a temporary actor);
- actor creation (RAY072 reports a dropped handle);
- tasks with `num_returns=0`, which return no ref at all: fire-and-forget on purpose;
- names starting with `_`, the usual way to say a value is unused on purpose;
- remote functions and calls it cannot resolve in this file (`module.task.remote()`,
  `self.fn.remote()`).

## Example
```python
for path in paths:
    upload.remote(path)
print("done")  # not done: errors are lost, and exiting now kills the uploads
```

## Use instead
```python
ray.get([upload.remote(path) for path in paths])
print("done")
```
or, to fire and forget on purpose, declare it with `@ray.remote(num_returns=0)`.

## Fix safety
There is no automatic fix: whether to wait for the task, and where, depends on the program.

## References
- [Tasks: waiting for results](https://docs.ray.io/en/latest/ray-core/tasks.html)
- [Fault tolerance: task failures and unhandled errors](https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html)
- [Actors: fire-and-forget calls](https://docs.ray.io/en/latest/ray-core/actors.html)
"""

    VALID = [
        Valid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\nray.get([upload.remote(p) for p in paths])\n",
            "the refs are fetched",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def increment(self):\n        self.n += 1\n\n"
            "counter = Counter.remote()\ncounter.increment.remote()\n",
            "fire and forget to an actor",
        ),
        Valid(
            "import ray\n\n@ray.remote(num_returns=0)\ndef log_event(event):\n    write(event)\n\nlog_event.remote('start')\n",
            "num_returns=0: no ref to observe",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\nrefs = []\nfor p in paths:\n"
            "    ref = upload.remote(p)\n    refs.append(ref)\nray.wait(refs, num_returns=len(refs))\n",
            "the ref is kept and waited on",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\n_ = upload.remote('a')\n",
            "assigned to `_`: unused on purpose",
        ),
        Valid("import ray\nimport tasks\n\ntasks.upload.remote('a')\n", "a remote function from another module"),
        Valid(
            "import ray\n\n@ray.remote\nclass Worker:\n    def run(self):\n        return 1\n\nw = Worker.remote()\n",
            "an actor creation whose handle is kept",
        ),
        Valid("@ray.remote\ndef f():\n    return 1\n\nf.remote()\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import pytest\nimport ray\n\n@ray.remote\ndef f(x):\n    return x\n\ndef test_signature():\n"
            "    with pytest.raises(TypeError):\n        f.remote(1, 2)\n",
            "a test that expects the submission to raise",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef f():\n    return 1\n\nasync def main():\n    return await f.remote()\n",
            "the ref is awaited",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\ndef main():\n    ref = upload.remote('a')\n"
            "    def wait_for_it():\n        return ray.get(ref)\n    return wait_for_it\n",
            "read in a nested function",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\nfor p in paths:\n    upload.remote(p)\n",
            8,
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef train(config):\n    fit(config)\n\nif __name__ == '__main__':\n    ray.init()\n"
            "    train.options(num_gpus=1).remote(config)\n",
            9,
            note="the driver exits right after: the task is killed",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef upload(path):\n    return send(path)\n\ndef main():\n    ref = upload.remote('a')\n"
            "    print('submitted')\n",
            8,
            note="assigned to a name that is never read",
        ),
        Invalid(
            "from ray import remote\n\n@remote\ndef child(x):\n    return x\n\n@remote\ndef parent(xs):\n    for x in xs:\n"
            "        child.remote(x)\n    return len(xs)\n",
            10,
            note="children dropped inside a task",
        ),
        Invalid(
            "import ray\n\ndef clean(path):\n    remove(path)\n\nclean_remote = ray.remote(clean)\nclean_remote.remote('/tmp/x')\n",
            7,
            note="a function made remote with ray.remote(f)",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.remote_defs:
            return
        found: list[tuple[cst.Call, str]] = []
        for site in model.calls_by_tail.get("remote", ()):
            submission = model.submission(site.node)
            if submission is None or submission.kind != "task" or submission.remote is None:
                continue
            if _returns_nothing(model, submission):
                continue
            statement = site.statement
            if isinstance(statement, cst.Expr) and statement.value is site.node:
                found.append((site.node, self._message(submission, "its ObjectRef is thrown away")))
                continue
            unread = _unread_name(model, site)
            if unread is not None:
                found.append((site.node, self._message(submission, f"its ObjectRef, `{unread}`, is never read")))
        if found:
            meant_to_fail = expected_to_raise(model)  # a test that expects the submission to raise
            for node, message in found:
                if id(node) not in meant_to_fail:
                    ctx.report(node, message)

    def _message(self, submission: Submission, what: str) -> str:
        name = submission.remote.name if submission.remote is not None else "task"
        return f"`{name}` is submitted but {what}"


def _returns_nothing(model: SemanticModel, submission: Submission) -> bool:
    """`num_returns=0` in the decorator or at the call; a value that is not a literal counts (it may be 0),
    and so do options hidden in `**kwargs`."""
    values = declared_num_returns(model, submission)
    if values is None:
        return True
    for value in values:
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # "streaming" or "dynamic": a generator, which returns a ref
        number = literal_number(value)
        if number is None or number == 0:
            return True
    return False


def _unread_name(model: SemanticModel, site: CallSite) -> str | None:
    """The name a plain `name = f.remote(...)` binds, when nothing in its scope ever reads it."""
    statement = site.statement
    if not isinstance(statement, cst.Assign) or statement.value is not site.node or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if not isinstance(target, cst.Name) or target.value.startswith("_"):
        return None
    name = target.value
    scope = _binding_scope(model, name, site)
    if scope is None or name in scope.globals:
        return None
    bindings = scope.bindings.get(name, [])
    uses = sum(1 for node in iter_subtree(scope.node) if isinstance(node, cst.Name) and node.value == name)
    return name if uses == len([b for b in bindings if _binds_by_name(b)]) else None


def _binding_scope(model: SemanticModel, name: str, site: CallSite) -> Scope | None:
    """The function or module scope that the assignment binds `name` in."""
    scope: Scope | None = site.scope
    while scope is not None and scope.kind == "comprehension":
        scope = scope.parent
    if scope is None or scope.kind not in ("function", "module"):
        return None
    if scope.kind == "module" and name in model.star_imports:
        return None
    return scope


def _binds_by_name(binding: Binding) -> bool:
    """Bindings whose node is the `Name` itself (assignments, loop targets), as counted among the uses."""
    return isinstance(binding.node, cst.Name)
