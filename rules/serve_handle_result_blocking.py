"""RAY221 serve-handle-result-blocking: `DeploymentResponse.result()` inside a coroutine, which Serve refuses."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import SERVE_TOKENS, keyword_value
from ray_lint.libraries.serve import ServeFacts
from ray_lint.python_model import CallSite, Scope, child_nodes
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Statements whose value, when it is the whole call, can become `await response` without parentheses.
VALUE_STATEMENTS = (cst.Expr, cst.Return, cst.Assign, cst.AnnAssign, cst.AugAssign)
# Parents that bind tighter than `await`: `r.result().x` must become `(await r).x`.
TIGHTER_THAN_AWAIT = (cst.Attribute, cst.Subscript, cst.Call)

MODEL = """

@serve.deployment(ray_actor_options={"num_cpus": 0})
class Model:
    async def predict(self, x):
        return x * 2

@serve.deployment(ray_actor_options={"num_cpus": 0})
class Ingress:
    def __init__(self, model):
        self.model = model

    async def __call__(self, x):
        return {wait}

serve.start(proxy_location="Disabled")
try:
    handle = serve.run(Ingress.bind(Model.bind()), name="ray_lint_RAY221", route_prefix=None)
    __ray_lint_evidence__ = {"right": f"the ingress answered {handle.remote(21).result(timeout_s=30)}"}
finally:
    serve.shutdown()
"""


class ResultInCoroutineExperiment(ReproductionExperiment[None]):
    """The user's script as written and with `await response`, when it has an entry point; else an
    ingress deployment whose async `__call__` asks a model deployment through its handle, once with
    `.result()` and once with `await`: Serve raises in the first, on the first request."""

    facts_type = type(None)
    expected = r"Sync methods should not be called from within an `asyncio` event loop"
    side_by_side = False  # a cluster has one Serve instance, which each variant starts and shuts down

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant(".result()", script(MODEL.replace("{wait}", "self.model.predict.remote(x).result()"), ("serve",))),
            Variant("await", script(MODEL.replace("{wait}", "await self.model.predict.remote(x)"), ("serve",))),
            "modelled",
            "an async ingress method calling a model deployment through its handle, with `.result()` and with `await`",
        )


class ServeHandleResultBlocking(Rule):
    code = "RAY221"
    name = "serve-handle-result-blocking"
    message = "`.result()` on a Serve `DeploymentResponse` inside a coroutine raises; `await` the response"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = (".result(",)
    also_tokens = SERVE_TOKENS
    experiment = ResultInCoroutineExperiment()
    docs = """
## What it does
Finds `.result()` called on a Ray Serve `DeploymentResponse` (what `handle.remote(...)` and
`handle.method.remote(...)` return, also through `handle.options(...)`) in the body of an
`async def`: an async method of a deployment, or any other coroutine. A handle is a
deployment's `__init__` parameter bound to another deployment, a parameter annotated
`DeploymentHandle`, or the value of `serve.get_deployment_handle(...)`, `serve.get_app_handle(...)`
or `serve.run(...)`.

## Why is this bad?
`DeploymentResponse.result()` blocks the calling thread until the reply arrives. On an event loop
that would stall every other request of the replica, so Serve refuses: in Ray 2.60 it raises
`RuntimeError: Sync methods should not be called from within an `asyncio` event loop. Use
`await response` instead.` whenever a loop is running in the thread (`serve/handle.py`). The
method fails on its first request, and the caller sees a `RayTaskError(RuntimeError)`.

ray-lint is silent for:
- `.result()` in a sync method of a deployment or in driver code: Serve 2.60 runs sync methods in
  a thread pool (`RAY_SERVE_RUN_SYNC_IN_THREADPOOL=1`, the default), where no loop runs;
- `.result()` in a nested plain `def` or `lambda`, or handed to a thread
  (`await asyncio.to_thread(response.result)`);
- `.result()` on anything that is not a handle's response: `concurrent.futures.Future`,
  `asyncio.Task`, a response of `handle.options(stream=True)` (a generator);
- `.result(_skip_asyncio_check=True)`.

## Example
```python
@serve.deployment
class Ingress:
    def __init__(self, model: DeploymentHandle):
        self.model = model

    async def __call__(self, request):
        return self.model.predict.remote(await request.json()).result()
```

## Use instead
```python
@serve.deployment
class Ingress:
    def __init__(self, model: DeploymentHandle):
        self.model = model

    async def __call__(self, request):
        return await self.model.predict.remote(await request.json())
```

## Fix safety
The fix replaces `response.result()` with `await response` (in parentheses where an attribute,
subscript or call follows). It is safe: the code it replaces can only raise. It is offered when
`.result()` has no arguments (`timeout_s=` has no `await` counterpart without `asyncio.wait_for`)
and the call is in the coroutine's own body, not in a comprehension or a class body inside it.

## References
- [Deploy compositions of models: DeploymentHandle](https://docs.ray.io/en/latest/serve/model_composition.html)
- [DeploymentResponse API](https://docs.ray.io/en/latest/serve/api/doc/ray.serve.handle.DeploymentResponse.html)
"""

    VALID = [
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n        return await self.model.predict.remote(x)\n",
            "the response is awaited",
        ),
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    def __call__(self, x):\n        return self.model.predict.remote(x).result()\n",
            "a sync method: Serve runs it in a thread pool, where `.result()` is allowed",
        ),
        Valid(
            "from ray import serve\n\nhandle = serve.run(app)\nprint(handle.remote(1).result())\n",
            "driver code",
        ),
        Valid(
            "import asyncio\nfrom concurrent.futures import ThreadPoolExecutor\nfrom ray import serve\n\n"
            "pool = ThreadPoolExecutor()\n\n@serve.deployment\nclass Ingress:\n"
            "    async def __call__(self, x):\n        future = pool.submit(len, x)\n        task = asyncio.ensure_future(asyncio.sleep(0))\n"
            "        await task\n        return future.result() + task.result()\n",
            "`.result()` on a concurrent future and an asyncio task",
        ),
        Valid(
            "import asyncio\nfrom ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n        response = self.model.predict.remote(x)\n"
            "        return await asyncio.to_thread(response.result)\n",
            "the bound method handed to a worker thread",
        ),
        Valid(
            "import asyncio\nfrom ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n        def fetch():\n"
            "            return self.model.predict.remote(x).result()\n        return await asyncio.to_thread(fetch)\n",
            "in a nested sync def run by a thread",
        ),
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n"
            "        stream = self.model.options(stream=True).tokens.remote(x)\n        return [t async for t in stream]\n",
            "a streaming response is iterated, not `.result()`",
        ),
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, retries: int):\n"
            "        self.retries = retries\n\n    async def __call__(self, job):\n        return job.remote(self.retries).result()\n",
            "`job` is not known to be a handle",
        ),
    ]
    INVALID = [
        Invalid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n        return self.model.predict.remote(x).result()\n",
            9,
            fixed="from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model\n\n    async def __call__(self, x):\n        return await self.model.predict.remote(x)\n",
        ),
        Invalid(
            "from ray import serve\nfrom ray.serve.handle import DeploymentHandle\n\n@serve.deployment\nclass Ingress:\n"
            "    def __init__(self, model: DeploymentHandle):\n        self.model = model\n\n"
            "    async def __call__(self, x):\n        response = self.model.remote(x)\n        return response.result()['label']\n",
            11,
            fixed="from ray import serve\nfrom ray.serve.handle import DeploymentHandle\n\n@serve.deployment\nclass Ingress:\n"
            "    def __init__(self, model: DeploymentHandle):\n        self.model = model\n\n"
            "    async def __call__(self, x):\n        response = self.model.remote(x)\n        return (await response)['label']\n",
            note="a name bound to the response; parenthesised before a subscript",
        ),
        Invalid(
            "from ray import serve\n\nasync def score(texts):\n    handle = serve.get_app_handle('sentiment')\n"
            "    return [handle.remote(t).result() for t in texts]\n",
            5,
            note="a driver coroutine; in a comprehension: no fix",
        ),
        Invalid(
            "from ray import serve\n\n@serve.deployment\nclass Ingress:\n    def __init__(self, model):\n"
            "        self.model = model.options(method_name='predict')\n\n    async def __call__(self, x):\n"
            "        return self.model.remote(x).result(timeout_s=5)\n",
            9,
            note="a handle made with `.options(...)`; a timeout: no fix",
        ),
        Invalid(
            "from ray import serve\nfrom ray.serve.handle import DeploymentHandle\n\n"
            "async def route(handle: DeploymentHandle, x):\n    print(handle.predict.remote(x).result())\n",
            5,
            fixed="from ray import serve\nfrom ray.serve.handle import DeploymentHandle\n\n"
            "async def route(handle: DeploymentHandle, x):\n    print(await handle.predict.remote(x))\n",
            note="a parameter annotated `DeploymentHandle`, in a call's argument",
        ),
        Invalid(
            "from ray import serve\n\n@serve.deployment\nclass Fanout:\n    def __init__(self, shard):\n        self.shard = shard\n\n"
            "    async def __call__(self, keys):\n        responses = [self.shard.get.remote(k) for k in keys]\n        found = []\n"
            "        for response in responses:\n            found.append(response.result())\n        return found\n",
            12,
            fixed="from ray import serve\n\n@serve.deployment\nclass Fanout:\n    def __init__(self, shard):\n        self.shard = shard\n\n"
            "    async def __call__(self, keys):\n        responses = [self.shard.get.remote(k) for k in keys]\n        found = []\n"
            "        for response in responses:\n            found.append(await response)\n        return found\n",
            note="the target of a loop over a list of responses",
        ),
        Invalid(
            "from ray import serve\n\n@serve.deployment\nasync def gateway(request):\n"
            "    audit = serve.get_deployment_handle('AuditLog', app_name='default')\n"
            "    audit.record.remote(request.url.path).result()\n    return 'ok'\n",
            6,
            fixed="from ray import serve\n\n@serve.deployment\nasync def gateway(request):\n"
            "    audit = serve.get_deployment_handle('AuditLog', app_name='default')\n"
            "    await audit.record.remote(request.url.path)\n    return 'ok'\n",
            note="a function deployment; an expression statement",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        serve = model.analysis(ServeFacts)
        for site in model.calls_by_tail.get("result", ()):
            func = site.node.func
            if not isinstance(func, cst.Attribute) or keyword_value(site.node, "_skip_asyncio_check") is not None:
                continue
            coroutine = _coroutine_of(site.scope)
            if coroutine is None or not serve.is_handle_response(func.value, site.scope, site.index):
                continue
            ctx.report(
                site.node,
                f"`.result()` in {_where(serve, coroutine)} raises; `await` the response",
                fix=_await_fix(ctx, site, coroutine, func.value),
            )


def _coroutine_of(scope: Scope) -> Scope | None:
    """The `async def` whose event loop runs the code of `scope`: comprehensions and class bodies inside
    it run there too; a nested plain `def` or `lambda` may run anywhere (a worker thread)."""
    function = scope.function
    return function if function is not None and function.kind == "function" and function.is_async else None


def _where(serve: ServeFacts, coroutine: Scope) -> str:
    """The coroutine in words: a deployment's method, a function deployment, or another coroutine."""
    assert isinstance(coroutine.node, cst.FunctionDef)
    name = coroutine.node.name.value
    owner = serve.deployment_of_scope(coroutine)
    if owner is None:
        return f"coroutine `{name}`"
    if owner[1].owner is None:
        return f"async Serve deployment `{name}`"
    return f"async Serve method `{owner[0].name}.{name}`"


def _await_fix(ctx: Context, site: CallSite, coroutine: Scope, response: cst.BaseExpression) -> FixPlan | None:
    """`response.result()` -> `await response`, for a call without arguments in the coroutine's own body."""
    if site.node.args or site.scope is not coroutine or site.statement is None:
        return None
    text = f"await {ctx.code_for(response)}"
    if not (isinstance(site.statement, VALUE_STATEMENTS) and site.statement.value is site.node):
        parent = _parent_of(site.statement, site.node)
        if parent is None:
            return None
        if isinstance(parent, TIGHTER_THAN_AWAIT):
            text = f"({text})"
    return FixPlan("Await the response", ((site.node, text),), Applicability.SAFE)


def _parent_of(root: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
    """The node under `root` that holds `node` as a child."""
    stack = [root]
    while stack:
        current = stack.pop()
        for child in child_nodes(current):
            if child is node:
                return current
            stack.append(child)
    return None
