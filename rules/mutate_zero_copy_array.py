"""RAY036 mutate-zero-copy-array: an in-place write to a numpy array that Ray handed over read-only."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import libcst as cst

from ray_lint.analyses.arrays import NUMPY_MAKERS
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import AFTER_ALL, Binding, CallSite, FunctionInfo, Scope, iter_subtree, literal_string, root_name
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

NDARRAY_TYPES = frozenset({"numpy.ndarray", "numpy.typing.NDArray"})
# ndarray methods that write into the array.
INPLACE_METHODS = frozenset({"fill", "sort", "resize", "put", "itemset", "partition", "setfield"})
# numpy functions that write into their first argument, which must be an ndarray.
NUMPY_WRITERS = frozenset({"numpy.copyto", "numpy.put", "numpy.place", "numpy.putmask", "numpy.fill_diagonal"})
_WRITER_TAILS = frozenset(name.rsplit(".", 1)[-1] for name in NUMPY_WRITERS)
_STRING_NDARRAY = re.compile(r"(np|numpy)\.ndarray|((np|numpy)\.typing\.|npt\.)?NDArray(\[.*\])?")
_MAX_DEPTH = 6


@dataclass(frozen=True)
class _Source:
    """A name holding an array that crossed Ray: a parameter of a remote body, or `x = ray.get(ref)`.
    Evidence and fix are computed only for a name that is written to."""

    binding: Binding
    origin: str  # for the message
    fetched: bool  # bound to `ray.get(...)` (else: a parameter of a remote body)
    evidence: Callable[[], bool]  # whether the code shows the value is an ndarray
    fix: Callable[[], FixPlan | None]


@dataclass(frozen=True)
class _Write:
    node: cst.CSTNode
    scope: Scope
    index: int
    proves_ndarray: bool  # the write itself needs an ndarray (`np.copyto(x, ...)`, `out=x`)


class _Writes:
    """Every in-place write in the module, by the name written to, found in one pass over the stores and calls."""

    def __init__(self, model: SemanticModel) -> None:
        self.by_name: dict[str, list[_Write]] = defaultdict(list)
        self.flag_set: set[str] = set()  # names whose write flag the code touches (`setflags`, `.flags.writeable =`)
        for store in model.stores:
            target = store.target
            if store.kind == "del":
                continue
            if isinstance(target, cst.Attribute) and target.attr.value == "writeable":
                self.flag_set.add(root_name(target) or "")
            elif isinstance(target, cst.Subscript) and (root := _subscript_root(target)) is not None:
                self.by_name[root].append(_Write(target, store.scope, store.index, False))
        for site in model.calls:
            func, args = site.node.func, site.node.args
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                if func.attr.value == "setflags":
                    self.flag_set.add(func.value.value)
                elif func.attr.value in INPLACE_METHODS:
                    self.by_name[func.value.value].append(_Write(site.node, site.scope, site.index, False))
            written = {arg.value.value for arg in args if _keyword(arg) == "out" and isinstance(arg.value, cst.Name)}
            tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            first = args[0].value if tail in _WRITER_TAILS and args and args[0].keyword is None else None
            if not written and not isinstance(first, cst.Name):
                continue
            qualified = model.call_name(site) or ""
            if not qualified.startswith("numpy."):
                continue
            if qualified in NUMPY_WRITERS and isinstance(first, cst.Name):
                written.add(first.value)
            for name in written:
                self.by_name[name].append(_Write(site.node, site.scope, site.index, True))

    def first(self, model: SemanticModel, source: Binding) -> _Write | None:
        """The first write to the array `source` binds, in the scope that binds it (nested functions
        excluded), while `source` is still the name's binding; None when the code touches the write flag."""
        name, scope = source.name, source.scope
        if name in self.flag_set:
            return None
        candidates = list(self.by_name.get(name, ()))
        candidates += [
            _Write(b.statement or b.node, scope, b.index, False) for b in scope.bindings.get(name, ()) if b.kind == "augassign"
        ]
        writes = [
            write
            for write in candidates
            if (write.scope is scope or (write.scope.kind == "comprehension" and write.scope.function is scope.function))
            and model.reaching_binding(name, write.scope, write.index) is source
        ]
        return min(writes, key=lambda write: write.index, default=None)


def _keyword(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None

@dataclass(frozen=True)
class ZeroCopyFacts:
    """Where the written array came from: a task's argument, or `ray.get`."""

    fetched: bool


ARGUMENT_MODEL = """
import numpy as np

@ray.remote
def clip_negative(batch):
    {copy}batch[batch < 0] = 0
    return batch.sum()

__ray_lint_result__ = ray.get(clip_negative.remote(np.array([-1.0, 2.0, -3.0, 4.0])), timeout=30)
"""

FETCHED_MODEL = """
import numpy as np

@ray.remote
def make(n):
    return np.arange(n, dtype=np.float64)

values = ray.get(make.remote(4), timeout=30){copy}
values[0] = 10.0
__ray_lint_result__ = values.sum()
"""


class ZeroCopyExperiment(ReproductionExperiment[ZeroCopyFacts]):
    """Runs the user's script as written and with `.copy()`, or a model: a task that writes into its
    numpy argument, or a driver that writes into an array from `ray.get` (fixed with `.copy()`). Both
    need numpy where the variants run."""

    facts_type = ZeroCopyFacts
    shares_driver = True
    # numpy's words vary with the write: "assignment destination is read-only" (item assignment),
    # "output array is read-only" (`+=`, `out=`), "sort array is read-only", "cannot resize ...". At the
    # start of a line: the error itself, not a line of source quoted in the traceback.
    expected = r"(?m)^ValueError: (.*read-only|cannot resize)"

    def model(self, subject: Subject) -> Plan:
        if self.facts(subject).fetched:
            return Plan(
                Variant("write to the fetched array", script(FETCHED_MODEL.format(copy=""))),
                Variant("write to a copy", script(FETCHED_MODEL.format(copy=".copy()"))),
                "modelled",
                "the driver writes into a numpy array that `ray.get` returned",
            )
        return Plan(
            Variant("write to the argument", script(ARGUMENT_MODEL.format(copy=""))),
            Variant("write to a copy", script(ARGUMENT_MODEL.format(copy="batch = batch.copy()\n    "))),
            "modelled",
            "a task writes into the numpy array it was passed",
        )


class MutateZeroCopyArray(Rule):
    code = "RAY036"
    name = "mutate-zero-copy-array"
    message = "A numpy array received from Ray is read-only (zero-copy); writing to it in place raises"
    severity = Severity.ERROR
    category = "correctness"
    fixable = True
    experiment = ZeroCopyExperiment()
    tokens = ("numpy",)  # every way this rule knows an array is a numpy one goes through an import of numpy
    # A parameter needs a remote def; a `ray.get` result needs a ref the file makes (`.remote(`, `ray.put(`).
    also_tokens = (*REMOTE_MADE, "ray.put(", "import put", ", put")
    docs = """
## What it does
Finds an in-place write to a numpy array that came through Ray:
- a parameter of a remote function or actor method;
- a name bound to `ray.get(ref)`.

Writes are item and slice assignments (`a[i] = v`, `a[:, 0] += v`), augmented assignments to the
name (`a += 1`), in-place methods (`a.fill(0)`, `a.sort()`, `a.resize(...)`, `a.put(...)`), numpy
functions that write into their first argument (`np.copyto(a, ...)`, `np.put`, `np.place`,
`np.putmask`, `np.fill_diagonal`) and `out=a` in a numpy call. Only the first write per name is
reported.

The array must be shown to be a numpy array: a parameter annotated `np.ndarray` or
`npt.NDArray[...]`, an argument built by a numpy allocator (`np.zeros`, `np.array`,
`np.random.rand`...) at a `.remote(...)` call in the file, a ref from `ray.put(<numpy array>)` or
from a task that is annotated to return `np.ndarray` (or returns a numpy allocation), or a write
that only an ndarray accepts (`np.copyto(a, ...)`, `out=a`).

## Why is this bad?
Ray stores numpy arrays in its shared-memory object store and deserializes them without copying:
a task argument, or the result of `ray.get`, is a read-only view of that memory. Ray's
serialization guide ("Fixing assignment destination is read-only") shows the failure:
`ValueError: assignment destination is read-only` (or `output array is read-only`), raised as
a `RayTaskError` inside a task. Checked with Ray 2.60: arguments of 10, 100 and 10^6 float64 are
all read-only inside the task, and so are arrays from `ray.get(ray.put(...))` in the driver; the
size of the array does not matter.

ray-lint is silent for:
- a name rebound before the write (`a = a.copy()`, `a = np.array(a)`; a rebinding in a branch
  counts too), or one whose write flag the code sets;
- values not shown to be numpy arrays: lists and dicts (Ray copies them, so they are writable),
  torch tensors (copied unless zero-copy tensors are enabled), unannotated parameters;
- arrays built with `dtype=object`, which Ray pickles normally;
- writes in nested functions, and arrays reached through attributes or containers.

## Example
```python
@ray.remote
def normalize(batch: np.ndarray):
    batch -= batch.mean()
    return batch
```

## Use instead
```python
@ray.remote
def normalize(batch: np.ndarray):
    batch = batch.copy()
    batch -= batch.mean()
    return batch
```
or compute a new array: `return batch - batch.mean()`.

## Fix safety
The fix copies the array before it is written: `x = ray.get(ref)` becomes
`x = ray.get(ref).copy()`, and a parameter gets `x = x.copy()` as the first statement of the
function (after its docstring). It is unsafe: the write could never succeed before, so code after
it now runs for the first time, and the copy doubles the memory the array takes. It is not offered
for a parameter with a default value, or when the function body does not start with a simple
statement.

## References
- [Serialization: numpy arrays and "assignment destination is read-only"](https://docs.ray.io/en/latest/ray-core/objects/serialization.html#fixing-assignment-destination-is-read-only)
- [Objects: fetching object data (zero-copy reads)](https://docs.ray.io/en/latest/ray-core/objects.html)
"""

    VALID = [
        Valid(
            "import numpy as np\nimport ray\n@ray.remote\ndef f(a: np.ndarray):\n    a = a.copy()\n    a[0] = 1\n    return a\n",
            "copied before the write",
        ),
        Valid(
            "import numpy as np\nimport ray\n@ray.remote\ndef f(config: dict):\n    config['seed'] = 1\n    return config\n",
            "a dict argument is a copy, and writable",
        ),
        Valid("import numpy as np\nimport ray\n@ray.remote\ndef f(a):\n    a[0] = 1\n    return a\n", "not shown to be a numpy array"),
        Valid(
            "import numpy as np\nimport ray\n@ray.remote\ndef f(a: np.ndarray):\n    b = a * 2\n    b[0] = 1\n    return b\n",
            "writes to a new array",
        ),
        Valid(
            "import numpy as np\nimport ray\nref = ray.put(np.zeros(10))\narr = np.array(ray.get(ref))\narr[0] = 1\n",
            "np.array copies",
        ),
        Valid(
            "import numpy as np\nimport ray\nref = ray.put(np.array([{}, {}], dtype=object))\nitems = ray.get(ref)\nitems[0] = {'a': 1}\n",
            "an object array is pickled, not zero-copy",
        ),
        Valid(
            "import numpy as np\nimport ray\n@ray.remote\ndef f(a: np.ndarray):\n    if not a.flags.writeable:\n        a = a.copy()\n"
            "    a[0] = 1\n",
            "rebound in a branch before the write",
        ),
        Valid(
            "import numpy as np\n@ray.remote\ndef f(a: np.ndarray):\n    a[0] = 1\n",
            "no `import ray`: not a Ray task",
        ),
        Valid(
            "import numpy as np\nimport ray\n\ndef f(a: np.ndarray):\n    a[0] = 1\n",
            "a plain function",
        ),
        Valid(
            "import numpy as np\nimport ray\nimport torch\n@ray.remote\ndef f(t: torch.Tensor):\n    t[0] = 1\n",
            "a torch tensor argument is copied",
        ),
        Valid(
            "import numpy as np\nimport ray\nrefs = [ray.put(np.zeros(4)) for _ in range(3)]\nout = ray.get(refs)\nout[0] = None\n",
            "a list of results: the list is writable",
        ),
    ]
    INVALID = [
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef normalize(batch: np.ndarray):\n    batch -= batch.mean()\n    return batch\n",
            6,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef normalize(batch: np.ndarray):\n    batch = batch.copy()\n"
            "    batch -= batch.mean()\n    return batch\n",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\nref = ray.put(np.zeros(10))\narr = ray.get(ref)\narr[0] = 1\n",
            6,
            fixed="import numpy as np\nimport ray\n\nref = ray.put(np.zeros(10))\narr = ray.get(ref).copy()\narr[0] = 1\n",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef clip(x, low):\n    \"\"\"Clip in place.\"\"\"\n    np.clip(x, low, None, out=x)\n"
            "    return x\n",
            7,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef clip(x, low):\n    \"\"\"Clip in place.\"\"\"\n    x = x.copy()\n"
            "    np.clip(x, low, None, out=x)\n    return x\n",
            note="out= proves an ndarray; the copy goes after the docstring",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef fill(grid):\n    grid[:, 0] = 0\n    return grid\n\n"
            "ref = fill.remote(np.ones((4, 4)))\n",
            6,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef fill(grid):\n    grid = grid.copy()\n    grid[:, 0] = 0\n"
            "    return grid\n\nref = fill.remote(np.ones((4, 4)))\n",
            note="a call site passes a numpy array",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\nclass Buffer:\n    def load(self, data: np.ndarray, offset=0):\n"
            "        data.sort()\n        return data[offset:]\n",
            7,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\nclass Buffer:\n    def load(self, data: np.ndarray, offset=0):\n"
            "        data = data.copy()\n        data.sort()\n        return data[offset:]\n",
            note="an actor method",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef make(n) -> np.ndarray:\n    return np.zeros(n)\n\n"
            "out = ray.get(make.remote(5))\nnp.copyto(out, 1.0)\n",
            9,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef make(n) -> np.ndarray:\n    return np.zeros(n)\n\n"
            "out = ray.get(make.remote(5)).copy()\nnp.copyto(out, 1.0)\n",
            note="the result of a task annotated to return an ndarray",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef step(state: np.ndarray, lr=0.1):\n    for i in range(3):\n"
            "        state[i] *= lr\n    return state\n",
            7,
            fixed="import numpy as np\nimport ray\n\n@ray.remote\ndef step(state: np.ndarray, lr=0.1):\n    state = state.copy()\n"
            "    for i in range(3):\n        state[i] *= lr\n    return state\n",
            note="a body that starts with a compound statement: the copy goes before it",
        ),
        Invalid(
            "import numpy as np\nimport ray\n\n@ray.remote\ndef f(a: np.ndarray = None):\n    a[0] = 1\n",
            6,
            note="a parameter with a default: no fix",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("numpy"):
            return
        writes = _Writes(model)
        for source in [*self._parameters(ctx), *self._fetched(ctx)]:
            write = writes.first(model, source.binding)
            if write is None or not (write.proves_ndarray or source.evidence()):
                continue
            name = source.binding.name
            ctx.report(
                write.node,
                f"`{name}`, a numpy array {source.origin}, is a read-only view, so this write raises",
                fix=source.fix(),
                facts=ZeroCopyFacts(source.fetched),
            )

    def _parameters(self, ctx: Context) -> list[_Source]:
        model = ctx.model
        found = []
        for remote in model.remote_defs:
            for info in model.remote_functions(remote):
                params = info.node.params
                positional = [*params.posonly_params, *params.params]
                skip = 1 if info.owner is not None and positional else 0  # `self`
                kind = "method" if info.owner is not None else "task"
                for position, param in enumerate([*positional, *params.kwonly_params]):
                    binding = next((b for b in info.scope.bindings.get(param.name.value, ()) if b.node is param), None)
                    if position < skip or binding is None:
                        continue
                    at = position - skip if position < len(positional) else None
                    found.append(
                        _Source(
                            binding,
                            f"passed to {kind} `{info.node.name.value}`",
                            False,
                            partial(_parameter_is_array, model, remote, info, param, at),
                            partial(_copy_first, ctx, info, param),
                        )
                    )
        return found

    def _fetched(self, ctx: Context) -> list[_Source]:
        model = ctx.model
        found = []
        for site in model.calls_to("ray.get"):
            args = site.node.args
            if not args or args[0].keyword is not None or args[0].star or any(arg.keyword is None for arg in args[1:]):
                continue  # one ref, and keywords such as `timeout=`
            if isinstance(args[0].value, (cst.List, cst.Tuple, cst.ListComp)):
                continue
            name = _assigned_name(site.statement, site.node)
            binding = next((b for b in site.scope.bindings.get(name or "", ()) if b.value is site.node), None)
            if binding is None:
                continue
            found.append(
                _Source(
                    binding,
                    "from `ray.get`",
                    True,
                    partial(_fetched_is_array, model, site),
                    partial(_copy_result, ctx, site.node),
                )
            )
        return found


def _parameter_is_array(model: SemanticModel, remote: RemoteDef, info: FunctionInfo, param: cst.Param, position: int | None) -> bool:
    return _annotated_ndarray(model, param.annotation, info.parent_scope) or _passed_arrays(model, remote, info, param, position)


def _fetched_is_array(model: SemanticModel, site: CallSite) -> bool:
    annotation = site.statement.annotation if isinstance(site.statement, cst.AnnAssign) else None
    return _annotated_ndarray(model, annotation, site.scope) or _ref_of_array(model, site.node.args[0].value, site.scope, site.index)


def _copy_result(ctx: Context, call: cst.Call) -> FixPlan:
    return FixPlan("Copy the array before writing to it", ((call, ctx.model.source_of(call) + ".copy()"),), Applicability.UNSAFE)


def _assigned_name(statement: cst.CSTNode | None, value: cst.Call) -> str | None:
    """`x` for the statement `x = value` or `x: T = value`."""
    if isinstance(statement, cst.Assign) and statement.value is value and len(statement.targets) == 1:
        target = statement.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    if isinstance(statement, cst.AnnAssign) and statement.value is value and isinstance(statement.target, cst.Name):
        return statement.target.value
    return None


def _annotated_ndarray(model: SemanticModel, annotation: cst.Annotation | None, scope: Scope) -> bool:
    """`np.ndarray`, `npt.NDArray[...]` (also as a string); not unions, which may be something else."""
    if annotation is None:
        return False
    expr = annotation.annotation
    text = literal_string(expr)
    if text is not None:
        return bool(_STRING_NDARRAY.fullmatch(text.strip()))
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    return model.qualified_name(expr, scope, AFTER_ALL) in NDARRAY_TYPES


def _numpy_array(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> bool:
    """Whether `expr` is a fresh numpy array of a non-object dtype: a numpy allocator, a copy of one, or a
    name bound to one."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return False
        return _numpy_array(model, binding.value, binding.scope, binding.index, depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "copy" and not expr.args:
        return _numpy_array(model, func.value, scope, at, depth + 1)
    if model.qualified_name(func, scope, at) not in NUMPY_MAKERS:
        return False
    for arg in expr.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            dtype = arg.value
            if literal_string(dtype) in ("O", "object") or model.module.code_for_node(dtype) in ("object", "np.object_", "numpy.object_"):
                return False
    return True


def _ref_of_array(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
    """Whether the ref `expr` holds a numpy array: `ray.put(<array>)`, or the result of a task of this module
    that is annotated to return an ndarray or returns numpy allocations only."""
    origin = model.ref_origin(expr, scope, at)
    if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
        return False
    producer = origin.producer
    site = model.call_site(producer)
    if site is None:
        return False
    if model.call_name(site) == "ray.put":
        args = producer.args
        return len(args) == 1 and _numpy_array(model, args[0].value, site.scope, site.index)
    submission = model.submission(producer)
    if submission is None or submission.kind != "task" or submission.remote is None:
        return False
    target = submission.remote.target
    info = model.function_info(target) if isinstance(target, cst.FunctionDef) else None
    if info is None:
        return False
    if _annotated_ndarray(model, info.node.returns, info.parent_scope):
        return True
    returns = [n for n in iter_subtree(info.node.body, into_functions=False) if isinstance(n, cst.Return)]
    return bool(returns) and all(
        r.value is not None and _numpy_array(model, r.value, info.scope, AFTER_ALL) for r in returns
    )


def _passed_arrays(model: SemanticModel, remote: RemoteDef, info: FunctionInfo, param: cst.Param, position: int | None) -> bool:
    """Whether a `.remote(...)` call in the file passes a numpy array (or `ray.put` of one) for `param`."""
    for site in model.calls_by_tail.get("remote", ()):
        submission = model.submission(site.node)
        if submission is None or submission.remote is not remote:
            continue
        if info.owner is not None and (submission.kind != "actor-method" or submission.method != info.node.name.value):
            continue
        if info.owner is None and submission.kind != "task":
            continue
        args = site.node.args
        if any(arg.star for arg in args):
            continue
        positional = [arg.value for arg in args if arg.keyword is None]
        keyword = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
        value = keyword.get(param.name.value)
        if value is None and position is not None and position < len(positional):
            value = positional[position]
        if value is None:
            continue
        if _numpy_array(model, value, site.scope, site.index) or _ref_of_array(model, value, site.scope, site.index):
            return True
    return False


def _subscript_root(expr: cst.Subscript) -> str | None:
    """`a` for `a[i]` and `a[i][j]` (a view of a read-only array is read-only), not for `a.b[i]`."""
    value: cst.BaseExpression = expr
    while isinstance(value, cst.Subscript):
        value = value.value
    return value.value if isinstance(value, cst.Name) else None


def _copy_first(ctx: Context, info: FunctionInfo, param: cst.Param) -> FixPlan | None:
    """`name = name.copy()` as the function's first statement (after its docstring); not for a parameter
    with a default value, which may be None."""
    name = param.name.value
    body = info.node.body
    if param.default is not None:
        return None
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    statements = list(body.body)
    first = statements[0]
    docstring = (
        isinstance(first, cst.SimpleStatementLine)
        and len(first.body) == 1
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
    statement = statements[1] if docstring and len(statements) > 1 else first
    anchor: cst.CSTNode = statement  # the node whose text the copy goes in front of
    if isinstance(statement, cst.SimpleStatementLine):
        if len(statement.body) != 1:
            return None
        anchor = statement.body[0]
    span = ctx.model.position(anchor)
    indent = ctx.model.module.code.splitlines()[span.start.line - 1][: span.start.column]
    if indent.strip():
        return None
    text = f"{name} = {name}.copy()\n{indent}{ctx.model.source_of(anchor)}"
    return FixPlan(f"Copy `{name}` before writing to it", ((anchor, text),), Applicability.UNSAFE)
