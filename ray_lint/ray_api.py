"""What Ray 2.60's API accepts, and how the code calls it: facts and call-site lookups that several rules
share, kept here so that no rule has to import another.

- calls: keyword arguments, signatures, `num_returns`, `.options(...)` at a call, tests that expect Ray
  to raise, `ray.init(ignore_reinit_error=...)`, Ray Data use;
- options: Ray's option tables for `ray.remote`, `.options(...)`, `@ray.method` and actor method calls;
- resources: the calls that request resources, their `resources=` dicts and quantities, and
  placement-group bundles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.model import RemoteDef, RemoteOptions, SemanticModel, Submission
from ray_lint.python_model import CallSite, iter_subtree, literal_number, literal_string

# ---------------------------------------------------------------------------------------------- calls

EXPECTING = ("raises", "assertRaises", "assertRaisesRegex")  # context managers of tests that expect an error


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    """The call's `name=` argument."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def value_text(value: cst.BaseExpression) -> str:
    """The source of an expression, for a message."""
    return cst.Module(body=[]).code_for_node(value)


def first_argument(call: cst.Call, keyword: str) -> cst.Arg | None:
    """The argument that fills the first parameter: the first positional one, or `keyword=`."""
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value == keyword:
            return arg
    return None


def signature_problem(call: cst.Call, function: str, keywords: tuple[str, ...]) -> tuple[cst.CSTNode, str] | None:
    """An argument that Python itself rejects for a function taking one positional parameter and the
    keyword-only `keywords`, and a short message saying so."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if len(positional) > 1:
        return positional[1], f"`{function}` takes one positional argument, so Python raises `TypeError`"
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value not in keywords:
            return arg, f"`{function}` has no keyword `{arg.keyword.value}`, so Python raises `TypeError`"
    return None


def expected_to_raise(model: SemanticModel) -> set[int]:
    """Ids of the nodes in the body of a `with pytest.raises(...)` or `with self.assertRaises(...)` block: code
    there is meant to fail (a test of Ray's own validation)."""
    inside: set[int] = set()
    for tail in EXPECTING:
        for site in model.calls_by_tail.get(tail, ()):
            statement = site.statement
            if not isinstance(statement, cst.With) or not any(item.item is site.node for item in statement.items):
                continue
            if tail == "raises" and model.call_name(site) != "pytest.raises":
                continue
            inside.update(id(node) for node in iter_subtree(statement.body))
    return inside


def tolerates_reinit(call: cst.Call) -> bool:
    """Whether a `ray.init` call may just find Ray running and reuse it: `ignore_reinit_error` not provably
    false, or `**kwargs`."""
    for arg in call.args:
        if arg.star == "**":
            return True
        if arg.keyword is not None and arg.keyword.value == "ignore_reinit_error":
            value = arg.value
            return not ((isinstance(value, cst.Name) and value.value in ("False", "None")) or literal_number(value) == 0)
    return False


def uses_ray_data(model: SemanticModel) -> bool:
    """Whether the file imports `ray.data` or calls something in it (`ray.data.read_parquet(...)`)."""
    if model.imports_module("ray.data"):
        return True
    return any((model.call_name(site) or "").startswith("ray.data.") for site in model.calls)


def remote_kind(remote: RemoteDef) -> str:
    """What Ray calls the definition, for a message: "actor class" or "remote function"."""
    return "actor class" if remote.kind == "actor" else "remote function"


def options_at_call(call: cst.Call) -> RemoteOptions | None:
    """The options of `x.options(...).remote(...)`, or None for a plain `x.remote(...)`."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        options = func.value
        if isinstance(options.func, cst.Attribute) and options.func.attr.value == "options":
            return RemoteOptions.from_call(options)
    return None


def declared_num_returns(model: SemanticModel, submission: Submission) -> list[cst.BaseExpression] | None:
    """Every `num_returns` the module gives for this submission (its decorator, its `@ray.method(...)`, its
    `.options(...)` at the call); None when the function is unknown or `**kwargs` may hold one."""
    remote = submission.remote
    if remote is None:
        return None
    values: list[cst.BaseExpression] = []
    if submission.kind == "task":
        if remote.options.has_unpacked:
            return None
        if "num_returns" in remote.options.values:
            values.append(remote.options.values["num_returns"])
    elif submission.kind == "actor-method" and remote.cls is not None and submission.method is not None:
        method = model.method(remote.cls, submission.method)
        if method is None:
            return None
        for decorator in method.node.decorators:
            if isinstance(decorator.decorator, cst.Call):
                for arg in decorator.decorator.args:
                    if arg.star == "**":
                        return None
                    if arg.keyword is not None and arg.keyword.value == "num_returns":
                        values.append(arg.value)
    else:
        return None
    at_call = options_at_call(submission.call)
    if at_call is not None:
        if at_call.has_unpacked:
            return None
        if "num_returns" in at_call.values:
            values.append(at_call.values["num_returns"])
    return values


# ---------------------------------------------------------------------------------------------- options

RemoteKind = Literal["task", "actor"]
NONE = type(None)
Check = Callable[[object], "str | None"]


@dataclass(frozen=True)
class OptionSpec:
    """One row of Ray's option table: the builtin types its `isinstance` check accepts (Ray's own classes,
    such as scheduling strategies, are never literals), and its value constraint, which returns Ray's error."""

    types: tuple[type, ...] | None  # None: not checked here
    check: Check | None = None


def _counting(name: str, infinite: bool = True) -> OptionSpec:
    """Ray's `_counting_option`: an int (or None) of at least 0, or -1 for infinity when `infinite`."""
    lowest = -1 if infinite else 0
    accepted = "None, 0, -1 or a positive integer, where -1 represents infinity" if infinite else "None, 0 or a positive integer"
    message = f"ValueError: The keyword '{name}' only accepts {accepted}."
    return OptionSpec((int, NONE), lambda x: None if x is None or x >= lowest else message)  # type: ignore[operator]


def _num_returns(x: object) -> str | None:
    if x is None or x in ("dynamic", "streaming"):
        return None
    if isinstance(x, str):
        return "TypeError: '>=' not supported between instances of 'str' and 'int'"
    return None if x >= 0 else "ValueError: The keyword 'num_returns' only accepts None, a non-negative integer, 'streaming' or 'dynamic'"  # type: ignore[operator]


def _positive_or_none(name: str) -> Check:
    return lambda x: None if x is None or x > 0 else f"ValueError: {name} must be a positive integer"  # type: ignore[operator]


_RESOURCE = OptionSpec(None)  # quantities: RAY047 (bad-resource-quantity)
# Mirrors Ray 2.60.0, python/ray/_common/ray_option_utils.py: `_common_options`, `_task_only_options` and
# `_actor_only_options` (types and value constraints). Values of `label_selector` and `fallback_strategy`
# (ray/_private/label_utils.py) are not mirrored, only their types.
COMMON_OPTIONS: dict[str, OptionSpec] = {
    "label_selector": OptionSpec((dict, NONE)),
    "fallback_strategy": OptionSpec((list, NONE)),
    "accelerator_type": OptionSpec((str, NONE)),
    "memory": _RESOURCE,
    "name": OptionSpec((str, NONE)),
    "num_cpus": _RESOURCE,
    "num_gpus": _RESOURCE,
    "object_store_memory": _counting("object_store_memory", infinite=False),
    "placement_group": OptionSpec((NONE, str)),  # or a PlacementGroup
    "placement_group_bundle_index": OptionSpec((int,)),
    "placement_group_capture_child_tasks": OptionSpec((bool, NONE)),
    "resources": OptionSpec((dict, NONE)),  # the dict's keys and quantities: RAY046, RAY047
    "runtime_env": OptionSpec((dict, NONE)),
    "scheduling_strategy": OptionSpec((NONE, str)),  # or a *SchedulingStrategy
    "enable_task_events": OptionSpec((bool,)),
    "_labels": OptionSpec((dict, NONE)),
}
TASK_ONLY_OPTIONS: dict[str, OptionSpec] = {
    "max_calls": _counting("max_calls", infinite=False),
    "max_retries": _counting("max_retries"),
    "num_cpus": _RESOURCE,
    "num_returns": OptionSpec((int, str, NONE), _num_returns),
    "object_store_memory": OptionSpec(
        (int, NONE), lambda x: None if x is None else "ValueError: Setting 'object_store_memory' is not implemented for tasks"
    ),
    "retry_exceptions": OptionSpec((bool, list, tuple)),  # list items: RAY094's `_retry_exception_problem`
    "_generator_backpressure_num_objects": OptionSpec(
        (int, NONE), lambda x: None if x != 0 else "ValueError: _generator_backpressure_num_objects=0 is not allowed"
    ),
    "_num_objects_per_yield": OptionSpec((int, NONE), _positive_or_none("_num_objects_per_yield")),
}
ACTOR_ONLY_OPTIONS: dict[str, OptionSpec] = {
    "concurrency_groups": OptionSpec((list, dict, NONE)),
    "enable_tensor_transport": OptionSpec((bool, NONE)),
    "lifetime": OptionSpec(
        (str, NONE),
        lambda x: None
        if x in (None, "detached", "non_detached")
        else "ValueError: actor `lifetime` argument must be one of 'detached', 'non_detached' and 'None'.",
    ),
    "max_concurrency": _counting("max_concurrency", infinite=False),
    "max_restarts": _counting("max_restarts"),
    "max_task_retries": _counting("max_task_retries"),
    "max_pending_calls": _counting("max_pending_calls"),
    "namespace": OptionSpec((str, NONE)),
    "get_if_exists": OptionSpec((bool,)),
    "allow_out_of_order_execution": OptionSpec((bool, NONE)),
    "_actor_generator_backpressure_num_objects": OptionSpec(
        (int, NONE),
        lambda x: None if x is None or x > 0 or x == -1 else "ValueError: _actor_generator_backpressure_num_objects must be > 0, or -1",  # type: ignore[operator]
    ),
}
# As in Ray: `task_options = {**_common_options, **_task_only_options}`, and likewise for actors.
REMOTE_OPTIONS: dict[RemoteKind, dict[str, OptionSpec]] = {
    "task": {**COMMON_OPTIONS, **TASK_ONLY_OPTIONS},
    "actor": {**COMMON_OPTIONS, **ACTOR_ONLY_OPTIONS},
}
ALL_OPTION_NAMES = sorted(set(REMOTE_OPTIONS["task"]) | set(REMOTE_OPTIONS["actor"]))

# Ray 2.60.0, python/ray/actor.py, `method`: the `valid_kwargs` of `@ray.method(...)` (an AssertionError
# otherwise) and the checks it runs when it decorates.
METHOD_OPTIONS: dict[str, OptionSpec] = {
    "num_returns": OptionSpec(
        None, lambda x: "ValueError: num_returns must be >= 0" if isinstance(x, int) and not isinstance(x, bool) and x < 0 else None
    ),
    "concurrency_group": OptionSpec(None),  # must be declared by the class: RAY094's `_undeclared_group`
    "max_task_retries": OptionSpec(None),
    "retry_exceptions": OptionSpec(None),  # checked when the method is called: RAY094's `_method_call_problem`
    "_generator_backpressure_num_objects": OptionSpec(None),
    "_num_objects_per_yield": TASK_ONLY_OPTIONS["_num_objects_per_yield"],
    "enable_task_events": OptionSpec(None),
    "tensor_transport": OptionSpec(
        None, lambda x: None if isinstance(x, str) else f"AttributeError: '{type(x).__name__}' object has no attribute 'upper'"
    ),
}
# Ray 2.60.0, python/ray/actor.py, `ActorMethod._remote`: the keywords `h.method.options(...)` may pass on.
METHOD_CALL_OPTIONS = frozenset(
    {
        "name", "num_returns", "max_task_retries", "retry_exceptions", "concurrency_group",
        "_generator_backpressure_num_objects", "_num_objects_per_yield", "enable_task_events", "tensor_transport", "_labels",
    }
)
# Scheduling strategies given as a string (checked by the core worker when the task or actor is submitted).
STRATEGY_NAMES = ("DEFAULT", "SPREAD")
# Options renamed by earlier Ray releases, which difflib would not connect to their new names.
RENAMED_OPTIONS = {"max_reconstructions": "max_restarts", "num_return_vals": "num_returns"}


# ---------------------------------------------------------------------------------------------- resources

# Keys Ray reserves for `num_cpus` / `num_gpus` (the check in Ray is case-sensitive: "cpu" is a custom resource).
RESERVED_RESOURCES = {"CPU": "num_cpus", "GPU": "num_gpus"}
# Keys of a task's or actor's `resources=` that mean a keyword option, and the keyword.
KEYWORD_OF = {"num_cpus": "num_cpus", "num_gpus": "num_gpus", "cpu": "num_cpus", "gpu": "num_gpus", "memory": "memory"}
# Keys of a placement-group bundle that mean a built-in resource ("memory" is one there, spelled so).
BUNDLE_KEY_OF = {"num_cpus": "CPU", "num_gpus": "GPU", "cpu": "CPU", "gpu": "GPU"}
# Ray Data methods whose `resources=` becomes the remote args of their tasks or actors.
DATA_METHODS = ("map_batches", "map", "flat_map", "filter")
PLACEMENT_GROUP = ("ray.util.placement_group", "ray.util.placement_group.placement_group")
# The keyword options Ray validates as resource quantities (`_common/ray_option_utils.py`, `_resource_option`).
QUANTITY_KEYWORDS = ("num_cpus", "num_gpus", "memory")
# Ray keeps quantities as integers of 1/10000 (`ray._raylet.RESOURCE_UNIT_SCALING`).
RESOURCE_UNIT_SCALING = 10000
# Accelerators whose manager refuses any fractional quantity when the options are validated
# (`_private/accelerators/{neuron,hpu,rbln,furiosa,mblt,ttnpu}.py`, `validate_resource_request_quantity`).
WHOLE_ONLY = frozenset({"neuron_cores", "HPU", "RBLN", "FURIOSA", "MBLT", "TTNPU"})
TPU_CHIP_OPTIONS = (1, 2, 4, 8)  # `_private/accelerators/tpu.py`, TPU_VALID_CHIP_OPTIONS
# Unit-instance resources (`RAY_predefined_unit_instance_resources` and GPU) that are accepted as any
# number by the validator, but refused above 1 unless whole when the task or actor is submitted.
WHOLE_ABOVE_ONE = frozenset({"GPU", "NPU"})


def resource_option_calls(model: SemanticModel) -> Iterator[tuple[CallSite, str]]:
    """Calls that take Ray's resource keywords, with where Ray reads them: "remote" (`ray.remote(...)`),
    "init" (`ray.init(...)`), "options" (`.options(...)` of a remote function or actor class, or any
    `x.options(...).remote(...)`) or "data" (a `map_batches`, `map`, `flat_map` or `filter` method call).
    A call may come more than once."""
    for site in model.calls_to("ray.remote"):
        yield site, "remote"
    for site in model.calls_to("ray.init"):
        yield site, "init"
    remote_calls = {id(s.node.func.value) for s in model.calls_by_tail.get("remote", ()) if isinstance(s.node.func, cst.Attribute)}
    for site in model.calls_by_tail.get("options", ()):
        func = site.node.func
        if not isinstance(func, cst.Attribute):
            continue
        if id(site.node) in remote_calls or model.remote_def_of(func.value, site.scope, site.index) is not None:
            yield site, "options"
    for method in DATA_METHODS:
        for site in model.calls_by_tail.get(method, ()):
            if isinstance(site.node.func, cst.Attribute):
                yield site, "data"


def resource_request_sites(model: SemanticModel) -> Iterator[tuple[CallSite, str]]:
    """Calls whose keywords Ray reads as a task's or actor's resource request, with where Ray reads them:
    "remote" (`ray.remote(...)`), "options" (`.options(...)` of a remote function or actor class) or
    "data" (`map_batches`, `map`, `flat_map`, `filter`, only in a file that uses Ray Data)."""
    seen: set[int] = set()
    data_used: bool | None = None
    for site, where in resource_option_calls(model):
        if where == "init" or id(site.node) in seen:
            continue
        if where == "data":
            if data_used is None:
                data_used = uses_ray_data(model)
            if not data_used:
                continue
        seen.add(id(site.node))
        yield site, where


def resources_dict(model: SemanticModel, site: CallSite) -> tuple[cst.Arg, cst.Dict, bool] | None:
    """The `resources=` argument of a call, its dict literal, and whether the literal is written in the call
    (else it is a name bound once to it in the same scope, and never changed in place)."""
    arg = keyword_arg(site.node, "resources")
    if arg is None:
        return None
    value = arg.value
    if isinstance(value, cst.Dict):
        return arg, value, True
    if not isinstance(value, cst.Name):
        return None
    binding = model.reaching_binding(value.value, site.scope, site.index)
    if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.Dict):
        return None
    if len(binding.scope.bindings.get(value.value, [])) != 1 or value.value in binding.scope.globals:
        return None
    if _changed(model, value.value):
        return None
    return arg, binding.value, False


def _changed(model: SemanticModel, name: str) -> bool:
    """Whether the dict a name holds may be changed in place (`res[k] = ...`, `del res[k]`, `res.pop(...)`)."""
    if any(isinstance(store.target, cst.Subscript) and isinstance(store.target.value, cst.Name) and store.target.value.value == name for store in model.stores):
        return True
    for site in model.calls:
        func = site.node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
            return True
    return False


def dict_entries(dictionary: cst.Dict) -> Iterator[tuple[str, cst.DictElement]]:
    """The entries of a dict literal whose key is a plain string."""
    for element in dictionary.elements:
        if isinstance(element, cst.DictElement):
            key = literal_string(element.key)
            if key is not None:
                yield key, element


def entries_moved_to_keywords(call: cst.Call, arg: cst.Arg, dictionary: cst.Dict, keyword_of: dict[str, str]) -> cst.Call | None:
    """The call with each `resources=` entry whose key is in `keyword_of` moved to that keyword argument, in
    the place of `resources=` (dropped when nothing is left in it); None when the call unpacks `**kwargs` or
    already has one of the keywords."""
    if any(a.star == "**" for a in call.args):
        return None
    present = {a.keyword.value for a in call.args if a.keyword is not None}
    position = list(call.args).index(arg)
    previous = call.args[position - 1].comma if position else None
    separator = previous if isinstance(previous, cst.Comma) else cst.MaybeSentinel.DEFAULT  # keeps a multi-line layout
    moved: list[cst.Arg] = []
    kept: list[cst.BaseDictElement] = []
    for element in dictionary.elements:
        key = literal_string(element.key) if isinstance(element, cst.DictElement) else None
        if key is None or key not in keyword_of:
            kept.append(element)
            continue
        keyword = keyword_of[key]
        if keyword in present:
            return None
        present.add(keyword)
        moved.append(cst.Arg(value=element.value, keyword=cst.Name(keyword), equal=arg.equal, comma=separator))
    if kept:
        last = dictionary.elements[-1]
        if kept[-1] is not last:
            kept[-1] = kept[-1].with_changes(comma=last.comma)
        moved.append(arg.with_changes(value=dictionary.with_changes(elements=kept)))
    moved[-1] = moved[-1].with_changes(comma=arg.comma)
    args: list[cst.Arg] = []
    for existing in call.args:
        args.extend(moved if existing is arg else [existing])
    return call.with_changes(args=args)


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.expression if isinstance(expr, cst.UnaryOperation) else expr


def quantity_problem(name: str, value: cst.BaseExpression, keyword: bool) -> tuple[str, bool] | None:
    """What Ray 2.60 says about `value` as the quantity of resource `name` (a keyword option when `keyword`),
    and whether it says so only when the task or actor is submitted; None if it is accepted or not literal."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        if keyword:
            return f"TypeError: The type of keyword '{name}' must be (float, int, NoneType)", False
        return "TypeError: '<' not supported between instances of 'str' and 'int'", False
    number = literal_number(value)
    if number is None:
        return None
    is_float = isinstance(_unwrapped(value), cst.Float)
    if number < 0:
        return f"ValueError: The quantity of resource {name} cannot be negative", False
    if is_float and number != 0 and int(number * RESOURCE_UNIT_SCALING) == 0:
        return f"ValueError: The precision of the fractional quantity of resource {name} cannot go beyond 0.0001", False
    resource = "GPU" if name == "num_gpus" else name
    whole = number.is_integer()
    if resource in WHOLE_ONLY and is_float and not whole:
        return f"ValueError: {resource} resource quantity must be whole numbers", False
    if resource == "TPU" and number not in TPU_CHIP_OPTIONS:
        chips = value_text(value)
        return f"ValueError: The number of requested 'TPU' was set to {chips} which is not a supported chip configuration", False
    if resource in WHOLE_ABOVE_ONE and number > 1 and not whole:
        return f"ValueError: {resource} resource quantities >1 must be whole numbers", True
    return None


def placement_group_bundles(model: SemanticModel) -> Iterator[tuple[CallSite, cst.BaseExpression]]:
    """Each `placement_group(...)` call of Ray's, with its bundles argument (first positional or `bundles=`)."""
    for name in PLACEMENT_GROUP:
        for site in model.calls_to(name):
            call = site.node
            bundles = keyword_arg(call, "bundles")
            first = call.args[0] if call.args and call.args[0].keyword is None and not call.args[0].star else None
            value = bundles.value if bundles is not None else first.value if first is not None else None
            if value is not None:
                yield site, value


def bundle_dicts(bundles: cst.BaseExpression) -> list[cst.Dict]:
    """The dict literals written as bundles: the dicts of a list literal, or the dict of a list comprehension."""
    if isinstance(bundles, cst.List):
        return [e.value for e in bundles.elements if isinstance(e.value, cst.Dict)]
    if isinstance(bundles, cst.ListComp) and isinstance(bundles.elt, cst.Dict):
        return [bundles.elt]
    return []
