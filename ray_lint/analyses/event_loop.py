"""What stalls an event loop when a coroutine runs it, in the coroutine's own body or one helper away.

A call stalls the loop when it is:
- a known blocking call (`ray_lint.blocking_calls`: `time.sleep`, synchronous HTTP, subprocesses);
- the blocking twin of an async API, by its name (`adapter.enqueue_task_sync(...)`: Ray Serve's task
  adapters, like many clients, offer `*_sync` and `*_async` forms of each call), unless it is a method
  known to block on `ray.get` (`analyses.waits`), which RAY006 reports;
- a neural network's inference, on an attribute of the object that holds a loaded one (`self.model =
  AutoModelForCausalLM.from_pretrained(...)`, then `self.model.generate(...)` or `self.pipe(prompt)`;
  `loaders.loads_neural_model` says which loaders count);
- a call of a synchronous helper of the module that does one of those whenever it runs: a module-level
  function (`fetch_page(term)`) or a method of the coroutine's own class (`self.generate(text)`),
  followed to `MAX_HELPER_DEPTH` calls. A generator helper's body runs only as it is iterated: its call
  counts where the caller iterates it there and then (`for n in self.numbers(k)`, `list(...)`), not where
  the generator is handed on (`StreamingResponse(self.numbers(k))`: Starlette iterates a synchronous one
  in a worker thread).

A call counts only where it runs whenever its function does, on the loop's thread: not in an `except`
block (a fallback), not awaited (then it is a coroutine), and not in a nested plain function or lambda (a
worker thread runs those: `loop.run_in_executor(None, lambda: requests.get(url))`). A nested `async def`
(the async generator a streaming response iterates) runs on the same loop: its calls count. Helpers in
other modules are not followed. RAY007 (async actor methods) and RAY222 (async Serve methods) report what
this finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.analyses.waits import waiter_called
from ray_lint.blocking_calls import BLOCKING_TOKENS, blocking_call
from ray_lint.loaders import NEURAL_MODEL_TOKENS, loads_neural_model
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, CallSite, ClassInfo, FunctionInfo, Scope, between, is_name, iter_subtree
from ray_lint.rule import MAX_MESSAGE, Context

# How many helper calls deep a stall is followed within one module.
MAX_HELPER_DEPTH = 2
# How many assignments a loaded model is followed through (`model = ...; model = model.eval(); self.m = model`).
MAX_NAME_HOPS = 4
# Methods of a model object that run it (`generate` for transformers, `run` for an ONNX session, `invoke` for a
# LangChain LLM, `create_completion` for llama.cpp's, `select_action` for a LeRobot policy).
INFERENCE_METHODS = frozenset({
    "generate", "predict", "predict_proba", "forward", "encode", "transcribe", "infer", "run", "invoke",
    "create_completion", "create_chat_completion", "select_action",
})
# Methods that move or configure a model and return it: `from_pretrained(...).to(device).eval()`.
MODEL_SETUP_METHODS = frozenset({"to", "eval", "cuda", "cpu", "half", "float", "bfloat16", "requires_grad_"})
Kind = Literal["blocking", "sync twin", "inference"]
# Calls that iterate the generator they are given there and then.
CONSUMERS = frozenset({"list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "min", "max", "any", "all", "next", "join"})
# A file without one of these has nothing `stalls` finds.
STALL_TOKENS = (*BLOCKING_TOKENS, "_sync(", *NEURAL_MODEL_TOKENS)


def may_stall(text: str) -> bool:
    """A pre-filter: whether a file's text can hold a call that stalls an event loop."""
    return any(token in text for token in STALL_TOKENS)


@dataclass(frozen=True)
class Stall:
    """A call of a coroutine's own body (or of an async function nested in it) that stalls its event loop,
    itself or through `helper`."""

    site: CallSite  # the call in the coroutine's own body
    effect: cst.Call  # the call that blocks: `site.node` itself, or one inside the helper
    kind: Kind
    name: str  # the blocking function's qualified name, the `*_sync` method's name, or the model call's text
    helper: FunctionInfo | None = None


def stalls(model: SemanticModel, coroutine: FunctionInfo, *, inference: bool = True) -> Iterator[Stall]:
    """The calls of the coroutine's own body that stall its event loop, in order, then those of the async
    functions nested in it (a streaming response's async generator), which run on the same loop and see
    its `self`. With `inference` false, a model's inference does not count (in a `@serve.batch` handler it
    is the point of the method)."""
    memo = model.analysis(_Stalls)
    for function in (coroutine, *memo.nested_coroutines(coroutine)):
        for site in memo.own_calls(function):
            found = memo.direct(function, site, inference, coroutine.owner)
            if found is not None:
                yield Stall(site, site.node, *found)
                continue
            callee = model.local_callee(coroutine, site.node)
            if callee is None or not memo.runs_body(function, site, callee):
                continue
            inner = memo.of_helper(callee, inference, 1)
            if inner is not None:
                yield Stall(site, inner.effect, inner.kind, inner.name, inner.helper or callee)


class _Stalls:
    """Memos: the calls each function runs on its own thread, each class's model attributes, and the
    first stall of each helper."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._own: dict[int, list[CallSite]] = {}
        self._models: dict[int, frozenset[str]] = {}
        self._helpers: dict[tuple[int, bool], Stall | None] = {}
        self._async_children: dict[int, list[FunctionInfo]] | None = None

    def nested_coroutines(self, coroutine: FunctionInfo) -> list[FunctionInfo]:
        """The `async def`s inside the coroutine, through nothing but other `async def`s."""
        if self._async_children is None:
            self._async_children = {}
            for info in self.model.functions:
                if info.is_async:
                    self._async_children.setdefault(id(info.parent_scope), []).append(info)
        found, pending = [], [coroutine]
        while pending:
            children = self._async_children.get(id(pending.pop().scope), [])
            found += children
            pending += children
        return found

    def own_calls(self, function: FunctionInfo) -> list[CallSite]:
        found = self._own.get(id(function.node))
        if found is None:
            model = self.model
            found = self._own[id(function.node)] = [
                site
                for site in between(model.calls, function.scope.start, function.scope.end)
                if _runner(site.scope) is function.scope and not self._deferred(function, site)
            ]
        return found

    def _deferred(self, function: FunctionInfo, site: CallSite) -> bool:
        """A call awaited (a coroutine of its own) or in an `except` block (a fallback)."""
        path = self.model.path_within(function.node, site.node) or []
        if len(path) >= 2 and isinstance(path[-2], cst.Await):
            return True
        return any(isinstance(node, cst.ExceptHandler) for node in path)

    def runs_body(self, function: FunctionInfo, site: CallSite, callee: FunctionInfo) -> bool:
        """Whether the call of `callee` runs its body on `function`'s thread: a synchronous function does;
        a generator only where `function` iterates it there and then (a `for`, a comprehension, `list(...)`)."""
        if callee.is_async:
            return False
        if not callee.is_generator:
            return True
        return _iterated_here(self.model.path_within(function.node, site.node) or [])

    def direct(self, function: FunctionInfo, site: CallSite, inference: bool, owner: ClassInfo | None = None) -> tuple[Kind, str] | None:
        """What stalls the loop at `site` itself; `owner`, the class whose `self` the function sees (a nested
        coroutine sees its method's), when not the function's own."""
        name = blocking_call(self.model, site)
        if name is not None:
            return "blocking", name
        func = site.node.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if _sync_twin(func):
            # A client method that blocks on `ray.get` (`self.client.fetch_sync(k)`) is RAY006's finding.
            return None if waiter_called(self.model, site, blocks=True) is not None else ("sync twin", method)
        owner = owner or function.owner
        if not inference or owner is None:
            return None
        held = func if is_name(func.value, "self") else func.value if method in INFERENCE_METHODS else None
        if isinstance(held, cst.Attribute) and is_name(held.value, "self") and held.attr.value in self.model_attributes(owner):
            return "inference", f"self.{held.attr.value}{'' if held is func else f'.{method}'}"
        return None

    def of_helper(self, helper: FunctionInfo, inference: bool, depth: int) -> Stall | None:
        """The first stall of a synchronous helper's own body (or of a helper it calls), or None; also
        past `MAX_HELPER_DEPTH` and while it is being asked (recursion)."""
        key = (id(helper.node), inference)
        if key in self._helpers:
            return self._helpers[key]
        if depth > MAX_HELPER_DEPTH:
            return None
        self._helpers[key] = None
        for site in self.own_calls(helper):
            found = self.direct(helper, site, inference)
            if found is not None:
                self._helpers[key] = Stall(site, site.node, *found, helper)
                break
            callee = self.model.local_callee(helper, site.node)
            runs = callee is not None and self.runs_body(helper, site, callee)
            inner = self.of_helper(callee, inference, depth + 1) if callee is not None and runs else None
            if inner is not None:
                self._helpers[key] = inner
                break
        return self._helpers[key]

    def model_attributes(self, cls: ClassInfo) -> frozenset[str]:
        """The attributes that the class's methods assign a loaded model to (`self.model = ...from_pretrained(...)`)."""
        found = self._models.get(id(cls))
        if found is None:
            stores = self.model.self_stores(cls)
            found = self._models[id(cls)] = frozenset(
                name
                for name, writes in stores.items()
                if any(w.kind == "assign" and w.value is not None and self._holds_model(w.value, w.scope, w.index, 0, cls) for w in writes)
            )
        return found

    def _holds_model(self, value: cst.BaseExpression, scope: Scope, index: int, depth: int, cls: ClassInfo) -> bool:
        """A loaded model: a loader's call, that call moved or set up (`.to(device).eval()`), a call that
        wraps a name holding one (`torch.compile(model)`), such a name, or a call of a method of `cls`
        that returns one (`self.pipeline = self._initialize_pipeline()`)."""
        if depth > MAX_NAME_HOPS:
            return False
        if isinstance(value, cst.Name):
            binding = self.model.reaching_binding(value.value, scope, index)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return False
            return self._holds_model(binding.value, binding.scope, binding.index, depth + 1, cls)
        if not isinstance(value, cst.Call):
            return False
        if loads_neural_model(self.model, value):
            return True
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in MODEL_SETUP_METHODS:
            return self._holds_model(func.value, scope, index, depth, cls)
        if isinstance(func, cst.Attribute) and is_name(func.value, "self"):
            method = self.model.method(cls, func.attr.value)
            return method is not None and self._returns_model(method, depth + 1, cls)
        first = value.args[0].value if value.args and value.args[0].keyword is None and not value.args[0].star else None
        return isinstance(first, cst.Name) and self._holds_model(first, scope, index, depth + 1, cls)

    def _returns_model(self, method: FunctionInfo, depth: int, cls: ClassInfo) -> bool:
        """Whether every value the method returns (there is one, `None` aside) is a loaded model."""
        returned = [
            node.value for node in iter_subtree(method.node.body, into_functions=False)
            if isinstance(node, cst.Return) and node.value is not None and not is_name(node.value, "None")
        ]
        return bool(returned) and all(self._holds_model(value, method.scope, AFTER_ALL, depth, cls) for value in returned)


def _iterated_here(path: list[cst.CSTNode]) -> bool:
    """Whether the iterable at the end of `path` is iterated where it stands: by a synchronous `for` or
    comprehension, or by a consumer's call (`list(...)`); a generator expression, where it is consumed so."""
    parent = path[-2] if len(path) >= 2 else None
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is path[-1] and parent.asynchronous is None:
        comprehension = path[-3] if isinstance(parent, cst.CompFor) and len(path) >= 3 else None
        return not isinstance(comprehension, cst.GeneratorExp) or _iterated_here(path[:-2])
    if isinstance(parent, cst.Arg) and len(path) >= 3 and isinstance(path[-3], cst.Call):
        func = path[-3].func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        return name in CONSUMERS
    return False


def _sync_twin(func: cst.Attribute) -> bool:
    """`client.enqueue_task_sync(...)`: a public `*_sync` method of another object (not of `self`, whose
    `_sync` methods are helpers, `self._weights_disabled_for_sync()`, followed as such)."""
    method = func.attr.value
    return method.endswith("_sync") and not method.startswith(("_", "async_to")) and not is_name(func.value, "self")


def _runner(scope: Scope) -> Scope:
    """The scope whose code runs a call of `scope`: a comprehension's code runs in the function around it."""
    while scope.kind == "comprehension" and scope.parent is not None:
        scope = scope.parent
    return scope


def stall_message(ctx: Context, stall: Stall, kind: str, method: str, loop: str) -> str:
    """The finding's sentence: what blocks the event loop of `method` (a `kind`, "async actor method",
    named "`A.m`"); shorter forms, down to naming only `loop` ("the actor's event loop") and the line,
    keep it within 100 characters."""
    effect = {"blocking": f"`{stall.name}`", "sync twin": f"`{stall.name}`", "inference": "model inference"}[stall.kind]
    if stall.helper is None:
        subject = f"Model inference `{stall.name}(...)`" if stall.kind == "inference" else effect
        wheres = (f"the event loop of {kind} {method}", f"the event loop of {method}", loop)
        sentences = [f"{subject} blocks {where}" for where in wheres]
    else:
        call = f"`{ctx.snippet(stall.site.node.func, 30)}()`"
        verb = "runs" if stall.kind == "inference" else "calls"
        line = ctx.line_of(stall.effect)
        sentences = [f"{call} {verb} {effect} ({line}), blocking {where}" for where in (f"the event loop of {method}", loop)]
        sentences.append(f"{call} blocks {loop} ({line})")
    return next((s for s in sentences if len(s) <= MAX_MESSAGE), sentences[-1])
