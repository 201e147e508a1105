"""RAY007 blocking-call-in-async-actor: `time.sleep`, synchronous HTTP or subprocess calls in an async actor method."""

from __future__ import annotations

from ray_lint.analyses.event_loop import may_stall, stall_message, stalls
from ray_lint.blocking_calls import sleep_fix
from ray_lint.diagnostics import Severity
from ray_lint.experiment import (
    MOST_AT_ONCE,
    AsyncActorExperiment,
    Plan,
    Subject,
    Variant,
    script,
    timed,
)
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid


# An async actor method that counts how many of the actor's calls ran at once, from the `(start, end)`
# spans its calls recorded: what the event loop really ran, which Ray's timeline does not show.
class BlockingCallExperiment(AsyncActorExperiment[None]):
    """Concurrent calls into an async actor whose method blocks in `time.sleep` (standing for any
    blocking call: HTTP, a subprocess), against the same method awaiting `asyncio.sleep`: the calls
    can overlap only when the wait yields the event loop.

    Judged by wall time and by how many calls the actor itself saw running at once, not by Ray's
    timeline: it counts a call to an async actor as running from when the event loop accepts it, so
    calls queued behind a blocked loop look concurrent there."""

    facts_type = type(None)
    shares_driver = True
    CALLS = 8
    WAIT_SECONDS = 0.2

    def plan(self, subject: Subject) -> Plan:
        setup = (
            "import asyncio\n\n"
            "@ray.remote\nclass Fetcher:\n    def __init__(self):\n        self.spans = []\n\n"
            "    async def fetch(self, x):\n        start = time.time()\n"
            "        {wait}  # stands for an HTTP request\n"
            "        self.spans.append((start, time.time()))\n        return x\n\n"
            f"{MOST_AT_ONCE}\n"
            "fetcher = Fetcher.remote()\n"
            "ray.get(fetcher.fetch.remote(-1))  # the actor up before the clock starts\n"
        )
        body = f"return ray.get([fetcher.fetch.remote(i) for i in range({self.CALLS})])"
        count = "__ray_lint_evidence__ = {'at_once': ray.get(fetcher.most_at_once.remote())}\n"
        blocking = setup.replace("{wait}", f"time.sleep({self.WAIT_SECONDS})")
        awaiting = setup.replace("{wait}", f"await asyncio.sleep({self.WAIT_SECONDS})")
        return Plan(
            Variant("blocking call", script(blocking + timed(body) + count)),
            Variant("await", script(awaiting + timed(body) + count)),
            "modelled",
            f"{self.CALLS} concurrent calls into an async actor, each waiting {self.WAIT_SECONDS:g} s",
        )



class BlockingCallInAsyncActor(Rule):
    code = "RAY007"
    name = "blocking-call-in-async-actor"
    message = "A blocking call in an async actor method stalls every call to the actor"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = ("async def",)
    also_tokens = REMOTE_MADE
    experiment = BlockingCallExperiment()
    docs = """
## What it does
Finds, in an `async def` method of a Ray actor class, a call to a known blocking function:
`time.sleep`; synchronous HTTP (`requests.*`, `httpx.get`/`post`/..., `urllib.request.urlopen`,
`urllib3.request`); subprocesses (`subprocess.run`/`call`/`check_call`/`check_output`/
`getoutput`/`getstatusoutput`, `os.system`, `os.wait*`); blocking name resolution and connects
(`socket.create_connection`, `socket.getaddrinfo`, `socket.gethostbyname*`); the `wikipedia`
client. Names are resolved through imports and aliases (`from time import sleep`). A subprocess
that runs a quick query of the machine, written as a literal (`subprocess.run(["nvidia-smi", "-L"])`,
`hostname`, `uname`, `nproc`, `lscpu`, `which`, `whoami`, `rocm-smi`), is not reported: it answers
in milliseconds. Its looping forms (`nvidia-smi -l 1`, `nvidia-smi dmon`) are.

It also finds, as RAY222 does for Serve replicas (`analyses/event_loop.py`):
- the blocking twin of an async API: a public `*_sync` method of another object
  (`client.fetch_sync(key)`) that is not known to block on `ray.get` (that is RAY006's);
- a neural network's inference on an attribute that holds one loaded in the class
  (`self.model = AutoModel.from_pretrained(...)`, then `self.model.generate(...)` or `self.model(x)`);
- a call of a synchronous helper that does one of those whenever it runs: a function of the module
  or a method of the same class, followed two calls deep; the message names the line where it blocks;
- any of these in an `async def` nested in the method, which runs on the same loop.

## Why is this bad?
An actor with an `async def` method is an async actor: all its methods run as coroutines on one
event loop in one thread, which switches between calls only at an `await`. A blocking call
holds that thread, so every other call to the actor (up to `max_concurrency` of them are meant
to overlap) waits for it. Ray's async-actor guide warns that only one task runs at a time and
that a method that never yields stalls the rest. Measured on a 2-core machine with Ray 2.60:
4 concurrent calls that each `time.sleep(0.5)` take 2.00 s; with `await asyncio.sleep(0.5)`
they take 0.50 s (4.0×).

`ray.get` and `ray.wait` in a coroutine are reported by RAY006, not here. ray-lint is silent for:
- a blocking function handed to a worker thread (`await asyncio.to_thread(time.sleep, 1)`,
  `loop.run_in_executor(None, lambda: requests.get(url))`), or called in a nested plain `def`;
- `time.sleep(0)`;
- synchronous methods of the actor (see RAY078) and `async def` functions that are not methods
  of a Ray actor;
- calls on objects (`session.get(...)`, `sock.recv(...)`, `proc.wait()`): their type is unknown;
- helpers in other modules, a call in an `except` block (a fallback), and an awaited call;
- inference of classic models (XGBoost, scikit-learn), which may take a millisecond.

## Example
```python
@ray.remote
class Poller:
    async def poll(self, url):
        while not self.ready:
            time.sleep(1)
        return requests.get(url).json()
```

## Use instead
```python
@ray.remote
class Poller:
    async def poll(self, url):
        while not self.ready:
            await asyncio.sleep(1)
        return (await asyncio.to_thread(requests.get, url)).json()
```
Each blocking call has an async counterpart: `await asyncio.sleep(...)` for `time.sleep`, an
async HTTP client (aiohttp, `httpx.AsyncClient`) for `requests`, `httpx` and `urllib`,
`await asyncio.create_subprocess_exec(...)` for `subprocess` and `os.system`, and
`await loop.getaddrinfo(...)` / `asyncio.open_connection(...)` for `socket`; any of them can
also run in a worker thread with `await asyncio.to_thread(...)`.
If the method must block, make the actor a threaded actor instead: plain `def` methods and
`max_concurrency=N`.

## Fix safety
The fix, offered for a `time.sleep(...)` statement, replaces it with `await asyncio.sleep(...)`
and adds `import asyncio` before the module-level import of `time` when `asyncio` is not
imported; that import replaces `import time` when the sleep was its only use. It is unsafe: other calls to the actor now run during the pause, which is the point,
but their side effects can interleave with this method's where they could not before. Other
blocking calls have no fix: the async replacement depends on the library.

## References
- [AsyncIO / concurrency for actors](https://docs.ray.io/en/latest/ray-core/actors/async_api.html)
- [Pattern: Using asyncio to run actor methods concurrently](https://docs.ray.io/en/latest/ray-core/patterns/concurrent-operations-async-actor.html)
"""

    VALID = [
        Valid(
            "import subprocess\nimport ray\n\n@ray.remote\nclass Orchestrator:\n    async def run(self):\n"
            "        gpus = subprocess.run(['nvidia-smi', '-L'], stdout=subprocess.PIPE, text=True).stdout\n"
            "        host = subprocess.check_output('hostname -f', shell=True)\n        return gpus, host\n",
            "quick queries of the machine: a short blocking call, as the catalogue calls it",
        ),
        Valid(
            "import asyncio\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self):\n        await asyncio.sleep(1)\n",
            "an awaited sleep",
        ),
        Valid(
            "import asyncio\nimport time\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self):\n"
            "        await asyncio.to_thread(time.sleep, 1)\n",
            "the blocking function runs in a worker thread",
        ),
        Valid(
            "import asyncio\nimport requests\nimport ray\n\n@ray.remote\nclass A:\n    async def fetch(self, url):\n"
            "        loop = asyncio.get_running_loop()\n        return await loop.run_in_executor(None, lambda: requests.get(url))\n",
            "a lambda run by an executor",
        ),
        Valid(
            "import time\nimport ray\n\n@ray.remote\nclass A:\n    def run(self):\n        time.sleep(1)\n",
            "a synchronous actor method (a sync actor runs one call at a time anyway)",
        ),
        Valid(
            "import time\nimport ray\n\nclass Local:\n    async def run(self):\n        time.sleep(1)\n\nref = f.remote()\n",
            "an async method of a class that is not an actor",
        ),
        Valid(
            "import time\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self):\n        time.sleep(0)\n",
            "time.sleep(0) only yields the thread",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass A:\n    async def run(self, time):\n        time.sleep(1)\n",
            "`time` is a parameter, not the module",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass A:\n    async def run(self, ref):\n        return ray.get(ref)\n",
            "ray.get is RAY006's",
        ),
        Valid(
            "import asyncio\nimport subprocess\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self, cmd):\n"
            "        def work():\n            return subprocess.run(cmd)\n        return await asyncio.to_thread(work)\n",
            "the subprocess runs in a nested def handed to a thread",
        ),
        Valid(
            "import ray\nimport requests\n\ndef fetch(url):\n    return requests.get(url).json()\n\n@ray.remote\nclass A:\n"
            "    def refresh(self, url):\n        return fetch(url)\n\n    async def ping(self):\n        return 'ok'\n",
            "the blocking helper is called from a synchronous method",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Learner:\n    async def push(self, client):\n"
            "        with self._disabled_for_sync():\n            await client.send()\n",
            "a private method of self whose name ends in _sync is not an API's blocking twin",
        ),
    ]
    INVALID = [
        Invalid(
            "import subprocess\nimport ray\n\n@ray.remote\nclass Monitor:\n    async def watch(self):\n"
            "        return subprocess.check_output(['nvidia-smi', 'dmon', '-c', '10'])\n",
            7,
            note="`nvidia-smi dmon` samples for as long as it is asked to",
        ),
        Invalid(
            "import asyncio\nimport time\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self):\n        time.sleep(1)\n\n"
            "    def now(self):\n        return time.time()\n",
            8,
            fixed="import asyncio\nimport time\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self):\n"
            "        await asyncio.sleep(1)\n\n    def now(self):\n        return time.time()\n",
        ),
        Invalid(
            "import time\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self, delay):\n        while True:\n"
            "            time.sleep(delay)\n",
            8,
            fixed="import asyncio\nimport ray\n\n@ray.remote\nclass A:\n    async def run(self, delay):\n"
            "        while True:\n            await asyncio.sleep(delay)\n",
            note="asyncio is imported by the fix, in place of `time`, whose only use was the sleep",
        ),
        Invalid(
            "import requests\nimport ray\n\n@ray.remote\nclass A:\n    async def fetch(self, url):\n"
            "        return requests.get(url).json()\n",
            7,
            note="synchronous HTTP; no fix",
        ),
        Invalid(
            "import subprocess as sp\nimport ray\n\nclass Runner:\n    async def run(self, cmd):\n"
            "        return sp.check_output(cmd)\n\nRemoteRunner = ray.remote(Runner)\n",
            6,
            note="an aliased import; the class made an actor with ray.remote(Cls)",
        ),
        Invalid(
            "from time import sleep\nimport ray\n\n@ray.remote(max_concurrency=4)\nclass A:\n    async def run(self):\n"
            "        x = [sleep(0.1) for _ in range(3)]\n        return x\n",
            7,
            note="in a comprehension: no fix",
        ),
        Invalid(
            "from urllib.request import urlopen\nimport ray\n\n@ray.remote\nclass A:\n    async def ping(self):\n"
            "        with urlopen('http://localhost:8000/health') as response:\n            return response.status\n",
            7,
        ),
        Invalid(
            "import ray\nimport requests\n\nclass Crawler:\n    def page(self, url):\n        return requests.get(url).text\n\n"
            "    async def crawl(self, urls):\n        return [self.page(url) for url in urls]\n\nCrawlerActor = ray.remote(Crawler)\n",
            9,
            note="a sync helper method of the same class; reported at the call in the coroutine",
        ),
        Invalid(
            "import ray\nfrom transformers import pipeline\n\n@ray.remote(max_concurrency=8)\nclass Embedder:\n"
            "    def __init__(self):\n        self.model = pipeline('feature-extraction')\n\n"
            "    async def embed(self, text):\n        return self.model(text)\n",
            10,
            note="a neural model's inference on the event loop",
        ),
    ]

    def wants(self, text: str) -> bool:
        """The pre-filter, plus something that can stall an event loop (`event_loop.may_stall`)."""
        return super().wants(text) and may_stall(text)

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for actor in model.remote_defs:
            if actor.kind != "actor" or actor.cls is None:
                continue
            for method in actor.cls.methods:
                if not method.is_async:
                    continue
                name = f"`{actor.name}.{method.node.name.value}`"
                for stall in stalls(model, method):
                    fix = sleep_fix(ctx, stall.site, method) if stall.helper is None and stall.name == "time.sleep" else None
                    ctx.report(stall.site.node, stall_message(ctx, stall, "async actor method", name, "the actor's event loop"), fix=fix)
