"""Where a function uses a GPU: in its own body, or one call away in a helper it calls.

A call uses a GPU when it moves data or a model to CUDA (`.cuda()`, `.to("cuda")`, `device="cuda"`),
calls `torch.cuda`, CuPy or Numba CUDA, asks TensorFlow or JAX for a GPU device, launches a
`@cuda.jit` kernel (`kernel[blocks, threads](a)`), or indexes the GPU ids Ray assigned
(`ray.get_gpu_ids()[0]`). Code under a condition about GPUs (`if torch.cuda.is_available():`), or
after a guard about them that leaves (`if not ray.get_gpu_ids(): return ...`), has a CPU path and
does not count, nor do nested functions, nor calls that hand GPU settings to Ray Train
or Ray Data (`use_gpu=True`), which schedule that work themselves.

Helpers are followed as `ray_lint.analyses.helper_effects` says; a helper imported from another module
of the project is known through the project fact `gpu:<name>` (`gpu_facts`), which its module gives.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.analyses.helper_effects import Effect, HelperEffects
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, FunctionInfo, child_nodes, literal_string

# `torch.cuda` functions that only ask whether a GPU is there.
PROBES = frozenset({"is_available", "device_count", "is_initialized"})
# Keywords that hand GPU settings to Ray Train or Ray Data, which schedule the GPU work themselves.
DELEGATING_KEYWORDS = frozenset({"num_gpus", "use_gpu", "resources_per_worker", "accelerator_type"})
GPU_WORDS = ("cuda", "gpu")
# A module without one of these uses no GPU in a way `gpu_facts` reports (its pre-filter, which also
# decides whether a module that no rule reads is parsed for its facts: "GPU" alone is in every
# `resources={"GPU": 1}` and would parse hundreds of modules of Ray's own tree for nothing).
GPU_TOKENS = (".cuda(", "'cuda", '"cuda', "torch.cuda.", "cupy", "numba", "get_gpu_ids", "/GPU", "jax.devices")


def gpu_uses(model: SemanticModel, function: FunctionInfo) -> Iterator[Effect]:
    """The GPU uses of `function`'s body, in order: its own, then those of helpers it calls."""
    return model.analysis(_GpuHelpers).effects(function)


def may_use_gpu(text: str) -> bool:
    return any(token in text for token in GPU_TOKENS)


def gpu_facts(model: SemanticModel, text: str) -> Iterator[str]:
    """`gpu:<name>` for each module-level function that uses a GPU, for the project's other modules."""
    if may_use_gpu(text):
        yield from model.analysis(_GpuHelpers).facts()


class _GpuHelpers(HelperEffects):
    kind = "gpu"

    def calls(self, function: FunctionInfo) -> Iterator[cst.CSTNode]:
        return _calls(self.model, function)

    def has_effect(self, call: cst.CSTNode) -> bool:
        return _uses_gpu(self.model, call)

    def marker_of(self, call: cst.CSTNode) -> cst.CSTNode:
        return call.value if isinstance(call, cst.Subscript) else call  # `ray.get_gpu_ids()`, not its `[0]`


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
