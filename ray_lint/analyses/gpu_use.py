"""Where a function uses a GPU: in its own body, or one call away in a helper it calls.

A call uses a GPU when it moves data or a model to CUDA (`.cuda()`, `.to("cuda")`, `device="cuda"`),
calls `torch.cuda`, CuPy or Numba CUDA, asks TensorFlow or JAX for a GPU device, launches a
`@cuda.jit` kernel (`kernel[blocks, threads](a)`), or indexes the GPU ids Ray assigned
(`ray.get_gpu_ids()[0]`). Code under a condition about GPUs (`if torch.cuda.is_available():`), or
after a guard about them that leaves (`if not ray.get_gpu_ids(): return ...`), has a CPU path and
does not count, nor do nested functions, nor calls that hand GPU settings to Ray Train
or Ray Data (`use_gpu=True`), which schedule that work themselves.

Helpers are followed through the module's own functions and the methods of the same class
(`self.load_model()`), to `MAX_HELPER_DEPTH` calls; a helper imported from another module of the
project is known through the project fact `gpu:<name>` (`gpu_facts`), which the helper's module gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.waits import from_library
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, FunctionInfo, child_nodes, dotted_name, literal_string

# `torch.cuda` functions that only ask whether a GPU is there.
PROBES = frozenset({"is_available", "device_count", "is_initialized"})
# Keywords that hand GPU settings to Ray Train or Ray Data, which schedule the GPU work themselves.
DELEGATING_KEYWORDS = frozenset({"num_gpus", "use_gpu", "resources_per_worker", "accelerator_type"})
GPU_WORDS = ("cuda", "gpu")
# How many helper calls deep a GPU use is followed within one module.
MAX_HELPER_DEPTH = 3
# A module without one of these uses no GPU in a way `gpu_facts` reports (its pre-filter, which also
# decides whether a module that no rule reads is parsed for its facts: "GPU" alone is in every
# `resources={"GPU": 1}` and would parse hundreds of modules of Ray's own tree for nothing).
GPU_TOKENS = (".cuda(", "'cuda", '"cuda', "torch.cuda.", "cupy", "numba", "get_gpu_ids", "/GPU", "jax.devices")


@dataclass(frozen=True)
class GpuUse:
    """A call in a function's body that uses a GPU, itself or through `helper`."""

    call: cst.CSTNode  # the call (or `ray.get_gpu_ids()`) in the function's own body
    marker: cst.CSTNode  # where the GPU is used: `call` itself, or the use inside the helper
    helper: str | None = None  # the function or method the call reaches the GPU through (qualified when imported)
    requires: tuple[str, ...] = ()  # the project facts it needs: a helper that another module defines


def gpu_uses(model: SemanticModel, function: FunctionInfo) -> Iterator[GpuUse]:
    """The GPU uses of `function`'s body, in order: its own, then those of helpers it calls."""
    local = model.analysis(_GpuHelpers)
    for call in _calls(model, function):
        if _uses_gpu(model, call):
            yield GpuUse(call, call.value if isinstance(call, cst.Subscript) else call)
            continue
        found = local.reached(function, call) if isinstance(call, cst.Call) else None
        if found is not None:
            yield found


def may_use_gpu(text: str) -> bool:
    return any(token in text for token in GPU_TOKENS)


def gpu_facts(model: SemanticModel, text: str) -> Iterator[str]:
    """`gpu:<name>` for each module-level function that uses a GPU, for the project's other modules."""
    if not may_use_gpu(text):
        return
    helpers = model.analysis(_GpuHelpers)
    for info in model.functions:
        if info.parent_scope is model.module_scope and helpers.marker(info) is not None:
            yield f"gpu:{info.node.name.value}"


class _GpuHelpers:
    """The module's functions that use a GPU, directly or through helpers of the module, memoized."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._markers: dict[int, cst.CSTNode | None] = {}

    def marker(self, info: FunctionInfo, depth: int = 0) -> cst.CSTNode | None:
        """Where `info` uses a GPU, or None (also past `MAX_HELPER_DEPTH`, and while it is being asked: recursion)."""
        key = id(info.node)
        if key in self._markers:
            return self._markers[key]
        if depth > MAX_HELPER_DEPTH:
            return None
        self._markers[key] = None  # a recursive call asks again: no GPU through itself
        for call in _calls(self.model, info):
            if _uses_gpu(self.model, call):
                found: cst.CSTNode | None = call.value if isinstance(call, cst.Subscript) else call
            else:
                callee = self.model.local_callee(info, call) if isinstance(call, cst.Call) else None
                found = self.marker(callee, depth + 1) if callee is not None else None
            if found is not None:
                self._markers[key] = found
                break
        return self._markers[key]

    def reached(self, caller: FunctionInfo, call: cst.Call) -> GpuUse | None:
        """The GPU use `call` reaches in a helper: one of this module (followed), or one imported (a fact)."""
        callee = self.model.local_callee(caller, call)
        if callee is not None:
            marker = self.marker(callee, 1)
            if marker is None:
                return None
            owner = f"{callee.owner.node.name.value}." if callee.owner is not None else ""
            return GpuUse(call, marker, f"{owner}{callee.node.name.value}")
        imported = self._imported_function(call)
        if imported is None:
            return None
        return GpuUse(call, call, imported, (f"gpu:{imported.rsplit('.', 1)[-1]}",))

    def _imported_function(self, call: cst.Call) -> str | None:
        """The qualified name (`.gpu.helper`) of a lower-case function imported from another module
        (`from .gpu import helper`), whose summary only that module has."""
        func = call.func
        site = self.model.call_site(call)
        if site is None or not isinstance(func, cst.Name) or not func.value[:1].islower():
            return None
        binding = self.model.reaching_binding(func.value, site.scope, site.index)
        if binding is None or binding.kind != "import" or from_library(binding):
            return None
        if binding.imported is not None:
            return binding.imported
        statement = binding.statement  # a relative import, which the model leaves unqualified
        imports = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else statement
        if isinstance(imports, cst.ImportFrom) and isinstance(binding.node, cst.ImportAlias):
            module = dotted_name(imports.module) if imports.module is not None else ""
            return f"{'.' * len(imports.relative)}{module}{'.' if module else ''}{binding.node.evaluated_name}"
        return func.value


def _calls(model: SemanticModel, function: FunctionInfo) -> Iterator[cst.CSTNode]:
    """The calls of the body that run whenever it does, in order (and `ray.get_gpu_ids()[k]` subscripts):
    not under a condition about GPUs, not in nested functions, not handing GPU settings to Ray's libraries."""
    stack: list[cst.CSTNode] = [function.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, (cst.If, cst.IfExp, cst.While)) and _mentions_gpu(node.test):
            continue
        if isinstance(node, cst.Subscript) and _indexes_gpu_ids(model, node):
            yield node
            continue
        if isinstance(node, cst.Call):
            if any(arg.keyword is not None and arg.keyword.value in DELEGATING_KEYWORDS for arg in node.args):
                continue
            yield node
        children = list(child_nodes(node))
        if isinstance(node, cst.IndentedBlock):  # `if not ray.get_gpu_ids(): return ...`: the rest runs only on a GPU
            guard = next((i for i, child in enumerate(children) if _gpu_guard(child)), None)
            children = children if guard is None else children[: guard + 1]
        stack.extend(reversed(children))


def _gpu_guard(statement: cst.CSTNode) -> bool:
    """An `if` about GPUs whose body always leaves (`if not ray.get_gpu_ids(): return cpu_result`)."""
    if not isinstance(statement, cst.If) or not _mentions_gpu(statement.test):
        return False
    body = statement.body.body
    last = body[-1] if body else None
    inner = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last
    return isinstance(inner, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _uses_gpu(model: SemanticModel, call: cst.CSTNode) -> bool:
    if isinstance(call, cst.Subscript):  # `ray.get_gpu_ids()[0]`, found by `_calls`
        return True
    assert isinstance(call, cst.Call)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
        return True
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    if isinstance(func, cst.Attribute) and func.attr.value == "to" and _is_cuda(first):
        return True
    if any(arg.keyword is not None and arg.keyword.value == "device" and _is_cuda(arg.value) for arg in call.args):
        return True
    if isinstance(func, cst.Subscript) and _is_cuda_kernel(model, func.value):
        return True
    site = model.call_site(call)
    name = model.call_name(site) if site is not None else None
    if name is None:
        return False
    if name.startswith("torch.cuda."):
        return name.split(".")[2] not in PROBES
    if name.startswith(("cupy.", "numba.cuda.")) or name == "cupy":
        return True
    text = (literal_string(first) or "").lower()
    if name == "torch.device":
        return text.startswith("cuda")
    if name == "tensorflow.device":
        return "gpu" in text
    if name == "jax.devices":
        return text in ("gpu", "cuda")
    return False


def _is_cuda_kernel(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """A function decorated with `@cuda.jit` (Numba): `kernel[blocks, threads](a)` launches it on the GPU."""
    if not isinstance(expr, cst.Name):
        return False
    binding = model.reaching_binding(expr.value, model.module_scope, AFTER_ALL)
    if binding is None or binding.kind != "def" or not isinstance(binding.node, cst.FunctionDef):
        return False
    for decorator in binding.node.decorators:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        if model.qualified_name(target, model.module_scope, AFTER_ALL) == "numba.cuda.jit":
            return True
    return False


def _indexes_gpu_ids(model: SemanticModel, subscript: cst.Subscript) -> bool:
    """`ray.get_gpu_ids()[0]`: the id of a GPU Ray assigned, which a task without `num_gpus` does not get
    (the list is empty, and the index raises IndexError)."""
    call = subscript.value
    if not isinstance(call, cst.Call):
        return False
    site = model.call_site(call)
    return site is not None and model.call_name(site) == "ray.get_gpu_ids"


def _is_cuda(expr: cst.BaseExpression | None) -> bool:
    return (literal_string(expr) or "").lower().startswith("cuda")


def _mentions_gpu(test: cst.BaseExpression) -> bool:
    """A condition about GPUs (`torch.cuda.is_available()`, `use_gpu`, `device == "cuda"`): the code
    under it has a CPU path."""
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        text = None
        if isinstance(node, cst.Name):
            text = node.value
        elif isinstance(node, cst.Attribute):
            text = node.attr.value
        elif isinstance(node, cst.SimpleString):
            text = literal_string(node)
        if text is not None and any(word in text.lower() for word in GPU_WORDS):
            return True
        stack.extend(child_nodes(node))
    return False
