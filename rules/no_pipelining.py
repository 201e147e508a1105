"""RAY009 no-pipelining: a worker loop fetches its next work item and waits for it before processing it."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.loop_dependence import LoopResults, carried_names, loop_results
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import EXITS, CallSite, Loop, block_statements, is_true, names_read
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

# Calls that do too little with an item for a prefetch to pay: conversions, checks, logging, collecting.
TRIVIAL_FUNCTIONS = frozenset(
    {
        "print", "len", "isinstance", "str", "repr", "int", "float", "bool", "type", "id", "hash", "list", "tuple",
        "dict", "set", "sorted", "min", "max", "sum", "any", "all", "enumerate", "zip", "iter", "next",
    }
)
TRIVIAL_METHODS = frozenset(
    {
        "append", "appendleft", "extend", "add", "update", "put", "put_nowait", "insert", "setdefault", "get", "items",
        "keys", "values", "copy", "format", "join", "split", "strip", "debug", "info", "warning", "warn", "error",
        "exception", "critical", "log",
    }
)


# A queue actor that takes `{fetch_s}` to hand out each of `{items}` items, then None; and a task that pulls
# them with `{body}`, its loop: ONE_AT_A_TIME or PIPELINED, each spending `{work_s}` on an item.
PULL_MODEL = """\
@ray.remote(num_cpus=0)
class Queue:
    def __init__(self, items):
        self.left = items

    def next_item(self):
        time.sleep({fetch_s})
        if self.left == 0:
            return None
        self.left -= 1
        return self.left

@ray.remote
def worker(queue):
    done = []
{body}
    return done

queue = Queue.remote({items})
ray.get(queue.__ray_ready__.remote())
"""
ONE_AT_A_TIME = """\
    while True:
        item = ray.get(queue.next_item.remote())
        if item is None:
            break
        time.sleep({work_s})
        done.append(item)"""
PIPELINED = """\
    next_ref = queue.next_item.remote()
    while True:
        item = ray.get(next_ref)
        if item is None:
            break
        next_ref = queue.next_item.remote()
        time.sleep({work_s})
        done.append(item)"""


class PullOneAtATimeExperiment(Experiment[None]):
    """A model: a task pulls 16 items from a queue actor that takes 50 ms to hand out each, and spends
    50 ms on each item; it asks for the next item after the current one is processed, against before
    (the pipelined form). The code's own fetch and work times are not in it, so the model shows what
    the overlap is worth when the two are equal."""

    facts_type = type(None)
    shares_driver = True
    ITEMS = 16
    FETCH_S = 0.05
    WORK_S = 0.05

    def plan(self, subject: Subject) -> Plan:
        def form(body: str) -> str:
            loop = body.format(work_s=self.WORK_S)
            return script(PULL_MODEL.format(fetch_s=self.FETCH_S, items=self.ITEMS, body=loop) + timed("return ray.get(worker.remote(queue))"))

        return Plan(
            Variant("next item after the work", form(ONE_AT_A_TIME)),
            Variant("next item requested first", form(PIPELINED)),
            "modelled",
            f"{self.ITEMS} items, each {self.FETCH_S * 1000:g} ms to fetch from a queue actor and {self.WORK_S * 1000:g} ms to process",
        )


class NoPipelining(Rule):
    code = "RAY009"
    name = "no-pipelining"
    message = "The loop fetches each work item only when it needs it, so fetching never overlaps work"
    severity = Severity.INFO
    category = "perf"
    preview = True
    tokens = ("ray.get", "import get")
    also_tokens = REMOTE_MADE
    experiment = PullOneAtATimeExperiment()
    docs = """
## What it does
Finds a worker loop in a task or actor method that pulls its work one item at a time: each
iteration calls `item = ray.get(queue.next.remote())` and then processes `item` with a
non-trivial call (`self.process(item)`, `train_step(item)`), so the request for the next item
is sent only after the current one is done. The loop is a `while` loop that runs until the
queue says stop (`if item is None: break`) or forever, which is why RAY001 (get-in-loop)
does not report it: there is no list of work to submit up front.

This rule is in preview: whether a prefetch pays depends on how long the round trip and the
processing take, which the code does not show, and on whether the next request may be sent
before the current item is processed (a queue that must not hand out work early, a
request that depends on side effects of the processing).

## Why is this bad?
Each iteration pays the full round trip to the queue actor (scheduling, the remote call and
the transfer of the item) and only then starts computing; the worker is idle during every
fetch. Sending the request for the next item before processing the current one overlaps
the two. Ray's "Pattern: Using pipelining to increase throughput" page shows this. Measured
on a 2-core machine with Ray 2.60: 20 items with a 50 ms fetch and 50 ms of work take 2.11 s
fetched one at a time and 1.09 s pipelined (1.9×).

ray-lint is silent when:
- the next request reads something computed from the item in the previous iteration (a
  cursor, an environment step's action): it cannot be sent earlier;
- the processing is trivial (logging, `len`, appending to a list, `print`) or is itself a
  remote call;
- the loop polls (`time.sleep`), runs once, or leaves right after the fetch;
- the ref was requested in an earlier iteration (already pipelined), or the fetch is not a
  call to an actor;
- the loop is a `for` loop (RAY001's case) or runs in driver code.

## Example
```python
@ray.remote
class Worker:
    def run(self):
        while True:
            item = ray.get(self.work_queue.get_work_item.remote())
            if item is None:
                break
            self.process(item)
```

## Use instead
```python
@ray.remote
class Worker:
    def run(self):
        next_ref = self.work_queue.get_work_item.remote()
        while True:
            item = ray.get(next_ref)
            if item is None:
                break
            next_ref = self.work_queue.get_work_item.remote()  # fetched while we process
            self.process(item)
```
Request the next item before processing the current one: keep its ref, and `ray.get` it at the
top of the next iteration.

## Fix safety
There is no automatic fix: requesting the next item earlier takes it off the queue before
the current one is done, which changes what other workers see and what is lost if this one
fails.

## References
- [Pattern: Using pipelining to increase throughput](https://docs.ray.io/en/latest/ray-core/patterns/pipelining.html)
- [Anti-pattern: Calling ray.get in a loop harms parallelism](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-loop.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        ref = self.queue.next.remote()\n"
            "        while True:\n            item = ray.get(ref)\n            if item is None:\n                break\n"
            "            ref = self.queue.next.remote()\n            self.process(item)\n",
            "already pipelined: the next request goes out before processing",
        ),
        Valid(
            "import ray\n@ray.remote\ndef rollout(env, policy):\n    obs = ray.get(env.reset.remote())\n    while True:\n"
            "        action = policy(obs)\n        obs = ray.get(env.step.remote(action))\n        if obs is None:\n"
            "            break\n        policy.update(obs)\n",
            "the next request needs the processed result",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        while True:\n"
            "            item = ray.get(self.queue.next.remote())\n            if item is None:\n                break\n"
            "            self.seen.append(item)\n",
            "trivial processing",
        ),
        Valid(
            "import ray\nimport time\n@ray.remote\nclass Watcher:\n    def run(self):\n        while True:\n"
            "            status = ray.get(self.controller.status.remote())\n            self.react(status)\n            time.sleep(5)\n",
            "a polling loop",
        ),
        Valid(
            "import ray\nwhile True:\n    item = ray.get(queue.next.remote())\n    if item is None:\n        break\n    process(item)\n",
            "driver code",
        ),
        Valid(
            "@remote\nclass Worker:\n    def run(self):\n        while True:\n            item = ray.get(self.queue.next.remote())\n"
            "            if item is None:\n                break\n            self.process(item)\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        while True:\n"
            "            item = ray.get(self.queue.next.remote())\n            if item is None:\n                break\n"
            "            ray.get(self.sink.write.remote(self.transform.remote(item)))\n",
            "processing is remote work",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        while True:\n"
            "            item = ray.get(self.queue.next.remote())\n            self.process(item)\n            break\n",
            "the loop runs once",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\nclass Worker:\n    def __init__(self, queue):\n        self.queue = queue\n"
            "    def run(self):\n        while True:\n            item = ray.get(self.queue.get_work_item.remote())\n"
            "            if item is None:\n                break\n            self.process(item)\n",
            8,
        ),
        Invalid(
            "import ray\n@ray.remote\ndef consume(queue):\n    while True:\n        batch = ray.get(queue.pop.remote())\n"
            "        train_step(batch)\n",
            5,
            note="an endless consumer task",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Learner:\n    def run(self, buffer):\n        done = False\n        while not done:\n"
            "            ref = buffer.sample.remote(256)\n            batch = ray.get(ref)\n            done = self.update(batch)\n",
            8,
            note="the stop condition comes from processing, the request does not",
        ),
        Invalid(
            "from ray import get, remote\n@remote\nclass Worker:\n    def run(self, q):\n        n = 0\n        while True:\n"
            "            job = get(q.next.remote(n))\n            if not job:\n                return n\n"
            "            result = compute(job)\n            n += 1\n",
            7,
            note="the cursor does not depend on the processing",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        while self.active:\n"
            "            msg = ray.get(self.broker.receive.remote())\n            if msg is None:\n                continue\n"
            "            self.handle(msg.body)\n",
            6,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for get in model.calls_to("ray.get"):
            loop = get.loop
            if loop is None or not isinstance(loop.node, cst.While) or model.remote_of_scope(get.scope) is None:
                continue
            item = _fetched_name(get)
            submission = _requested_in_iteration(model, get, loop)
            if item is None or submission is None:
                continue
            facts = loop_results(model, loop)
            if not self._pulls_work(model, loop, get, facts) or self._request_needs_result(model, loop, facts, submission):
                continue
            work = _processing(model, get, loop, {item} | facts.derived)
            if work is None:
                continue
            ctx.report(
                get.node,
                f"The loop waits for `{item}` from `{ctx.snippet(submission.call, limit=36)}` before it can process it",
            )

    def _pulls_work(self, model: SemanticModel, loop: Loop, get: CallSite, facts: LoopResults) -> bool:
        """A loop that pulls items until told to stop, or forever: not one that runs once, leaves right
        after the fetch, retries, or polls."""
        assert isinstance(loop.node, cst.While)
        body = block_statements(loop.node.body)
        if facts.polls or any(isinstance(s, EXITS) for s in body):
            return False
        if any(isinstance(s, cst.Try) and any(isinstance(t, EXITS) for t in block_statements(s.body)) for s in body):
            return False
        if get.statement is not None and model.exits_after(loop.node.body, get.statement):
            return False
        return is_true(loop.node.test) or facts.exits_on_result or _reads_flag(loop.node.test)

    def _request_needs_result(self, model: SemanticModel, loop: Loop, facts: LoopResults, submission: Submission) -> bool:
        """Whether the request reads a value the previous iteration computed from a fetched result."""
        site = model.call_site(submission.call)
        assert site is not None
        inputs = set().union(*(names_read(arg.value) for arg in submission.call.args))
        if submission.handle is not None:
            inputs |= names_read(submission.handle)
        return bool(carried_names(loop, inputs, site.index) & facts.derived)


def _reads_flag(test: cst.BaseExpression) -> bool:
    """`while self.active` / `while not self.stopped`: a worker loop run until told to stop."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return isinstance(test, cst.Attribute) and isinstance(test.value, cst.Name)


def _fetched_name(get: CallSite) -> str | None:
    """`item` for `item = ray.get(...)`, with one ref and no other argument."""
    statement = get.statement
    if not isinstance(statement, cst.Assign) or statement.value is not get.node or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if not isinstance(target, cst.Name) or len(get.node.args) != 1 or get.node.args[0].keyword is not None:
        return None
    return target.value


def _requested_in_iteration(model: SemanticModel, get: CallSite, loop: Loop) -> Submission | None:
    """The actor call whose ref the get waits for, when it is made in the same iteration, just for this get."""
    origin = model.ref_origin(get.node.args[0].value, get.scope, get.index)
    if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
        return None
    producer = model.call_site(origin.producer)
    if producer is None or producer.loop is not loop:
        return None
    if origin.binding is not None and origin.binding.index > get.index:
        return None  # requested later in the body, for the next iteration: already pipelined
    submission = model.submission(origin.producer)
    if submission is None or submission.kind != "actor-method":
        return None
    return submission


def _on_self(func: cst.Attribute) -> bool:
    """`self.update(...)`: a method of the actor itself, not of a container it holds."""
    return isinstance(func.value, cst.Name) and func.value.value == "self"


def _processing(model: SemanticModel, get: CallSite, loop: Loop, item_names: set[str]) -> CallSite | None:
    """The first call after the fetch, in the same iteration, that does real local work with the item: not a
    conversion, check, log line or collection update, not Ray itself, and not another remote call."""
    for site in model.calls:
        if site.index <= get.index or not loop.contains_index(site.index) or site.scope.function is not get.scope.function:
            continue
        call = site.node
        if not any(names_read(arg.value) & item_names for arg in call.args):
            continue
        func = call.func
        if isinstance(func, cst.Name) and func.value in TRIVIAL_FUNCTIONS:
            continue
        if isinstance(func, cst.Attribute) and (func.attr.value in TRIVIAL_METHODS and not _on_self(func) or func.attr.value == "remote"):
            continue
        name = model.call_name(site)
        if name is not None and (name == "ray" or name.startswith("ray.") or name.startswith("logging.")):
            continue
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and func.value.attr.value == "remote":
            continue
        return site
    return None
