"""RAY111 udf-captures-large-object: a Ray Data UDF (function, lambda or callable class) reads a large object
from an enclosing scope, so it is pickled into the UDF that every task deserializes."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ray_lint.analyses.captures import Capture, captured_size, free_variables
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.libraries import DATA_TOKENS, defined_function_or_class
from ray_lint.libraries.data import DATA_LOG_CAPTURE, UDF_METHODS, DatasetFacts, udf_of
from ray_lint.model import SemanticModel
from ray_lint.python_model import ClassInfo, FunctionInfo, Scope
from ray_lint.rule import Context, Invalid, Option, Rule, Valid
from ray_lint.sizes import ALLOCATION_TOKENS, Size

# Ray Data warns when a serialized UDF passes 100 MiB (`MapOperator.MAP_UDF_WARN_SIZE_THRESHOLD`).
UDF_OPTION = Option(
    "large-object-mb",
    100,
    "Size, in megabytes (10**6 bytes), from which a captured object counts as large; Ray Data warns from 100 MiB.",
)
# numpy buffers pickle out of band: a task maps them from the object store without a copy.
ZERO_COPY_PREFIX = "numpy."
# A UDF reading a 120 MB module-level `bytes` (pickled into it), or a callable class that builds it in
# `__init__`; the dataset is mapped, and Ray Data's own warnings are read.
UDF_SIZE_MODEL = """\
{udf}
""" + DATA_LOG_CAPTURE + """\
rows = ray.data.range(1000, override_num_blocks=4).map_batches({call}).take_all()
said = [text for text in logged if "is too large" in text]
if said:
    __ray_lint_evidence__ = {{"wrong": f"Ray 2.60 warns: {{said[0]}}"}}
else:
    __ray_lint_evidence__ = {{"right": f"no warning about the UDF's size; {{len(rows)}} rows"}}
"""
CAPTURING_UDF = """\
PAYLOAD = bytes(120 * 10**6)

def add_size(batch):
    batch["size"] = batch["id"] * 0 + len(PAYLOAD)
    return batch
"""
LOADING_UDF = """\
class AddSize:
    def __init__(self):
        self.payload = bytes(120 * 10**6)

    def __call__(self, batch):
        batch["size"] = batch["id"] * 0 + len(self.payload)
        return batch
"""


class UdfSizeExperiment(ReproductionExperiment[None]):
    """A map over 4 blocks whose UDF captures a 120 MB object, against one that builds the object in a
    callable class's `__init__`: Ray Data warns that the first UDF is too large, not the second. (Timing
    is not the point: the fix measured no faster on a 2-core machine; see the rule's page.)"""

    facts_type = type(None)

    def model(self, subject: Subject) -> Plan:
        def variant(udf: str, call: str) -> str:
            return script(UDF_SIZE_MODEL.format(udf=udf, call=call), ("data",))

        return Plan(
            Variant("a UDF that captures 120 MB", variant(CAPTURING_UDF, "add_size")),
            Variant("the object built in `__init__`", variant(LOADING_UDF, "AddSize, compute=ray.data.ActorPoolStrategy(size=1)")),
            "modelled",
            "`map_batches` with a UDF that reads a captured 120 MB `bytes`, against a class that builds it, reading Ray's warnings",
        )


class UdfCapturesLargeObject(Rule):
    code = "RAY111"
    name = "udf-captures-large-object"
    message = "A Ray Data UDF captures a large object, which every task deserializes with the UDF"
    severity = Severity.WARNING
    category = "perf"
    preview = True  # the fixes Ray advises measured no faster on Ray 2.60 (see "Why is this bad?")
    tokens = tuple(f"{method}(" for method in UDF_METHODS)
    also_tokens = DATA_TOKENS
    options = (UDF_OPTION,)
    experiment = UdfSizeExperiment()
    docs = """
## What it does
Finds the function, lambda or callable class passed to `map`, `map_batches`, `flat_map` or
`filter` of a Ray Data dataset when its code reads, from the module or an enclosing function, an
object that is certainly large: an allocation with a literal size (`bytes(200 * 10**6)`,
`[0.0] * 10**8`, `torch.zeros(50_000, 1024)`, ...) of at least `large-object-mb` megabytes (100
by default, Ray Data's own threshold), or a value whose line says `# ray-lint: large`.

## Why is this bad?
Ray Data pickles the UDF with cloudpickle, globals and closure values included, puts it in the
object store once per operator, and every task deserializes it. Above 100 MiB Ray 2.60 logs
"The UDF of operator ... is too large (size = N MiB). Check if the UDF has accidentally captured
large objects. Load the large objects in the __init__ method or pass them as ObjectRefs instead"
(`MapOperator._warn_large_udf`). Objects that deserialize by copying (bytes, lists, dicts,
torch tensors) are copied again by every task. Measured on a 2-core machine with Ray 2.60, 20
blocks mapped by a function reading a captured 120 MB `bytes`: 2.2-3.0 s, against 0.3-0.4 s
without it. A numpy array is mapped from the object store without a copy, so it costs little
(0.29 s against 0.31 s through a ref): ray-lint does not report numpy allocations. The fixes Ray's
warning advises did not measure faster on that machine either: the same `bytes` passed as an
ObjectRef took 3-6 s, and a callable class that builds it in `__init__` was slower still at 20
blocks. That is why the rule is in preview: it says what Ray warns about, before the run, but
ray-lint could not show the cost of following that advice. `ray-lint verify` therefore reproduces
the warning, not a slowdown: a UDF that captures 120 MB makes Ray 2.60 log "The UDF of operator
MapBatches(add_size) is too large", and the same object built in a callable class's `__init__`
does not.

ray-lint is silent for objects whose size is not in the code (a file or model load: mark it
`# ray-lint: large` if it is big), names the UDF binds itself, imported names, and a module-level
function or class in a module that has no `if __name__ == "__main__":` block and does not build
the pipeline at its top level: cloudpickle pickles those by reference, and the worker imports the
module instead.

## Example
```python
vocab = build_vocab()  # ray-lint: large


def tokenize(batch):
    batch["ids"] = [[vocab[w] for w in text.split()] for text in batch["text"]]
    return batch


ds = ds.map_batches(tokenize)
```

## Use instead
Load it once per worker in a callable class:
```python
class Tokenize:
    def __init__(self):
        self.vocab = build_vocab()

    def __call__(self, batch):
        batch["ids"] = [[self.vocab[w] for w in text.split()] for text in batch["text"]]
        return batch


ds = ds.map_batches(Tokenize, compute=ray.data.ActorPoolStrategy(size=4))
```

## Fix safety
There is no automatic fix: the object must be built or loaded where the UDF runs.

## Options
- `large-object-mb`: the size, in megabytes, from which a captured object counts as large.

## References
- [Ray Data: Transforming data (stateful transforms)](https://docs.ray.io/en/latest/data/transforming-data.html)
- [Anti-pattern: Closure capturing large objects harms performance](https://docs.ray.io/en/latest/ray-core/patterns/closure-capture-large-objects.html)
"""

    VALID = [
        Valid(
            "import ray\n\nclass Lookup:\n    def __init__(self):\n        self.table = bytes(200 * 10**6)\n\n"
            "    def __call__(self, batch):\n        return batch\n\nds = ray.data.range(10).map_batches(Lookup, compute=ray.data.ActorPoolStrategy(size=2))\n",
            "loaded in __init__, in the worker",
        ),
        Valid(
            "import numpy as np\nimport ray\n\ntable = np.zeros((20_000, 1000))\n\nds = ray.data.range(10).map_batches(lambda b: {'y': b['id'] * table[0, 0]})\n",
            "a numpy array is read zero-copy",
        ),
        Valid(
            "import ray\n\nsmall = bytes(10**6)\nds = ray.data.range(10).map(lambda row: {'x': small[0]})\n",
            "1 MB",
        ),
        Valid(
            "import ray\n\ntable = load_table()\nds = ray.data.range(10).filter(lambda row: row['id'] in table)\n",
            "size not in the code",
        ),
        Valid(
            "import ray\n\nPAYLOAD = bytes(200 * 10**6)\n\ndef add(batch):\n    return batch\n\ndef build():\n"
            "    return ray.data.range(10).map_batches(add)\n",
            "a module-level UDF of an importable module that does not read the object",
        ),
        Valid(
            "import ray\n\nPAYLOAD = bytes(200 * 10**6)\n\ndef add(batch):\n    batch['p'] = PAYLOAD[:1]\n    return batch\n\n"
            "def build():\n    return ray.data.range(10).map_batches(add)\n",
            "module-level function of an importable module: pickled by reference",
        ),
        Valid(
            "PAYLOAD = bytes(200 * 10**6)\nrows = map(lambda row: PAYLOAD[row], range(3))\n",
            "the builtin map, no Ray Data",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\ndef run():\n    table = bytes(200 * 10**6)\n    ds = ray.data.range(1000)\n"
            "    return ds.map_batches(lambda batch: {'y': batch['id'] * table[0]})\n",
            6,
        ),
        Invalid(
            "import ray\n\nvocab = load_vocab()  # ray-lint: large\n\ndef tokenize(batch):\n"
            "    batch['ids'] = [vocab[w] for w in batch['text']]\n    return batch\n\n"
            "if __name__ == '__main__':\n    ray.data.read_text('x.txt').map_batches(tokenize).show()\n",
            6,
            note="marked large; the module is a script",
        ),
        Invalid(
            "import torch\nimport ray\n\nEMBEDDINGS = torch.zeros(50_000, 1024)\n\nclass Embed:\n"
            "    def __call__(self, batch):\n        batch['v'] = EMBEDDINGS[batch['id']]\n        return batch\n\n"
            "ds = ray.data.range(100).map_batches(Embed, compute=ray.data.ActorPoolStrategy(size=2))\n",
            8,
            note="a callable class, pipeline built at the top level",
        ),
        Invalid(
            "import ray\n\ndef pipeline(path):\n    weights = [0.5] * 20_000_000\n\n    def keep(row):\n"
            "        return weights[row['id']] > 0.1\n\n    return ray.data.read_parquet(path).filter(keep)\n",
            7,
            note="a nested function",
        ),
        Invalid(
            "import ray\n\nBLOB = bytearray(150 * 10**6)\nds = ray.data.range(100).flat_map(fn=lambda row: [{'b': BLOB[row['id']]}])\n",
            4,
            note="fn= keyword",
        ),
    ]

    def wants(self, text: str) -> bool:
        """The pre-filter, plus an allocation ray-lint can size (or the marker)."""
        return super().wants(text) and any(token in text for token in ALLOCATION_TOKENS)

    def check(self, ctx: Context) -> None:
        model = ctx.model
        threshold = int(self.settings[UDF_OPTION.name]) * 10**6
        scopes = {id(scope.node): scope for scope in model.scopes}
        has_main = any(_is_main_guard(statement) for statement in model.module.body)
        seen: set[int] = set()
        for site, method in model.analysis(DatasetFacts).calls(UDF_METHODS):
            udf = udf_of(site.node)
            if udf is None:
                continue
            bodies = _bodies(model, udf, site.scope, site.index, scopes, has_main or site.scope is model.module_scope)
            if bodies is None or id(udf) in seen:
                continue
            seen.add(id(udf))
            for capture in free_variables(model, bodies, scopes):
                size = _copied_size(model, capture, threshold)
                if size is not None:
                    ctx.report(capture.use, f"The `{method}` UDF captures `{capture.name}`, {size.describe()}, pickled into it")


def _bodies(
    model: SemanticModel, udf: cst.BaseExpression, scope: Scope, at: int, scopes: dict[int, Scope], script: bool
) -> list[tuple[cst.CSTNode, Scope]] | None:
    """The code of the UDF, as (body, scope) pairs, when cloudpickle pickles it by value: a lambda, a function
    or class defined in a function, or one at module level of a script (`script`)."""
    if isinstance(udf, cst.Lambda):
        return [(udf.body, scopes[id(udf)])] if id(udf) in scopes else None
    defined = defined_function_or_class(model, udf, scope, at)
    if defined is None:
        return None
    functions = list(_functions(defined))
    owner = defined.parent_scope if isinstance(defined, FunctionInfo) else defined.scope.parent
    if owner is None or (owner.kind == "module" and not script):
        return None
    return [(function.node.body, function.scope) for function in functions]


def _functions(defined: FunctionInfo | ClassInfo) -> Iterator[FunctionInfo]:
    if isinstance(defined, FunctionInfo):
        yield defined
    else:
        yield from defined.methods


def _copied_size(model: SemanticModel, capture: Capture, threshold: int) -> Size | None:
    """The capture's size when it is large and not a numpy array (which deserializes without a copy)."""
    for binding in capture.bindings:
        value = binding.value
        if isinstance(value, cst.Call):
            name = model.qualified_name(value.func, binding.scope, binding.index)
            if name is not None and name.startswith(ZERO_COPY_PREFIX):
                return None
    return captured_size(model, capture, threshold)


def _is_main_guard(statement: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":`: the module is run as a script, whose functions cloudpickle copies."""
    if not isinstance(statement, cst.If) or not isinstance(statement.test, cst.Comparison):
        return False
    test = statement.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(side, cst.Name) and side.value == "__name__" for side in sides) and any(
        isinstance(side, cst.SimpleString) and side.evaluated_value == "__main__" for side in sides
    )
