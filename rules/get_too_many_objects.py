"""RAY003 get-too-many-objects: one `ray.get` on a list of very many refs, or of refs whose results add
up to a lot of memory, fetches them all into the caller at once."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import (
    AFTER_ALL,
    Binding,
    FunctionInfo,
    Loop,
    block_statements,
    iter_subtree,
)
from ray_lint.rule import Context, Invalid, Option, Rule, Valid
from ray_lint.sizes import format_bytes, size_of

# Calls whose result is a scalar or a short string: such task results are inlined and cheap.
SMALL_RESULT_CALLS = frozenset({"len", "int", "float", "bool", "round", "abs", "hash", "id", "item"})


class GetTooManyObjects(Rule):
    code = "RAY003"
    name = "get-too-many-objects"
    message = "One `ray.get` fetches a very large number of results, or a lot of memory, all at once"
    severity = Severity.WARNING
    category = "resource"
    preview = True
    tokens = (".remote(",)
    also_tokens = ("range(",)
    options = (
        Option("min-refs", 1000, "How many refs of unknown result size one `ray.get` may fetch before it is reported."),
        Option(
            "total-mb",
            1000,
            "Total size, in megabytes (10**6 bytes), from which results of a known size are reported, whatever their number.",
        ),
    )
    no_experiment = (
        "its cost is spilling once the results outgrow the object store, and the verifier's shared cluster "
        "has a store far larger than a model's data"
    )
    docs = """
## What it does
Finds one `ray.get(refs)` on a list of refs built by a comprehension or a loop over
`range(N)`, where `N` is a literal (or a module constant, or a product of them), when either
- each task's result has a size the code makes certain (a `numpy`/`torch` allocation with a
  literal shape, `bytes(n)`, ... returned by a remote function of the same file) and the
  results add up to `total-mb` megabytes (1,000 by default) or more; or
- the result size is not known and `N` is at least `min-refs` (1,000 by default).

## Why is this bad?
`ray.get` on a list returns only when every result is in the caller: all of them are copied
into the caller's node's object store and deserialized into its heap at the same time. With
enough results this spills the object store to disk or runs the caller (often the driver) out
of memory. Ray's "Fetching too many objects at once with ray.get causes failure" page
recommends fetching and processing one batch at a time, so each batch can be evicted before
the next. Measured on a 2-core machine with Ray 2.60: 40 results of 8 MB each with a 100 MB
object store take 4.43 s with one `ray.get` (spilling) and 0.30 s in `ray.wait` batches of 5
(14.8×).

This rule is in preview: the size of a task's result is usually not in the code, so a large
count of refs is only a hint. A thousand small results (numbers, short strings, small
dicts) are inlined in the reply to the caller and cost little.

ray-lint is silent when:
- the count is not a constant (`for x in items`), has a filter (`if ...` in the
  comprehension), or is below the thresholds;
- the remote function of this file returns only small values (numbers, booleans, short
  literals, `len(...)`, nothing at all), or is a generator (a streaming task);
- the refs come from `ray.put`, or are fetched in slices or `ray.wait` batches (the argument
  is not the whole list);
- the list is built by appends under a condition, or in a `while` loop.

## Example
```python
@ray.remote
def simulate(seed):
    return np.random.rand(1000, 1000)  # 8 MB

results = ray.get([simulate.remote(i) for i in range(500)])  # 4 GB at once
```

## Use instead
```python
pending = [simulate.remote(i) for i in range(500)]
while pending:
    ready, pending = ray.wait(pending, num_returns=min(50, len(pending)))
    for result in ray.get(ready):
        summarize(result)
```

## Fix safety
There is no automatic fix: the batches only help when each is processed and dropped before the
next, which needs the code that uses the results to change.

## Options
- `min-refs`: the number of refs of unknown size from which one `ray.get` is reported.
- `total-mb`: the total size of known-size results from which it is reported.

## References
- [Anti-pattern: Fetching too many objects at once with ray.get causes failure](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-too-many-objects.html)
- [Pattern: Using ray.wait to limit the number of pending tasks](https://docs.ray.io/en/latest/ray-core/patterns/limit-pending-tasks.html)
- [Object spilling](https://docs.ray.io/en/latest/ray-core/objects/object-spilling.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\ndef square(x):\n    return x * x\n\n"
            "results = ray.get([square.remote(i) for i in range(100)])\n",
            "100 refs: below the count threshold",
        ),
        Valid(
            "import ray\n@ray.remote\ndef check(i):\n    return i % 7 == 0\n\nflags = ray.get([check.remote(i) for i in range(100_000)])\n",
            "small results (booleans) are inlined and cheap",
        ),
        Valid(
            "import ray\n@ray.remote\ndef touch(path):\n    open(path, 'a').close()\n\nray.get([touch.remote(p) for p in range(5000)])\n",
            "the task returns nothing",
        ),
        Valid(
            "import ray\nrefs = [work.remote(x) for x in items]\nresults = ray.get(refs)\n",
            "the count is not in the code",
        ),
        Valid(
            "import ray\nrefs = [work.remote(i) for i in range(10_000)]\nwhile refs:\n    ready, refs = ray.wait(refs, num_returns=100)\n"
            "    handle(ray.get(ready))\n",
            "already fetched in ray.wait batches",
        ),
        Valid(
            "import ray\nrefs = [work.remote(i) for i in range(10_000)]\nfor start in range(0, len(refs), 100):\n"
            "    handle(ray.get(refs[start:start + 100]))\n",
            "fetched in slices",
        ),
        Valid(
            "import ray\nimport numpy as np\nrefs = [ray.put(np.zeros(10**6)) for _ in range(2000)]\nvalues = ray.get(refs)\n",
            "ray.put objects are already in this process's object store",
        ),
        Valid(
            "import ray\nrefs = [work.remote(i) for i in range(10_000) if keep(i)]\nresults = ray.get(refs)\n",
            "a filter: the count is not certain",
        ),
        Valid("refs = [work.remote(i) for i in range(10_000)]\nresults = ray.get(refs)\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import ray\nimport numpy as np\n@ray.remote\ndef block(i):\n    return np.zeros((100, 100))\n\n"
            "blocks = ray.get([block.remote(i) for i in range(500)])\n",
            "known size, 40 MB in all: below the total threshold",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote\ndef simulate(seed):\n    return np.random.rand(1000, 1000)\n\n"
            "results = ray.get([simulate.remote(i) for i in range(500)])\n",
            8,
            note="500 results of 8 MB each",
        ),
        Invalid(
            "import ray\nimport numpy as np\n\nNUM_TASKS = 20_000\n\n@ray.remote\ndef return_big_object():\n"
            "    return np.zeros(1024 * 10)\n\nobject_refs = [return_big_object.remote() for _ in range(NUM_TASKS)]\n"
            "results = ray.get(object_refs)\n",
            11,
            note="the docs' example, with 20,000 tasks of 82 KB through a module constant: 1.6 GB",
        ),
        Invalid(
            "import ray\nrefs = []\nfor shard in range(4096):\n    refs.append(load_shard.remote(shard))\ntables = ray.get(refs)\n",
            5,
            note="a list filled in a loop, result size unknown",
        ),
        Invalid(
            "import ray as r\nrefs = [[f.remote(i, j) for j in range(100)] for i in range(100)]\n"
            "flat = r.get([f.remote(i, j) for i in range(50) for j in range(50)])\n",
            3,
            note="nested comprehension: 2,500 refs",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote\nclass Sampler:\n    def sample(self, i):\n"
            "        return torch.zeros(256, 1024, 1024)\n\nsampler = Sampler.remote()\n"
            "batches = ray.get([sampler.sample.remote(i) for i in range(8)])\n",
            10,
            note="an actor method returning 1 GB tensors",
        ),
        Invalid(
            "from ray import get\nrefs = [score.remote(i) for i in range(2 * 1000)]\nscores = get(refs)\n",
            3,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        min_refs = int(self.settings["min-refs"])
        total_bytes = int(self.settings["total-mb"]) * 10**6
        for get in model.calls_to("ray.get"):
            args = get.node.args
            if not args or args[0].star or args[0].keyword is not None:
                continue
            origin = model.ref_origin(args[0].value, get.scope, get.index)
            if origin is None or origin.kind != "ref-list":
                continue
            counted = _count_refs(model, origin.producer, origin.binding)
            if counted is None:
                continue
            count, element, where = counted
            submission = model.submission(element) if isinstance(element, cst.Call) else None
            if submission is None or not submission.returns_ref:
                continue  # `ray.put` refs, or refs the code does not show being submitted
            size = _result_size(model, submission)
            if size == "small":
                continue
            if isinstance(size, int):
                if count * size < total_bytes:
                    continue
                message = (
                    f"`{ctx.snippet(get.node, limit=30)}` fetches {count:,} results, about {format_bytes(count * size)}, at once"
                )
            elif count >= min_refs:
                built = "" if any(node is where for node in iter_subtree(get.node)) else f" (list built at {ctx.line_of(where)})"
                message = (
                    f"`{ctx.snippet(get.node, limit=30)}` fetches {count:,} results at once{built}"
                )
            else:
                continue
            ctx.report(get.node, message)


def _count_refs(
    model: SemanticModel, producer: cst.BaseExpression, binding: Binding | None
) -> tuple[int, cst.BaseExpression, cst.CSTNode] | None:
    """How many refs a list holds, when the code makes it certain, the expression that makes each one,
    and the node that builds the list: a comprehension over `range(...)` of constant bounds (nested
    `for`s multiply), or a list bound empty and filled by one unconditional `append` in such loops."""
    if isinstance(producer, (cst.ListComp, cst.GeneratorExp)):
        inner = model.comprehension_scope(producer)
        scope = inner.parent if inner is not None else None
        if scope is None:
            return None
        count = 1
        comp_for: cst.CompFor | None = producer.for_in
        while comp_for is not None:
            if comp_for.ifs or comp_for.asynchronous is not None:
                return None
            length = model.iteration_count(comp_for.iter, scope, AFTER_ALL)
            if length is None:
                return None
            count *= length
            comp_for = comp_for.inner_for_in
        return count, producer.elt, producer
    if isinstance(producer, cst.List) and not producer.elements and binding is not None:
        return _count_appended(model, binding)
    return None


def _count_appended(model: SemanticModel, binding: Binding) -> tuple[int, cst.BaseExpression, cst.CSTNode] | None:
    """For `refs = []` filled by `refs.append(f.remote(i))` in `for` loops over constant ranges: the count."""
    sites = [
        site
        for site in model.calls_by_tail.get("append", ())
        if isinstance(site.node.func, cst.Attribute)
        and isinstance(site.node.func.value, cst.Name)
        and site.node.func.value.value == binding.name
        and model.reaching_binding(binding.name, site.scope, site.index) is binding
    ]
    if len(sites) != 1 or len(sites[0].node.args) != 1 or sites[0].scope is not binding.scope:
        return None
    site = sites[0]
    count = 1
    statement: cst.CSTNode | None = site.statement
    loop: Loop | None = site.loop
    while loop is not None and not loop.encloses(binding.loop):
        node = loop.node
        if not isinstance(node, cst.For) or node.orelse is not None or statement is None:
            return None
        if not any(s is statement for s in block_statements(node.body)):
            return None  # under a condition, or in a `try`: the count is not certain
        length = model.iteration_count(node.iter, loop.scope, loop.start)
        if length is None:
            return None
        count *= length
        statement, loop = node, loop.parent
    if site.loop is None:
        return None
    value = site.node.args[0].value
    if isinstance(value, cst.Name):
        origin = model.ref_origin(value, site.scope, site.index)
        value = origin.producer if origin is not None and origin.kind == "ref" else value
    return count, value, binding.node


def _result_size(model: SemanticModel, submission: Submission) -> int | str:
    """The size of one result in bytes when every `return` of the remote function or actor method makes it
    certain; "small" when every one returns a scalar, a short literal or nothing; "unknown" otherwise
    (also for a generator, a streaming task, which is reported as small: its refs stream)."""
    function = _remote_function(model, submission)
    if function is None:
        return "unknown"
    returned: list[cst.Return] = []
    for node in iter_subtree(function.node.body, into_functions=False):
        if isinstance(node, (cst.Yield, cst.Await)):
            return "small" if isinstance(node, cst.Yield) else "unknown"
        if isinstance(node, cst.Return):
            returned.append(node)
    values = [r.value for r in returned if r.value is not None]
    if all(_is_small(value) for value in values):
        return "small"
    sizes = [_returned_size(model, function, value) for value in values]
    if all(size is not None for size in sizes):
        return max(size for size in sizes if size is not None)
    return "unknown"


def _remote_function(model: SemanticModel, submission: Submission) -> FunctionInfo | None:
    """The function that runs for a submission: the task, or the actor's method, when this file defines it."""
    remote = submission.remote
    if remote is None:
        return None
    if submission.kind == "task" and isinstance(remote.target, cst.FunctionDef):
        return model.function_info(remote.target)
    if submission.kind == "actor-method" and remote.cls is not None and submission.method is not None:
        return model.method(remote.cls, submission.method)
    return None


def _returned_size(model: SemanticModel, function: FunctionInfo, value: cst.BaseExpression) -> int | None:
    site = model.call_site(value) if isinstance(value, cst.Call) else None
    at = site.index if site is not None else AFTER_ALL
    size = size_of(model, value, function.scope, at)
    return size.bytes if size is not None else None


def _is_small(value: cst.BaseExpression) -> bool:
    """A returned value that is certainly small: a number, a boolean, None, a short literal string, a
    comparison, `len(...)` and other scalar builtins, or a short tuple of those."""
    if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary, cst.Comparison)):
        return True
    if isinstance(value, cst.Name):
        return value.value in ("True", "False", "None")
    if isinstance(value, cst.SimpleString):
        return len(value.value) <= 1000
    if isinstance(value, cst.UnaryOperation):
        return isinstance(value.operator, cst.Not) or _is_small(value.expression)
    if isinstance(value, cst.BooleanOperation):
        return _is_small(value.left) and _is_small(value.right)
    if isinstance(value, cst.Tuple):
        return len(value.elements) <= 16 and all(_is_small(element.value) for element in value.elements)
    if isinstance(value, cst.Call):
        func = value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        return name in SMALL_RESULT_CALLS
    return False
