"""RAY072 temporary-actor-handle: an actor whose handle is dropped at once, which Ray takes as the end of the actor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, RemoteOptions, SemanticModel
from ray_lint.python_model import CallSite, FunctionInfo, iter_subtree, literal_string
from ray_lint.ray_api import expected_to_raise, options_at_call
from ray_lint.rule import Context, Invalid, Rule, Valid

# Calls that start work which outlives the method that starts it.
BACKGROUND_STARTERS = {
    "threading.Thread": "a thread",
    "threading.Timer": "a timer thread",
    "asyncio.create_task": "an asyncio task",
    "asyncio.ensure_future": "an asyncio task",
    "subprocess.Popen": "a subprocess",
    "multiprocessing.Process": "a process",
}
# Calls that wait for such work before the method returns.
WAITS = frozenset({"join", "wait", "communicate", "result", "gather", "wait_for", "run_until_complete"})

SINK = """
import threading

@ray.remote
class Sink:
    '''Kept by the driver: records what the short-lived actor got to do.'''

    def __init__(self):
        self.hits = []

    def hit(self, what):
        self.hits.append(what)

    def read(self):
        return self.hits

sink = Sink.remote()

def hits_after(seconds, enough):
    '''What the sink saw, polled until it saw `enough` or `seconds` passed.'''
    deadline = time.time() + seconds
    while True:
        hits = ray.get(sink.read.remote(), timeout=30)
        if len(hits) >= enough or time.time() > deadline:
            return hits
        time.sleep(0.1)
"""
# Per shape: the program, with `CALL` where the flagged statement goes, the statement, and its fix (the handle kept).
SHAPES = {
    "creation": (
        """
@ray.remote
class Loader:
    def __init__(self, sink):
        ray.get(sink.hit.remote("init"))

CALL
hits = hits_after(10, 1)  # an actor starts in about a second, several on a loaded machine
if hits:
    __ray_lint_evidence__ = {"right": f"`Loader.__init__` ran: the sink saw {hits}"}
else:
    __ray_lint_evidence__ = {"wrong": "`Loader.__init__` never ran: Ray cancelled the actor, the sink saw nothing in 10 s"}
""",
        "Loader.remote(sink)",
        "loader = Loader.remote(sink)",
    ),
    "named": (
        """
@ray.remote
class Service:
    def ping(self):
        return "pong"

name = f"registry-{os.getpid()}"
CALL
time.sleep(0.5)
found = ray.get_actor(name)  # raises when the actor is gone
__ray_lint_evidence__ = {"right": f"`ray.get_actor` found it; `ping` returned {ray.get(found.ping.remote(), timeout=30)!r}"}
""",
        "Service.options(name=name).remote()",
        "service = Service.options(name=name).remote()",
    ),
    "background": (
        """
@ray.remote
class Poller:
    def start(self, sink):
        def loop():
            for i in range(6):
                sink.hit.remote(i)
                time.sleep(0.1)

        threading.Thread(target=loop, daemon=True).start()
        return True

CALL
hits = hits_after(3, 6)  # 6 writes 0.1 s apart: well inside 3 s, unless the actor is gone
__ray_lint_evidence__ = {
    "right" if len(hits) == 6 else "wrong": f"the thread that `start` left running made {len(hits)} of 6 writes"
}
""",
        "ray.get(Poller.remote().start.remote(sink), timeout=30)",
        "poller = Poller.remote(); ray.get(poller.start.remote(sink), timeout=30)",
    ),
    "unobserved": (
        """
@ray.remote
class Worker:
    def run(self, sink):
        ray.get(sink.hit.remote("run"))
        raise ValueError("bad config")

try:
    CALL
    hits = hits_after(5, 1)
    __ray_lint_evidence__ = {"wrong": f"`run` raised ValueError in the actor (the sink saw {hits}), and the driver got no error"}
except ray.exceptions.RayTaskError as error:
    __ray_lint_evidence__ = {"right": f"the error reached the driver: {type(error.cause).__name__}: {error.cause}"}
""",
        "Worker.remote().run.remote(sink)",
        "worker = Worker.remote(); ray.get(worker.run.remote(sink), timeout=30)",
    ),
}


@dataclass(frozen=True)
class DroppedHandle:
    """What is lost with the handle: the actor's creation, a named actor, the background work its
    method starts, or the error of the call made on it."""

    shape: Literal["creation", "named", "background", "unobserved"]


class TemporaryActorHandleExperiment(ReproductionExperiment[DroppedHandle]):
    """The finding's shape (a bare creation, a named actor, a method that leaves a thread running, a
    call whose error is dropped) on an actor whose handle is dropped, against the same with the
    handle kept; a sink actor the driver keeps records what the short-lived actor did."""

    facts_type = DroppedHandle
    expected = r"Failed to look up actor with name"

    def model(self, subject: Subject) -> Plan:
        shape = self.facts(subject).shape
        program, flagged, kept = SHAPES[shape]
        return Plan(
            Variant("handle dropped", script(SINK + program.replace("CALL", flagged))),
            Variant("handle kept", script(SINK + program.replace("CALL", kept))),
            "modelled",
            f"`{flagged}`, and `{kept}`",
        )


class TemporaryActorHandle(Rule):
    code = "RAY072"
    name = "temporary-actor-handle"
    message = "An actor's handle is not kept, so Ray destroys the actor while it is still needed"
    severity = Severity.ERROR
    category = "correctness"
    tokens = (".remote(",)
    experiment = TemporaryActorHandleExperiment()
    docs = """
## What it does
Finds an actor whose handle is thrown away while the actor is still needed:
- an actor created by a bare statement, `Worker.remote(...)` or `Worker.options(...).remote(...)`,
  with no `lifetime="detached"`;
- a method called on an actor created in the same expression,
  `Worker.remote().run.remote(...)` (also with `.options(...)` on either part), when
  - the call's result is thrown away (a bare statement),
  - the actor is named (`.options(name=...)`), so other code means to find it with
    `ray.get_actor`, or
  - the method (defined in this file) starts a thread, an asyncio task, a timer or a subprocess
    and returns without waiting for it.

## Why is this bad?
Ray destroys an actor as soon as no handle to it is left (unless it is detached). Older versions
raised `RuntimeError: Lost reference to actor. Actor handles must be stored as variables`
(`actor.py`, issue #6265); Ray 2.60 keeps the actor alive until the pending method call finishes,
and then destroys it. Checked on Ray 2.60:
- a bare `Worker.remote(path)` logs `Failed to register actor ... SchedulingCancelled: Actor
  creation cancelled`: the actor's `__init__` never runs;
- `Service.options(name="svc").remote()` without a kept handle (alone or followed by a method
  call) is gone a moment later: `ray.get_actor("svc")` raises `ValueError: Failed to look up actor
  with name 'svc'`;
- a method that starts a background thread and returns: the actor is killed when the method
  returns, and the thread with it (1 of 6 writes happened, against 6 of 6 with the handle kept).

A bare `Worker.remote().run.remote(config)` also drops the call's result, so an exception in
`run` is never raised anywhere, and a driver that then exits kills the actor mid-call.

ray-lint is silent for:
- `ray.get(Worker.remote().run.remote(config))`, or a ref kept in a variable: a one-shot actor.
  The pending call keeps it alive until the call finishes, so this works in Ray 2.60 (it costs an
  actor start-up; a task may do);
- detached actors (`lifetime="detached"`, or a `lifetime` that is not a literal) and
  `get_if_exists=True`, which may return a handle to an actor that is held elsewhere;
- options given with `**kwargs`, which may hold `lifetime`;
- background work started in another method (such as `__init__`), or in a method of a class
  defined in another file.

## Example
```python
Service.options(name="registry").remote()
...
registry = ray.get_actor("registry")  # ValueError: the actor is gone
```

## Use instead
```python
registry = Service.options(name="registry").remote()  # keep the handle for as long as the actor is needed
```
or, for an actor that must outlive this driver,
`Service.options(name="registry", lifetime="detached").remote()`.

## Fix safety
There is no automatic fix: how long the actor must live, and where its handle should be kept,
depends on the program.

## References
- [Actor lifetimes and named actors](https://docs.ray.io/en/latest/ray-core/actors/named-actors.html)
- [Terminating actors](https://docs.ray.io/en/latest/ray-core/actors/terminating-actors.html)
- [ray-project/ray#6265: lost reference to actor](https://github.com/ray-project/ray/issues/6265)
"""

    VALID = [
        Valid(
            "import ray\n\n@ray.remote\nclass Runner:\n    def run(self, config):\n        return train(config)\n\n"
            "result = ray.get(Runner.remote().run.remote(config))\n",
            "a one-shot actor whose result is fetched: the call keeps it alive",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Service:\n    def ping(self):\n        return 'pong'\n\n"
            "Service.options(name='svc', lifetime='detached').remote()\n",
            "a detached actor lives on without a handle",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Service:\n    def ping(self):\n        return 'pong'\n\n"
            "svc = Service.options(name='svc').remote()\nray.get(svc.ping.remote())\n",
            "the handle is kept",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def add(self, x):\n        self.n += x\n\n"
            "counter = Counter.remote()\ncounter.add.remote(1)\n",
            "a fire-and-forget call on a kept handle",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Service:\n    def ping(self):\n        return 'pong'\n\n"
            "Service.options(name='svc', get_if_exists=True).remote()\n",
            "get_if_exists may return an actor held elsewhere",
        ),
        Valid(
            "import ray\nimport threading\n\n@ray.remote\nclass Job:\n    def run(self):\n"
            "        t = threading.Thread(target=work)\n        t.start()\n        t.join()\n        return 1\n\n"
            "ref = Job.remote().run.remote()\n",
            "the thread is joined before the method returns",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef task():\n    return 1\n\ntask.remote()\n",
            "a task, not an actor (RAY077's concern)",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Service:\n    pass\n\nService.options(**opts).remote()\n",
            "options unknowable: may be detached",
        ),
        Valid(
            "class Service:\n    def remote(self):\n        return self\n\nService().remote()\n",
            "no Ray here",
        ),
        Valid(
            "import pytest\nimport ray\n\n@ray.remote\nclass Service:\n    pass\n\ndef test_bad_options():\n"
            "    with pytest.raises(ValueError):\n        Service.options(num_cpus=-1).remote()\n",
            "a test that expects the creation to raise",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def snapshot(self):\n        return self\n\n"
            "c = Counter.remote()\nc.snapshot.remote().value.remote()\n",
            "the result of a known actor method is an ObjectRef, not a new actor",
        ),
        Valid(
            "import ray\nfrom workers import CodeWorker\n\nrefs = [CodeWorker.remote().run.remote(step) for step in plan]\n"
            "results = ray.get(refs)\n",
            "one-shot actors whose results are collected",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass Service:\n    def ping(self):\n        return 'pong'\n\n"
            "Service.options(name='svc').remote()\nsvc = ray.get_actor('svc')\n",
            8,
            note="a named actor created without keeping its handle",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Loader:\n    def __init__(self, path):\n        self.data = load(path)\n\n"
            "def warm_up(path):\n    Loader.remote(path)\n",
            9,
            note="creation cancelled: __init__ never runs",
        ),
        Invalid(
            "import ray\n\n@ray.remote(num_cpus=1)\nclass TaskRunner:\n    def run(self, config):\n        return train(config)\n\n"
            "def main(config):\n    ray.init()\n    TaskRunner.remote().run.remote(config)\n",
            10,
            note="fire and forget on a temporary actor: the driver returns and exits",
        ),
        Invalid(
            "import ray\nimport threading\n\n@ray.remote\nclass Poller:\n    def start(self, url):\n"
            "        threading.Thread(target=poll, args=(url,), daemon=True).start()\n        return True\n\n"
            "ok = ray.get(Poller.remote().start.remote(url))\n",
            10,
            note="the thread dies with the actor when start returns",
        ),
        Invalid(
            "import ray\nfrom services import Registry\n\nray.get(Registry.options(name='registry').remote().ping.remote())\n",
            4,
            note="a named actor from another module",
        ),
        Invalid(
            "import ray as r\n\n@r.remote\nclass Sink:\n    async def serve(self):\n        import asyncio\n"
            "        asyncio.create_task(self.loop())\n        return 'started'\n\n"
            "ref = Sink.remote().serve.options(name='serve').remote()\n",
            10,
            note="an asyncio task started and left running; method options",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Service:\n    pass\n\nService.options(name='svc', lifetime='non_detached').remote()\n",
            7,
            note="explicitly not detached",
        ),
        Invalid(
            "import ray\n\nclass Launcher:\n    def launch(self, config):\n        self.runner_cls.remote().run.remote(config)\n",
            5,
            note="an actor class held in an attribute",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        found: list[tuple[cst.Call, tuple[str, DroppedHandle]]] = []
        for site in model.calls_by_tail.get("remote", ()):
            submission = model.submission(site.node)
            if submission is None:
                continue
            message = None
            if submission.kind == "actor-create" and submission.remote is not None and _is_bare(site):
                message = self._bare_creation(site, submission.remote)
            elif submission.kind in ("actor-method", "unknown"):
                message = self._chain(ctx, site)
            if message is not None:
                found.append((site.node, message))
        if found:
            meant_to_fail = expected_to_raise(model)  # a test that expects the creation or the call to raise
            for node, (message, facts) in found:
                if id(node) not in meant_to_fail:
                    ctx.report(node, message, facts=facts)

    def _bare_creation(self, site: CallSite, actor: RemoteDef) -> tuple[str, DroppedHandle] | None:
        options = _creation_options(site.node, actor)
        if options is None or _lives_on(options) or _has_option(options, "get_if_exists"):
            return None
        name = _literal_option(options, "name")
        shown = name if name is None or len(name) <= 20 else name[:17] + "..."
        named = f" named `{shown}`" if name else (" named" if _has_option(options, "name") else "")
        message = f"The handle of this new `{actor.name}` actor{named} is dropped at once, so Ray cancels it"
        return message, DroppedHandle("named" if named else "creation")

    def _chain(self, ctx: Context, site: CallSite) -> tuple[str, DroppedHandle] | None:
        """`Cls.remote(...).method.remote(...)`: the handle exists only inside the expression."""
        model = ctx.model
        method_ref = site.node.func.value  # type: ignore[attr-defined]
        if isinstance(method_ref, cst.Call) and isinstance(method_ref.func, cst.Attribute) and method_ref.func.attr.value == "options":
            method_ref = method_ref.func.value
        if not isinstance(method_ref, cst.Attribute) or not isinstance(method_ref.value, cst.Call):
            return None
        creation = method_ref.value
        creation_func = creation.func
        if not (isinstance(creation_func, cst.Attribute) and creation_func.attr.value == "remote"):
            return None
        made = model.submission(creation)
        # Anything but a known task or actor method (which return ObjectRefs) is taken as an actor class:
        # `.method.remote(...)` on its result works only on an actor handle (`self.worker_cls.remote()`).
        if made is None or made.kind == "task" or (made.kind == "actor-method" and made.remote is not None):
            return None
        actor = made.remote if made.kind == "actor-create" else None
        options = _creation_options(creation, actor)
        if options is None or _lives_on(options) or _has_option(options, "get_if_exists"):
            return None
        method = method_ref.attr.value
        class_name = actor.name if actor is not None else ctx.snippet(_class_expression(creation), 30)
        reasons: list[tuple[str, DroppedHandle]] = []
        background = _background_work(model, actor, method)
        if background is not None:
            reasons.append((f"{background[0]} started by `{method}` dies with it", DroppedHandle("background")))
        if _has_option(options, "name"):
            reasons.append(("`ray.get_actor` cannot find it", DroppedHandle("named")))
        if _is_bare(site):
            reasons.append(("an error in the call is never raised", DroppedHandle("unobserved")))
        if not reasons:
            return None
        reason, facts = reasons[0]
        return f"`{class_name}.remote().{method}.remote()` keeps no handle, so {reason}", facts


def _is_bare(site: CallSite) -> bool:
    """Whether the call is a whole expression statement: its value is thrown away."""
    statement = site.statement
    return isinstance(statement, cst.Expr) and statement.value is site.node


def _class_expression(creation: cst.Call) -> cst.BaseExpression:
    receiver = creation.func.value  # type: ignore[attr-defined]
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "options":
        return receiver.func.value
    return receiver


def _creation_options(creation: cst.Call, actor: RemoteDef | None) -> list[RemoteOptions] | None:
    """The options that apply to this creation: the class decorator's (when the class is known) and the
    `.options(...)` of the call itself; None when `**kwargs` makes them unknowable."""
    found = [actor.options] if actor is not None else []
    at_call = options_at_call(creation)
    if at_call is not None:
        found.append(at_call)
    if any(options.has_unpacked for options in found):
        return None
    return found


def _has_option(options: list[RemoteOptions], name: str) -> bool:
    return any(name in o.values and not _is_none(o.values[name]) for o in options)


def _literal_option(options: list[RemoteOptions], name: str) -> str | None:
    values = [literal_string(o.values[name]) for o in options if name in o.values]
    return values[-1] if values else None


def _lives_on(options: list[RemoteOptions]) -> bool:
    """Detached, or a `lifetime` that is not a literal (it may be "detached")."""
    return any(
        "lifetime" in o.values and not _is_none(o.values["lifetime"]) and literal_string(o.values["lifetime"]) != "non_detached"
        for o in options
    )


def _is_none(expr: cst.BaseExpression) -> bool:
    """`None` or `False`: an option given but not set."""
    return isinstance(expr, cst.Name) and expr.value in ("None", "False")


def _background_work(model: SemanticModel, actor: RemoteDef | None, method_name: str) -> tuple[str, cst.Call] | None:
    """What a method of an actor class in this module starts and leaves running when it returns: a
    thread, timer, asyncio task or subprocess, with no join, wait or await of it in the method."""
    if actor is None or actor.cls is None:
        return None
    method: FunctionInfo | None = model.method(actor.cls, method_name)
    if method is None:
        return None
    found: tuple[str, cst.Call] | None = None
    in_with: set[int] = set()
    for node in iter_subtree(method.node.body, into_functions=False):
        if isinstance(node, cst.Await):
            return None  # the method may await what it started
        if isinstance(node, cst.With):
            in_with.update(id(item.item) for item in node.items)
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in WAITS:
            return None
        site = model.call_site(node)
        name = model.call_name(site) if site is not None else None
        kind = BACKGROUND_STARTERS.get(name or "")
        if kind is None and isinstance(func, cst.Attribute) and func.attr.value == "create_task":
            kind = "an asyncio task"
        if kind is not None and id(node) not in in_with and found is None:
            found = (kind, node)
    return found
