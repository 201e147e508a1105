"""RAY065 async-def-remote-task: `ray.remote` applied to an `async def` function, which Ray refuses."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import is_generator
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid


def _applied_to_the_function(remote: RemoteDef) -> bool:
    """Whether `ray.remote` gets the `async def` function itself. Another decorator between them (or on a
    function later passed to `ray.remote(f)`) may wrap the coroutine function in a plain one, which Ray accepts."""
    decorators = remote.target.decorators
    if isinstance(remote.declared_at, cst.Decorator):
        return bool(decorators) and decorators[-1] is remote.declared_at
    return not decorators


def _in_actor_class(model: SemanticModel, remote: RemoteDef, actors: set[int]) -> bool:
    info = model.function_info(remote.target)  # type: ignore[arg-type]
    return info is not None and info.owner is not None and id(info.owner.node) in actors


FLAGGED = """
import asyncio

@ray.remote
async def fetch(url):
    await asyncio.sleep(0.1)  # stands for an async client's request
    return f"page of {url}"

__ray_lint_result__ = ray.get([fetch.remote(u) for u in ("a", "b")], timeout=30)
"""
FIXED = """
import asyncio

async def _fetch(url):
    await asyncio.sleep(0.1)
    return f"page of {url}"

@ray.remote
def fetch(url):
    return asyncio.run(_fetch(url))

__ray_lint_result__ = ray.get([fetch.remote(u) for u in ("a", "b")], timeout=30)
__ray_lint_evidence__ = {"right": f"a sync task ran the coroutine with asyncio.run: {__ray_lint_result__}"}
"""


class AsyncDefRemoteTaskExperiment(ReproductionExperiment[None]):
    """`ray.remote` applied to an `async def` function (Ray refuses it as the decorator runs), against
    the fix Ray's docs give: a sync task that runs the coroutine with `asyncio.run`. The same for every finding."""

    facts_type = type(None)
    shares_driver = True
    expected = r"'async def' should not be used for remote tasks"

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("async def task", script(FLAGGED)),
            Variant("sync task with asyncio.run", script(FIXED)),
            "modelled",
            "`ray.remote` applied to an `async def` function, and the same coroutine run by a sync task",
        )


class AsyncDefRemoteTask(Rule):
    code = "RAY065"
    name = "async-def-remote-task"
    message = "`ray.remote` is applied to an `async def` function; Ray raises ValueError at decoration"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = False
    tokens = ("async def",)
    also_tokens = REMOTE_MADE
    experiment = AsyncDefRemoteTaskExperiment()
    docs = """
## What it does
Finds `@ray.remote` (or `@ray.remote(...)`, `ray.remote(f)`, `ray.remote(...)(f)`) applied to a
function defined with `async def` that is not an async generator.

## Why is this bad?
Ray tasks cannot be coroutines: only the methods of an actor may be `async`. Ray 2.60 checks
this when the decorator runs (`ray/remote_function.py`, `RemoteFunction.__init__`) and raises

```
ValueError: 'async def' should not be used for remote tasks. You can wrap the async function
with `asyncio.run(f())`. See more at:https://docs.ray.io/en/latest/ray-core/actors/async_api.html
```

so the module fails at import, before any task runs.

ray-lint is silent for:
- async generators (an `async def` whose own body contains `yield`): Ray accepts them as
  streaming generator tasks;
- `async def` methods of a `@ray.remote` class: that makes an async actor, which is supported;
- an `async def` with another decorator between it and `ray.remote` (or a decorated function
  passed to `ray.remote(f)`): that decorator may return a plain function, which Ray accepts;
- a `remote` decorator that does not come from Ray.

## Example
```python
@ray.remote
async def fetch(url):
    async with aiohttp.ClientSession() as session:
        return await (await session.get(url)).text()
```

## Use instead
A synchronous task that runs the coroutine in its own event loop:
```python
async def _fetch(url):
    async with aiohttp.ClientSession() as session:
        return await (await session.get(url)).text()

@ray.remote
def fetch(url):
    return asyncio.run(_fetch(url))
```
or, to overlap many calls in one process, an async actor:
```python
@ray.remote
class Fetcher:
    async def fetch(self, url):
        ...
```

## Fix safety
There is no automatic fix: whether a sync task with `asyncio.run` or an async actor fits depends
on how the function is used.

## References
- [AsyncIO for remote tasks](https://docs.ray.io/en/latest/ray-core/actors/async_api.html#asyncio-for-remote-tasks)
- [AsyncIO / concurrency for actors](https://docs.ray.io/en/latest/ray-core/actors/async_api.html)
- [Ray generators (streaming tasks)](https://docs.ray.io/en/latest/ray-core/ray-generator.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nasync def stream(n):\n    for i in range(n):\n        yield i\n",
            "an async generator is a streaming task",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Fetcher:\n    async def fetch(self, url):\n        return await get(url)\n\n"
            "    async def close(self):\n        await self.session.close()\n",
            "async methods make an async actor",
        ),
        Valid(
            "import asyncio\nimport ray\n\nasync def _fetch(url):\n    return await get(url)\n\n"
            "@ray.remote\ndef fetch(url):\n    return asyncio.run(_fetch(url))\n",
            "a sync task running the coroutine with asyncio.run",
        ),
        Valid("import ray\n\nasync def fetch(url):\n    return await get(url)\n\nref = work.remote(1)\n", "an async def that is not remote"),
        Valid(
            "import ray\n\nasync def work(x):\n    return x\n\ndef work(x):\n    return x\n\nremote_work = ray.remote(work)\n",
            "ray.remote gets the sync function that shadows the async one",
        ),
        Valid(
            "import ray\n\ndef helper():\n    async def work(x):\n        return x\n    return work\n\n"
            "def work(x):\n    return x\n\nremote_work = ray.remote(num_cpus=1)(work)\n",
            "an async function of the same name in another scope",
        ),
        Valid(
            "import ray\nfrom rpyc.utils import remote\n\n@remote\nasync def fetch(url):\n    return await get(url)\n",
            "a `remote` decorator that is not Ray's",
        ),
        Valid("@ray.remote\nasync def fetch(url):\n    return await get(url)\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import ray\n@ray.remote\n@run_in_event_loop\nasync def fetch(url):\n    return await get(url)\n",
            "another decorator may turn the coroutine function into a plain one",
        ),
        Valid(
            "import ray\n@ray.remote\ndef outer(n):\n    async def gen():\n        yield 1\n    return n\n",
            "a sync task with a nested async generator",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\n@ray.remote\nasync def fetch(url):\n    return await get(url)\n", 3),
        Invalid(
            "import ray\n\n@ray.remote(num_cpus=2, max_retries=3)\nasync def fetch(url):\n    return await get(url)\n", 3,
            note="decorator with options",
        ),
        Invalid(
            "import ray\n\nasync def fetch(url):\n    return await get(url)\n\nremote_fetch = ray.remote(fetch)\n", 6,
            note="ray.remote called on the function",
        ),
        Invalid(
            "import ray\n\nasync def fetch(url):\n    return await get(url)\n\nremote_fetch = ray.remote(num_cpus=1)(fetch)\n", 6,
            note="ray.remote(...) applied to the function",
        ),
        Invalid("from ray import remote\n\n@remote\nasync def fetch(url):\n    return await get(url)\n", 3, note="imported name"),
        Invalid(
            "import ray as r\n\n@log_calls\n@r.remote\nasync def fetch(url):\n    async def gen():\n        yield 1\n"
            "    return [x async for x in gen()]\n",
            4,
            note="a decorator above ray.remote cannot help; the yield of a nested generator does not count",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Worker:\n    async def run(self):\n        return 1\n\n"
            "@ray.remote\nasync def run_all(n):\n    return n\n",
            8,
            note="a task beside an async actor",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        actors = {id(remote.target) for remote in model.remote_defs if remote.kind == "actor"}
        for remote in model.remote_defs:
            target = remote.target
            if remote.kind != "task" or not isinstance(target, cst.FunctionDef) or target.asynchronous is None:
                continue
            if is_generator(target) or not _applied_to_the_function(remote):  # an async generator is a streaming task
                continue
            if _in_actor_class(model, remote, actors):
                continue  # a method of an actor class is run by the actor, whatever the decorator says
            name = target.name.value
            ctx.report(
                remote.declared_at,
                f"`ray.remote` raises `ValueError` on `{name}`, an `async def` function",
            )
