"""RAY047 bad-resource-quantity: a literal resource quantity that Ray 2.60 refuses (negative, finer than
0.0001, not a number, a fraction of an accelerator that only comes whole)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.model import CallSite, SemanticModel, iter_subtree, literal_number, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

from .resources_dict_cpu_gpu import RESERVED, ResourcesDictCpuGpu

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

_RAY046 = ResourcesDictCpuGpu()  # its call-site and `resources=` dict lookups are the ones every resource rule needs

EXPECTING = ("raises", "assertRaises", "assertRaisesRegex")  # context managers of tests that expect an error

WHEN = {
    "remote": "when `ray.remote` is applied",
    "options": "at the `.options(...)` call",
    "data": "when the dataset executes",
}


def resource_request_sites(model: SemanticModel) -> Iterator[tuple[CallSite, str]]:
    """Calls whose keywords Ray reads as a task's or actor's resource request, with where Ray reads them:
    "remote" (`ray.remote(...)`), "options" (`.options(...)` of a remote function or actor class) or
    "data" (`map_batches`, `map`, `flat_map`, `filter`, only in a file that uses Ray Data)."""
    seen: set[int] = set()
    data_used: bool | None = None
    for site, where in _RAY046._calls(model):
        if where == "init" or id(site.node) in seen:
            continue
        if where == "data":
            if data_used is None:
                data_used = uses_ray_data(model)
            if not data_used:
                continue
        seen.add(id(site.node))
        yield site, where


def uses_ray_data(model: SemanticModel) -> bool:
    """Whether the file imports `ray.data` or calls something in it (`ray.data.read_parquet(...)`)."""
    if model.imports_module("ray.data"):
        return True
    return any((model.call_name(site) or "").startswith("ray.data.") for site in model.calls)


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


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def resources_dict(model: SemanticModel, site: CallSite) -> tuple[cst.Arg, cst.Dict, bool] | None:
    """The `resources=` argument of a call, its dict literal, and whether the literal is written in the call
    (else it is a name bound once to it in the same scope)."""
    arg = keyword_arg(site.node, "resources")
    if arg is None:
        return None
    found = _RAY046._resources_dict(model, site, arg.value)
    if found is None:
        return None
    return arg, found[0], found[1]


def dict_entries(dictionary: cst.Dict) -> Iterator[tuple[str, cst.DictElement]]:
    """The entries of a dict literal whose key is a plain string."""
    for element in dictionary.elements:
        if isinstance(element, cst.DictElement):
            key = literal_string(element.key)
            if key is not None:
                yield key, element


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


def value_text(value: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(value)


class BadResourceQuantity(Rule):
    code = "RAY047"
    name = "bad-resource-quantity"
    message = "A literal resource quantity Ray rejects: negative, below 0.0001, not a number, or a fraction of a whole-only accelerator"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("num_cpus", "num_gpus", "memory=", "memory =", "resources")  # `memory` alone is everywhere; only the keyword is checked
    also_tokens = (".remote", "import remote", ".map(", ".map_batches(", ".flat_map(", ".filter(")
    docs = """
## What it does
Checks the literal quantities of `num_cpus=`, `num_gpus=`, `memory=` and each entry of a
`resources=` dict (written in the call, or a name bound once to a dict literal in the same scope)
given to `@ray.remote(...)` / `ray.remote(...)(f)`, to `.options(...)` of a remote function or
actor class, and to a Ray Data `map_batches` / `map` / `flat_map` / `filter` call (in a file that
uses Ray Data), and reports the ones Ray 2.60 refuses:

- a negative quantity (`num_cpus=-1`): "The quantity of resource num_cpus cannot be negative";
- a fraction finer than 0.0001 (`num_gpus=0.00001`): Ray keeps quantities in units of 1/10000,
  and refuses a float that would round to zero;
- a string (`num_cpus="2"`): a `TypeError`;
- a fraction of an accelerator that only comes whole: `neuron_cores`, `HPU`, `RBLN`, `FURIOSA`,
  `MBLT`, `TTNPU` (e.g. `resources={"neuron_cores": 0.5}`), and a `TPU` count that is not 1, 2, 4
  or 8;
- a GPU (or `NPU`) count above 1 that is not whole (`num_gpus=1.5`). The validator accepts it,
  but Ray refuses it when the task or actor is submitted: "GPU resource quantities >1 must be
  whole numbers".

The rules are Ray's own (`_common/ray_option_utils.py`, `_validate_resource_quantity`, and the
accelerator managers' `validate_resource_request_quantity`). Only literal numbers and strings
are checked: a value computed at run time is not. A `resources=` dict with a `"CPU"` or `"GPU"`
key is left to RAY046 (Ray refuses those keys before it looks at any quantity). Fractions below
1 of a GPU (`num_gpus=0.25`), whole quantities written as floats (`resources={"TPU": 4.0}`) and
fractions of custom resources (`resources={"licence": 1.5}`) are accepted and not reported.
Nor is code under `with pytest.raises(...)` or `with self.assertRaises(...)`, which tests that
Ray refuses the value.

## Why is this bad?
Ray raises instead of scheduling anything: a `ValueError` (or `TypeError`) when `ray.remote` is
applied, which fails the import of the module, at the `.options(...)` call, or, for a Ray Data
map, only when the dataset executes, after the earlier stages have run.

## Example
```python
@ray.remote(num_cpus=-1)  # "all CPUs" is not a Ray quantity
def crunch(chunk):
    ...

@ray.remote(num_gpus=1.5)
class Trainer:
    ...
```

## Use instead
```python
@ray.remote(num_cpus=4)
def crunch(chunk):
    ...

@ray.remote(num_gpus=2)
class Trainer:
    ...
```

## Fix safety
There is no automatic fix: the intended quantity is not in the code.

## References
- [Specifying task or actor resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Fractional resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html#fractional-resource-requirements)
- [Accelerator support](https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html)
- [ray.remote](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
"""

    VALID = [
        Valid("import ray\n@ray.remote(num_cpus=0.5, num_gpus=0.25, memory=2 * 1024**3)\ndef f():\n    pass\n", "fractions and an expression"),
        Valid("import ray\n@ray.remote(num_gpus=2.0, resources={'TPU': 4.0, 'neuron_cores': 2})\nclass A:\n    pass\n", "whole values as floats"),
        Valid("import ray\n@ray.remote(num_cpus=0.0001, resources={'licence': 1.5})\ndef f():\n    pass\n", "the finest fraction; custom resources may be fractional"),
        Valid("import ray\n@ray.remote\ndef f():\n    pass\n\nf.options(num_cpus=n_cpus - 1).remote()\n", "computed value"),
        Valid("def schedule(job, num_cpus):\n    pass\n\nschedule('train', num_cpus=-1)\n", "not a Ray call"),
        Valid("import ray\nfrom joblib import Parallel\n\nParallel(n_jobs=-1)\nhandle = pool.map(f, xs, num_cpus=-1)\n", "a map that is not Ray Data's"),
        Valid("import ray\n@ray.remote(resources={'GPU': -1})\ndef f():\n    pass\n", "CPU / GPU keys: RAY046"),
        Valid("@ray.remote(num_cpus=-1)\ndef f():\n    pass\n", "no `import ray`"),
        Valid("import ray\nray.init(num_cpus=0)\n@ray.remote(num_cpus=0)\ndef f():\n    pass\n", "zero is a quantity"),
        Valid(
            "import pytest\nimport ray\n\ndef test_negative():\n    with pytest.raises(ValueError):\n        ray.remote(num_cpus=-1)(f)\n",
            "a test of Ray's validation",
        ),
    ]
    INVALID = [
        Invalid("import ray\n\n@ray.remote(num_cpus=-1)\ndef f():\n    pass\n", 3),
        Invalid("import ray\n@ray.remote(num_gpus=1.5)\nclass Trainer:\n    pass\n", 2, note="refused at submission"),
        Invalid("import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(num_gpus=0.00001).remote()\n", 6, note="finer than 0.0001"),
        Invalid("import ray\n\ndef f():\n    pass\n\ng = ray.remote(num_cpus='2')(f)\n", 6, note="a string"),
        Invalid("import ray\n@ray.remote(resources={'neuron_cores': 0.5})\ndef f():\n    pass\n", 2, note="Neuron cores are whole"),
        Invalid("import ray\nRES = {'TPU': 3}\n@ray.remote(resources=RES)\ndef f():\n    pass\n", 2, note="TPU chip count, through a name"),
        Invalid(
            "import ray\n\nds = ray.data.read_parquet('s3://bucket/x')\nds = ds.map_batches(Embed, concurrency=2, memory=-1)\n",
            4,
            note="Ray Data",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass A:\n    pass\n\na = A.options(\n    name='a',\n    resources={'pool': -2},\n).remote()\n",
            8,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        reported: set[int] = set()
        expected = expected_to_raise(model)
        for site, where in resource_request_sites(model):
            if id(site.node) in expected:
                continue
            found: list[tuple[str, cst.BaseExpression, bool]] = []
            for option in QUANTITY_KEYWORDS:
                arg = keyword_arg(site.node, option)
                if arg is not None:
                    found.append((option, arg.value, True))
            resources = resources_dict(model, site)
            if resources is not None:
                entries = list(dict_entries(resources[1]))
                if not any(key in RESERVED for key, _ in entries):
                    found.extend((key, element.value, False) for key, element in entries)
            for name, value, is_keyword in found:
                problem = quantity_problem(name, value, is_keyword)
                if problem is None or id(value) in reported:
                    continue
                reported.add(id(value))
                error, at_submission = problem
                when = "when the task or actor is submitted" if at_submission and where != "data" else WHEN[where]
                what = f"`{name}={value_text(value)}`" if is_keyword else f"`resources={{{name!r}: {value_text(value)}}}`"
                ctx.report(value, f"{what}: Ray 2.60 refuses this quantity {when} ({error})")
