"""RAY012 unbounded-pending-submission: a loop submits work faster than it completes, with no back-pressure."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Run, Subject, Variant, script
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import Binding, CallSite, Loop, has_exit, is_true, iter_subtree, names_read
from ray_lint.rule import Context, Invalid, Rule, Valid

# Ray warns once this many calls wait to be sent to one actor (`actor_excess_queueing_warn_threshold`).
EXCESS_QUEUEING_THRESHOLD = 5000
# Iterables that never end: counters, cycles, message-queue consumers.
ENDLESS_ITERABLES = frozenset({"itertools.count", "itertools.cycle", "kafka.KafkaConsumer"})
EXIT_CALLS = ("sys.exit", "os._exit")
STORING_METHODS = frozenset({"append", "appendleft", "add", "extend", "insert"})
EMPTY_CONSTRUCTORS = frozenset({"list", "dict", "set"})


@dataclass(frozen=True)
class PendingFacts:
    """What the experiment needs of the flagged submission."""

    actor: bool  # the loop calls an actor method (Ray warns past 5000 pending calls), not a task
    calls: int | None  # how many calls the loop makes, when it ends and the code says so


class PendingSubmissionExperiment(ReproductionExperiment[PendingFacts]):
    """The loop's submissions replayed for a second against work that cannot keep up, then the backlog
    counted, with Ray's own warning when the calls go to one actor; against the same loop keeping at
    most 100 calls in flight with `ray.wait`."""

    facts_type = PendingFacts
    expected = r"More than \d+ tasks are pending submission to actor"
    WINDOW_S = 1.0
    IN_FLIGHT = 100
    beside_others = True  # the backlog is thousands of calls against a limit of 100

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        if facts.actor:
            target = (
                "@ray.remote\nclass Sink:\n    def write(self, i):\n        time.sleep(0.002)\n        return i\n\n"
                "sink = Sink.remote()\nray.get(sink.write.remote(-1))  # the actor up before the loop\nsubmit = sink.write.remote\n"
            )
            what, cost = "calls to one actor", "2 ms"
        else:
            target = "@ray.remote\ndef work(i):\n    time.sleep(0.01)\n    return i\n\nsubmit = work.remote\n"
            what, cost = "tasks", "10 ms"
        limit = facts.calls if facts.calls is not None else 10**9
        loop = (
            "pending, sent, start = [], 0, time.perf_counter()\n"
            f"while time.perf_counter() - start < {self.WINDOW_S} and sent < {limit}:\n"
            "{bound}"
            "    pending.append(submit(sent))\n"
            "    sent += 1\n"
            "elapsed = time.perf_counter() - start\n"
            "_, pending = ray.wait(pending, num_returns=len(pending), timeout=0, fetch_local=False)\n"
            f"counts = f'{{sent}} {what} submitted in {{elapsed:.1f}} s, {{len(pending)}} of them still pending'\n"
            "time.sleep(0.5)  # Ray's warnings reach the driver\n"
            f"if len(pending) > {self.IN_FLIGHT}:\n"
            "    __ray_lint_evidence__ = {'wrong': counts + ': the backlog grows as long as the loop runs'}\n"
            "else:\n"
            "    __ray_lint_evidence__ = {'right': counts}\n"
        )
        bounded = f"    if len(pending) >= {self.IN_FLIGHT}:\n        _, pending = ray.wait(pending, num_returns=1)\n"
        upto = f", up to {facts.calls}" if facts.calls is not None else ""
        return Plan(
            Variant("no bound", script(target + loop.replace("{bound}", ""))),
            Variant(f"at most {self.IN_FLIGHT} in flight", script(target + loop.replace("{bound}", bounded))),
            "modelled",
            f"{what} of {cost} submitted for {self.WINDOW_S:g} s{upto}",
        )

    def shown(self, run: Run) -> str | None:
        """The backlog the run counted, and Ray's warning about it when Ray gave one."""
        problem = super().shown(run)
        warned = next((w for w in run.ray_warnings if re.search(self.expected, w)), None)
        if problem is None or warned is None:
            return problem or warned
        return f"{problem}; Ray warned: {warned}"


class UnboundedPendingSubmission(Rule):
    code = "RAY012"
    name = "unbounded-pending-submission"
    message = "A loop submits work with no back-pressure, so pending tasks pile up without bound"
    severity = Severity.WARNING
    category = "resource"
    tokens = (".remote(",)
    experiment = PendingSubmissionExperiment()
    also_tokens = ("while True", "while 1", "count(", "cycle(", "KafkaConsumer", "range(")
    docs = """
## What it does
Finds two ways of submitting work with nothing to hold it back:
- a loop that never ends (`while True:` with no `break`, `return` or `raise`, or a `for` over
  `itertools.count()`, `itertools.cycle()` or a `KafkaConsumer`) that submits tasks or actor
  calls and keeps every ref in a list, dict or set made before the loop, which the loop never
  reads, trims, waits on or replaces;
- a loop over `range(N)` with a literal N of 5000 or more that sends a call to the same
  actor handle each time and never calls `ray.get` or `ray.wait` in the loop.

## Why is this bad?
`.remote()` returns at once, so a loop that does not wait submits work as fast as it can,
whatever the cluster can run. Every pending call holds its arguments and bookkeeping in the
submitter, and every ref the loop keeps pins its result in the object store. In a stream that
never ends this grows until the driver or the object store runs out of memory. Calls to one
actor show it first: once more than 5000 calls wait to be sent to an actor, Ray warns
"Warning: More than 5000 tasks are pending submission to actor ... wait for these tasks to
finish before sending more" (`excess_queueing_warning`, threshold
`actor_excess_queueing_warn_threshold`; it repeats at 10000, 20000, ...). Ray's "Pattern:
Using ray.wait to limit the number of pending tasks" page describes the fix.

ray-lint is silent when:
- the loop ends (`break`, `return`, `raise`, `sys.exit()`), or iterates something finite; a
  finite batch of moderate size is fine;
- the list of refs is read in the loop at all (`len(refs)`, `ray.wait(refs)`, `refs.pop()`,
  `refs = ...`, passed to a helper) or anywhere else in the function: that is how a bound is
  applied;
- the refs are dropped at once (fire and forget; see RAY077), or kept in an attribute
  (`self.pending`) that another method may drain;
- for the `range(N)` case, the loop waits (`ray.get`/`ray.wait`), the handle changes each
  iteration, or the actor sets `max_pending_calls`.

## Example
```python
pending = []
while True:
    event = consumer.poll()
    pending.append(process.remote(event))
```

## Use instead
```python
MAX_IN_FLIGHT = 100
pending = []
while True:
    event = consumer.poll()
    if len(pending) >= MAX_IN_FLIGHT:
        done, pending = ray.wait(pending, num_returns=1)
        handle(ray.get(done[0]))
    pending.append(process.remote(event))
```
For an actor, `Actor.options(max_pending_calls=100)` makes `.remote()` raise
`PendingCallsLimitExceeded` instead of queueing without bound.

## Fix safety
There is no automatic fix: the right number of calls in flight depends on the work and the
cluster.

## References
- [Pattern: Using ray.wait to limit the number of pending tasks](https://docs.ray.io/en/latest/ray-core/patterns/limit-pending-tasks.html)
- [ray.remote: the `max_pending_calls` actor option](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
"""

    VALID = [
        Valid(
            "import fed\nimport ray\n\n@fed.remote\nclass Worker:\n    def run(self):\n        return None\n\n"
            "worker = Worker.party('alice').remote()\nfor i in range(10000):\n    worker.run.remote()\n",
            "RayFed's `@fed.remote`: another library's actor, not Ray's",
        ),
        Valid(
            "import ray\npending = []\nwhile True:\n    event = consumer.poll()\n    if len(pending) >= 100:\n"
            "        done, pending = ray.wait(pending, num_returns=1)\n    pending.append(process.remote(event))\n",
            "bounded with ray.wait",
        ),
        Valid(
            "import ray\npending = []\nwhile True:\n    event = consumer.poll()\n    if event is None:\n        break\n"
            "    pending.append(process.remote(event))\nray.get(pending)\n",
            "the loop ends when the stream does",
        ),
        Valid(
            "import ray\nrefs = [process.remote(x) for x in range(100)]\nprint(ray.get(refs))\n",
            "a finite, moderate batch",
        ),
        Valid(
            "import ray\nwhile True:\n    event = consumer.poll()\n    logger.log.remote(event)\n",
            "fire and forget: the refs are dropped (RAY077's concern)",
        ),
        Valid(
            "import ray\n@ray.remote(max_pending_calls=1000)\nclass Sink:\n    def write(self, x):\n        pass\n\n"
            "sink = Sink.remote()\nfor i in range(100000):\n    sink.write.remote(i)\n",
            "max_pending_calls bounds the queue",
        ),
        Valid(
            "import ray\nfor i in range(100000):\n    ray.get(sink.write.remote(i))\n",
            "each call waited for",
        ),
        Valid(
            "import ray\nsinks = [Sink.remote() for _ in range(8)]\nfor i in range(10000):\n    sinks[i % 8].write.remote(i)\n",
            "the handle changes each iteration",
        ),
        Valid(
            "pending = []\nwhile True:\n    pending.append(worker.remote(next_event()))\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\nimport threading\npending = []\nthreading.Thread(target=drain, args=(pending,)).start()\nwhile True:\n"
            "    pending.append(process.remote(consumer.poll()))\n",
            "the list is drained elsewhere",
        ),
        Valid(
            "import ray\nrefs = []\nwhile True:\n    refs.append(process.remote(consumer.poll()))\n    refs = refs[-100:]\n",
            "the list is trimmed",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\npending = []\nwhile True:\n    event = consumer.poll()\n    pending.append(process.remote(event))\n",
            5,
        ),
        Invalid(
            "import ray\nimport itertools\n\ndef serve(model):\n    results = {}\n    for i in itertools.count():\n"
            "        request = receive()\n        results[i] = model.predict.remote(request)\n",
            8,
            note="an endless counter; refs kept in a dict",
        ),
        Invalid(
            "import ray\nfrom kafka import KafkaConsumer\nconsumer = KafkaConsumer('events')\nfutures = []\nfor message in consumer:\n"
            "    ref = handle.remote(message.value)\n    futures.append(ref)\n",
            6,
            note="a Kafka consumer never ends",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Sink:\n    def write(self, x):\n        self.rows.append(x)\n\nsink = Sink.remote()\n"
            "for i in range(10000):\n    sink.write.remote(i)\n",
            9,
            note="more than 5000 calls queue on one actor",
        ),
        Invalid(
            "import ray\n\ndef load(counter):\n    refs = [counter.incr.remote(i) for i in range(20_000)]\n    return ray.get(refs)\n",
            4,
            note="a comprehension: the get comes after all 20000 calls are queued",
        ),
        Invalid(
            "import ray\nimport time\nrefs = []\nwhile 1:\n    refs += [sample.options(num_cpus=1).remote(time.time())]\n"
            "    time.sleep(1)\n",
            5,
            note="slowly, but without end",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        ray_imported = model.imports_module("ray")
        for site in model.calls_by_tail.get("remote", ()):
            if site.loop is None:
                continue
            submission = model.submission(site.node)
            if submission is None or not submission.returns_ref:
                continue
            if submission.remote is None and not ray_imported:
                continue
            endless = _endless_loop(model, site)
            if endless is not None:
                collection = _kept_in(model, site, endless)
                if collection is not None and _only_filled(model, collection, endless, site):
                    ctx.report(
                        site.node,
                        f"This endless loop keeps every ref it submits in `{collection.name}` and never waits on one",
                        facts=PendingFacts(submission.kind == "actor-method", None),
                    )
                    continue
            self._check_many_actor_calls(ctx, site, submission)

    def _check_many_actor_calls(self, ctx: Context, site: CallSite, submission: Submission) -> None:
        model = ctx.model
        if submission.kind != "actor-method" or submission.handle is None:
            return
        actor = submission.remote
        if actor is not None and (actor.options_unknowable or any(True for _ in actor.option_values("max_pending_calls"))):
            return
        loop = _many_iterations(model, site)
        if loop is None or names_read(submission.handle) & model.names_bound_in(loop) or _waits_in(model, loop):
            return
        count = model.literal_iterations(loop)
        ctx.report(
            site.node,
            f"{count} calls go to actor `{ctx.snippet(submission.handle, limit=24)}` without waiting, past Ray's "
            f"{EXCESS_QUEUEING_THRESHOLD} pending-call warning",
            facts=PendingFacts(True, count),
        )


def _endless_loop(model: SemanticModel, site: CallSite) -> Loop | None:
    """The loop around the call (in the same function) that never ends: `while True` with no exit, or a
    `for` over `itertools.count()`, `itertools.cycle()` or a `KafkaConsumer`, with none."""
    loop = site.loop
    while loop is not None and loop.scope.function is site.scope.function:
        node = loop.node
        if isinstance(node, cst.While) and is_true(node.test) and _never_leaves(model, loop):
            return loop
        if isinstance(node, cst.For) and _is_endless(model, node.iter, loop) and _never_leaves(model, loop):
            return loop
        loop = loop.parent
    return None


def _never_leaves(model: SemanticModel, loop: Loop) -> bool:
    assert isinstance(loop.node, (cst.For, cst.While))
    if has_exit(loop.node.body):
        return False
    exits = (site for name in EXIT_CALLS for site in model.calls_to(name))
    return not any(loop.contains_index(site.index) for site in exits)


def _is_endless(model: SemanticModel, iterable: cst.BaseExpression, loop: Loop) -> bool:
    """`itertools.count()`, `itertools.cycle(xs)`, or a name bound to a `KafkaConsumer(...)`."""
    if isinstance(iterable, cst.Name):
        binding = model.reaching_binding(iterable.value, loop.scope, loop.start)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return False
        return _is_endless(model, binding.value, loop)
    if not isinstance(iterable, cst.Call):
        return False
    site = model.call_site(iterable)
    if site is None:
        return False
    return model.call_name(site) in ENDLESS_ITERABLES


def _kept_in(model: SemanticModel, site: CallSite, loop: Loop) -> Binding | None:
    """The binding of the local collection that keeps the call's ref: `refs.append(f.remote())`,
    `refs += [f.remote()]`, `refs[k] = f.remote()`, directly or through a name bound in the same statement
    sequence (`ref = f.remote()` then `refs.append(ref)`)."""
    statement = site.statement
    holder = _collection_receiving(statement, site.node)
    if holder is None and isinstance(statement, cst.Assign) and statement.value is site.node and len(statement.targets) == 1:
        target = statement.targets[0].target
        if isinstance(target, cst.Name):
            holder = _collection_receiving_name(model, target.value, site, loop)
    if holder is None:
        return None
    binding = model.reaching_binding(holder, site.scope, site.index)
    if binding is None or binding.kind != "assign" or loop.contains_index(binding.index) or not _is_empty_collection(model, binding):
        return None
    return binding


def _collection_receiving(statement: cst.CSTNode | None, value: cst.BaseExpression) -> str | None:
    """`refs` when `statement` stores `value` in it: `refs.append(value)`, `refs += [value]`, `refs[k] = value`."""
    if isinstance(statement, cst.Expr):
        call = statement.value
        if (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in STORING_METHODS
            and isinstance(call.func.value, cst.Name)
            and any(_holds(arg.value, value) for arg in call.args)
        ):
            return call.func.value.value
    if isinstance(statement, cst.AugAssign) and isinstance(statement.target, cst.Name) and _holds(statement.value, value):
        return statement.target.value
    if isinstance(statement, cst.Assign) and statement.value is value:
        for target in statement.targets:
            subscript = target.target
            if isinstance(subscript, cst.Subscript) and isinstance(subscript.value, cst.Name):
                return subscript.value.value
    return None


def _holds(expr: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`value` itself, or a literal list or tuple with it as an element."""
    if expr is value:
        return True
    return isinstance(expr, (cst.List, cst.Tuple)) and any(element.value is value for element in expr.elements)


def _collection_receiving_name(model: SemanticModel, name: str, site: CallSite, loop: Loop) -> str | None:
    """For `ref = f.remote()`: the collection a later statement of the same iteration stores `ref` in."""
    for other in model.calls:
        if other.index <= site.index or not loop.contains_index(other.index) or other.scope is not site.scope:
            continue
        for arg in other.node.args:
            if isinstance(arg.value, cst.Name) and arg.value.value == name:
                holder = _collection_receiving(other.statement, arg.value)
                if holder is not None:
                    return holder
    for store in model.stores:
        value, target = store.value, store.target
        if (
            store.index > site.index
            and loop.contains_index(store.index)
            and isinstance(value, cst.Name)
            and value.value == name
            and isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
        ):
            return target.value.value
    return None


def _is_empty_collection(model: SemanticModel, binding: Binding) -> bool:
    """`[]`, `{}`, `set()`, `list()` or `dict()`: a plain, unbounded container."""
    value = binding.value
    if isinstance(value, (cst.List, cst.Dict)):
        return not value.elements
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Name):
        return value.func.value in EMPTY_CONSTRUCTORS and model.reaching_binding(value.func.value, binding.scope, binding.index) is None
    return False


def _only_filled(model: SemanticModel, collection: Binding, loop: Loop, site: CallSite) -> bool:
    """Whether the function (or module) that holds the collection uses it only to store refs in the loop:
    any other use (its length, `ray.wait`, `pop`, a slice, a helper, a thread, a rebinding) may bound it."""
    scope = collection.scope
    owner = scope.node
    name = collection.name
    augmented = site.statement.target if isinstance(site.statement, cst.AugAssign) else None
    if any(b is not collection and b.node is not augmented for b in scope.bindings.get(name, ())):
        return False
    for node in iter_subtree(owner):
        if not isinstance(node, cst.Name) or node.value != name or node is collection.node:
            continue
        if not _is_store_use(model, node, loop, site):
            return False
    return True


def _is_store_use(model: SemanticModel, name: cst.Name, loop: Loop, site: CallSite) -> bool:
    """Whether this occurrence of the collection's name, inside the endless loop, only puts something in it."""
    for other in model.calls:
        func = other.node.func
        if isinstance(func, cst.Attribute) and func.value is name:
            return func.attr.value in STORING_METHODS and loop.contains_index(other.index)
    for store in model.stores:
        if isinstance(store.target, cst.Subscript) and store.target.value is name:
            return store.kind == "assign" and loop.contains_index(store.index)
    augmented = site.statement
    return isinstance(augmented, cst.AugAssign) and augmented.target is name


def _many_iterations(model: SemanticModel, site: CallSite) -> Loop | None:
    """The innermost loop around the call (in the same function) that runs a literal 5000 times or more."""
    loop = site.loop
    while loop is not None and loop.scope.function is site.scope.function:
        count = model.literal_iterations(loop)
        if count is not None and count >= EXCESS_QUEUEING_THRESHOLD:
            return loop
        loop = loop.parent
    return None


def _waits_in(model: SemanticModel, loop: Loop) -> bool:
    """A `ray.get` or `ray.wait` anywhere in the loop: the submitter waits for work as it goes."""
    return any(loop.contains_index(site.index) for name in ("ray.get", "ray.wait") for site in model.calls_to(name))
