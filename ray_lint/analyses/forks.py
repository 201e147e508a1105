"""Where a process is forked: the calls that fork, and the functions that fork one call away.

A call forks when it is `os.fork()` or `os.forkpty()`, or when `multiprocessing`'s `Pool`, `Process`
or `Manager` (also those of `torch.multiprocessing` and of `multiprocess`, its dill-based fork) or
`concurrent.futures.ProcessPoolExecutor` start their processes by fork: with the default start method
(fork on Linux before Python 3.14) in a module that sets no other, or with a `get_context("fork")`
context. Helpers are followed as `ray_lint.analyses.helper_effects` says, under any condition (a pool
made only when `workers > 1` is still made); one imported from another module of the project is known
through the project fact `forks:<name>` (`fork_facts`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.analyses.helper_effects import Effect, HelperEffects
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, FunctionInfo, child_nodes, literal_string
from ray_lint.ray_api import keyword_arg

MP_MODULES = ("multiprocessing", "torch.multiprocessing", "multiprocess")  # `multiprocess`: the dill-based fork
# Calls that always fork, whatever the start method.
ALWAYS_FORK = frozenset({"os.fork", "os.forkpty"})
# Factories that start their processes with the default start method (fork on Linux before Python 3.14).
DEFAULT_CONTEXT = frozenset(
    {
        *(f"{module}.{name}" for module in MP_MODULES for name in ("Pool", "Process", "Manager")),
        "multiprocessing.pool.Pool",
        "multiprocess.pool.Pool",
        "multiprocessing.managers.SyncManager",
    }
)
EXECUTORS = frozenset({"concurrent.futures.ProcessPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor"})
CONTEXT_METHODS = frozenset({"Pool", "Process", "Manager"})  # what a `get_context(...)` object makes
GET_CONTEXT = frozenset(f"{module}.get_context" for module in MP_MODULES)
SET_START_METHOD = frozenset(f"{module}.set_start_method" for module in MP_MODULES)
# The last names of the calls `how_it_forks` may report (an alias, `from multiprocessing import Pool as P`,
# is followed in a task's own body but not in its helpers).
FORKING_NAMES = frozenset({"fork", "forkpty", *CONTEXT_METHODS, "SyncManager", "ProcessPoolExecutor"})
# A module without one of these forks nothing `fork_facts` reports (its pre-filter).
FORK_TOKENS = ("fork", "Pool(", "Process(", "Manager(", "ProcessPoolExecutor")


def start_method_set(model: SemanticModel) -> bool:
    """Whether the module sets a start method other than fork (a non-literal one counts: it may)."""
    for name in SET_START_METHOD:
        for site in model.calls_to(name):
            method = site.node.args[0].value if site.node.args else None
            if literal_string(method) != "fork":
                return True
    return False


def how_it_forks(model: SemanticModel, site: CallSite, start_method_set: bool) -> str | None:
    """How the call forks ("forks this process", "starts its workers by fork", ...), or None when it does
    not, or may not."""
    name = model.call_name(site)
    if name in ALWAYS_FORK:
        return "forks this process"
    call = site.node
    if name in DEFAULT_CONTEXT:
        context = keyword_arg(call, "context") or keyword_arg(call, "ctx")
        if context is not None:
            return "starts its processes by fork" if context_method(model, context.value, site) == "fork" else None
        return None if start_method_set else "starts its processes by fork"
    if name in EXECUTORS:
        context = keyword_arg(call, "mp_context")
        if context is None and len([a for a in call.args if a.keyword is None]) >= 2:
            return None  # `ProcessPoolExecutor(4, ctx)`: a context given by position
        if context is not None:
            return "starts its workers by fork" if context_method(model, context.value, site) == "fork" else None
        return None if start_method_set else "starts its workers by fork"
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in CONTEXT_METHODS:
        method = context_method(model, func.value, site)
        if method == "fork" or (method == "default" and not start_method_set):
            return "starts its processes by fork"
    return None


def context_method(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> str | None:
    """The start method of a `get_context(...)` value: "fork", "default" (no argument), another literal,
    or None when `expr` is not known to be a context or its method is not literal."""
    if isinstance(expr, cst.Name):
        binding = model.sole_assignment(expr.value, site.scope, site.index)
        if binding is None or binding.value is None:
            return None
        expr = binding.value
        scope, at = binding.scope, binding.index
    else:
        scope, at = site.scope, site.index
    if not isinstance(expr, cst.Call) or model.qualified_name(expr.func, scope, at) not in GET_CONTEXT:
        return None
    argument = keyword_arg(expr, "method") or next((a for a in expr.args if a.keyword is None), None)
    if argument is None:
        return "default"
    if isinstance(argument.value, cst.Name) and argument.value.value == "None":
        return "default"
    return literal_string(argument.value)


def forks_in_helpers(model: SemanticModel, function: FunctionInfo) -> Iterator[Effect]:
    """The calls of `function`'s body that fork one or more calls away, in a helper (not themselves)."""
    helpers = model.analysis(_ForkHelpers)
    for effect in helpers.effects(function):
        if effect.helper is not None:
            yield effect


def fork_facts(model: SemanticModel, text: str) -> Iterator[str]:
    """`forks:<name>` for each module-level function that forks, for the project's other modules."""
    if any(token in text for token in FORK_TOKENS):
        yield from model.analysis(_ForkHelpers).facts()


class _ForkHelpers(HelperEffects):
    kind = "forks"

    def __init__(self, model: SemanticModel) -> None:
        super().__init__(model)
        self.start_method_set = start_method_set(model)

    def calls(self, function: FunctionInfo) -> Iterator[cst.CSTNode]:
        """The calls of the body, in order; not those of nested functions, classes or lambdas."""
        stack: list[cst.CSTNode] = [function.node.body]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(node, cst.Call):
                yield node
            stack.extend(reversed(list(child_nodes(node))))

    def has_effect(self, call: cst.CSTNode) -> bool:
        if not isinstance(call, cst.Call):
            return False
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last not in FORKING_NAMES:
            return False
        site = self.model.call_site(call)
        return site is not None and how_it_forks(self.model, site, self.start_method_set) is not None
