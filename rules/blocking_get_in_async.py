"""RAY006 blocking-get-in-async: `ray.get` / `ray.wait` inside a coroutine blocks its whole event loop."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.waits import polls, waiter_called
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import (
    MOST_AT_ONCE,
    AsyncActorExperiment,
    Plan,
    Subject,
    Variant,
    script,
    timed,
)
from ray_lint.libraries.serve import ServeFacts
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    CallSite,
    Scope,
    child_nodes,
    dotted_name,
    iter_subtree,
    keys_read,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Methods that run a compiled graph: `ray.get` on the `CompiledDAGRef` they return has its own semantics.
COMPILED_DAG_METHODS = frozenset({"execute", "execute_async"})
# Calls that put other coroutines on the loop: a blocking call after one of them stalls them.
TASK_STARTERS = frozenset({"create_task", "ensure_future", "gather", "TaskGroup", "as_completed", "start_soon", "wait"})
# A parent that binds tighter than `await`: `ray.get(x).y` must become `(await x).y`, not `await x.y`.
TIGHTER_THAN_AWAIT = (cst.Attribute, cst.Subscript, cst.Call, cst.Await)


# An async actor method that counts how many of the actor's calls ran at once, from the `(start, end)`
# spans its calls recorded: what the event loop really ran, which Ray's timeline does not show.
class BlockingGetExperiment(AsyncActorExperiment[None]):
    """Concurrent calls into an async actor whose method waits for another actor's reply with a
    blocking `ray.get`, against the same method awaiting the ref: the calls can overlap only when the
    wait yields the event loop.

    Judged by wall time and by how many calls the actor itself saw running at once, not by Ray's
    timeline: it counts a call to an async actor as running from when the event loop accepts it, so
    calls queued behind a blocked loop look concurrent there."""

    facts_type = type(None)
    shares_driver = True
    CALLS = 8
    REPLY_SECONDS = 0.2

    def plan(self, subject: Subject) -> Plan:
        setup = (
            "import asyncio\n\n"
            "@ray.remote\nclass Backend:\n"
            f"    async def predict(self, x):\n        await asyncio.sleep({self.REPLY_SECONDS})  # a model server's reply\n"
            "        return x\n\n"
            "@ray.remote\nclass Gateway:\n    def __init__(self, backend):\n        self.backend = backend\n"
            "        self.spans = []\n\n"
            "    async def handle(self, x):\n        start = time.time()\n        value = {wait}\n"
            "        self.spans.append((start, time.time()))\n        return value\n\n"
            f"{MOST_AT_ONCE}\n"
            "gateway = Gateway.remote(Backend.remote())\n"
            "ray.get(gateway.handle.remote(-1))  # both actors up before the clock starts\n"
        )
        body = f"return ray.get([gateway.handle.remote(i) for i in range({self.CALLS})])"
        count = "__ray_lint_evidence__ = {'at_once': ray.get(gateway.most_at_once.remote())}\n"
        blocking = setup.replace("{wait}", "ray.get(self.backend.predict.remote(x))")
        awaiting = setup.replace("{wait}", "await self.backend.predict.remote(x)")
        return Plan(
            Variant("ray.get", script(blocking + timed(body) + count)),
            Variant("await", script(awaiting + timed(body) + count)),
            "modelled",
            f"{self.CALLS} concurrent calls into an async actor, each waiting for a {self.REPLY_SECONDS:g} s reply of another actor",
        )




class BlockingGetInAsync(Rule):
    code = "RAY006"
    name = "blocking-get-in-async"
    message = "`ray.get` / `ray.wait` inside a coroutine blocks its event loop; `await` the ref instead"
    severity = Severity.WARNING
    category = "perf"
    supersedes = ("RAY001",)  # in a coroutine the fix is to await, in a loop or not
    experiment = BlockingGetExperiment()
    fixable = True
    tokens = ("async def",)
    also_tokens = ("ray.get", "ray.wait", "import ray as", "from ray import", "@ray.remote")
    docs = """
## What it does
Finds a call to `ray.get` or `ray.wait` (through any alias) in the body of an `async def`: an
async actor method, an async Ray Serve handler, or any other coroutine.

It also finds a call, in an async actor method or an async method of a Serve deployment (or in a
coroutine of the module that such a method awaits: `return await handle(request)`), of a
synchronous function that blocks on `ray.get` or `ray.wait` (a `*_sync()` client method that wraps
`ray.get`, on an object the class holds; a sync method of the same class called on `self`; a
function of the module or of another module of the project): the wait happens one call away, on
the same event loop, which Ray uses to run the actor's other calls. The message names the function
that blocks. In other coroutines this form is not reported: driver-side async code often blocks on
purpose around a step it has paused everything else for (a weight sync), which one call's
distance hides from the reader as much as from the linter.

## Why is this bad?
A coroutine runs on an event loop that executes one coroutine at a time and switches only at an
`await`. `ray.get` and `ray.wait` are blocking calls: while one waits, nothing else on that loop
runs. In an async actor this means every other call to the actor stalls (the actor looks hung);
in an async driver or web handler, every other request does. Ray's async-actor guide forbids
them there, and Ray logs "Using blocking ray.get inside async actor method" only once per
process, in the actor's own log; the `ray.wait` variant is logged at debug level only.
Measured on a 2-core machine with Ray 2.60: 4 concurrent calls into an async actor that each
wait for a 0.5 s task take 2.02 s with `ray.get` and 1.49 s with `await` (1.36×; the gap grows
with concurrency and CPUs).

ray-lint is silent for:
- a call in a nested plain `def` or `lambda` inside the coroutine, or a call handed to
  `asyncio.to_thread(ray.get, ref)` / `loop.run_in_executor(None, lambda: ray.get(ref))`:
  these run in a worker thread, which is what Ray's docs recommend when blocking is needed;
- `timeout=0`: a non-blocking poll;
- a `ray.get` (or `ray.wait`) of refs the coroutine already waited for: awaited earlier
  (`await ref`, `await asyncio.wait(refs)`, a name bound by an `await`), passed to or returned
  by an earlier `ray.wait` (`ready, _ = ray.wait(refs, timeout=0)`, then `ray.get(ready)`), or
  the target of an `async for` over a streaming generator: the object is ready, so the get
  returns at once (this also silences `ray.get(refs)` after a `ray.wait(refs, num_returns=1)`,
  which may still block on the rest);
- a coroutine that shares its loop with nothing: the loop's entry point (given to
  `asyncio.run(...)` / `run_until_complete(...)`, or a pytest test or fixture) that starts no
  task of its own (`create_task`, `gather`, `TaskGroup`, ...), or a coroutine that starts none
  either and is used only inside such coroutines (awaited there, or handed to a helper they
  await, as a benchmark harness takes the function it times);
- `ray.get` on the `CompiledDAGRef` of a compiled graph (`dag.execute(...)`), and in modules
  that compile a graph (`experimental_compile`) unless the argument is a proven ObjectRef.

The message says whether the coroutine is an async actor method (the whole actor stalls), a
method of a `@serve.deployment` class (the replica stalls), or another coroutine. A
`ray.wait(..., fetch_local=False)` is reported too: it blocks like any other; run it with
`asyncio.to_thread`, as Ray's docs suggest, since the awaitable form has no such option.

## Example
```python
@ray.remote
class Gateway:
    async def handle(self, request):
        features = ray.get(featurize.remote(request))
        return ray.get([model.predict.remote(features) for model in self.models])
```

## Use instead
```python
@ray.remote
class Gateway:
    async def handle(self, request):
        features = await featurize.remote(request)
        return await asyncio.gather(*[model.predict.remote(features) for model in self.models])
```
For `ray.wait`, use `await asyncio.wait(refs, return_when=asyncio.FIRST_COMPLETED)` (its
results are futures, not refs), or `await asyncio.to_thread(ray.wait, refs, ...)` when you need
`ray.wait`'s own options such as `fetch_local=False`.

## Fix safety
The fix is unsafe: it turns `ray.get(ref)` into `await ref` and `ray.get(refs)` into
`await asyncio.gather(*refs)`, which lets other coroutines run while this one waits, so their
side effects can interleave with this one's. It is offered only for a `ray.get` with one
argument that is proven to be an ObjectRef (from `.remote(...)` or `ray.put(...)` without
`num_returns`) or a list of them, directly in the coroutine (not inside a generator expression
or a class body), and for a list only when `asyncio` is imported. `ray.wait` has no fix:
`asyncio.wait` returns futures, not refs.

## References
- [Anti-pattern: Calling ray.get or ray.wait in an async method blocks the event loop](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-ray-wait-async.html)
- [AsyncIO / concurrency for actors](https://docs.ray.io/en/latest/ray-core/actors/async_api.html)
- [Pattern: Using asyncio to run actor methods concurrently](https://docs.ray.io/en/latest/ray-core/patterns/concurrent-operations-async-actor.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nclass A:\n    async def run(self, ref):\n        return await ref\n",
            "awaiting the ref",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def main(ref):\n    return await asyncio.to_thread(ray.get, ref)\n",
            "ray.get handed to a worker thread as a callable",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def main(refs):\n    loop = asyncio.get_running_loop()\n"
            "    return await loop.run_in_executor(None, lambda: ray.get(refs))\n",
            "ray.get in a lambda run by an executor",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def main(refs):\n    def fetch():\n        return ray.get(refs)\n"
            "    return await asyncio.to_thread(fetch)\n",
            "ray.get in a nested sync def",
        ),
        Valid(
            "import ray\n\nasync def poll(ref):\n    try:\n        return ray.get(ref, timeout=0)\n"
            "    except ray.exceptions.GetTimeoutError:\n        return None\n",
            "timeout=0 is a non-blocking poll",
        ),
        Valid(
            "import ray\n\nasync def poll(refs):\n    ready, pending = ray.wait(refs, timeout=0)\n    return ready\n",
            "ray.wait with timeout=0 does not block",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def collect(refs):\n    await asyncio.wait(refs)\n    return ray.get(refs)\n",
            "the refs were awaited first, so the get returns at once",
        ),
        Valid(
            "import ray\n\nasync def collect(ref):\n    await ref\n    return ray.get(ref)\n",
            "the ref itself was awaited",
        ),
        Valid("import ray\n\ndef main(ref):\n    return ray.get(ref)\n", "a plain function, not a coroutine"),
        Valid("import ray\n\nasync def main(ray, ref):\n    return ray.get(ref)\n", "a parameter `ray` shadows the module"),
        Valid(
            "import ray\n\nasync def run(dag, x):\n    ref = dag.execute(x)\n    return ray.get(ref)\n",
            "a CompiledDAGRef from a compiled graph",
        ),
        Valid(
            "import ray\n\nasync def main(ref):\n    get = lambda r: r\n    return get(ref)\n",
            "a local `get` that is not Ray's",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def main(client):\n    await client.start()\n"
            "    print(ray.get(work.remote()))\n\nasyncio.run(main(make_client()))\n",
            "the entry coroutine of `asyncio.run`: nothing else is on its loop",
        ),
        Valid(
            "import pytest\nimport ray\n\n@pytest.mark.asyncio\nasync def check_weights(client):\n"
            "    await client.sync()\n    assert ray.get(trainer.version.remote()) == 2\n",
            "a pytest-asyncio test body",
        ),
        Valid(
            "import asyncio\nimport ray\nfrom ray import serve\n\ndef sync_weights(workers):\n    ray.get([w.sync.remote() for w in workers])\n\n"
            "async def step(workers):\n    sync_weights(workers)\n\n@serve.deployment\nclass Trainer:\n"
            "    async def __call__(self, request):\n"
            "        asyncio.run_coroutine_threadsafe(step(self.workers), self.background_loop)\n        return {'started': True}\n",
            "a helper that blocks, in a coroutine the Serve method hands to another thread's loop (not awaited)",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def bench(fn, n):\n    for _ in range(n):\n        await fn()\n\n"
            "async def trial(clients):\n    async def queries():\n        ray.get([c.work.remote() for c in clients])\n\n"
            "    await bench(queries, 10)\n\nasync def main():\n    await trial(make_clients())\n\nasyncio.run(main())\n",
            "a benchmark's coroutine, handed to a harness that awaits it in turn; no coroutine starts a task",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\nclass Client:\n    def __init__(self, actor):\n        self.actor = actor\n\n"
            "    def fetch_sync(self, key):\n        return ray.get(self.actor.get.remote(key))\n\n"
            "@ray.remote\nclass Server:\n    def __init__(self, store):\n        self.client = Client(store)\n\n"
            "    async def handle(self, key):\n        return self.client.fetch_sync(key)\n",
            16,
            note="a synchronous client method that wraps `ray.get`, called in an async actor method",
        ),
        Invalid(
            "import asyncio\nimport ray\n\nasync def main(client):\n    beat = asyncio.create_task(client.heartbeat())\n"
            "    print(ray.get(work.remote()))\n    await beat\n\nasyncio.run(main(make_client()))\nray.shutdown()\n",
            6,
            fixed="import asyncio\nimport ray\n\nasync def main(client):\n    beat = asyncio.create_task(client.heartbeat())\n"
            "    print(await work.remote())\n    await beat\n\nasyncio.run(main(make_client()))\nray.shutdown()\n",
            note="an entry coroutine that started a task: the get stalls it",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef work(x):\n    return x\n\n@ray.remote\nclass A:\n    async def run(self, x):\n"
            "        return ray.get(work.remote(x))\n",
            10,
            fixed="import ray\n\n@ray.remote\ndef work(x):\n    return x\n\n@ray.remote\nclass A:\n    async def run(self, x):\n"
            "        return await work.remote(x)\n",
            note="async actor method",
        ),
        Invalid(
            "import asyncio\nimport ray\n\n@ray.remote\ndef work(x):\n    return x\n\nasync def main(xs):\n"
            "    refs = [work.remote(x) for x in xs]\n    return ray.get(refs)\n",
            10,
            fixed="import asyncio\nimport ray\n\n@ray.remote\ndef work(x):\n    return x\n\nasync def main(xs):\n"
            "    refs = [work.remote(x) for x in xs]\n    return await asyncio.gather(*refs)\n",
            note="a list of refs in an async driver",
        ),
        Invalid(
            "import ray\n\nasync def handler(refs):\n    ready, _ = ray.wait(refs, num_returns=1)\n    return ready\n",
            4,
            note="ray.wait has no fix",
        ),
        Invalid(
            "from ray import get as fetch\n\nasync def handler(ref):\n    return fetch(ref, timeout=10)\n",
            4,
            note="an imported alias; a timeout still blocks",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef work(x):\n    return {'y': x}\n\nasync def main(x):\n    ref = work.remote(x)\n"
            "    return ray.get(ref)['y']\n",
            9,
            fixed="import ray\n\n@ray.remote\ndef work(x):\n    return {'y': x}\n\nasync def main(x):\n    ref = work.remote(x)\n"
            "    return (await ref)['y']\n",
            note="parenthesized where the result is indexed",
        ),
        Invalid(
            "import ray\n\nasync def main(refs, ref):\n    await refs[0]\n    return ray.get(ref)\n",
            5,
            note="a different ref was awaited",
        ),
        Invalid(
            "import ray\n\nasync def main(ref):\n    def helper():\n        return 1\n    return helper() + ray.get(ref)\n",
            6,
            note="a nested def beside the get does not hide it; the ref's origin is unknown, so no fix",
        ),
        Invalid(
            "import ray\n\nasync def main(ref):\n    await ref\n    ref = other()\n    return ray.get(ref)\n",
            6,
            note="rebound after the await",
        ),
        Invalid(
            "import ray\nfrom ray import serve\n\n@serve.deployment\nclass Api:\n    async def __call__(self, request):\n"
            "        return ray.get(self.model.predict.remote(await request.json()))\n\nray.init()\n",
            7,
            fixed="import ray\nfrom ray import serve\n\n@serve.deployment\nclass Api:\n    async def __call__(self, request):\n"
            "        return await self.model.predict.remote(await request.json())\n\nray.init()\n",
            note="an async Serve deployment method",
        ),
        Invalid(
            "import ray\nfrom ray import serve\n\n@ray.remote\ndef review(text):\n    return text\n\n"
            "def review_all(files):\n    return ray.get([review.remote(text) for text in files])\n\n"
            "async def handle_webhook(request):\n    files = await request.json()\n    return review_all(files)\n\n"
            "@serve.deployment\nclass Bot:\n    async def __call__(self, request):\n        return await handle_webhook(request)\n",
            13,
            note="a helper that blocks, in a coroutine of the module that a Serve method awaits",
        ),
        Invalid(
            "import asyncio\nimport ray\n\nasync def bench(fn, n):\n    for _ in range(n):\n        await fn()\n\n"
            "async def trial(clients):\n    async def queries():\n        ray.get([c.work.remote() for c in clients])\n\n"
            "    await bench(queries, 10)\n\nasync def main():\n    await asyncio.gather(trial(make_clients()), trial(make_clients()))\n\n"
            "asyncio.run(main())\n",
            10,
            note="the same benchmark, with two trials gathered on one loop",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        compiles_graphs = bool(model.calls_by_tail.get("experimental_compile"))
        awaited: dict[int, _Awaited] = {}
        alone: dict[int, bool] = {}  # per coroutine: whether nothing else can run on its loop
        for function_name in ("ray.get", "ray.wait"):
            for site in model.calls_to(function_name):
                coroutine = _coroutine_of(site.scope)
                if coroutine is None or polls(site.node):
                    continue
                if id(coroutine.node) not in alone:
                    alone[id(coroutine.node)] = _runs_alone(model, coroutine)
                if alone[id(coroutine.node)]:
                    continue
                facts = awaited.get(id(coroutine.node))
                if facts is None:
                    facts = awaited[id(coroutine.node)] = _Awaited(model, coroutine)
                if facts.already_awaited(site):
                    continue
                if function_name == "ray.get" and _compiled_graph_ref(model, site, compiles_graphs):
                    continue
                self._report(ctx, site, function_name, coroutine)
        served: dict[int, bool] = {}  # coroutines on an actor's or a Serve replica's event loop
        for site in model.calls:
            coroutine = _coroutine_of(site.scope) if isinstance(site.node.func, (cst.Name, cst.Attribute)) else None
            if coroutine is None:
                continue
            if id(coroutine.node) not in served:
                served[id(coroutine.node)] = _served(model, coroutine) or _awaited_by_served(model, coroutine)
            waiter = waiter_called(model, site, blocks=True) if served[id(coroutine.node)] else None
            if waiter is None:
                continue
            where = f" ({ctx.line_of(waiter.get.node)})" if waiter.get is not None else ""
            ctx.report(
                site.node,
                f"`{ctx.snippet(site.node.func, 24)}()` blocks on `ray.get` in `{waiter.name}`{where}",
                requires=waiter.requires,
            )

    def _report(self, ctx: Context, site: CallSite, function_name: str, coroutine: Scope) -> None:
        model = ctx.model
        assert isinstance(coroutine.node, cst.FunctionDef)
        short = function_name.split(".")[1]
        actor = _actor_of_method(model, coroutine)
        deployment = _deployment_of_method(model, coroutine) if actor is None else None
        if actor is not None:
            where = (
                f"in the async actor method `{actor.name}.{coroutine.node.name.value}` blocks the actor's event loop"
            )
        elif deployment is not None:
            where = (
                f"in the async Serve method `{deployment}.{coroutine.node.name.value}` blocks the replica's event loop"
            )
        else:
            where = (
                f"in the coroutine `{coroutine.node.name.value}` blocks its event loop"
            )
        ctx.report(
            site.node,
            f"`ray.{short}` {where}",
            fix=self._fix(ctx, site, coroutine) if short == "get" else None,
        )

    def _fix(self, ctx: Context, site: CallSite, coroutine: Scope) -> FixPlan | None:
        """`await ref` or `await asyncio.gather(...)` for a proven ref or list of refs, where `await` is allowed."""
        model, call = ctx.model, site.node
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        argument = call.args[0].value
        if not isinstance(argument, (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.List, cst.ListComp)):
            return None
        if not _await_allowed(site.scope):
            return None
        origin = model.ref_origin(argument, site.scope, site.index)
        if origin is None or _has_num_returns(model, origin.producer):
            return None
        source = ctx.model.source_of(argument)
        if origin.kind == "ref":
            if isinstance(argument, (cst.List, cst.ListComp)):
                return None
            text = f"await {source}"
        else:
            asyncio_module = _asyncio_name(model, site)
            if asyncio_module is None:
                return None
            if isinstance(argument, cst.List) and source.startswith("[") and source.endswith("]"):
                inner = source[1:-1]  # the elements as written, with their line breaks
            else:
                inner = f"*{source}"
            text = f"await {asyncio_module}.gather({inner})"
        parent = _parent_of(site, coroutine)
        if parent is None or isinstance(parent, TIGHTER_THAN_AWAIT):
            text = f"({text})"
        return FixPlan("Await the ref instead of blocking on it", ((call, text),), Applicability.UNSAFE)


class _Awaited:
    """What a coroutine has already waited for, in source order: the names and dotted names read by each
    `await` or `ray.wait(...)`, the names they bind (`done, _ = await asyncio.wait(refs)`,
    `ready, _ = ray.wait(refs, timeout=0)`), and the target of an `async for` (a streaming generator
    yields a ref once its object is ready)."""

    def __init__(self, model: SemanticModel, coroutine: Scope) -> None:
        self.model = model
        self.order: dict[int, int] = {}
        self.awaits: list[tuple[int, set[str]]] = []
        waits = {id(site.node) for site in model.calls_to("ray.wait")}
        ready_at: dict[int, set[str]] = {}  # id of a node -> keys that hold ready values from there on
        for position, node in enumerate(iter_subtree(coroutine.node, into_functions=False)):
            self.order[id(node)] = position
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                ready_at[id(node.value)] = {key for target in targets for key in keys_read(target)}
            elif isinstance(node, cst.For) and node.asynchronous is not None:
                ready_at[id(node.body)] = keys_read(node.target)
            if isinstance(node, cst.Await) or id(node) in waits:  # visited after the targets it binds
                read = keys_read(node.expression) if isinstance(node, cst.Await) else keys_read(node)
                self.awaits.append((position, read | ready_at.get(id(node), set())))
            elif isinstance(node, cst.BaseSuite) and id(node) in ready_at:
                self.awaits.append((position, ready_at[id(node)]))

    def already_awaited(self, site: CallSite) -> bool:
        """Whether every ref the get or wait names was awaited before it, and not rebound since."""
        at = self.order.get(id(site.node))
        if at is None or not site.node.args or site.node.args[0].keyword is not None:
            return False
        keys = self._argument_keys(site.node.args[0].value, site)
        if not keys:
            return False
        return all(self._awaited_before(key, at, site) for key in keys)

    def _argument_keys(self, argument: cst.BaseExpression, site: CallSite) -> list[str]:
        """One key per ref the argument holds; an empty list when some element is not a plain name."""
        elements = [e.value for e in argument.elements] if isinstance(argument, (cst.List, cst.Tuple)) else [argument]
        keys = []
        for element in elements:
            while isinstance(element, cst.Subscript):  # `refs[0]` after `await asyncio.wait(refs)`
                element = element.value
            key = dotted_name(element)
            if key is None:
                return []
            if isinstance(element, cst.Name):  # `for r in refs: ray.get(r)` after `await asyncio.gather(*refs)`
                binding = self.model.reaching_binding(key, site.scope, site.index)
                if binding is not None and binding.kind == "loop-target" and binding.source is not None:
                    source = dotted_name(binding.source)
                    if source is not None:
                        key = source
            keys.append(key)
        return keys

    def _awaited_before(self, key: str, at: int, site: CallSite) -> bool:
        root = key.split(".", 1)[0]
        binding = self.model.reaching_binding(root, site.scope, site.index)
        bound_at = self.order.get(id(binding.node), -1) if binding is not None else -1
        return any(bound_at < position < at and key in keys for position, keys in self.awaits)


def _coroutine_of(scope: Scope) -> Scope | None:
    """The `async def` whose body runs the code of `scope` on its event loop: comprehensions and class
    bodies inside it run there too; a nested plain `def` or `lambda` may run anywhere (a worker thread)."""
    function = scope.function
    if function is None or function.kind != "function" or not function.is_async:
        return None
    return function


def _runs_alone(model: SemanticModel, coroutine: Scope, asked: frozenset[int] = frozenset()) -> bool:
    """Whether nothing can share the coroutine's event loop while it blocks: it is not an actor's or a Serve
    replica's method, starts no task of its own, and is the loop's entry point (given to `asyncio.run(...)`
    / `run_until_complete(...)`, or run by pytest as a test or a fixture) or used only inside coroutines
    that run alone (awaited there, or handed to a helper they await, as a benchmark harness takes it).
    Any other coroutine may be awaited beside others by its callers."""
    node = coroutine.node
    assert isinstance(node, cst.FunctionDef)
    if id(node) in asked or _served(model, coroutine) or _starts_task(node):
        return False
    if _is_loop_entry(model, node):
        return True
    users = _users(model, coroutine)
    return bool(users) and all(user is not None and _runs_alone(model, user, asked | {id(node)}) for user in users)


def _starts_task(node: cst.FunctionDef) -> bool:
    """Whether the coroutine's own body puts other coroutines on its loop (`create_task`, `gather`, ...)."""
    return any(
        isinstance(inner, cst.Call) and _called_name(inner.func) in TASK_STARTERS
        for inner in iter_subtree(node.body, into_functions=False)
    )


def _users(model: SemanticModel, coroutine: Scope) -> list[Scope | None]:
    """The coroutine that runs each place where the coroutine function's name is read (None where no
    coroutine does: the module's top level, a plain function, a decorator)."""
    node = coroutine.node
    assert isinstance(node, cst.FunctionDef)
    name = node.name.value
    users: list[Scope | None] = []
    for scope in model.scopes:
        for at in scope.reads.get(name, ()):
            binding = model.reaching_binding(name, scope, at)
            if binding is not None and binding.node is node:
                users.append(_coroutine_of(scope))
    return users


def _called_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _is_loop_entry(model: SemanticModel, node: cst.FunctionDef) -> bool:
    """A pytest test or fixture, or a coroutine the module hands to `asyncio.run` / `run_until_complete`."""
    name = node.name.value
    if name.startswith("test") or any("pytest" in (dotted_name(_decorator_name(d)) or "") for d in node.decorators):
        return True
    for runner in ("run", "run_until_complete"):
        for site in model.calls_by_tail.get(runner, ()):
            first = site.node.args[0].value if site.node.args else None
            if isinstance(first, cst.Call) and _called_name(first.func) == name:
                return True
    return False


def _decorator_name(decorator: cst.Decorator) -> cst.BaseExpression:
    expr = decorator.decorator
    return expr.func if isinstance(expr, cst.Call) else expr


def _compiled_graph_ref(model: SemanticModel, site: CallSite, compiles_graphs: bool) -> bool:
    """Whether the get may be on a `CompiledDAGRef`: its argument comes from `dag.execute(...)`, or the
    module compiles graphs and the argument is not a proven ObjectRef."""
    if not site.node.args:
        return False
    argument = site.node.args[0].value
    value: cst.BaseExpression | None = argument
    if isinstance(argument, cst.Name):
        binding = model.reaching_binding(argument.value, site.scope, site.index)
        value = binding.value if binding is not None and binding.kind == "assign" else None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in COMPILED_DAG_METHODS:
        return True
    return compiles_graphs and model.ref_origin(argument, site.scope, site.index) is None


def _served(model: SemanticModel, coroutine: Scope) -> bool:
    """Whether the coroutine is an async actor's or a Serve replica's method."""
    return _actor_of_method(model, coroutine) is not None or _deployment_of_method(model, coroutine) is not None


def _awaited_by_served(model: SemanticModel, coroutine: Scope) -> bool:
    """Whether the coroutine is a function of the module that an async actor's or a Serve replica's method
    awaits (`return await handle_webhook(request)`): it runs on that method's event loop."""
    info = model.function_info(coroutine.node) if isinstance(coroutine.node, cst.FunctionDef) else None
    if info is None or info.parent_scope is not model.module_scope:
        return False
    for site in model.calls_by_tail.get(info.node.name.value, ()):
        caller = _coroutine_of(site.scope)
        if caller is None or caller is coroutine or not _served(model, caller):
            continue
        path = model.path_within(caller.node, site.node) or []
        if len(path) >= 2 and isinstance(path[-2], cst.Await) and model.local_callee(model.function_info(caller.node), site.node) is info:
            return True
    return False


def _actor_of_method(model: SemanticModel, coroutine: Scope) -> RemoteDef | None:
    remote = model.remote_of_scope(coroutine)
    if remote is None or remote[0].kind != "actor":
        return None
    return remote[0]


def _deployment_of_method(model: SemanticModel, coroutine: Scope) -> str | None:
    """The class name when the coroutine is a method of a `@serve.deployment` class (a replica is an actor)."""
    found = model.analysis(ServeFacts).deployment_of_scope(coroutine)
    return found[0].name if found is not None and found[1].owner is not None and found[1].scope is coroutine else None


def _await_allowed(scope: Scope) -> bool:
    """Whether `await` may replace the call here: not in a class body nor in a generator expression
    (an `await` there makes an async generator, which `list(...)` and friends cannot consume)."""
    current: Scope | None = scope
    while current is not None and current.kind in ("comprehension", "class"):
        if current.kind == "class" or isinstance(current.node, cst.GeneratorExp):
            return False
        current = current.parent
    return True


def _has_num_returns(model: SemanticModel, producer: cst.BaseExpression) -> bool:
    """Whether some `.remote(...)` that made the ref(s) may return several refs or a generator
    (`num_returns` set on the call, the task or the actor method), so `await` would not give the value."""
    for node in iter_subtree(producer):
        if not isinstance(node, cst.Call):
            continue
        submission = model.submission(node)
        if submission is None:
            continue
        if "num_returns" in _keywords_of(submission.call.func):
            return True
        remote = submission.remote
        if remote is None:
            continue
        if any(True for _ in remote.option_values("num_returns")):
            return True
        if submission.kind == "actor-method" and remote.cls is not None and submission.method is not None:
            method = model.method(remote.cls, submission.method)
            if method is not None and any("num_returns" in _keywords_of(d.decorator) for d in method.node.decorators):
                return True
    return False


def _keywords_of(expr: cst.BaseExpression) -> set[str]:
    """Keyword names passed in any call inside `expr` (`f.options(num_returns=2).remote` -> {"num_returns"})."""
    return {
        arg.keyword.value
        for node in iter_subtree(expr)
        if isinstance(node, cst.Call)
        for arg in node.args
        if arg.keyword is not None
    }


def _asyncio_name(model: SemanticModel, site: CallSite) -> str | None:
    """The name under which the `asyncio` module is reachable at the call, if it is imported."""
    return "asyncio" if model.qualified_name(cst.Name("asyncio"), site.scope, site.index) == "asyncio" else None


def _parent_of(site: CallSite, coroutine: Scope) -> cst.CSTNode | None:
    """The node that holds the call, found under its statement (or else in the whole coroutine)."""
    stack: list[cst.CSTNode] = [site.statement if site.statement is not None else coroutine.node]
    while stack:
        node = stack.pop()
        for child in child_nodes(node):
            if child is site.node:
                return node
            stack.append(child)
    return None
