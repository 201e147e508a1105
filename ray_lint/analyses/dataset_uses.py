"""What becomes of the dataset a Ray Data call returns: the method calls made on it, in the same chain
(`ds.random_shuffle().iter_batches()`) or through a name bound to it. Shared by the rules that judge an
operation by what follows it (a global shuffle only iterated, a repartition only mapped)."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite


class DatasetUses:
    """The method calls made on a call's result. Get one with `model.analysis(DatasetUses)`."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def _calls_on(self) -> dict[int, CallSite]:
        """Each method call by the id of its receiver expression."""
        return {
            id(site.node.func.value): site for site in self.model.calls if isinstance(site.node.func, cst.Attribute)
        }

    def method_calls_on(self, site: CallSite) -> list[tuple[str, CallSite]] | None:
        """The method calls on what `site` returns, with their method names: the next call of its chain, or
        every call on the name a plain `name = <site>` binds. None when the result is used in another way
        (passed, returned, stored, read outside a method call) or not at all: nothing can be said then.
        Through a name, every read of that name in the file must be a method call on this binding."""
        chained = self._calls_on.get(id(site.node))
        if chained is not None:
            return [(chained.node.func.attr.value, chained)]  # type: ignore[attr-defined]
        statement = site.statement
        if not isinstance(statement, cst.Assign) or statement.value is not site.node or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, cst.Name):
            return None
        binding = next((b for b in site.scope.bindings.get(target.value, ()) if b.value is site.node), None)
        if binding is None:
            return None
        uses: list[tuple[str, CallSite]] = []
        for other in self.model.calls:
            func = other.node.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == target.value):
                continue
            if self.model.reaching_binding(target.value, other.scope, other.index) is not binding:
                return None
            uses.append((func.attr.value, other))
        if not uses or len(uses) != self.model.read_counts[target.value]:
            return None
        return uses
