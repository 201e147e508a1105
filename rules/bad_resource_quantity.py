"""RAY047 bad-resource-quantity: a literal resource quantity that Ray 2.60 refuses (negative, finer than
0.0001, not a number, a fraction of an accelerator that only comes whole)."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.ray_api import (
    QUANTITY_KEYWORDS,
    RESERVED_RESOURCES,
    RESOURCE_UNIT_SCALING,
    TPU_CHIP_OPTIONS,
    WHOLE_ABOVE_ONE,
    WHOLE_ONLY,
    dict_entries,
    expected_to_raise,
    keyword_arg,
    quantity_problem,
    resource_request_sites,
    resources_dict,
    value_text,
)
from ray_lint.rule import Context, Invalid, Rule, Valid

WHEN = {
    "remote": "when `ray.remote` is applied",
    "options": "at the `.options(...)` call",
    "data": "when the dataset executes",
}

# The stand-in task, submitted (some quantities are refused only then); B's task runs, or waits for an
# accelerator or custom resource the verify cluster lacks.
TASK = """
def work():
    return ray.get_gpu_ids()

{make}
ref = work.remote()
ready, _ = ray.wait([ref], timeout=5)
if ready:
    __ray_lint_evidence__ = {{"right": f"the task ran, with ray.get_gpu_ids()={{ray.get(ref)}}"}}
else:
    ray.cancel(ref)
    __ray_lint_evidence__ = {{"right": "accepted; the task waits for more than this cluster has"}}
"""


@dataclass(frozen=True)
class QuantityFacts:
    """The refused quantity, replayable: the resource (`num_cpus`, or a `resources=` key), its value as written
    (a string literal, or an f-string's text as a string), whether it is a keyword, and where Ray reads it."""

    resource: str
    quantity: str
    keyword: bool
    where: str


class BadResourceQuantityExperiment(ReproductionExperiment[QuantityFacts]):
    """The quantity as written on a stand-in task, given where the code gives it (`ray.remote` or `.options`)
    and submitted; B gives the nearest quantity Ray takes (1 for a negative or non-numeric one, 0.0001 for a
    finer fraction, the next whole number or TPU chip count) and runs the task."""

    facts_type = QuantityFacts
    shares_driver = True
    expected = (
        r"cannot be negative|The precision of the fractional quantity|The type of keyword"
        r"|not supported between instances of 'str'|resource quantity must be whole numbers"
        r"|not a supported chip configuration|resource quantities >1 must"
    )

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        flagged, fixed = _option(facts, facts.quantity), _option(facts, _accepted(facts.resource, facts.quantity, facts.keyword))
        if facts.where == "options":
            make = "work = ray.remote(work).options({})"
            how = "at `.options(...)`"
        else:
            make = "work = ray.remote({})(work)"
            how = "by `ray.remote`" + (" (Ray Data makes its tasks with `ray.remote(**ray_remote_args)`)" if facts.where == "data" else "")
        return Plan(
            Variant(flagged, script(TASK.format(make=make.format(flagged)))),
            Variant(fixed, script(TASK.format(make=make.format(fixed)))),
            "modelled",
            f"a stand-in task given {flagged} {how} and submitted, and the same with {fixed}",
        )


def _option(facts: QuantityFacts, quantity: str) -> str:
    return f"{facts.resource}={quantity}" if facts.keyword else f"resources={{{facts.resource!r}: {quantity}}}"


def _accepted(resource: str, quantity: str, keyword: bool) -> str:
    """The quantity nearest to the refused one that Ray takes for `resource`."""
    value = ast.literal_eval(quantity)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = 1
    number = abs(float(value)) or 1.0
    name = "GPU" if keyword and resource == "num_gpus" else resource
    if number * RESOURCE_UNIT_SCALING < 1:
        number = 1 / RESOURCE_UNIT_SCALING
    if name in WHOLE_ONLY or (name in WHOLE_ABOVE_ONE and number > 1):
        number = float(math.ceil(number))
    if name == "TPU":
        number = float(next((chips for chips in TPU_CHIP_OPTIONS if chips >= number), TPU_CHIP_OPTIONS[-1]))
    return str(int(number)) if number.is_integer() else f"{number:g}"


class BadResourceQuantity(Rule):
    code = "RAY047"
    name = "bad-resource-quantity"
    message = "A literal resource quantity Ray rejects: negative, too precise, not a number, or not whole"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("num_cpus", "num_gpus", "memory=", "memory =", "resources")  # `memory` alone is everywhere; only the keyword is checked
    also_tokens = (".remote", "import remote", ".map(", ".map_batches(", ".flat_map(", ".filter(")
    experiment = BadResourceQuantityExperiment()
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
                if not any(key in RESERVED_RESOURCES for key, _ in entries):
                    found.extend((key, element.value, False) for key, element in entries)
            for name, value, is_keyword in found:
                problem = quantity_problem(name, value, is_keyword)
                if problem is None or id(value) in reported:
                    continue
                reported.add(id(value))
                _, at_submission = problem
                when = "when the task or actor is submitted" if at_submission and where != "data" else WHEN[where]
                what = f"`{name}={value_text(value)}`" if is_keyword else f"`resources={{{name!r}: {value_text(value)}}}`"
                facts = QuantityFacts(name, _replayable(value), is_keyword, where)
                ctx.report(value, f"{what}: Ray refuses this quantity {when}", facts=facts)


def _replayable(value: cst.BaseExpression) -> str:
    """The quantity as a Python literal: as written, or an f-string's text as a plain string (Ray refuses any string)."""
    text = value_text(value)
    return repr(text) if isinstance(value, cst.FormattedString) else text
