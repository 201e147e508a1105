"""Ray facts about Ray's libraries, as `ray_lint.model` knows Ray Core: Data's datasets (`data`), Train's
training loops (`train`), Tune's trainables (`tune`) and Serve's deployments (`serve`), resolved through
imports and aliases.

Each family is an analysis layered on the model (`model.analysis(...)`), built on a rule's first
question, so a file that no library rule reads pays nothing. Names resolve with the model's own
tables (`qualified_name`, `reaching_binding`); nothing here imports Ray or its libraries.
"""

from __future__ import annotations

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import ClassInfo, FunctionInfo, Scope

# Pre-filter tokens: a file without one of them holds nothing for that library's rules. Whole import
# forms, not bare words: "serve" is in "preserve", "import data" in "import dataclasses".
DATA_TOKENS = ("ray.data", "ray import data")  # ", data" would be every `(self, data)`
TRAIN_TOKENS = ("ray.train", "ray import train", ", train")
TUNE_TOKENS = ("ray.tune", "ray import tune", ", tune")
SERVE_TOKENS = ("ray.serve", "ray import serve", ", serve")
# Calls that start a run, which the Train and Tune facts read in the same module (the loop or trainable a
# trainer or Tuner is handed): rules about those need one of them besides the library's import, so that
# Ray's own library source, which imports the library everywhere, is not parsed for them.
TRAINER_CALL_TOKENS = ("Trainer(",)
TUNE_RUN_TOKENS = ("Tuner(", "tune.run(")


def defined_function_or_class(
    model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int
) -> FunctionInfo | ClassInfo | None:
    """The function or class of this module that a name refers to (`functools.partial(f, ...)` counts as f)."""
    if isinstance(expr, cst.Call) and model.qualified_name(expr.func, scope, at) == "functools.partial" and expr.args:
        expr = expr.args[0].value
    if not isinstance(expr, cst.Name):
        return None
    binding = model.reaching_binding(expr.value, scope, at)
    if binding is None:
        return None
    if binding.kind == "def" and isinstance(binding.node, cst.FunctionDef):
        return model.function_info(binding.node)
    if binding.kind == "class" and isinstance(binding.node, cst.ClassDef):
        return model.class_info(binding.node)
    return None


def keyword_value(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def is_self_attribute(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"
