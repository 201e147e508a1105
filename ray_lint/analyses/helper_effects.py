"""What a function does one call away: an effect a rule cares about (using a GPU, forking a process),
found in the function's own body or in a helper it calls.

Helpers are followed through the module's own functions and the methods of the same class
(`self.load_model()`), to `MAX_HELPER_DEPTH` calls; a helper imported from another module of the
project is known through a project fact, `<kind>:<name>`, which the helper's module gives (`facts`).
Each effect is a subclass: which calls of a body count (`calls`) and which of them have the effect
(`has_effect`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.waits import from_library
from ray_lint.model import SemanticModel
from ray_lint.python_model import FunctionInfo, dotted_name

# How many helper calls deep an effect is followed within one module.
MAX_HELPER_DEPTH = 3


@dataclass(frozen=True)
class Effect:
    """A call in a function's body that has the effect, itself or through `helper`."""

    call: cst.CSTNode  # the call in the function's own body
    marker: cst.CSTNode  # where the effect happens: `call` itself, or the call inside the helper
    helper: str | None = None  # the function or method the call reaches it through (qualified when imported)
    requires: tuple[str, ...] = ()  # the project facts it needs: a helper that another module defines
    callee: FunctionInfo | None = None  # the helper, when it is this module's


class HelperEffects:
    """The module's functions that have the effect, directly or through helpers of the module, memoized."""

    kind: str  # the project fact's kind: `gpu` gives `gpu:<name>`

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._markers: dict[int, cst.CSTNode | None] = {}

    def calls(self, function: FunctionInfo) -> Iterator[cst.CSTNode]:
        """The calls of `function`'s body that may have the effect, in order."""
        raise NotImplementedError

    def has_effect(self, call: cst.CSTNode) -> bool:
        raise NotImplementedError

    def marker_of(self, call: cst.CSTNode) -> cst.CSTNode:
        """Where a call that has the effect shows it."""
        return call

    def effects(self, function: FunctionInfo) -> Iterator[Effect]:
        """The effects of `function`'s body, in order: its own, then those of helpers it calls."""
        for call in self.calls(function):
            if self.has_effect(call):
                yield Effect(call, self.marker_of(call))
                continue
            found = self.reached(function, call) if isinstance(call, cst.Call) else None
            if found is not None:
                yield found

    def facts(self) -> Iterator[str]:
        """`<kind>:<name>` for each module-level function with the effect, for the project's other modules."""
        for info in self.model.functions:
            if info.parent_scope is self.model.module_scope and self.marker(info) is not None:
                yield f"{self.kind}:{info.node.name.value}"

    def marker(self, info: FunctionInfo, depth: int = 0) -> cst.CSTNode | None:
        """Where `info` has the effect, or None (also past `MAX_HELPER_DEPTH`, and while it is being asked: recursion)."""
        key = id(info.node)
        if key in self._markers:
            return self._markers[key]
        if depth > MAX_HELPER_DEPTH:
            return None
        self._markers[key] = None  # a recursive call asks again: no effect through itself
        for call in self.calls(info):
            if self.has_effect(call):
                found: cst.CSTNode | None = self.marker_of(call)
            else:
                callee = self.model.local_callee(info, call) if isinstance(call, cst.Call) else None
                found = self.marker(callee, depth + 1) if callee is not None else None
            if found is not None:
                self._markers[key] = found
                break
        return self._markers[key]

    def reached(self, caller: FunctionInfo, call: cst.Call) -> Effect | None:
        """The effect `call` reaches in a helper: one of this module (followed), or one imported (a fact)."""
        callee = self.model.local_callee(caller, call)
        if callee is not None:
            marker = self.marker(callee, 1)
            if marker is None:
                return None
            owner = f"{callee.owner.node.name.value}." if callee.owner is not None else ""
            return Effect(call, marker, f"{owner}{callee.node.name.value}", callee=callee)
        imported = self._imported_function(call)
        if imported is None:
            return None
        return Effect(call, call, imported, requires=(f"{self.kind}:{imported.rsplit('.', 1)[-1]}",))

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
