"""RAY001 get-in-loop: `ray.get` on a task submitted in the same loop iteration."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.actor_state import blocks_or_reads, returns_stored_state
from ray_lint.analyses.loop_dependence import (
    LoopResults,
    carried_names,
    loop_invariant,
    loop_results,
    repeats_discarded_call,
    sequential_by_design,
)
from ray_lint.analyses.loops import runs_in_one_iteration
from ray_lint.analyses.waits import waited_before, waiter_called, waiting_functions, waits_on_actors
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import (
    Experiment,
    Plan,
    Run,
    Subject,
    Variant,
    replayed,
    script,
    timed,
)
from ray_lint.model import RefOrigin, SemanticModel, Submission
from ray_lint.project import concurrent_actor, sequential_actor
from ray_lint.python_model import (
    COMPREHENSIONS,
    comments_in,
    AFTER_ALL,
    CallSite,
    Loop,
    Scope,
    block_statements,
    iter_subtree,
    keys_read,
    scope_within,
)
from ray_lint.rule import Context, FixPlan, Invalid, Option, Rule, Valid

# Other work a loop does between submitting a task and waiting for it beyond which the task overlaps
# with that work on purpose (a training step that fetches a reward it started early).
OVERLAPPED_CALLS = 5
# What ends an actor's or a program's work (`w.shutdown.remote()`, `def stop(self):`, `close_all`): a loop of
# such calls, or one in such a function, is a teardown loop, run once and often in order on purpose.
TEARDOWN_VERBS = frozenset({"stop", "shutdown", "close", "aclose", "terminate", "teardown", "cleanup", "destroy", "kill", "exit"})
TEARDOWN_DUNDERS = frozenset({"__exit__", "__aexit__", "__del__"})


@dataclass(frozen=True, eq=False)
class _Wait:
    """Where code waits for a ref: a `ray.get(ref)` call or an `await ref`, with what a call site says of it."""

    node: cst.Call | cst.Await
    ref: cst.BaseExpression | None  # what it waits for
    scope: Scope
    index: int  # event number
    loop: Loop | None
    statement: cst.CSTNode | None
    bounded: bool  # a `timeout=` limits the wait

    @classmethod
    def of_get(cls, get: CallSite) -> _Wait:
        bounded = any(arg.keyword is not None and arg.keyword.value == "timeout" for arg in get.node.args)
        ref = get.node.args[0].value if get.node.args else None
        return cls(get.node, ref, get.scope, get.index, get.loop, get.statement, bounded)

    @property
    def is_await(self) -> bool:
        return isinstance(self.node, cst.Await)


@dataclass(frozen=True)
class LoopFacts:
    """What the experiment needs of the flagged loop."""

    iterations: int | None  # when the code says how many times it runs


class GetInLoopExperiment(Experiment[LoopFacts]):
    """The user's code as written and fixed (its entry point, else the tests that call it), timing the
    function that holds the get; or, when it cannot run as is, the loop replayed with tasks of a known
    duration."""

    facts_type = LoopFacts
    shares_driver = True
    TASK_SECONDS = 0.25
    ASSUMED_ITERATIONS = 8

    def plan(self, subject: Subject) -> Plan | str:
        return self.on_user_code_or(subject, self.model(subject))

    def model(self, subject: Subject) -> Plan:
        count, counted = replayed(self.facts(subject).iterations, self.ASSUMED_ITERATIONS, subject.cluster_cpus, "iterations")
        shape = f"{counted}, each a {self.TASK_SECONDS:g} s task"
        task = f"@ray.remote\ndef task(i):\n    time.sleep({self.TASK_SECONDS})\n    return i\n\n"
        return Plan(
            Variant("get in the loop", script(task + timed(f"return [ray.get(task.remote(i)) for i in range({count})]"))),
            Variant("one get after it", script(task + timed(f"return ray.get([task.remote(i) for i in range({count})])"))),
            "modelled",
            shape,
        )

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        known = self.facts(subject).iterations
        if known is not None and known < 2:
            return f": the loop runs {known} time{'s' if known != 1 else ''}, so there is nothing to overlap"
        if subject.cluster_cpus < 2:
            return ": the cluster has one CPU, so the tasks cannot overlap"
        return f": below the {self.threshold:.1f}× threshold (tasks this short may cost less than Ray's overhead)"


class GetInLoop(Rule):
    code = "RAY001"
    name = "get-in-loop"
    message = "`ray.get` waits for a task submitted in the same loop iteration, so the tasks run one at a time"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = (".remote(",)
    experiment = GetInLoopExperiment()
    options = (
        Option(
            "extra-get-functions",
            [],
            "Qualified names of your own functions that block like `ray.get` (e.g. `mypkg.util.fetch`).",
        ),
    )
    docs = """
## What it does
Finds a `ray.get` inside a `for` or `while` loop, or inside a comprehension or generator
expression, that waits for a task (or actor call) submitted earlier in the same iteration.

In a coroutine it also finds the async form of the same mistake: an `await` of such a ref
(`values.append(await actor.work.remote(i))`, or `ref = f.remote(x)` then `await ref`), in a `for`,
`async for` or `while` loop or a comprehension. An `ObjectRef` is awaitable, and awaiting each one
in turn serializes the calls just as a `ray.get` would; `await asyncio.gather(*[f.remote(x) for x
in xs])` runs them together. The same exceptions below apply to it, and no fix is offered for it.

## Why is this bad?
`ray.get` blocks until its task finishes, so the loop submits the next task only after the
previous one is done: the tasks run one at a time and the cluster sits idle. Ray's own
"Anti-pattern: Calling ray.get in a loop harms parallelism" page shows 4 one-second tasks
taking 4 s instead of 1 s. Measured on a 2-core machine with Ray 2.60: 8 tasks of 0.25 s take
2.03 s with a `ray.get` per iteration and 1.01 s with one `ray.get` after the loop (2.0×, the
number of CPUs).

ray-lint stays silent when the loop cannot be parallel or is already right:
- the loop needs the previous result to submit the next task (`x = ray.get(step.remote(x))`),
  or decides whether to go on from it (a `break` or the `while` condition);
- the ref came from `ray.wait`, from a list built before the loop, or from an earlier
  iteration (pipelining);
- the `ray.get` is in the loop's iterable (`for v in ray.get(refs)`), which runs once;
- the loop always exits in its first iteration;
- the call is to an actor method that itself waits on calls to actors (`ray.get(peer.name.remote())`
  in its body): actors that run one call at a time and wait on each other would deadlock if all
  were called at once, so waiting for each in turn is right;
- the call is to an actor method that exists to block (`lock.acquire.remote()`, `release`,
  `wait`, `barrier`, `notify`): a critical section or a barrier is sequential on purpose;
- the loop leaves right after the get, retries until an attempt succeeds (`try: ...; break`),
  runs forever with no exit (a consumer: there is no "all" to submit first), or times each
  iteration (`time.perf_counter()` before and after: a benchmark);
- the loop repeats one identical call and throws the result away (a warm-up);
- every call goes to one actor, whatever its class and however the handle is held (a name, an
  attribute such as `self.buffer`, a parameter, a helper's return value) as long as the loop does
  not change it: the actor runs the calls one at a time whatever the driver does, so batching the
  gets gains nothing (unless the actor is known to be async or threaded, here or in the module of
  the project that defines its class, or the call takes the ref of a task the loop submitted,
  which the get then waits for too). RAY010 reports that
  case when the calls are independent;
- a later submission of the loop needs the result, even through an attribute (`self.last`), a
  list it was appended to, or an assignment under a condition (`if rank == 0: addr = ray.get(...)`);
- the get is in an `except` fallback, or it has a `timeout=` and a `try` handles its failure
  (teardown and health-check loops: `try: ray.get(h.shutdown.remote(), timeout=5) except: ray.kill(h)`):
  each wait is bounded and handled on its own on purpose;
- a teardown loop: it kills actors (`ray.kill`), or waits on calls to actor methods that end their
  work (`shutdown`, `stop`, `close_all`, ...), or is in a function that ends the program's
  (`def stop(self):`, `__exit__`); each actor is closed in turn, once (tasks in a `cleanup_files`
  are still reported: they are work);
- the get runs in one iteration only, under `if i == 0:` where `i` counts the loop
  (`for rank, w in enumerate(workers):`): a rank-0 step, such as asking the first worker for an address;
- the call asks an actor for a small fact (`is_*`, `has_*`, `ping`, `ready`, `status`, or a
  `get_*`/`alloc_*` of a rank, an address, an id, a port, ..., or its counters: `get_metrics`,
  `get_stats`): one round trip each, milliseconds for a group of actors (`get_weights` and
  `get_batch` are not small facts);
- the method, defined in this file, only returns what an earlier call stored (`return
  self.sorted_frame`, after asserts): no work runs while the loop waits. The actor's class is
  known through its handle, or through the list the loop takes it from (`for w in self.workers`,
  where `self.workers = [chief] + workers` holds actors of one class);
- every call goes to one named actor looked up in the loop (`ray.get_actor(NAME)`);
- the actor was itself fetched with `ray.get` (or `await`) in the iteration (borrowed from a pool:
  each item's calls form a chain), or is a Ray Serve handle (`serve.get_app_handle(...)`: its responses are
  awaited or `.result()`-ed, and `serve-*` rules cover them);
- more than five other calls run between the submission and the get: the task already overlaps
  with the rest of the iteration (a training step that starts its reward early).

Test files (`test-files`) are not checked: a get per worker in a test of three workers is noise.

It also finds a loop that starts actors and, in the same iteration, waits on calls to them (a
probe such as `ready` or `get_gpu_ids`, or one `ray.get` of a list of calls, one per actor just
started, such as the workers of one node): the wait includes their start-up (a process, imports,
a model), so the next iteration's actors start only once these run. Start every actor first, then
wait once. A get on a list of calls, or on a small fact, is otherwise not reported (one get per
batch of parallel tasks is a choice); here it is, unless a result feeds the next iteration (a rank
0 address handed to the later actors), the loop kills its actors, or the handle was fetched (an
actor borrowed from a pool). No fix is offered for it.

It also follows calls: a loop that calls a function which submits a task and waits for it
(outside any loop of its own) is reported at the call in the loop, naming the function that holds
the get (of this module; else the one called): a module-level function of the same file or imported
from another module of the project (`fetch(x)`), or a method of a plain class called on each element of a list or dict of
its instances (`[w.get_attr(k) for w in self.workers]`, where `RayWorker.get_attr` does
`ray.get(self.actor.get_attr.remote(k))`). A function that calls such a function of its own module
(a helper, or a method of `self`) outside any loop waits too, up to three calls deep
(`score_and_log(p)` calls `score_one(p)`, which gets). Have the function return the ref, and call
`ray.get` once after the loop. Not reported: a function that waits on an actor it was handed (a
counter, a buffer), a method called on one object (its calls go to one actor), a function that
reads a small fact (`get_master_port`, or a method like `get_rank` on the actor), and a chain whose
result feeds the next call (`state = fit_logged(state, batch)`). A function of another module is
known from the project's facts (`waits:<name>`): ray-lint summarises the module that defines it.
Like every finding of this rule, it is looked for only in modules that submit Ray calls themselves
(a `.remote(` call): the pre-filter that keeps ray-lint fast.

The diagnostic is reported on the line of the `ray.get` call (or of the `await`, or of the helper
call); put a `# noqa: RAY001` there.

## Example
```python
results = []
for x in items:
    results.append(ray.get(process.remote(x)))
```

## Use instead
```python
results = ray.get([process.remote(x) for x in items])
```
In a coroutine: `results = await asyncio.gather(*[process.remote(x) for x in items])`.
Or, to handle results as they finish, use `ray.wait` (see RAY002).

## Fix safety
The fix is unsafe in every shape it is offered for, and stays so by decision: submitting every task
before waiting for any puts as many tasks in flight as the loop has turns (memory and object store
load grow with the iterable, where the loop kept one), runs the tasks after one that fails, and,
when several fail, may raise another task's error than the loop would have. None of that is
visible in the code, so the fix cannot prove it keeps behaviour.

It is offered for comprehensions and generator expressions whose element is the `ray.get`, for a
`for` loop whose only statement is `results.append(ray.get(...))`, and for one whose body is
`ref = f.remote(x)` then `results.append(ray.get(ref))` when `ref` is used nowhere else. It is not
offered when the loop variable is read after the loop (or by a function that may run later), since
the rewritten loop no longer sets it. Comments inside the loop are kept, on their own lines above
the statement that replaces it.

## Options
- `extra-get-functions`: qualified names of helpers that block like `ray.get`.

## References
- [Anti-pattern: Calling ray.get in a loop harms parallelism](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-loop.html)
- [Tips for first-time users: delay ray.get()](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
"""

    VALID = [
        Valid(
            "import ray\n\n@ray.remote\nclass Friend:\n    def __init__(self, name):\n        self.name = name\n"
            "        self.friends = []\n    def add(self, other):\n        self.friends.append(other)\n"
            "    def get_name(self):\n        return self.name\n    def display(self):\n"
            "        return [ray.get(f.get_name.remote()) for f in self.friends]\n\n"
            "a, b = Friend.remote('a'), Friend.remote('b')\nray.get([a.add.remote(b), b.add.remote(a)])\n"
            "labels = [ray.get(x.display.remote()) for x in [a, b]]\n",
            "each display waits on the other actor: called at once, a and b would each wait for the other",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Env:\n    def step(self, a):\n        return a\n\n"
            "class Worker:\n    def __init__(self):\n        self.actor = Env.remote()\n\n"
            "    def step(self, a):\n        return ray.get(self.actor.step.remote(a))\n\n"
            "w = Worker()\nfor a in actions:\n    print(w.step(a))\n",
            "one wrapper object: its calls go to one actor, one at a time whatever the loop does",
        ),
        Valid(
            "import ray\n\nclass Worker:\n    def __init__(self):\n        self.actor = Env.remote()\n\n"
            "    def get_port(self):\n        return ray.get(self.actor.port.remote())\n\n"
            "workers = [Worker() for _ in range(4)]\nports = [w.get_port() for w in workers]\n",
            "a wrapper that reads a small fact (a port) from each actor",
        ),
        Valid("import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n", "one get after submitting all"),
        Valid("import ray\nrefs = [f.remote(x) for x in xs]\nfor r in refs:\n    print(ray.get(r))\n", "refs built before the loop"),
        Valid("import ray\nfor v in ray.get([f.remote(x) for x in xs]):\n    print(v)\n", "get in the iterable runs once"),
        Valid(
            "import ray\npending = [f.remote(x) for x in xs]\nwhile pending:\n"
            "    ready, pending = ray.wait(pending)\n    print(ray.get(ready[0]))\n",
            "refs from ray.wait",
        ),
        Valid("import ray\nx = 0\nfor _ in range(10):\n    x = ray.get(step.remote(x))\n", "each step needs the previous result"),
        Valid(
            "import ray\ndone = False\nwhile not done:\n    done = ray.get(poll.remote())\n",
            "the loop condition depends on the result",
        ),
        Valid(
            "import ray\nfor x in xs:\n    if ray.get(check.remote(x)):\n        break\n",
            "search that stops at the first hit",
        ),
        Valid(
            "import ray\nnext_ref = f.remote(0)\nfor i in range(1, n):\n    ref, next_ref = next_ref, f.remote(i)\n"
            "    print(ray.get(ref))\n",
            "pipelining: the ref was submitted in the previous iteration",
        ),
        Valid("import ray\nfor x in xs:\n    return ray.get(f.remote(x))\n", "the loop exits in its first iteration"),
        Valid(
            "import ray\nwhile True:\n    try:\n        print(ray.get(actor.read.remote()))\n        break\n"
            "    except ray.exceptions.RayActorError:\n        actor = Reader.remote()\n",
            "retry until an attempt succeeds",
        ),
        Valid(
            "import ray\nimport time\nfor size in sizes:\n    start = time.perf_counter()\n    ray.get(work.remote(size))\n"
            "    print(size, time.perf_counter() - start)\n",
            "a benchmark timing each call",
        ),
        Valid("import ray\nwhile True:\n    item = ray.get(queue.get.remote())\n    handle(item)\n", "an endless consumer loop"),
        Valid(
            "import ray\nfor x in xs:\n    if x.ready:\n        print(ray.get(f.remote(x)))\n        break\n",
            "the loop leaves right after the get",
        ),
        Valid("import ray\nfor _ in range(5):\n    ray.get(actor.echo.remote('hello'))\n", "a warm-up: one call repeated"),
        Valid("import ray\n[ray.get(counter.increment.remote()) for _ in range(5)]\n", "one call repeated, results thrown away"),
        Valid("import ray\nimport time\nwhile True:\n    stats = ray.get(monitor.stats.remote())\n    print(stats)\n    time.sleep(5)\n", "a monitoring loop"),
        Valid(
            "import ray\n@ray.remote\nclass Counter:\n    def add(self, x):\n        self.n += x\n        return self.n\n\n"
            "c = Counter.remote()\nfor x in xs:\n    print(ray.get(c.add.remote(x)))\n",
            "one stateful actor: its calls are sequential whatever the driver does",
        ),
        Valid(
            "import ray\nwhile True:\n    ray.get(lock.acquire.remote())\n    try:\n        work()\n"
            "    finally:\n        ray.get(lock.release.remote())\n",
            "a distributed lock: blocking is the point",
        ),
        Valid(
            "import ray\nnext_ref = f.remote(0)\nfor i in range(1, n):\n    ref = next_ref\n    next_ref = f.remote(i)\n"
            "    print(ray.get(ref))\n",
            "pipelining through a second name",
        ),
        Valid(
            "import ray\n\ndef step(state):\n    return ray.get(advance.remote(state))\n\nfor _ in range(10):\n    state = step(state)\n",
            "a helper whose result feeds the next call",
        ),

        Valid("for x in xs:\n    ray.get(f.remote(x))\n", "no `import ray`: `ray` is not Ray here"),
        Valid("import ray\nfor x in xs:\n    ray.put(ray.get(ref))\n", "the ref is not created in the loop"),
        Valid(
            "import ray\nimport time\nwhile time.time() < deadline:\n    statuses = ray.get(ctl.status.remote())\n"
            "    done = True\n    for s in statuses:\n        if s != 'ok':\n            done = False\n"
            "    if done:\n        return\n    time.sleep(1)\n",
            "polling until a condition read from the result holds",
        ),
        Valid(
            "import ray\nfor x in xs:\n    ref = f.remote(x)\n    ready, _ = ray.wait([ref], timeout=0)\n"
            "    if ready:\n        ray.get(ref)\n",
            "ray.wait said the ref is ready: the get does not block",
        ),
        Valid(
            "import ray\nnode = None\nfor actor in actors:\n    if node is None:\n"
            "        node = ray.get(actor.host.remote())\n    place(actor, node)\n",
            "runs once: guarded by a condition on an earlier result",
        ),
        Valid(
            "import ray\nfor batch in batches:\n    refs = [f.remote(x) for x in batch]\n    out.extend(ray.get(refs))\n",
            "one get per batch of parallel tasks",
        ),
        Valid(
            "import ray\nfor pool in pools:\n    actor = ray.get(pool.acquire.remote())\n"
            "    defs.extend(ray.get(actor.describe.remote()))\n    pool.release.remote(actor)\n",
            "an actor borrowed from a pool: each item's calls form a chain",
        ),
        Valid(
            "import ray\nfrom ray import serve\nfor name in names:\n    handle = serve.get_app_handle(name)\n"
            "    print(ray.get(handle.remote(1)))\n",
            "a Ray Serve handle",
        ),
        Valid(
            "import ray\n\ndef fit_one(state, batch):\n    return ray.get(fit.remote(state, batch))\n\n"
            "def fit_logged(state, batch):\n    state = fit_one(state, batch)\n    log(state)\n    return state\n\n"
            "for batch in batches:\n    state = fit_logged(state, batch)\n",
            "two calls away, each call still needs the previous result",
        ),
        Valid(
            "import ray\n\nclass Worker:\n    def __init__(self):\n        self.actor = Env.remote()\n\n"
            "    def step(self, a):\n        return ray.get(self.actor.step.remote(a))\n\n"
            "    def act(self, a):\n        out = self.step(a)\n        log(out)\n        return out\n\n"
            "w = Worker()\nfor a in actions:\n    w.act(a)\n",
            "a method that calls the waiting one, on one object: its calls go to one actor",
        ),
        Valid(
            "import ray\n\ndef process(path, counter):\n    seen = ray.get(counter.increment.remote(1))\n    return load(path, seen)\n\n"
            "for path in paths:\n    process(path, counter)\n",
            "a helper that waits on the caller's one actor",
        ),
        Valid(
            "import ray\nranks = [ray.get(w.get_rank.remote()) for w in workers]\n",
            "an accessor asked of each actor: one round trip each",
        ),
        Valid(
            "import ray\nfor w in workers:\n    ray.get(w.close.remote())\n    ray.kill(w)\n",
            "a teardown loop",
        ),
        Valid("import ray\nfor w in workers:\n    ray.get(w.shutdown.remote())\n", "a teardown loop: each actor asked to shut down in turn"),
        Valid(
            "import ray\n\nclass Cluster:\n    async def stop(self):\n        for pool in self.pools:\n"
            "            await pool.actor_pool.remote('stop')\n",
            "a teardown loop: in a method that stops the program's actors",
        ),
        Valid(
            "import ray\nworkers, addr = [], None\nfor rank, pg in enumerate(groups):\n    if rank == 0:\n"
            "        addr = ray.get(probe.options(placement_group=pg).remote())\n    workers.append(Worker.remote(rank, addr))\n",
            "a rank-0 step: the get runs in the first iteration only",
        ),
        Valid(
            "import ray\nfor step in range(steps):\n    reward_ref = reward.remote(batch)\n    a = actor_wg.log_prob(batch)\n"
            "    b = ref_wg.log_prob(batch)\n    c = critic_wg.values(batch)\n    batch = merge(a, b, c)\n"
            "    log(a)\n    log(b)\n    batch.scores = ray.get(reward_ref)\n",
            "the task overlaps with the rest of the step on purpose",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Sorter:\n    def sort(self, xs):\n        self.done = sorted(xs)\n\n"
            "    def get_sorted(self):\n        assert self.done is not None\n        return self.done\n\n"
            "def drain(n, out):\n    sorters = [Sorter.remote() for _ in range(n)]\n"
            "    ray.get([s.sort.remote([2, 1]) for s in sorters])\n    for i in range(n):\n"
            "        out.write(str(ray.get(sorters[i].get_sorted.remote())))\n",
            "each call hands back what the actor already computed: no work waits",
        ),
        Valid(
            "import ray\nfrom buffers import ReplayBuffer\nbuf = ReplayBuffer.remote()\nfor x in xs:\n"
            "    ray.get(buf.add.remote(x))\n",
            "one actor of an imported class: it runs the calls one at a time anyway",
        ),
        Valid(
            "import ray\n\nclass Runner:\n    def run(self, episodes):\n        for episode in episodes:\n"
            "            ray.get(self.queue.put.remote(episode))\n",
            "one actor held in an attribute",
        ),
        Valid(
            "import ray\naddr = None\nworkers = []\nfor rank in range(n):\n    w = Worker.options(name=str(rank)).remote(addr)\n"
            "    if rank == 0:\n        addr = ray.get(w.get_addr.remote())\n    workers.append(w)\n",
            "a result set under a condition feeds the next iteration's actor",
        ),
        Valid(
            "import ray\n\nclass Driver:\n    def loop(self, actors):\n        for a in actors:\n"
            "            self.episode = ray.get(a.next_episode.remote())\n            if self.episode is None:\n                break\n",
            "an exit on a result kept in an attribute",
        ),
        Valid(
            "import ray\nfor h in handles:\n    try:\n        ray.get(h.shutdown.remote(), timeout=5)\n"
            "    except Exception:\n        ray.kill(h)\n",
            "a teardown loop: each bounded wait is handled on its own",
        ),
        Valid(
            "import ray\nfor w in workers:\n    try:\n        w.sync()\n    except Exception:\n"
            "        ray.get(fallback.remote(w))\n",
            "a get in an except fallback",
        ),
        Valid(
            "import ray\n\nclass Sim:\n    def run(self, n):\n        for _ in range(n):\n"
            "            r = step.remote(self.states[-1])\n            self.states.append(ray.get(r))\n",
            "each step needs the previous one, through a list",
        ),
        Valid(
            "import ray\n\nasync def run(x, n):\n    for _ in range(n):\n        x = await step.remote(x)\n    return x\n",
            "await: each step needs the previous result",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def run(xs):\n    for x in xs:\n        await asyncio.sleep(1)\n"
            "        await notify(x)\n",
            "await of coroutines that are not Ray tasks",
        ),
        Valid(
            "import ray\n\nasync def run(xs):\n    refs = [f.remote(x) for x in xs]\n    out = []\n    for r in refs:\n"
            "        out.append(await r)\n    return out\n",
            "await of refs all submitted before the loop",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def run(xs):\n    return await asyncio.gather(*[f.remote(x) for x in xs])\n",
            "one await of every submission together",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Counter:\n    def add(self, x):\n        self.n += x\n        return self.n\n\n"
            "async def run(xs):\n    c = Counter.remote()\n    for x in xs:\n        print(await c.add.remote(x))\n",
            "await on one stateful actor: its calls are sequential whatever the caller does",
        ),
        Valid(
            "import ray\n\nasync def run(xs):\n    done = False\n    while not done:\n        done = await poll.remote()\n",
            "await: the loop condition depends on the result",
        ),
        Valid(
            "import ray\n\nasync def close_all(handles):\n    for h in handles:\n        await h.close.remote()\n        ray.kill(h)\n",
            "await in a teardown loop",
        ),
        Valid(
            "import ray\n\nasync def setup(pools, cfg):\n    for pool in pools:\n        actor = await pool.acquire.remote()\n"
            "        await actor.reset.remote(cfg)\n",
            "await on an actor borrowed from a pool in the iteration: each item's calls form a chain",
        ),
        Valid(
            "import ray\n\nasync def collect(envs):\n    metrics = {}\n    for name, env in envs.items():\n"
            "        metrics[name] = await env.get_metrics.remote()\n    return metrics\n",
            "await of each actor's metrics: a small read, one round trip each",
        ),
        Valid(
            "import ray\naddr = None\nfor rank in range(n):\n    w = Worker.remote(rank, addr)\n"
            "    addr = ray.get(w.get_address.remote())\n    workers.append(w)\n",
            "actors started one by one, each given the address the previous one reported",
        ),
        Valid(
            "import ray\nworkers = [Worker.remote(i) for i in range(n)]\nfor w in workers:\n"
            "    print(ray.get(w.ready.remote()))\n",
            "every actor started before the loop: the start-ups overlap",
        ),
        Valid(
            "import ray\nfor path in paths:\n    w = Worker.remote(path)\n    ray.get(w.ready.remote())\n"
            "    w.run.remote()\n    ray.kill(w)\n",
            "an actor per item, killed in the iteration: a teardown loop",
        ),
        Valid(
            "import ray\nfor pool in pools:\n    w = ray.get(pool.acquire.remote())\n    refs = [w.warm.remote()]\n"
            "    ray.get(refs)\n",
            "an actor borrowed from a pool, not started by the loop",
        ),
        Valid(
            "import ray\n\nclass Runner:\n    def __init__(self, index):\n        self.index = index\n\n"
            "    def get_index(self):\n        return self.index\n\n"
            "class Cluster:\n    def __init__(self, n):\n        remote_runner = ray.remote(num_cpus=1)(Runner)\n"
            "        chief = remote_runner.remote(0)\n        workers = [remote_runner.remote(i) for i in range(1, n)]\n"
            "        self.workers = [chief] + workers\n\n"
            "    def indexes(self):\n        return [ray.get(w.get_index.remote()) for w in self.workers]\n",
            "each handle of a list kept on `self` is asked for what its actor stored: no work runs while the loop waits",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass Worker:\n    def ready(self):\n        return True\n\n"
            "workers = []\nfor host in hosts:\n    w = Worker.options(resources={host: 1}).remote()\n"
            "    ray.get(w.ready.remote())\n    workers.append(w)\n",
            11,
            note="a readiness probe of the actor the iteration started: start-ups run one at a time",
        ),
        Invalid(
            "import ray\nfor node in nodes:\n    refs = []\n    for i in range(per_node):\n"
            "        w = make_worker_cls().remote(node, i)\n        refs.append(w.get_gpu_ids.remote())\n"
            "        workers.append(w)\n    gpu_ids[node] = ray.get(refs)\n",
            8,
            note="one get per node on the actors just started there: the next node's actors wait",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Env:\n    def step(self, a):\n        return a\n\n"
            "class Worker:\n    def __init__(self):\n        self.actor = Env.remote()\n\n"
            "    def step(self, a):\n        return ray.get(self.actor.step.remote(a))\n\n"
            "workers = [Worker() for _ in range(4)]\nresults = [w.step(1) for w in workers]\n",
            16,
            note="a wrapper method that waits on its own actor, called for each wrapper of a list",
        ),
        Invalid(
            "import ray\n\nasync def run(actors, items):\n    values = []\n    for a, i in zip(actors, items):\n"
            "        values.append(await a.work.remote(i))\n    return values\n",
            6,
            note="`await` on each call in turn: the async form of a get in a loop (no fix)",
        ),
        Invalid(
            "import ray\n\nasync def run(xs):\n    out = []\n    for x in xs:\n        ref = f.remote(x)\n"
            "        out.append(await ref)\n    return out\n",
            7,
        ),
        Invalid("import ray\n\nasync def run(xs):\n    return [await f.remote(x) for x in xs]\n", 4),
        Invalid(
            "import ray\n\nasync def run(stream):\n    async for x in stream:\n        print(await f.remote(x))\n",
            5,
            note="an `async for` counts the same",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Sorter:\n    def __init__(self, xs):\n        self.xs = xs\n\n"
            "    def get_sorted(self):\n        return sorted(self.xs)\n\n"
            "def drain(parts, out):\n    sorters = [Sorter.remote(p) for p in parts]\n"
            "    for i in range(len(parts)):\n        out.write(str(ray.get(sorters[i].get_sorted.remote())))\n",
            14,
            note="the method computes its answer: each actor waits for the one before",
        ),
        Invalid(
            "import ray\nfor x in xs:\n    results.append(ray.get(f.remote(x)))\n",
            3,
            fixed="import ray\nresults.extend(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n",
            2,
            fixed="import ray\nresults = ray.get([f.remote(x) for x in xs])\n",
        ),
        Invalid(
            "import ray\ntotal = sum(ray.get(f.remote(x)) for x in xs)\n",
            2,
            fixed="import ray\ntotal = sum(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\nseen = {ray.get(f.remote(x)) for x in xs}\n",
            2,
            fixed="import ray\nseen = set(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid("import ray\nfor x in xs:\n    ref = f.remote(x)\n    print(ray.get(ref))\n", 4),
        Invalid(
            "import ray\n[ray.get(actors[i].run.remote()) for i in range(n)]\n",
            2,
            fixed="import ray\nray.get([actors[i].run.remote() for i in range(n)])\n",
            note="a different actor each time",
        ),
        Invalid("import ray\nfor x in xs:\n    ref = f.remote(x)\n    ray.wait([ref])\n    print(ray.get(ref))\n", 5, note="wait without a timeout blocks too"),
        Invalid(
            "import ray\nout = []\nfor x in xs:\n    ref = f.remote(x)\n    out.append(ray.get(ref))\n",
            5,
            fixed="import ray\nout = []\nout.extend(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\nfor cfg in configs:\n    results.append(ray.get(train.remote(cfg)))\nprint(cfg)\n",
            3,
            note="no fix: the loop variable is read after the loop, and the fix would remove it",
        ),
        Invalid(
            "import ray\n\ndef run(configs):\n    for cfg in configs:\n        results.append(ray.get(train.remote(cfg)))\n"
            "    log = lambda: cfg\n    return log\n",
            5,
            note="no fix: a function defined later reads the loop variable",
        ),
        Invalid(
            "import ray\nfor cfg in configs:\n    results.append(ray.get(train.remote(cfg)))\ncfg = None\nprint(cfg)\n",
            3,
            fixed="import ray\nresults.extend(ray.get([train.remote(cfg) for cfg in configs]))\ncfg = None\nprint(cfg)\n",
            note="the loop variable is assigned again before it is read: the fix may remove the loop",
        ),
        Invalid(
            "import ray\n\ndef run(xs, out):\n    for x in xs:  # each input once\n        # one task per input\n"
            "        out.append(ray.get(f.remote(x)))  # keep order\n",
            6,
            fixed="import ray\n\ndef run(xs, out):\n    # each input once\n    # one task per input\n"
            "    out.extend(ray.get([f.remote(x) for x in xs]))  # keep order\n",
            note="the loop's comments are kept, above the statement that replaces it",
        ),
        Invalid(
            "import ray\n\ndef run_one(x):\n    ref = f.remote(x)\n    return ray.get(ref)\n\nresults = [run_one(x) for x in xs]\n",
            7,
            note="a one-level helper that submits and waits, called in a loop",
        ),
        Invalid(
            "import ray\n\ndef score_one(path):\n    return ray.get(score.remote(path))\n\n"
            "def score_and_log(path):\n    value = score_one(path)\n    log(path, value)\n    return value\n\n"
            "values = [score_and_log(p) for p in paths]\n",
            11,
            note="a helper of a helper: reported at the call in the loop, naming `score_one`, which holds the get",
        ),
        Invalid("import ray as r\ni = 0\nwhile i < n:\n    print(r.get(f.remote(i)))\n    i += 1\n", 4),
        Invalid("from ray import get as fetch\nfor x in xs:\n    print(fetch(f.options(num_cpus=2).remote(x)))\n", 3),
        Invalid(
            "import ray\n\ndef step_all(workers):\n    out = []\n    for w in workers:\n        out.append(ray.get(w.step.remote()))\n"
            "    return out\n",
            6,
            fixed="import ray\n\ndef step_all(workers):\n    out = []\n    out.extend(ray.get([w.step.remote() for w in workers]))\n"
            "    return out\n",
            note="fan-out over a list of actors, one at a time",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Fetcher:\n    async def fetch(self, url):\n        return url\n\n"
            "f = Fetcher.remote()\nfor url in urls:\n    print(ray.get(f.fetch.remote(url)))\n",
            9,
            note="one async actor runs calls concurrently, so the per-call get serializes them",
        ),
        Invalid("import ray\nby_key = {k: ray.get(f.remote(k)) for k in keys}\n", 2),
        Invalid(
            "import ray\n\ndef cleanup_files(paths):\n    for path in paths:\n        ray.get(scrub.remote(path))\n",
            5,
            note="tasks in a function named for cleaning up are still work, not a teardown",
        ),
        Invalid(
            "import ray\nfor x in xs:\n    if x == 0:\n        continue\n    print(ray.get(f.remote(x)))\n",
            5,
            note="a test of an item, not of the loop's counter: the get runs in many iterations",
        ),
        Invalid(
            "import ray\n\ndef main(xs):\n    out = []\n    for x in xs:\n        r = f.remote(x)\n"
            "        log(x)\n        out.append(ray.get(r))\n    return out\n",
            8,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        get_functions = ("ray.get", *self.settings["extra-get-functions"])
        gets = sorted((site for name in get_functions for site in model.calls_to(name)), key=lambda site: site.index)
        waiting = waiting_functions(model)
        helper_names = frozenset(key for key, _ in waiting.values() if "." not in key)
        for get in gets:
            if get.loop is not None:
                self._check_wait(ctx, _Wait.of_get(get), get_functions, helper_names)
        for wait in _awaits_in_loops(model):
            self._check_wait(ctx, wait, get_functions, helper_names)
        for site in model.calls:
            if site.loop is not None and isinstance(site.node.func, (cst.Name, cst.Attribute)):
                self._check_waiter_call(ctx, site, get_functions, helper_names)

    def _check_wait(self, ctx: Context, get: _Wait, get_functions: tuple[str, ...], helpers: frozenset[str]) -> None:
        """A `ray.get` or an `await` in a loop: the same checks for both, and a fix only for the get."""
        model = ctx.model
        if get.loop is None:
            return
        found = self._submitted_ref(model, get)
        if found is None:
            self._check_startup_wait(ctx, get, get_functions, helpers)
            return
        submission, producer, origin = found
        if submission.kind == "actor-method" and (
            blocks_or_reads(submission.method) or returns_stored_state(model, submission.remote, submission.method)
        ):
            self._check_startup_wait(ctx, get, get_functions, helpers)
            return
        if submission.kind == "actor-method" and waits_on_actors(model, submission.remote, submission.method):
            return  # all called at once, actors that wait on each other would deadlock
        created_in = origin.binding.loop if origin.binding is not None else producer.loop
        loop = model.common_loop(get.loop, created_in)
        if loop is None:
            return
        requires: tuple[str, ...] = ()
        unless: tuple[str, ...] = ()
        if _one_actor(model, submission, loop):
            # one actor runs the calls one at a time anyway (RAY010's concern, not the get's), unless its
            # class, defined in another module, runs them concurrently
            imported = _imported_actor_class(model, submission)
            if imported is None:
                return
            requires, unless = concurrent_actor(imported), sequential_actor(imported)
        if _handle_made_by(model, submission, loop, _fetched_or_serve) or _awaited_handle(model, submission):
            return
        facts = loop_results(model, loop, get_functions, helpers, awaits=get.is_await)
        if sequential_by_design(model, loop, get, facts) or repeats_discarded_call(model, loop, get, submission.call):
            return
        if self._is_sequential(model, loop, facts, submission.call, submission.handle, producer.index, get.node):
            return
        if waited_before(model, get.ref, get.scope, get.index, producer) or _handled_wait(model, loop.node, get):
            return
        if _tears_down(model, loop, get, submission.method) or runs_in_one_iteration(model, loop, get.node):
            return
        if _calls_between(model, producer.index, get.index) > OVERLAPPED_CALLS:
            return  # the task runs while the iteration does other work: already overlapped
        known = LoopFacts(model.literal_iterations(loop))
        if get.is_await:  # no fix: `asyncio.gather` changes when errors surface, and the code around may rely on order
            ctx.report(get.node, "`await` in a loop waits for each task in turn", None, known, unless=unless, requires=requires)
            return
        message = "`ray.get` in a loop waits for each task in turn"
        ctx.report(get.node, message, self._fix(ctx, get, loop, submission.call), known, unless=unless, requires=requires)

    def _check_startup_wait(self, ctx: Context, get: _Wait, get_functions: tuple[str, ...], helpers: frozenset[str]) -> None:
        """A get in a loop on calls to the actors the same iteration started (a probe such as `ready`, or a
        list of calls, one per actor): the wait includes their start-up, so the loop starts the next
        iteration's actors only once these run, unless the iteration hands a result on to the next."""
        model = ctx.model
        loop = get.loop
        started = _started_actors(model, get)
        if loop is None or not started:
            return
        first = started[0]
        facts = loop_results(model, loop, get_functions, helpers, awaits=get.is_await)
        if sequential_by_design(model, loop, get, facts) or self._is_sequential(model, loop, facts, first.node, None, first.index, get.node):
            return
        if waited_before(model, get.ref, get.scope, get.index, first) or _handled_wait(model, loop.node, get):
            return
        if _tears_down(model, loop, get, None) or runs_in_one_iteration(model, loop, get.node):
            return
        what = "`await`" if get.is_await else "`ray.get`"
        message = f"{what} in a loop waits for the actors this iteration started before starting the next"
        ctx.report(get.node, message, None, LoopFacts(model.literal_iterations(loop)))

    def _submitted_ref(self, model: SemanticModel, get: _Wait) -> tuple[Submission, CallSite, RefOrigin] | None:
        """The submission whose ref the get (or await) waits for, when the module shows one."""
        if get.ref is None:
            return None
        origin = model.ref_origin(get.ref, get.scope, get.index)
        if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
            return None
        submission = model.submission(origin.producer)
        producer = model.call_site(origin.producer)
        if submission is None or producer is None:
            return None
        return submission, producer, origin

    def _check_waiter_call(self, ctx: Context, site: CallSite, get_functions: tuple[str, ...], helpers: frozenset[str]) -> None:
        """A call in a loop of a function that submits a task and waits for it (`fetch(x)`, or
        `w.get_attr(k)` over a list of wrappers whose method gets from its own actor): the same mistake,
        one call away, in this module or another of the project."""
        model = ctx.model
        func = site.node.func
        if isinstance(func, cst.Attribute) and not isinstance(func.value, (cst.Name, cst.Subscript)):
            return
        waiter = waiter_called(model, site, instances_only=True)
        if waiter is None or (waiter.get is not None and scope_within(site.scope, waiter.get.scope)):
            return
        called_name = func.attr.value if isinstance(func, cst.Attribute) else func.value  # type: ignore[union-attr]
        facts = loop_results(model, site.loop, get_functions, helpers | {called_name})
        if sequential_by_design(model, site.loop, site, facts):
            return
        if self._is_sequential(model, site.loop, facts, site.node, None, site.index, site.node):
            return
        where = f" ({ctx.line_of(waiter.get.node)})" if waiter.get is not None else ""
        called = ctx.snippet(func, 24)
        ctx.report(
            site.node,
            f"`{called}()` waits on `ray.get` in `{waiter.name}`{where} in each iteration",
            facts=LoopFacts(model.literal_iterations(site.loop)),
            requires=waiter.requires,
        )

    def _is_sequential(
        self,
        model: SemanticModel,
        loop: Loop,
        facts: LoopResults,
        call: cst.Call,
        handle: cst.BaseExpression | None,
        at: int,
        waiting: cst.Call | cst.Await,
    ) -> bool:
        """Whether the loop cannot run its tasks in parallel, or does not wait where it seems to: the next
        submission (`call`, made at event `at`) needs a result fetched in the loop, or the waiting call
        runs only under a condition read from an earlier result."""
        if waiting in facts.guarded_nodes:
            return True
        if _needs_result(loop, facts, call, handle, at):
            return True
        # any other submission of the loop that needs a result (one answer per loop: a loop of a thousand
        # gets must not look at its thousand submissions once per get)
        memo = model.analysis(_LoopSubmissions).need_results
        key = (id(loop), id(facts))
        if key not in memo:
            remotes = model.calls_by_tail.get("remote", [])  # in event order
            first = bisect.bisect_left(remotes, loop.start, key=lambda site: site.index)
            last = bisect.bisect_left(remotes, loop.end, key=lambda site: site.index)
            memo[key] = any(_needs_result(loop, facts, site.node, None, site.index) for site in remotes[first:last])
        return memo[key]

    def _fix(self, ctx: Context, get: _Wait, loop: Loop, producer: cst.Call) -> FixPlan | None:
        """Submit everything, then one `ray.get`: for a comprehension whose element is the get, and for a
        `for` loop whose body is `out.append(ray.get(f.remote(x)))`, or `r = f.remote(x)` followed by
        `out.append(ray.get(r))` when `r` is used nowhere else."""
        call = get.node
        if not isinstance(call, cst.Call) or len(call.args) != 1 or get.loop is not loop:
            return None
        fetch = ctx.code_for(call.func)
        node = loop.node
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and node.elt is call:
            if node.for_in.asynchronous is not None or call.args[0].value is not producer:
                return None
            refs = ctx.code_for(cst.ListComp(elt=producer, for_in=node.for_in))
            text = f"{fetch}({refs})"
            if isinstance(node, cst.SetComp):
                text = f"set({text})"
            return self._plan(node, text)
        if not isinstance(node, cst.For) or node.orelse is not None or node.asynchronous is not None:
            return None
        if isinstance(node.body, cst.IndentedBlock) and len(node.body.body) > 2:
            return None  # only a body of one or two statements is rewritten (and a long one is not re-read per finding)
        statements = block_statements(node.body)
        if len(statements) == 2 and call.args[0].value is not producer:
            submit, statements = statements[0], statements[1:]
            argument = call.args[0].value
            if not (
                isinstance(submit, cst.Assign)
                and submit.value is producer
                and len(submit.targets) == 1
                and isinstance(argument, cst.Name)
                and isinstance(submit.targets[0].target, cst.Name)
                and submit.targets[0].target.value == argument.value
                and _occurrences(ctx.model, get, argument.value) == 2
            ):
                return None
        elif call.args[0].value is not producer:
            return None
        if len(statements) != 1 or not isinstance(statements[0], cst.Expr):
            return None
        append = statements[0].value
        if (
            isinstance(append, cst.Call)
            and isinstance(append.func, cst.Attribute)
            and append.func.attr.value == "append"
            and len(append.args) == 1
            and append.args[0].value is call
        ):
            target = ctx.code_for(append.func.value)
            refs = ctx.code_for(cst.ListComp(elt=producer, for_in=cst.CompFor(target=node.target, iter=node.iter)))
            return self._plan(node, _with_comments(ctx, node, f"{target}.extend({fetch}({refs}))"))
        return None

    def _plan(self, node: cst.CSTNode, text: str) -> FixPlan:
        return FixPlan("Submit all tasks first, then call `ray.get` once", ((node, text),), Applicability.UNSAFE)


def _with_comments(ctx: Context, loop: cst.For, statement: str) -> str:
    """The statement that replaces `loop`, after the loop's comments, each on its own line at the
    loop's indentation: a fix never drops a comment."""
    span = ctx.model.source_of(loop)  # the comment after the loop's last line is not in it, and stays
    if "#" not in span:
        return statement
    indent = " " * ctx.model.position(loop).start.column
    return "".join(f"{comment}\n{indent}" for comment in comments_in(loop) if comment in span) + statement


def _awaits_in_loops(model: SemanticModel) -> list[_Wait]:
    """Every `await` of a call or a name inside a loop of a coroutine, located as a call site would be:
    `await f.remote(x)` from its call, `await ref` from the read of `ref` it makes."""
    waits = []
    for scope in model.scopes:
        if scope.kind != "function" or not scope.is_async:
            continue
        for node in iter_subtree(scope.node, into_functions=False):
            if isinstance(node, cst.Await):
                wait = _locate_await(model, scope, node)
                if wait is not None:
                    waits.append(wait)
    return waits


def _locate_await(model: SemanticModel, function: Scope, node: cst.Await) -> _Wait | None:
    operand = node.expression
    if isinstance(operand, cst.Call):  # the await is the event just before its call
        site = model.call_site(operand)
        if site is None or site.loop is None:
            return None
        return _Wait(node, operand, site.scope, site.index - 1, site.loop, site.statement, False)
    if not isinstance(operand, cst.Name):
        return None
    path = model.path_within(function.node, node)
    if path is None:
        return None
    loop: Loop | None = None
    statement: cst.CSTNode | None = None
    for i, parent in enumerate(path[:-1]):
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            statement = parent
        candidate = model.loop_of(parent)
        if candidate is not None and _repeated(parent, path[i + 1], path[i + 2] if i + 2 < len(path) else None):
            loop = candidate
    if loop is None or not any(
        b.kind == "assign" and loop.contains_index(b.index) for b in loop.scope.bindings.get(operand.value, ())
    ):
        return None  # a ref submitted in the same iteration is bound in the loop
    # the read of the name this await makes: the one between the calls around it
    low, high, seen = loop.start, loop.end, False
    for inner in iter_subtree(loop.node, into_functions=False):
        if inner is node:
            seen = True
        site = model.call_site(inner) if isinstance(inner, cst.Call) else None
        if site is not None and loop.contains_index(site.index):
            if not seen:
                low = site.index
            else:
                high = site.index
                break
    reads = [r for r in loop.scope.reads.get(operand.value, ()) if low < r < high]
    if not reads:
        return None
    return _Wait(node, operand, loop.scope, reads[-1] - 1, loop, statement, False)


def _repeated(loop: cst.CSTNode, child: cst.CSTNode, grandchild: cst.CSTNode | None) -> bool:
    """Whether `child` (then `grandchild`) on the way down from a loop node runs in every iteration: not a
    `for`'s target, iterable or `else`, nor a comprehension's first iterable."""
    if isinstance(loop, cst.For):
        return child is loop.body
    if isinstance(loop, cst.While):
        return child is loop.test or child is loop.body
    if isinstance(loop, COMPREHENSIONS):
        return not (child is loop.for_in and grandchild is loop.for_in.iter)
    return False


def _one_actor(model: SemanticModel, submission: Submission, loop: Loop) -> bool:
    """Every call goes to one actor, whatever its class (`buf`, `self.queue`, `get_buffer()`): the actor
    runs them one at a time, so waiting for each costs nothing more. Not for an async or threaded actor
    known to run calls concurrently."""
    if submission.kind != "actor-method" or submission.handle is None:
        return False
    actor = submission.remote
    if actor is not None and (actor.is_async_actor or actor.is_threaded_actor):
        return False
    site = model.call_site(submission.call)
    if site is None or not (loop_invariant(model, submission.handle, loop) or _named_actor(model, submission.handle, site, loop)):
        return False
    for arg in submission.call.args:  # `ledger.record.remote(task.remote(x))`: the get waits for the task too
        origin = model.ref_origin(arg.value, site.scope, site.index)
        producer = model.call_site(origin.producer) if origin is not None and isinstance(origin.producer, cst.Call) else None
        if producer is not None and loop.contains_index(producer.index):
            return False
    return True


def _started_actors(model: SemanticModel, get: _Wait) -> list[CallSite]:
    """Where the actors were started, when every ref the get waits for (one, or a list built by
    `.append` or written out) is a call on an actor the get's own iteration started: a name assigned an
    actor creation, or a `.remote(...)` the loop calls methods on (an ObjectRef has none)."""
    loop = get.loop
    origin = model.ref_origin(get.ref, get.scope, get.index) if get.ref is not None and loop is not None else None
    if origin is None or loop is None:
        return []
    producer = origin.producer
    if origin.kind == "ref":
        calls = [producer]
    elif isinstance(producer, cst.List) and producer.elements:
        calls = [element.value for element in producer.elements]
    elif isinstance(producer, cst.List) and origin.binding is not None:
        calls = [value for _, value in model.appends_to(origin.binding)]
    else:
        return []
    started: list[CallSite] = []
    for call in calls:
        submission = model.submission(call) if isinstance(call, cst.Call) else None
        site = model.call_site(call) if isinstance(call, cst.Call) else None
        if submission is None or site is None or submission.kind != "actor-method" or submission.handle is None:
            return []
        made = _handle_value(model, submission.handle, site)
        creation = model.submission(made) if made is not None else None
        made_at = model.call_site(made) if made is not None else None
        if creation is None or creation.kind not in ("actor-create", "unknown") or made_at is None:
            return []
        if model.call_name(made_at) == "ray.remote" or not loop.contains_index(made_at.index):
            return []
        started.append(made_at)
    return sorted(started, key=lambda site: site.index)


def _actor_made_here(model: SemanticModel, submission: Submission, site: CallSite) -> bool:
    """Whether the call goes to an actor the same function created (`a = Worker.remote(); ray.get(a.f.remote())`)."""
    made = _handle_value(model, submission.handle, site) if submission.handle is not None else None
    creation = model.submission(made) if made is not None else None
    return creation is not None and creation.kind == "actor-create"


def _imported_actor_class(model: SemanticModel, submission: Submission) -> str | None:
    """The class name when the handle was made here from a class this module imports (`Fetcher.remote()`,
    `Fetcher.options(...).remote()`): only the project knows whether it runs calls concurrently."""
    if submission.remote is not None or submission.handle is None:
        return None
    site = model.call_site(submission.call)
    made = _handle_value(model, submission.handle, site) if site is not None else None
    creation = model.submission(made) if made is not None else None
    if creation is None or not isinstance(made.func, cst.Attribute):  # type: ignore[union-attr]
        return None
    receiver = made.func.value  # type: ignore[union-attr]
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "options":
        receiver = receiver.func.value
    if not isinstance(receiver, cst.Name):
        return None
    binding = model.reaching_binding(receiver.value, model.module_scope, AFTER_ALL)
    return receiver.value if binding is not None and binding.kind == "import" else None


def _named_actor(model: SemanticModel, handle: cst.BaseExpression, site: CallSite, loop: Loop) -> bool:
    """`h = ray.get_actor(NAME)` in the loop, with a name the loop does not change: the same actor each time."""
    value = _handle_value(model, handle, site)
    if value is None or not value.args:
        return False
    lookup = model.call_site(value)
    return lookup is not None and model.call_name(lookup) == "ray.get_actor" and loop_invariant(model, value, loop)


def _handle_value(model: SemanticModel, handle: cst.BaseExpression, site: CallSite) -> cst.Call | None:
    """The call a handle name was last assigned from (`h = pool.acquire()`), when the module shows one."""
    value = _bound_value(model, handle, site)
    return value if isinstance(value, cst.Call) else None


def _bound_value(model: SemanticModel, handle: cst.BaseExpression, site: CallSite) -> cst.BaseExpression | None:
    """The expression a handle name was last assigned, when the module shows one."""
    if not isinstance(handle, cst.Name):
        return None
    binding = model.reaching_binding(handle.value, site.scope, site.index)
    return binding.value if binding is not None and binding.kind == "assign" else None


def _awaited_handle(model: SemanticModel, submission: Submission) -> bool:
    """`actor = await pool.acquire.remote()`: an actor fetched by an `await`, as one fetched with `ray.get`
    (borrowed from a pool: each item's calls form a chain)."""
    site = model.call_site(submission.call)
    handle = submission.handle
    if handle is None and isinstance(submission.call.func, cst.Attribute):
        handle = submission.call.func.value
    return site is not None and handle is not None and isinstance(_bound_value(model, handle, site), cst.Await)


def _handle_made_by(model: SemanticModel, submission: Submission, loop: Loop, made: Callable[[str], bool]) -> bool:
    """Whether the handle the call goes through was made by a call whose qualified name `made` accepts."""
    site = model.call_site(submission.call)
    receiver = submission.call.func.value if isinstance(submission.call.func, cst.Attribute) else None
    handle = submission.handle if submission.handle is not None else receiver
    value = _handle_value(model, handle, site) if site is not None and handle is not None else None
    for node in iter_subtree(value) if value is not None else ():
        inner = model.call_site(node) if isinstance(node, cst.Call) else None
        name = model.call_name(inner) if inner is not None else None
        if name is not None and made(name):
            return True
    return False


def _fetched_or_serve(name: str) -> bool:
    """An actor fetched with `ray.get` (borrowed from a pool: each item's calls form a chain, which one get
    after the loop would not batch), or a Ray Serve handle (its responses are awaited, not `ray.get`)."""
    return name == "ray.get" or name.startswith("ray.serve.")


class _LoopSubmissions:
    """Per-model memo: whether any submission of a loop needs a result fetched in it, by loop and results."""

    def __init__(self, model: SemanticModel) -> None:
        self.need_results: dict[tuple[int, int], bool] = {}


def _needs_result(loop: Loop, facts: LoopResults, submitted: cst.Call, receiver: cst.BaseExpression | None, at: int) -> bool:
    """Whether the submission `submitted` (made at event `at`, on actor `receiver`) reads a result fetched
    in an earlier iteration of the loop."""
    keys = set().union(keys_read(submitted.func), *(keys_read(arg.value) for arg in submitted.args))
    if receiver is not None:
        keys |= keys_read(receiver)
    dotted = {key for key in keys if "." in key}
    return bool(carried_names(loop, keys - dotted, at) & facts.derived or dotted & facts.derived)


def _handled_wait(model: SemanticModel, root: cst.CSTNode, get: _Wait) -> bool:
    """A get in an `except` fallback, or a bounded one (`timeout=`) whose failure a `try` handles, as teardown
    and health-check loops do (`try: ray.get(h.shutdown.remote(), timeout=5) except: ray.kill(h)`): each
    wait is bounded and handled on its own on purpose. (A `try` alone is not enough: per-item error
    handling survives submitting everything first.)"""
    path = model.path_within(root, get.node) or []
    if any(isinstance(node, cst.ExceptHandler) for node in path):
        return True
    return get.bounded and any(isinstance(node, cst.Try) and node.handlers for node in path)


def _calls_between(model: SemanticModel, start: int, end: int) -> int:
    """How many calls run between two events (`model.calls` is in event order)."""
    key = lambda site: site.index  # noqa: E731
    return bisect.bisect_left(model.calls, end, key=key) - bisect.bisect_right(model.calls, start, key=key)


def _tears_down(model: SemanticModel, loop: Loop, wait: _Wait, method: str | None) -> bool:
    """A teardown loop, where each actor is closed (and perhaps killed) in turn: the loop kills actors, or it
    waits for calls to an actor `method` that ends its work (`shutdown`, `close_all`) or is in a function
    that ends the program's (`def stop(self):`, `__exit__`). Tasks in a `cleanup_files` are still work."""
    if any(loop.contains_index(site.index) for site in model.calls_to("ray.kill")):
        return True
    if method is None:
        return False
    function = wait.scope.function
    name = function.node.name.value if function is not None and isinstance(function.node, cst.FunctionDef) else None
    return any(
        each is not None and (each in TEARDOWN_DUNDERS or each.strip("_").split("_")[0] in TEARDOWN_VERBS) for each in (method, name)
    )


def _occurrences(model: SemanticModel, site: _Wait, name: str) -> int:
    """How often `name` appears in the function (or module) that holds `site`."""
    scope = site.scope.function or model.module_scope
    return sum(1 for node in iter_subtree(scope.node) if isinstance(node, cst.Name) and node.value == name)




