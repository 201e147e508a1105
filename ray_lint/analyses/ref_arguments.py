"""What a value given to `ray.get` or `ray.wait` provably is, when it cannot be what they accept (one
ObjectRef or a list of them): another collection, or a literal that cannot be an ObjectRef. Shared by
the rules that check both calls."""

from __future__ import annotations

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import Scope, literal_number

# Builtins that make a collection or an iterator that is not a list (`ray.get` and `ray.wait` accept only lists).
NON_LIST_BUILTINS = {
    "tuple": "a tuple",
    "set": "a set",
    "frozenset": "a frozenset",
    "dict": "a dict",
    "map": "a `map` iterator",
    "filter": "a `filter` iterator",
    "zip": "a `zip` iterator",
    "reversed": "a `reversed` iterator",
    "iter": "an iterator",
    "enumerate": "an `enumerate` iterator",
    "range": "a range",
}
NON_LIST_FUNCTIONS = {
    "itertools.chain": "an `itertools.chain` iterator",
    "itertools.islice": "an `itertools.islice` iterator",
    "collections.deque": "a deque",
}
DICT_MAKERS = ("collections.defaultdict", "collections.OrderedDict")
DICT_VIEWS = ("values", "keys", "items")


def _is_builtin(model: SemanticModel, name: str, scope: Scope, at: int) -> bool:
    """Whether a plain name is the builtin: nothing in the module binds it, and no star import may."""
    return model.reaching_binding(name, scope, at) is None and not model.star_imports


def _sole_assignment(model: SemanticModel, name: cst.Name, scope: Scope, at: int) -> cst.BaseExpression | None:
    binding = model.sole_assignment(name.value, scope, at)
    return binding.value if binding is not None else None


def _is_dict(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
    """Whether `expr` is provably a dict: a dict display or comprehension, `dict(...)`, a `defaultdict` or
    `OrderedDict`, or a name assigned one of those once."""
    if isinstance(expr, cst.Name):
        value = _sole_assignment(model, expr, scope, at)
        return value is not None and not isinstance(value, cst.Name) and _is_dict(model, value, scope, at)
    if isinstance(expr, (cst.Dict, cst.DictComp)):
        return True
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name) and expr.func.value == "dict" and _is_builtin(model, "dict", scope, at):
            return True
        return model.qualified_name(expr.func, scope, at) in DICT_MAKERS
    return False


def non_list_collection(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, follow: bool = True) -> str | None:
    """What `expr` is when it is provably a collection or iterator other than a list ("a tuple", "a set",
    "a generator expression", "a dict view", ...): `ray.get` and `ray.wait` reject all of these. A name
    counts when its only binding is such a value."""
    if isinstance(expr, cst.Tuple):
        return "a tuple"
    if isinstance(expr, (cst.Set, cst.SetComp)):
        return "a set"
    if isinstance(expr, (cst.Dict, cst.DictComp)):
        return "a dict"
    if isinstance(expr, cst.GeneratorExp):
        return "a generator expression"
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in NON_LIST_BUILTINS and _is_builtin(model, func.value, scope, at):
            return NON_LIST_BUILTINS[func.value]
        qualified = model.qualified_name(func, scope, at)
        if qualified in NON_LIST_FUNCTIONS:
            return NON_LIST_FUNCTIONS[qualified]
        if qualified in DICT_MAKERS:
            return "a dict"
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in DICT_VIEWS
            and not expr.args
            and _is_dict(model, func.value, scope, at)
        ):
            return f"a dict view (`.{func.attr.value}()`)"
        return None
    if follow and isinstance(expr, cst.Name):
        value = _sole_assignment(model, expr, scope, at)
        if value is not None:
            found = non_list_collection(model, value, scope, at, follow=False)
            return f"{found} (assigned to `{expr.value}`)" if found else None
    return None


# What `non_ref_literal` calls the literals it finds; every other kind `item_problem` gives is a collection.
LITERAL_KINDS = ("a number", "a string", "bytes", "a bool", "None", "a lambda")


def non_ref_literal(expr: cst.BaseExpression) -> str | None:
    """What a literal that cannot be an ObjectRef is: a number, a string, bytes, a bool, None or a lambda."""
    if literal_number(expr) is not None or isinstance(expr, cst.Imaginary):
        return "a number"
    if isinstance(expr, cst.SimpleString):
        return "bytes" if "b" in expr.prefix.lower() else "a string"
    if isinstance(expr, (cst.ConcatenatedString, cst.FormattedString)):
        return "a string"
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return "a bool"
    if isinstance(expr, cst.Name) and expr.value == "None":
        return "None"
    if isinstance(expr, cst.Lambda):
        return "a lambda"
    return None


def item_problem(
    model: SemanticModel, elements: list[cst.BaseExpression], scope: Scope, at: int,
) -> tuple[cst.BaseExpression, str] | None:
    """The first item of a list display that provably is not an ObjectRef: a literal, or a collection
    (the list of refs wrapped in another, `ray.wait([refs])`)."""
    for element in elements:
        kind = non_ref_literal(element) or _collection(model, element, scope, at)
        if kind is not None:
            return element, kind
    return None


def _collection(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> str | None:
    """What `expr` is when it is provably a list or another collection: a display, a comprehension, or a
    name assigned one once."""
    if isinstance(expr, (cst.List, cst.ListComp)):
        return "a list"
    if isinstance(expr, cst.Name):
        value = _sole_assignment(model, expr, scope, at)
        if isinstance(value, (cst.List, cst.ListComp)):
            return f"a list (assigned to `{expr.value}`)"
    return non_list_collection(model, expr, scope, at)

