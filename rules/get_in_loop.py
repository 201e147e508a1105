"""RAY001 get-in-loop: `ray.get` on a task submitted in the same loop iteration."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.model import (
    CallSite,
    FunctionInfo,
    Loop,
    LoopResults,
    RefOrigin,
    SemanticModel,
    Submission,
    block_statements,
    iter_subtree,
    names_read,
    scope_within,
)
from ray_lint.rule import Context, FixPlan, Invalid, Option, Rule, Valid
from ray_lint.verify.experiment import (
    Experiment,
    Plan,
    Run,
    Subject,
    Variant,
    script,
    timed,
)

# Actor methods that exist to block: waiting on them one at a time is the point (a lock, a barrier).
SYNCHRONIZATION_METHODS = frozenset({"acquire", "release", "lock", "unlock", "wait", "barrier", "notify", "notify_all", "signal"})


class GetInLoopExperiment(Experiment):
    """The user's script as written and fixed, timing the function that holds the get; or, when it
    cannot run as is, the loop replayed with tasks of a known duration."""

    TASK_SECONDS = 0.25
    ASSUMED_ITERATIONS = 8

    def plan(self, subject: Subject) -> Plan | str:
        model = self.model(subject)
        fixed = subject.fixed_text()
        if fixed is None or not subject.has_entry_point():
            return model
        return Plan(
            Variant("as written", subject.instrumented(subject.text)),
            Variant("fixed", subject.instrumented(fixed)),
            "measured",
            "the script run from its entry point, timing the function that holds the get",
            fallback=model,
        )

    def model(self, subject: Subject) -> Plan:
        known = subject.facts.get("iterations")
        count = known if known is not None else self.ASSUMED_ITERATIONS
        shape = f"{count} iterations{'' if known is not None else ' (count not in the code: 8 assumed)'}, each a {self.TASK_SECONDS:g} s task"
        task = f"@ray.remote\ndef task(i):\n    time.sleep({self.TASK_SECONDS})\n    return i\n\n"
        return Plan(
            Variant("get in the loop", script(task + timed(f"return [ray.get(task.remote(i)) for i in range({count})]"))),
            Variant("one get after it", script(task + timed(f"return ray.get([task.remote(i) for i in range({count})])"))),
            "modelled",
            shape,
        )

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        known = subject.facts.get("iterations")
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
- the call is to an actor method that exists to block (`lock.acquire.remote()`, `release`,
  `wait`, `barrier`, `notify`): a critical section or a barrier is sequential on purpose;
- the loop leaves right after the get, retries until an attempt succeeds (`try: ...; break`),
  runs forever with no exit (a consumer: there is no "all" to submit first), or times each
  iteration (`time.perf_counter()` before and after: a benchmark);
- the loop repeats one identical call and throws the result away (a warm-up);
- every call goes to one actor created outside the loop: the actor runs them one at a time
  whatever the driver does, so batching the gets gains nothing. RAY010 reports that case when
  the calls are independent.

It also follows one level of helper: a loop that calls a module-level function of the same
file which submits a task and waits for it (outside any loop of its own) is reported at the
call in the loop.

The diagnostic is reported on the line of the `ray.get` call (or of the helper call); put a
`# noqa: RAY001` there.

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
Or, to handle results as they finish, use `ray.wait` (see RAY002).

## Fix safety
The fix is unsafe: it starts every task before waiting for any, which changes when side
effects happen, how much memory the results take at once, and which exception surfaces
first. It is offered for comprehensions and generator expressions whose element is the
`ray.get`, for a `for` loop whose only statement is `results.append(ray.get(...))`, and for
one whose body is `ref = f.remote(x)` then `results.append(ray.get(ref))` when `ref` is used
nowhere else.

## Options
- `extra-get-functions`: qualified names of helpers that block like `ray.get`.

## References
- [Anti-pattern: Calling ray.get in a loop harms parallelism](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-loop.html)
- [Tips for first-time users: delay ray.get()](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
"""

    VALID = [
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
    ]
    INVALID = [
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
            "import ray\n[ray.get(actors[i].ping.remote()) for i in range(n)]\n",
            2,
            fixed="import ray\nray.get([actors[i].ping.remote() for i in range(n)])\n",
            note="a different actor each time",
        ),
        Invalid("import ray\nfor x in xs:\n    ref = f.remote(x)\n    ray.wait([ref])\n    print(ray.get(ref))\n", 5, note="wait without a timeout blocks too"),
        Invalid(
            "import ray\nout = []\nfor x in xs:\n    ref = f.remote(x)\n    out.append(ray.get(ref))\n",
            5,
            fixed="import ray\nout = []\nout.extend(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\n\ndef run_one(x):\n    ref = f.remote(x)\n    return ray.get(ref)\n\nresults = [run_one(x) for x in xs]\n",
            7,
            note="a one-level helper that submits and waits, called in a loop",
        ),
        Invalid("import ray as r\ni = 0\nwhile i < n:\n    print(r.get(f.remote(i)))\n    i += 1\n", 4),
        Invalid("from ray import get as fetch\nfor x in xs:\n    print(fetch(f.options(num_cpus=2).remote(x)))\n", 3),
        Invalid("import ray\ncounter = Counter.remote()\nfor x in xs:\n    print(ray.get(counter.add.remote(x)))\n", 4),
        Invalid("import ray\nby_key = {k: ray.get(f.remote(k)) for k in keys}\n", 2),
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
        helpers = self._blocking_helpers(model, gets)
        helper_names = frozenset(info.node.name.value for info, _ in helpers.values())
        for get in gets:
            self._check_get(ctx, get, get_functions, helper_names)
        for info, inner_get in helpers.values():
            self._check_helper_calls(ctx, info, inner_get, get_functions, helper_names)

    def _check_get(self, ctx: Context, get: CallSite, get_functions: tuple[str, ...], helpers: frozenset[str]) -> None:
        model = ctx.model
        if get.loop is None:
            return
        found = self._submitted_ref(model, get)
        if found is None:
            return
        submission, producer, origin = found
        if submission.kind == "actor-method" and submission.method in SYNCHRONIZATION_METHODS:
            return
        created_in = origin.binding.loop if origin.binding is not None else producer.loop
        loop = model.common_loop(get.loop, created_in)
        if loop is None or model.single_actor(submission, loop) is not None:
            return  # one actor runs the calls one at a time anyway: RAY010's concern, not the get's
        facts = model.loop_results(loop, get_functions, helpers)
        if model.sequential_by_design(loop, get, facts) or model.repeats_discarded_call(loop, get, submission.call):
            return
        if self._is_sequential(model, loop, facts, submission.call, submission.handle, producer.index, get.node):
            return
        if _waited_before(model, get, producer):
            return
        message = self.message + "; submit them all first and call `ray.get` once after the loop"
        known = {"iterations": model.literal_iterations(loop)}
        ctx.report(get.node, message, self._fix(ctx, get, loop, submission.call), known)

    def _submitted_ref(self, model: SemanticModel, get: CallSite) -> tuple[Submission, CallSite, RefOrigin] | None:
        """The submission whose ref the get waits for, when the module shows one."""
        if not get.node.args:
            return None
        origin = model.ref_origin(get.node.args[0].value, get.scope, get.index)
        if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
            return None
        submission = model.submission(origin.producer)
        producer = model.call_site(origin.producer)
        if submission is None or producer is None:
            return None
        return submission, producer, origin

    def _blocking_helpers(self, model: SemanticModel, gets: list[CallSite]) -> dict[int, tuple[FunctionInfo, CallSite]]:
        """Module-level synchronous functions that submit a task and wait for it, outside any loop of their
        own: calling one in a loop is the same mistake, one level down."""
        helpers: dict[int, tuple[FunctionInfo, CallSite]] = {}
        for get in gets:
            scope = get.scope.function
            if get.loop is not None or scope is None or scope.kind != "function" or get.scope is not scope:
                continue
            info = model.function_info(scope.node)  # type: ignore[arg-type]
            if info is None or info.parent_scope is not model.module_scope or info.is_async or model.remote_of_scope(scope):
                continue
            found = self._submitted_ref(model, get)
            if found is None or found[1].scope is not scope or found[1].loop is not None:
                continue
            if not _waited_before(model, get, found[1]):
                helpers.setdefault(id(info.node), (info, get))
        return helpers

    def _check_helper_calls(
        self, ctx: Context, info: FunctionInfo, inner_get: CallSite, get_functions: tuple[str, ...], helpers: frozenset[str]
    ) -> None:
        model = ctx.model
        name = info.node.name.value
        for site in model.calls_by_tail.get(name, ()):
            if site.loop is None or not isinstance(site.node.func, cst.Name) or scope_within(site.scope, info.scope):
                continue
            binding = model.reaching_binding(name, site.scope, site.index)
            if binding is None or binding.node is not info.node:
                continue
            facts = model.loop_results(site.loop, get_functions, helpers)
            if model.sequential_by_design(site.loop, site, facts):
                continue
            if self._is_sequential(model, site.loop, facts, site.node, None, site.index, site.node):
                continue
            ctx.report(
                site.node,
                f"`{name}()` submits a task and waits for it with `ray.get` ({ctx.line_of(inner_get.node)}), so calling it in this loop "
                "runs the tasks one at a time; have it return the ref and call `ray.get` once after the loop",
                facts={"iterations": model.literal_iterations(site.loop)},
            )

    def _is_sequential(
        self,
        model: SemanticModel,
        loop: Loop,
        facts: LoopResults,
        call: cst.Call,
        handle: cst.BaseExpression | None,
        at: int,
        waiting: cst.Call,
    ) -> bool:
        """Whether the loop cannot run its tasks in parallel, or does not wait where it seems to: the next
        submission (`call`, made at event `at`) needs a result fetched in the loop, or the waiting call
        runs only under a condition read from an earlier result."""
        inputs = set().union(*(names_read(arg.value) for arg in call.args))
        if handle is not None:
            inputs |= names_read(handle)
        if model.carried_names(loop, inputs, at) & facts.derived:
            return True
        return waiting in facts.guarded_nodes

    def _fix(self, ctx: Context, get: CallSite, loop: Loop, producer: cst.Call) -> FixPlan | None:
        """Submit everything, then one `ray.get`: for a comprehension whose element is the get, and for a
        `for` loop whose body is `out.append(ray.get(f.remote(x)))`, or `r = f.remote(x)` followed by
        `out.append(ray.get(r))` when `r` is used nowhere else."""
        call = get.node
        if len(call.args) != 1 or get.loop is not loop:
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
            return self._plan(node, f"{target}.extend({fetch}({refs}))")
        return None

    def _plan(self, node: cst.CSTNode, text: str) -> FixPlan:
        return FixPlan("Submit all tasks first, then call `ray.get` once", ((node, text),), Applicability.UNSAFE)


def _waited_before(model: SemanticModel, get: CallSite, producer: CallSite) -> bool:
    """A `ray.wait` with a timeout on the ref between its submission and the get: the code checks
    readiness instead of blocking (a `ray.wait` without a timeout blocks just like the get)."""
    names = names_read(get.node.args[0].value)
    for wait in model.calls_to("ray.wait"):
        timeout = next((arg.value for arg in wait.node.args if arg.keyword and arg.keyword.value == "timeout"), None)
        if timeout is None or (isinstance(timeout, cst.Name) and timeout.value == "None"):
            continue
        between = producer.index < wait.index < get.index and wait.scope is get.scope
        if between and any(names_read(arg.value) & names for arg in wait.node.args):
            return True
    return False


def _occurrences(model: SemanticModel, site: CallSite, name: str) -> int:
    """How often `name` appears in the function (or module) that holds `site`."""
    scope = site.scope.function or model.module_scope
    return sum(1 for node in iter_subtree(scope.node) if isinstance(node, cst.Name) and node.value == name)




