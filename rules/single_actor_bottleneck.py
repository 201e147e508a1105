"""RAY010 single-actor-bottleneck: a loop sends many independent calls to one actor, which runs them one at a time."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.actor_state import mutates_state
from ray_lint.analyses.loop_dependence import repeats_discarded_call, sequential_by_design, single_actor
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, replayed, script, timed
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import COMPREHENSIONS, CallSite, Loop
from ray_lint.ray_api import keyword_arg
from ray_lint.rule import Context, Invalid, Rule, Valid

COLLECTING_METHODS = frozenset({"append", "appendleft", "add", "put", "put_nowait", "insert"})
# Options that make an actor a deliberate singleton: a named or detached service.
SINGLETON_OPTIONS = ("name", "lifetime", "get_if_exists")
CAPTURE_CHILDREN = "placement_group_capture_child_tasks"


@dataclass(frozen=True)
class CallFacts:
    """What the experiment needs of the flagged loop of calls."""

    iterations: int | None  # when the code says how many calls the loop makes


class SingleActorBottleneckExperiment(Experiment[CallFacts]):
    """The calls replayed on one actor and spread over one actor per CPU: RAY010 has no fix to apply,
    so this is the comparison its docs recommend, with calls of a known duration."""

    facts_type = CallFacts
    shares_driver = True

    CALL_SECONDS = 0.25
    ASSUMED_CALLS = 8

    def plan(self, subject: Subject) -> Plan | str:
        calls, counted = replayed(self.facts(subject).iterations, self.ASSUMED_CALLS, subject.cluster_cpus, "calls")
        actors = max(2, int(subject.cluster_cpus))
        worker = f"@ray.remote\nclass Worker:\n    def work(self, i):\n        time.sleep({self.CALL_SECONDS})\n        return i\n\n"
        one = worker + "handles = [Worker.remote()]\n"
        many = worker + f"handles = [Worker.remote() for _ in range({actors})]\n"
        ready = "ray.get([h.work.remote(-1) for h in handles])  # actors up before the clock starts\n"
        body = f"return ray.get([handles[i % len(handles)].work.remote(i) for i in range({calls})])"
        shape = f"{counted} of {self.CALL_SECONDS:g} s"
        return Plan(
            Variant("one actor", script(one + ready + timed(body))),
            Variant(f"{actors} actors", script(many + ready + timed(body))),
            "modelled",
            shape,
        )


class SingleActorBottleneck(Rule):
    code = "RAY010"
    name = "single-actor-bottleneck"
    message = "Many independent calls go to one actor, which runs them one at a time"
    severity = Severity.WARNING
    category = "perf"
    tokens = (".remote(",)
    experiment = SingleActorBottleneckExperiment()
    docs = """
## What it does
Finds a loop or comprehension that sends many calls of one method to a single actor handle
created outside the loop and wants the results (it collects the refs or fetches each with
`ray.get`), when the actor keeps no state between calls: no method of its class assigns, deletes
or mutates anything reached from `self` (directly or through other methods it calls on `self`). A
method that only reads state another method changes (`get_count` beside `inc`) is not reported:
its calls must reach the one actor that holds that state.

## Why is this bad?
An actor runs one method call at a time, in the order the calls arrive. Submitting the calls
asynchronously does not make them parallel: they queue behind each other on the actor's one
worker while the rest of the cluster is idle. Ray's "Profiling Ray Actors" guide shows 5 calls
of 0.5 s taking 2.5 s on one actor and 1.5 s on five. Measured on a 2-core machine with Ray
2.60: 4 calls of 0.5 s take 2.0 s on one actor and 1.0 s on two (2.0×).

ray-lint is silent when the serialization is the point or does not happen: the method changes
the actor's state (counters, buffers, caches, an environment or optimizer `step`), the actor is
async or threaded (`max_concurrency`, concurrency groups), it holds a GPU (one device, one
model), it coordinates a placement group's gang (`placement_group_capture_child_tasks=True`: an
inference engine whose workers hold the group's GPUs), it is a named or detached service, the
calls go to different actors (`actors[i % n]`,
`ray.util.ActorPool`), the handle is created in the loop, the results are not wanted
(fire-and-forget calls such as logging), or the loop repeats one identical call and throws the
result away (a warm-up). When the calls are fetched one by one with `ray.get` in the loop, this
rule reports them rather than RAY001: batching the gets would not help, since the actor runs the
calls one at a time anyway.

## Example
```python
scorer = Scorer.remote()
refs = [scorer.score.remote(doc) for doc in docs]
scores = ray.get(refs)
```

## Use instead
```python
from ray.util import ActorPool

pool = ActorPool([Scorer.remote() for _ in range(4)])
scores = list(pool.map(lambda actor, doc: actor.score.remote(doc), docs))
```
or make `score` a task (`@ray.remote def score(doc): ...`) when it needs no set-up.

## Fix safety
There is no automatic fix: how many actors to run depends on their memory and the cluster.

## References
- [Actors: calls on one actor run serially](https://docs.ray.io/en/latest/ray-core/actors.html)
- [Profiling Ray actors](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/optimize-performance.html)
- [Utility classes: ActorPool](https://docs.ray.io/en/latest/ray-core/actors/actor-utils.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nclass Counter:\n    def __init__(self):\n        self.n = 0\n"
            "    def inc(self):\n        self.n += 1\n    def read(self, k):\n        return self.n * k\n\n"
            "c = Counter.remote()\nvalues = ray.get([c.read.remote(k) for k in range(10)])\n",
            "a reader of state another method changes: the calls need that one actor",
        ),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    def ping(self):\n        return 'ok'\n\nm = M.remote()\nfor _ in range(5):\n"
            "    ray.get(m.ping.remote())\n",
            "a warm-up",
        ),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    def read(self):\n        return 1\n\nm = M.remote()\nwhile True:\n"
            "    try:\n        value = ray.get(m.read.remote())\n        break\n    except ray.exceptions.RayActorError:\n"
            "        m = M.remote()\n",
            "a retry loop",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Counter:\n    def add(self, x):\n        self.total += x\n        return self.total\n\n"
            "c = Counter.remote()\nrefs = [c.add.remote(x) for x in xs]\n",
            "the method keeps a running total",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Buffer:\n    def push(self, x):\n        self._store(x)\n    def _store(self, x):\n"
            "        self.items.append(x)\n\nb = Buffer.remote()\nrefs = [b.push.remote(x) for x in xs]\n",
            "state changed through a helper method",
        ),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    async def predict(self, x):\n        return x\n\nm = M.remote()\nrefs = [m.predict.remote(x) for x in xs]\n",
            "async actor: calls overlap",
        ),
        Valid(
            "import ray\n@ray.remote(max_concurrency=8)\nclass M:\n    def predict(self, x):\n        return x\n\nm = M.remote()\nrefs = [m.predict.remote(x) for x in xs]\n",
            "threaded actor",
        ),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nms = [M.remote() for _ in range(4)]\n"
            "refs = [ms[i % 4].predict.remote(x) for i, x in enumerate(xs)]\n",
            "calls spread over several actors",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Log:\n    def write_line(self, x):\n        print(x)\n\nlog = Log.remote()\nfor x in xs:\n    log.write_line.remote(x)\n",
            "fire and forget",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\nclass M:\n    def predict(self, x):\n        return self.model(x)\n\nm = M.remote()\nrefs = [m.predict.remote(x) for x in xs]\n",
            "one model on one GPU",
        ),
        Valid(
            "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote\nclass Engine:\n"
            "    def __init__(self):\n        self.engine = start_engine(tp=8)\n    def generate(self, prompts):\n"
            "        return self.engine.generate(prompts)\n\npg = ray.util.placement_group([{'GPU': 4}] * 2)\n"
            "engine = Engine.options(num_gpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(\n"
            "    placement_group=pg, placement_group_capture_child_tasks=True)).remote()\n"
            "futures = [engine.generate.remote(prompts[i:i + 20]) for i in range(0, len(prompts), 20)]\n"
            "results = ray.get(futures)\n",
            "the coordinator of a placement group's gang: its workers hold the GPUs, and there is one engine",
        ),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nrefs = []\nfor x in xs:\n    m = M.remote()\n    refs.append(m.predict.remote(x))\n",
            "a new actor per item",
        ),
        Valid("import ray\n\ndef run(m, xs):\n    return [m.predict.remote(x) for x in xs]\n", "actor class not visible"),
        Valid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\n"
            "m = M.options(name='model', lifetime='detached').remote()\nrefs = [m.predict.remote(x) for x in xs]\n",
            "a named, detached service",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nm = M.remote()\n"
            "for x in xs:\n    print(ray.get(m.predict.remote(x)))\n",
            9,
            note="fetched one by one: RAY010, not RAY001",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return self.model(x)\n\nm = M.remote()\nrefs = [m.predict.remote(x) for x in xs]\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def __init__(self):\n        self.model = load()\n    def predict(self, x):\n        return self.model(x)\n\n"
            "m = M.remote()\nrefs = []\nfor x in xs:\n    refs.append(m.predict.remote(x))\nout = ray.get(refs)\n",
            12,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nm = M.options(num_cpus=2).remote()\n"
            "refs = {}\nfor k, x in items:\n    refs[k] = m.predict.remote(x)\n",
            10,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nm = M.remote()\nrefs = []\nfor x in xs:\n"
            "    ref = m.predict.options(name='p').remote(x)\n    refs.append(ref)\n",
            10,
        ),
        Invalid(
            "import ray\nclass M:\n    def predict(self, x):\n        return x\n\nRemoteM = ray.remote(M)\nm = RemoteM.remote()\n"
            "pending = {m.predict.remote(x): x for x in xs}\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\ndef main(xs):\n    m = M.remote()\n"
            "    futures = [m.predict.remote(x) for x in xs]\n    return ray.get(futures)\n",
            9,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return self.cache.get(x)\n\nm = M.remote()\n"
            "refs = []\ni = 0\nwhile i < n:\n    refs += [m.predict.remote(i)]\n    i += 1\n",
            11,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass M:\n    def predict(self, x):\n        return x\n\nm = M.remote()\n"
            "for batch in batches:\n    refs = [m.predict.remote(x) for x in batch]\n    print(ray.get(refs))\n",
            9,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for site, submission, _ in model.looped_submissions("actor-method"):
            assert site.loop is not None
            actor, handle = single_actor(model, submission, site.loop), submission.handle
            if actor is None or actor.cls is None or not isinstance(handle, cst.Name) or not submission.method:
                continue
            method = model.method(actor.cls, submission.method)
            iterations = model.literal_iterations(site.loop)
            if iterations is not None and iterations < 2:
                continue
            if method is None or not self._serializes(model, actor) or _keeps_state(model, actor):
                continue
            fetch = _fetch_in_iteration(model, site)
            if fetch is not None:
                if sequential_by_design(model, site.loop, fetch) or repeats_discarded_call(model, site.loop, fetch, site.node):
                    continue
            elif not _collected(model, site, site.loop):
                continue
            ctx.report(
                site.node,
                f"`{handle.value}.{submission.method}` calls in this loop run one at a time on one `{actor.name}` actor",
                facts=CallFacts(iterations),
            )

    def _serializes(self, model: SemanticModel, actor: RemoteDef) -> bool:
        """Not a deliberate one-of-a-kind actor (a GPU holder, a named service, a gang's coordinator)."""
        if model.gpu_request(actor) != "none" or _coordinates_gang(actor):
            return False
        return not any(any(True for _ in actor.option_values(name)) for name in SINGLETON_OPTIONS)


def _coordinates_gang(actor: RemoteDef) -> bool:
    """Whether the actor is placed in a placement group whose tasks and actors it starts land there too
    (`placement_group_capture_child_tasks=True`, in a `PlacementGroupSchedulingStrategy` or as the legacy
    option): it coordinates a gang of reserved resources, such as an inference engine whose workers hold
    the group's GPUs, and there is one of it by design."""
    values = list(actor.option_values(CAPTURE_CHILDREN))
    for strategy in actor.option_values("scheduling_strategy"):
        captured = keyword_arg(strategy, CAPTURE_CHILDREN) if isinstance(strategy, cst.Call) else None
        if captured is not None:
            values.append(captured.value)
    return any(isinstance(value, cst.Name) and value.value == "True" for value in values)


def _fetch_in_iteration(model: SemanticModel, site: CallSite) -> CallSite | None:
    """The `ray.get` that waits for this call's ref in the same iteration (directly or through a name)."""
    assert site.loop is not None
    for get in model.calls_to("ray.get"):
        if not get.node.args or not site.loop.contains_index(get.index):
            continue
        origin = model.ref_origin(get.node.args[0].value, get.scope, get.index)
        if origin is not None and origin.producer is site.node:
            return get
    return None


def _collected(model: SemanticModel, site: CallSite, loop: Loop) -> bool:
    """Whether the loop keeps the ref: a comprehension element, `refs.append(ref)`, `refs[k] = ref`,
    `refs += [ref]`, a dict key, directly or through a name in the same iteration."""
    call = site.node
    node = loop.node
    if isinstance(node, COMPREHENSIONS):
        element = (node.key, node.value) if isinstance(node, cst.DictComp) else (node.elt,)
        if any(e is call or (isinstance(e, cst.Tuple) and any(x.value is call for x in e.elements)) for e in element):
            return True
    statement = site.statement
    if isinstance(statement, cst.Expr) and any(value is call for value in _stored_values(statement.value)):
        return True
    if isinstance(statement, cst.AugAssign) and isinstance(statement.value, cst.List):
        return any(element.value is call for element in statement.value.elements)
    if isinstance(statement, cst.Assign):
        for target in statement.targets:
            subscript = target.target
            if isinstance(subscript, cst.Subscript) and (
                statement.value is call  # refs[k] = ref
                or any(isinstance(s.slice, cst.Index) and s.slice.value is call for s in subscript.slice)  # d[ref] = k
            ):
                return True
        names = [t.target.value for t in statement.targets if isinstance(t.target, cst.Name)]
        if statement.value is call and len(names) == 1:
            return _name_collected(model, names[0], site, loop)
    return False


def _stored_values(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What `refs.append(x)` (or `.add`, `.put`, ...) stores."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in COLLECTING_METHODS:
        return [arg.value for arg in expr.args]
    return []


def _name_collected(model: SemanticModel, name: str, site: CallSite, loop: Loop) -> bool:
    """`ref = h.m.remote(x)` followed, in the same iteration, by `refs.append(ref)` or `refs[k] = ref`."""
    def later_in_iteration(index: int) -> bool:
        return index > site.index and loop.contains_index(index)

    for other in [*model.calls_by_tail.get("append", ()), *model.calls_by_tail.get("add", ())]:
        stored = _stored_values(other.node)
        if later_in_iteration(other.index) and any(isinstance(v, cst.Name) and v.value == name for v in stored):
            return True
    return any(
        later_in_iteration(store.index) and isinstance(store.value, cst.Name) and store.value.value == name
        for store in model.stores
    )


def _keeps_state(model: SemanticModel, actor: RemoteDef) -> bool:
    """Whether any method of the actor leaves state behind: then even a method that only reads it
    (`get_count` beside `inc`) must go to the one actor that holds that state."""
    return any(
        mutates_state(model, function)
        for function in model.functions
        if function.owner is actor.cls and function.node.name.value != "__init__"  # setting up is not state between calls
    )
