"""Ray Serve: deployments, their methods, and what a `DeploymentHandle` call returns."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from ray_lint.libraries import (
    defined_function_or_class,
    is_self_attribute,
    keyword_value,
)
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, ClassInfo, FunctionInfo, Scope, dotted_name

DEPLOYMENT = "ray.serve.deployment"
BATCH = "ray.serve.batch"
# Calls that return a `DeploymentHandle`.
HANDLE_MAKERS = ("ray.serve.get_deployment_handle", "ray.serve.get_app_handle", "ray.serve.run")


@dataclass(eq=False, repr=False)
class Deployment:
    """A `@serve.deployment` class or function (or one made with `serve.deployment(Cls)`)."""

    name: str
    node: cst.ClassDef | cst.FunctionDef


class ServeFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def deployments(self) -> dict[int, Deployment]:
        """Deployments by the id of their class or function node."""
        model = self.model
        found: dict[int, Deployment] = {}
        definitions: list[FunctionInfo | ClassInfo] = [*model.functions, *model.classes]
        for info in definitions:
            scope = info.parent_scope if isinstance(info, FunctionInfo) else info.scope.parent
            for decorator in info.node.decorators:
                expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
                if scope is not None and model.qualified_name(expr, scope, AFTER_ALL) == DEPLOYMENT:
                    found[id(info.node)] = Deployment(info.node.name.value, info.node)
        for site in model.calls_to(DEPLOYMENT):  # `serve.deployment(Cls)` and `serve.deployment(...)(Cls)`
            target = defined_function_or_class(model, site.node.args[0].value, site.scope, site.index) if site.node.args else None
            if target is not None and id(target.node) not in found:
                found[id(target.node)] = Deployment(target.node.name.value, target.node)
        return found

    def deployment_of_scope(self, scope: Scope) -> tuple[Deployment, FunctionInfo] | None:
        """The deployment and its method (or the function deployment itself) whose own scope is `scope`'s function."""
        function_scope = scope.function
        if function_scope is None or not isinstance(function_scope.node, cst.FunctionDef):
            return None
        info = self.model.function_info(function_scope.node)
        if info is None:
            return None
        owner = info.owner.node if info.owner is not None else info.node
        deployment = self.deployments.get(id(owner))
        return (deployment, info) if deployment is not None else None

    def is_batched(self, method: FunctionInfo) -> bool:
        """Whether the method is a `@serve.batch` handler: Serve gathers requests into one call of it."""
        for decorator in method.node.decorators:
            expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if self.model.qualified_name(expr, method.parent_scope, AFTER_ALL) == BATCH:
                return True
        return False

    def is_handle_response(self, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> bool:
        """Whether `expr` is what a `DeploymentHandle` call returns, a `DeploymentResponse`:
        `<handle>.remote(...)` or `<handle>.<method>.remote(...)`, with `.options(...)` anywhere in the
        chain (but not `stream=`, which returns a `DeploymentResponseGenerator`), where `<handle>` is one
        by `is_handle`; a name bound to such a call; or the target of a loop over a collection of them
        (`for response in responses`)."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Name):
            target = self.model.reaching_binding(expr.value, scope, at)
            if target is not None and target.kind == "loop-target" and target.source is not None:
                return self._all_responses(target.source, target.scope, target.index, depth + 1)
            binding = self.model.sole_assignment(expr.value, scope, at)
            return binding is not None and self.is_handle_response(binding.value, binding.scope, binding.index, depth + 1)  # type: ignore[arg-type]
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "remote"):
            return False
        receiver = _without_options(expr.func.value)
        if isinstance(receiver, cst.Attribute) and not is_self_attribute(receiver):
            receiver = _without_options(receiver.value)  # `handle.method.remote`
        return receiver is not None and self.is_handle(receiver, scope, at)

    def _all_responses(self, expr: cst.BaseExpression, scope: Scope, at: int, depth: int) -> bool:
        """Whether every item of a list, tuple or comprehension (or of the one a name is bound to) is a
        `DeploymentResponse`: what a loop over it binds its target to."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Name):
            binding = self.model.sole_assignment(expr.value, scope, at)
            return binding is not None and self._all_responses(binding.value, binding.scope, binding.index, depth + 1)  # type: ignore[arg-type]
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self.is_handle_response(expr.elt, scope, at, depth + 1)
        if isinstance(expr, (cst.List, cst.Tuple)):
            items = [item.value for item in expr.elements if isinstance(item, cst.Element)]
            return bool(items) and len(items) == len(expr.elements) and all(
                self.is_handle_response(item, scope, at, depth + 1) for item in items
            )
        return False

    def is_handle(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """A handle whose calls return `DeploymentResponse`s: `self.x` in a deployment where `x` is one; a
        name bound by `serve.get_*_handle(...)` or by `serve.run(...)` (which returns the ingress
        deployment's handle); a parameter annotated `DeploymentHandle`; an unannotated parameter of a
        deployment's `__init__`; or `<handle>.options(...)` without `stream=` (a streaming handle's calls
        return generators)."""
        model = self.model
        if isinstance(expr, cst.Call):
            plain = _without_options(expr)
            if plain is not expr:
                return plain is not None and self.is_handle(plain, scope, at)
            return (model.qualified_name(expr.func, scope, at) or "") in HANDLE_MAKERS
        if isinstance(expr, cst.Name):
            binding = model.sole_assignment(expr.value, scope, at)
            if binding is not None:
                return self.is_handle(binding.value, binding.scope, binding.index)  # type: ignore[arg-type]
            binding = model.reaching_binding(expr.value, scope, at)
            return binding is not None and binding.kind == "param" and self._handle_param(binding.scope, binding.node)
        if is_self_attribute(expr):
            owner = self.deployment_of_scope(scope)
            if owner is None or owner[1].owner is None:
                return False
            stores = model.self_assignments(owner[1].owner, expr.attr.value)
            return bool(stores) and all(self.is_handle(s.value, s.scope, s.index) for s in stores)  # type: ignore[arg-type]
        return False

    def _handle_param(self, scope: Scope, param: cst.CSTNode) -> bool:
        """A parameter annotated `DeploymentHandle`, or an unannotated one of a deployment's `__init__`: how
        Serve hands a deployment the handles of the deployments bound to it."""
        annotation = param.annotation if isinstance(param, cst.Param) else None
        if annotation is not None:
            return (dotted_name(annotation.annotation) or "").endswith("DeploymentHandle")
        if not (isinstance(scope.node, cst.FunctionDef) and scope.node.name.value == "__init__"):
            return False
        return self.deployment_of_scope(scope) is not None


def _without_options(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`handle.options(...)` as `handle` (it returns a handle like it), repeatedly; None for
    `.options(stream=...)`, whose calls return a `DeploymentResponseGenerator` instead of a response."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "options":
        if keyword_value(expr, "stream") is not None:
            return None
        expr = expr.func.value
    return expr
