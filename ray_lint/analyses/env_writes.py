"""Environment variables a module sets for Ray's workers: writes to the driver's environment (which a
local cluster's workers inherit) and the `env_vars` of a `runtime_env` (which Ray sets in every worker
the runtime environment applies to). Rules about particular variables (thread counts, the object
store's share of memory) judge the values; this module only finds the writes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, Scope, literal_string


@dataclass(frozen=True)
class EnvWrite:
    """One variable set to one value: `node` is where to report it; `site` is the call whose `runtime_env`
    (or `env_vars`) holds it, None for a write to the driver's own environment."""

    node: cst.CSTNode
    variable: str
    value: cst.BaseExpression
    scope: Scope
    at: int
    site: CallSite | None = None


def environ_writes(model: SemanticModel) -> Iterator[EnvWrite]:
    """`os.environ[KEY] = value`, `os.environ.setdefault/update(...)` and `os.putenv(KEY, value)`, with a literal KEY."""
    for store in model.stores:
        target = store.target
        if store.kind != "assign" or store.value is None or not isinstance(target, cst.Subscript):
            continue
        if model.qualified_name(target.value, store.scope, store.index) != "os.environ" or len(target.slice) != 1:
            continue
        index = target.slice[0].slice
        key = literal_string(index.value) if isinstance(index, cst.Index) else None
        if key is not None:
            yield EnvWrite(store.statement, key, store.value, store.scope, store.index)
    for name in ("os.environ.setdefault", "os.putenv"):
        for site in model.calls_to(name):
            args = site.node.args
            if len(args) == 2 and args[0].keyword is None and (key := literal_string(args[0].value)) is not None:
                yield EnvWrite(site.node, key, args[1].value, site.scope, site.index)
    for site in model.calls_to("os.environ.update"):
        for arg in site.node.args:
            if arg.keyword is not None:
                yield EnvWrite(site.node, arg.keyword.value, arg.value, site.scope, site.index)
            elif isinstance(arg.value, cst.Dict):
                for element in arg.value.elements:
                    if isinstance(element, cst.DictElement) and (key := literal_string(element.key)) is not None:
                        yield EnvWrite(site.node, key, element.value, site.scope, site.index)


def runtime_env_writes(model: SemanticModel) -> Iterator[EnvWrite]:
    """The literal entries of `runtime_env={"env_vars": {...}}` (or `env_vars={...}`) given to any call
    (`ray.init`, `@ray.remote`, `.options`, `JobConfig`...), through one name for each dict; each reported
    at its key."""
    for site in model.calls:
        for arg in site.node.args:
            if arg.keyword is None or arg.keyword.value not in ("runtime_env", "env_vars"):
                continue
            for element in _env_vars(model, site, arg):
                variable = literal_string(element.key)
                if variable is not None:
                    yield EnvWrite(element.key, variable, element.value, site.scope, site.index, site)


def _env_vars(model: SemanticModel, site: CallSite, arg: cst.Arg) -> Iterator[cst.DictElement]:
    """The entries of `env_vars` in a `runtime_env=` (or `env_vars=`) argument, through one name."""
    variables: cst.BaseExpression | None = arg.value
    if arg.keyword is not None and arg.keyword.value == "runtime_env":
        runtime_env = _dict_value(model, arg.value, site)
        variables = _entry(runtime_env, "env_vars") if runtime_env is not None else None
    env = _dict_value(model, variables, site) if variables is not None else None
    if env is not None:
        for element in env.elements:
            if isinstance(element, cst.DictElement):
                yield element


def _dict_value(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> cst.Dict | None:
    """A dict literal, or the dict literal a name was last bound to."""
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, site.scope, site.index)
        expr = binding.value if binding is not None and binding.kind == "assign" and binding.value is not None else expr
    return expr if isinstance(expr, cst.Dict) else None


def _entry(mapping: cst.Dict, key: str) -> cst.BaseExpression | None:
    for element in mapping.elements:
        if isinstance(element, cst.DictElement) and literal_string(element.key) == key:
            return element.value
    return None
