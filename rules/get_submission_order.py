"""RAY002 get-submission-order: a loop over refs submitted beforehand fetches each with `ray.get`, in
submission order, and does real work on each result."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.loop_dependence import LoopResults, loop_results, sequential_by_design
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Experiment, Plan, Run, Subject, Variant, script, timed
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import (
    COMPREHENSIONS,
    Binding,
    CallSite,
    Loop,
    Scope,
    block_statements,
    iter_subtree,
    names_read,
    target_names,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Calls that cost next to nothing per result, or only record it: a loop doing only these gains little
# from completion order (`total += ray.get(r)` is better as one `ray.get(refs)`).
CHEAP_CALLS = frozenset(
    {
        # builtins
        "print", "len", "str", "repr", "int", "float", "bool", "complex", "bytes", "list", "tuple", "dict", "set",
        "frozenset", "isinstance", "issubclass", "type", "id", "hash", "format", "sum", "min", "max", "abs", "round",
        "sorted", "reversed", "enumerate", "zip", "range", "iter", "next", "any", "all", "getattr", "hasattr",
        "setattr", "vars", "callable", "divmod",
        # containers and strings
        "append", "appendleft", "extend", "add", "insert", "update", "setdefault", "get", "items", "keys", "values",
        "copy", "pop", "remove", "discard", "join", "split", "strip", "lower", "upper", "replace", "startswith",
        "endswith", "count", "index", "tolist", "item", "encode", "decode",
        # logging and progress
        "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "set_description", "set_postfix",
        "approx", "raises",
    }
)
# Calls that put each result into an ordered sink (a file, a socket, a queue): the order is the output.
ORDERED_SINKS = frozenset({"write", "writelines", "writerow", "writerows", "send", "sendall", "put", "put_nowait", "emit"})
ORDERED_COLLECTORS = frozenset({"append", "appendleft", "extend", "extendleft", "insert"})
PENDING_NAMES = ("pending", "pending_refs", "unfinished", "not_ready")


@dataclass(frozen=True)
class _RefLoop:
    """A loop over a list of refs submitted before it, and the get in its body that fetches each one."""

    loop: Loop
    get: CallSite
    ref_name: str
    refs: cst.BaseExpression  # the list the loop walks (inside `enumerate(...)` or `zip(...)` if used)
    direct: bool  # `for ref in refs:` itself, not through enumerate or zip
    producers: tuple[cst.BaseExpression, ...]  # each `.remote(...)` or other expression that made a ref of the list


class SubmissionOrderExperiment(Experiment[None]):
    """The user's script as written and fixed, timing the function that holds the loop; or, when it
    cannot run as is, a straggler submitted first and short tasks after it, each result followed by
    work in the driver, handled in submission order and as they finish.

    Judged by wall time and by the driver's work left after the last task ended, not by the timeline's
    parallelism: both forms run the same tasks at once, and the gain is the driver's work overlapping
    the tasks still running."""

    facts_type = type(None)
    shares_driver = True
    STRAGGLER_SECONDS = 1.0
    SHORT_TASKS = 10
    SHORT_SECONDS = 0.05
    WORK_SECONDS = 0.1

    def plan(self, subject: Subject) -> Plan:
        return self.on_user_code_or(subject, self.model())

    def model(self) -> Plan:
        delays = [self.STRAGGLER_SECONDS] + [self.SHORT_SECONDS] * self.SHORT_TASKS
        setup = (
            f"@ray.remote\ndef task(delay):\n    time.sleep(delay)\n    return delay\n\n"
            f"def process(value):\n    time.sleep({self.WORK_SECONDS})  # stands for work on the result\n    return value\n\n"
        )
        submit = f"refs = [task.remote(d) for d in {delays!r}]\n"
        in_order = submit + "return [process(ray.get(ref)) for ref in refs]"
        as_ready = (
            submit + "pending, out = list(refs), []\nwhile pending:\n"
            "    [ref], pending = ray.wait(pending, num_returns=1)\n    out.append(process(ray.get(ref)))\nreturn sorted(out)"
        )
        shape = (
            f"a {self.STRAGGLER_SECONDS:g} s task submitted first, then {self.SHORT_TASKS} of {self.SHORT_SECONDS:g} s; "
            f"{self.WORK_SECONDS:g} s of work in the driver on each result"
        )
        return Plan(
            Variant("submission order", script(setup + timed(in_order))),
            Variant("ray.wait", script(setup + timed(as_ready))),
            "modelled",
            shape,
        )

    def evidence(self, plan: Plan, a: list[Run], b: list[Run]) -> tuple[str, bool, str]:
        """Both forms run the same tasks at once: what changes is the driver work left after the last task."""
        tail_a, tail_b = _driver_tail(a), _driver_tail(b)
        if tail_a is None or tail_b is None:
            return "", True, ""
        shown = f"; driver work left after the last task ended: {tail_a:.2f} s vs {tail_b:.2f} s"
        return shown, tail_a > tail_b, f"{plan.b.label} leaves no less work after the tasks"

    def why_not(self, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> str:
        return f": below the {self.threshold:.1f}× threshold (the tasks may take about as long as each other)"


def _driver_tail(runs: list[Run]) -> float | None:
    """Median time the run went on after its last task ended: the work still waiting in the driver."""
    tails = [run.window[1] - max(end for _, end, _ in run.timeline) for run in runs if run.timeline]
    return statistics.median(tails) if tails else None


class GetSubmissionOrder(Rule):
    code = "RAY002"
    name = "get-submission-order"
    message = "Results are fetched in submission order, so work on fast results waits behind slow tasks"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = (".remote(",)
    also_tokens = ("get(", "get as")
    experiment = SubmissionOrderExperiment()
    docs = """
## What it does
Finds a `for` loop (or a comprehension) that walks a list of refs submitted before the loop,
fetches each one with `ray.get(ref)`, and does real work on each result (calls a function with
it), as in `for ref in refs: process(ray.get(ref))`.

## Why is this bad?
The tasks run in parallel, but the loop handles their results strictly in the order they were
submitted: if the first task is a straggler, the loop blocks on it while later results are
ready and waiting, and all of their processing is pushed back. Handling each result as soon as
it is ready, with `ray.wait`, overlaps the processing with the tasks still running. Ray's
"Processing results in submission order using ray.get increases runtime" page and its
tips for first-time users show the effect (7.8 s against 4.85 s in the tips). Measured on a
2-core machine with Ray 2.60: tasks of 1.0, 0.1, 0.1 and 0.1 s, each result followed by 0.3 s
of processing, take 2.21 s in submission order and 1.31 s with `ray.wait` (1.7×).

ray-lint is silent when completion order cannot help or would change the result:
- the body only records the result (`out.append(ray.get(r))`, `total += ray.get(r)`,
  `print`, logging, asserts): one `ray.get(refs)` is simpler and as fast;
- the results go to an ordered sink (`f.write`, `writer.writerow`, `queue.put`, `send`),
  are `yield`ed, or are folded into a value that each step feeds to the next
  (`state = merge(state, ray.get(r))`);
- the loop stops early on a result (`break`, `return`), polls, or times each iteration;
- the refs were already passed to `ray.wait`;
- the refs come from `ray.put` (already there), from a single synchronous actor (it runs the
  calls in order anyway), from a chain of tasks each taking the previous ref, or from an
  `ObjectRefGenerator` (already streaming);
- the get waits for a task submitted in the same iteration: RAY001 reports that;
- the loop is in an `async def` (there, RAY006 asks for `await`).

## Example
```python
refs = [render.remote(scene) for scene in scenes]
for ref in refs:
    frame = ray.get(ref)
    encode_and_upload(frame)
```

## Use instead
```python
pending = [render.remote(scene) for scene in scenes]
while pending:
    [ref], pending = ray.wait(pending, num_returns=1)
    frame = ray.get(ref)
    encode_and_upload(frame)
```
`ray.util.as_completed(refs)` (an alpha API in Ray 2.60) yields the results in the same way.

## Fix safety
The fix is unsafe: it handles the results in the order the tasks finish, so anything the body
appends, prints or raises comes out in a different order, and an exception from a slow task
surfaces later. It is offered for a plain `for ref in refs:` loop (no `else`, the header on one
line) over refs made by `.remote(...)` calls, when the get is written `ray.get` (or through an
alias of the `ray` module), and not when the body appends to a list (whose order would change
silently); it copies the list into a new name, so `refs` itself is unchanged.

## References
- [Anti-pattern: Processing results in submission order using ray.get increases runtime](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-submission-order.html)
- [Tips for first-time users: process results as they finish with ray.wait()](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
- [Optimizing performance: variable durations](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/optimize-performance.html)
- [ray.wait](https://docs.ray.io/en/latest/ray-core/api/doc/ray.wait.html)
"""

    VALID = [
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\ntotal = 0\nfor ref in refs:\n    total += ray.get(ref)\n",
            "a plain accumulation: sum(ray.get(refs)) is enough",
        ),
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nfor ref in refs:\n    out.append(ray.get(ref))\n    print(len(out))\n",
            "the body only records and prints the result",
        ),
        Valid(
            "import ray\npending = [f.remote(x) for x in xs]\nwhile pending:\n    done, pending = ray.wait(pending, num_returns=1)\n"
            "    process(ray.get(done[0]))\n",
            "already a ray.wait loop",
        ),
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nray.wait(refs, num_returns=len(refs))\nfor ref in refs:\n"
            "    process(ray.get(ref))\n",
            "every ref is ready before the loop",
        ),
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nwith open(path, 'w') as out:\n    for ref in refs:\n"
            "        out.write(render(ray.get(ref)))\n",
            "an ordered sink: the file must follow the input order",
        ),
        Valid(
            "import ray\ndef results(xs):\n    refs = [f.remote(x) for x in xs]\n    for ref in refs:\n        yield decode(ray.get(ref))\n",
            "a generator yields in submission order by design",
        ),
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nstate = init()\nfor ref in refs:\n    state = merge(state, ray.get(ref))\n",
            "a fold: each step feeds the next, order may matter",
        ),
        Valid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nfor ref in refs:\n    result = ray.get(ref)\n    if is_match(result):\n"
            "        break\n",
            "stops at the first match in submission order",
        ),
        Valid("import ray\nfor x in xs:\n    process(ray.get(f.remote(x)))\n", "submitted in the same iteration: RAY001's finding"),
        Valid(
            "import ray\nrefs = [ray.put(chunk) for chunk in chunks]\nfor ref in refs:\n    process(ray.get(ref))\n",
            "ray.put refs are ready at once",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Reader:\n    def read(self, i):\n        return i\n\nreader = Reader.remote()\n"
            "refs = [reader.read.remote(i) for i in range(10)]\nfor ref in refs:\n    process(ray.get(ref))\n",
            "one synchronous actor finishes its calls in order anyway",
        ),
        Valid(
            "import ray\nrefs = [first.remote()]\nfor i in range(5):\n    refs.append(step.remote(refs[-1]))\nfor ref in refs:\n"
            "    process(ray.get(ref))\n",
            "a chain: each task waits for the previous one, so they finish in order",
        ),
        Valid(
            "refs = [f.remote(x) for x in xs]\nfor ref in refs:\n    process(ray.get(ref))\n",
            "no `import ray`: `ray` is not Ray here",
        ),
        Valid(
            "import ray\nasync def run(xs):\n    refs = [f.remote(x) for x in xs]\n    for ref in refs:\n        process(ray.get(ref))\n",
            "in a coroutine RAY006 asks for await instead",
        ),
        Valid(
            "import ray\ndef consume(refs):\n    for ref in refs:\n        process(ray.get(ref))\n",
            "the refs come from the caller: nothing shows they are independent tasks",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nfor ref in refs:\n    process(ray.get(ref))\n",
            4,
            fixed="import ray\nrefs = [f.remote(x) for x in xs]\npending = list(refs)\nwhile pending:\n"
            "    [ref], pending = ray.wait(pending, num_returns=1)\n    process(ray.get(ref))\n",
        ),
        Invalid(
            "import ray\n\ndef run(scenes):\n    refs = []\n    for scene in scenes:\n        refs.append(render.remote(scene))\n"
            "    for ref in refs:  # one frame at a time\n        # encode as we go\n        frame = ray.get(ref)\n"
            "        upload(encode(frame))\n",
            9,
            fixed="import ray\n\ndef run(scenes):\n    refs = []\n    for scene in scenes:\n        refs.append(render.remote(scene))\n"
            "    pending = list(refs)\n    while pending:  # one frame at a time\n"
            "        [ref], pending = ray.wait(pending, num_returns=1)\n        # encode as we go\n        frame = ray.get(ref)\n"
            "        upload(encode(frame))\n",
            note="a list filled with append; the header's comment is kept",
        ),
        Invalid(
            "import ray as rt\npending = 0\nfor ref in [f.remote(x) for x in xs]:\n    save(rt.get(ref), path)\n",
            4,
            fixed="import ray as rt\npending = 0\npending_refs = list([f.remote(x) for x in xs])\nwhile pending_refs:\n"
            "    [ref], pending_refs = rt.wait(pending_refs, num_returns=1)\n    save(rt.get(ref), path)\n",
            note="an alias of ray; `pending` is taken",
        ),
        Invalid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nfor i, ref in enumerate(refs):\n    results[i] = postprocess(ray.get(ref))\n",
            4,
            note="no fix through enumerate",
        ),
        Invalid(
            "import ray\nrefs = [f.remote(p) for p in paths]\nfor path, ref in zip(paths, refs):\n    table = ray.get(ref)\n"
            "    table.to_parquet(path)\n",
            4,
            note="work through a method of the result",
        ),
        Invalid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nout = []\nfor ref in refs:\n    out.append(postprocess(ray.get(ref)))\n",
            5,
            note="no fix: the list would come out in completion order",
        ),
        Invalid(
            "from ray import get\nrefs = [f.remote(x) for x in xs]\nfor ref in refs:\n    out.append(score(get(ref)))\n",
            4,
            note="no fix when `ray.wait` has no name in the file",
        ),
        Invalid(
            "import ray\nrefs = [f.remote(x) for x in xs]\nsummaries = [summarize(ray.get(ref)) for ref in refs]\n",
            3,
            note="the comprehension form",
        ),
        Invalid(
            "import ray\n\ndef evaluate(models):\n    refs = [train.options(num_gpus=1).remote(m) for m in models]\n    for ref in refs:\n"
            "        try:\n            metrics = ray.get(ref)\n        except ray.exceptions.RayTaskError:\n            continue\n"
            "        report(metrics)\n",
            7,
            fixed="import ray\n\ndef evaluate(models):\n    refs = [train.options(num_gpus=1).remote(m) for m in models]\n"
            "    pending = list(refs)\n    while pending:\n        [ref], pending = ray.wait(pending, num_returns=1)\n"
            "        try:\n            metrics = ray.get(ref)\n        except ray.exceptions.RayTaskError:\n            continue\n"
            "        report(metrics)\n",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for get in model.calls_to("ray.get"):
            found = _ref_loop(model, get)
            if found is None or not _independent(model, found) or _waited(model, found):
                continue
            facts = loop_results(model, found.loop)
            if sequential_by_design(model, found.loop, get, facts) or not _works_on_results(model, found, facts):
                continue
            message = (
                f"`{ctx.snippet(get.node, limit=40)}` fetches results in submission order, not as they finish"
            )
            ctx.report(get.node, message, self._fix(ctx, found))

    def _fix(self, ctx: Context, found: _RefLoop) -> FixPlan | None:
        """`for ref in refs:` becomes `pending = list(refs)` and `while pending:` whose first line takes the
        next finished ref with `ray.wait`; the body is kept as written, comments included."""
        model, node = ctx.model, found.loop.node
        if not isinstance(node, cst.For) or not found.direct or node.orelse is not None or node.asynchronous is not None:
            return None
        if not isinstance(node.body, cst.IndentedBlock) or not isinstance(node.target, cst.Name):
            return None
        if not all(isinstance(p, cst.Call) and model.submission(p) is not None for p in found.producers):
            return None
        if _collects_in_order(node):
            return None  # completion order would silently reorder the list the loop builds
        wait = _wait_function(model, found.get)
        if wait is None:
            return None
        start, iter_end = model.position(node), model.position(node.iter)
        if iter_end.end.line != start.start.line:
            return None  # a header over several lines: keep the fix simple
        taken = _names_in(model, found.get)
        pending = next((name for name in PENDING_NAMES if name not in taken), None)
        if pending is None:
            return None
        lines = model.module.code.splitlines(keepends=True)
        newline = model.module.default_newline
        indent = lines[start.start.line - 1][: start.start.column]
        body_start = model.position(node.body).start
        body_indent = lines[body_start.line - 1][: body_start.column]
        end = model.position(node).end
        after_header = "".join(lines[start.start.line : end.line - 1]) + lines[end.line - 1][: end.column]
        header_tail = ctx.code_for(node.body.header).rstrip("\r\n")
        text = (
            f"{pending} = list({ctx.code_for(node.iter)}){newline}"
            f"{indent}while {pending}:{header_tail}{newline}"
            f"{body_indent}[{node.target.value}], {pending} = {wait}({pending}, num_returns=1){newline}"
            f"{after_header}"
        )
        return FixPlan("Handle the results as they finish with `ray.wait`", ((node, text),), Applicability.UNSAFE)


def _collects_in_order(loop: cst.For) -> bool:
    """Whether the loop body adds to a sequence (`out.append(...)`, `extend`, `insert`), whose order
    would follow completion instead of submission after the fix."""
    return any(
        isinstance(node, cst.Call) and _callee(node) in ORDERED_COLLECTORS
        for node in iter_subtree(loop.body, into_functions=False)
    )


def _ref_loop(model: SemanticModel, get: CallSite) -> _RefLoop | None:
    """The loop when `get` fetches its loop variable, and the loop walks a list of refs the module
    shows being submitted before the loop."""
    loop = get.loop
    args = get.node.args
    if loop is None or loop.kind == "while" or not args or args[0].star or not isinstance(args[0].value, cst.Name):
        return None
    if any(arg.keyword is None for arg in args[1:]):
        return None
    function = get.scope.function
    if function is not None and function.is_async:
        return None
    ref_name = args[0].value.value
    binding = model.reaching_binding(ref_name, get.scope, get.index)
    if binding is None or binding.kind != "loop-target" or binding.loop is not loop:
        return None
    node = loop.node
    if isinstance(node, cst.For):
        target, iterable, outer = node.target, node.iter, loop.scope
    elif isinstance(node, COMPREHENSIONS) and node.for_in.inner_for_in is None:
        target, iterable = node.for_in.target, node.for_in.iter
        outer = loop.scope.parent or model.module_scope
    else:
        return None
    walked = _walked_refs(model, target, iterable, ref_name, outer, loop.start)
    if walked is None:
        return None
    refs, direct = walked
    origin = model.ref_origin(refs, outer, loop.start)
    if origin is None or origin.kind != "ref-list":
        return None
    if origin.binding is not None and loop.encloses(origin.binding.loop):
        return None
    built_in, built_at = (origin.binding.scope, origin.binding.index) if origin.binding is not None else (outer, loop.start)
    producers = _producers(model, origin.producer, origin.binding, built_in, built_at)
    if not producers:
        return None
    return _RefLoop(loop, get, ref_name, refs, direct, producers)


def _walked_refs(
    model: SemanticModel, target: cst.BaseExpression, iterable: cst.BaseExpression, ref_name: str, scope: Scope, at: int
) -> tuple[cst.BaseExpression, bool] | None:
    """The expression of the refs list the loop walks for `ref_name`: `for ref in refs`, `for i, ref in
    enumerate(refs)`, `for x, ref in zip(xs, refs)`; and whether it is walked directly."""
    if isinstance(target, cst.Name):
        return (iterable, True) if target.value == ref_name else None
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(iterable, cst.Call):
        return None
    func = iterable.func
    if not isinstance(func, cst.Name) or func.value not in ("enumerate", "zip"):
        return None
    if model.reaching_binding(func.value, scope, at) is not None:
        return None  # a local `zip` or `enumerate`, not the builtin
    elements = [element.value for element in target.elements]
    positions = [i for i, element in enumerate(elements) if isinstance(element, cst.Name) and element.value == ref_name]
    if len(positions) != 1 or any(arg.star or arg.keyword is not None for arg in iterable.args):
        return None
    position = positions[0]
    if func.value == "enumerate":
        return (iterable.args[0].value, False) if position == 1 and len(elements) == 2 and iterable.args else None
    if len(iterable.args) != len(elements):
        return None
    return iterable.args[position].value, False


def _producers(
    model: SemanticModel, producer: cst.BaseExpression, binding: Binding | None, scope: Scope, at: int
) -> tuple[cst.BaseExpression, ...]:
    """The expressions that made the refs of a list: a comprehension's element, or a literal's items
    (through the names they were bound to) and the refs later added with `name.append(...)`.
    `scope` and `at`: where the list was built."""
    if isinstance(producer, (cst.ListComp, cst.GeneratorExp)):
        return (producer.elt,)
    if not isinstance(producer, (cst.List, cst.Tuple)):
        return ()
    made = tuple(_made_by(model, element.value, scope, at) for element in producer.elements)
    if isinstance(producer, cst.List) and binding is not None:
        made += tuple(_made_by(model, value, site.scope, site.index) for site, value in model.appends_to(binding))
    return made


def _made_by(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> cst.BaseExpression:
    """The `.remote(...)` or `ray.put(...)` call behind a ref expression, when the module shows it."""
    origin = model.ref_origin(expr, scope, at)
    return origin.producer if origin is not None and origin.kind == "ref" else expr


def _independent(model: SemanticModel, found: _RefLoop) -> bool:
    """Whether the refs are of tasks that can finish in any order: every one is a `.remote(...)` call
    (not `ray.put`, which is ready at once), they are not all calls on one synchronous actor, and none
    takes a ref of the list (a chain finishes in order)."""
    submissions: list[Submission] = []
    for producer in found.producers:
        submission = model.submission(producer) if isinstance(producer, cst.Call) else None
        if submission is None or not submission.returns_ref:
            return False
        submissions.append(submission)
    list_name = found.refs.value if isinstance(found.refs, cst.Name) else None
    for submission in submissions:
        read = set().union(set(), *(names_read(arg.value) for arg in submission.call.args))
        if list_name is not None and list_name in read:
            return False
        site = model.call_site(submission.call)
        if site is not None and any(_chained(model, name, site) for name in read):
            return False
    return not _one_sync_actor(model, submissions)


def _chained(model: SemanticModel, name: str, site: CallSite) -> bool:
    """Whether `name`, an argument of the submission at `site`, holds a ref submitted in the same loop
    (`prev = step.remote(prev)`): each task then waits for the one before. A ref made outside the loop
    (`data_ref = ray.put(data)`, shared by every task) is no chain."""
    if site.loop is None:
        return False
    origin = model.ref_origin(cst.Name(name), site.scope, site.index)
    if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
        return False
    producer = model.call_site(origin.producer)
    return producer is not None and site.loop.encloses(producer.loop)


def _one_sync_actor(model: SemanticModel, submissions: list[Submission]) -> bool:
    """Every call goes to the same handle name of one synchronous, unthreaded actor of this module."""
    if not submissions or any(s.kind != "actor-method" for s in submissions):
        return False
    handles = {s.handle.value if isinstance(s.handle, cst.Name) else None for s in submissions}
    if len(handles) != 1 or None in handles:
        return False
    actors = {id(s.remote) for s in submissions}
    first = submissions[0].remote
    if len(actors) != 1 or first is None or first.cls is None:
        return False
    return not (first.is_async_actor or first.is_threaded_actor)


def _waited(model: SemanticModel, found: _RefLoop) -> bool:
    """A `ray.wait` in the same function (or module body) on the refs or on the loop's ref: the loop
    walks refs that are ready, or already handles completion order itself."""
    names = names_read(found.refs) | {found.ref_name}
    function = found.get.scope.function
    for wait in model.calls_to("ray.wait"):
        if wait.scope.function is not function:
            continue
        if any(names_read(arg.value) & names for arg in wait.node.args):
            return True
        if found.loop.contains_index(wait.index):
            return True
    return False


def _works_on_results(model: SemanticModel, found: _RefLoop, facts: LoopResults) -> bool:
    """Whether the body does real work with each result (calls something that is not a cheap builtin,
    container, logging or assertion call), and does not need the submission order: no `yield`, no write
    to an ordered sink, no fold of a result into a value carried to the next step."""
    node = found.loop.node
    parts: list[cst.CSTNode]
    if isinstance(node, cst.For):
        parts = list(block_statements(node.body))
    elif isinstance(node, cst.DictComp):
        parts = [node.key, node.value, *(c.test for c in node.for_in.ifs)]
    else:
        parts = [node.elt, *(c.test for c in node.for_in.ifs)]  # type: ignore[union-attr]
    derived = facts.derived - {found.ref_name}  # names holding a result; the ref itself counts only through a get
    works = False
    for part in parts:
        for inner in iter_subtree(part, into_functions=False):
            if isinstance(inner, (cst.Yield, cst.Await)):
                return False
            if isinstance(inner, cst.Assign) and _folds(inner, derived, found.get.node):
                return False
            if not isinstance(inner, cst.Call) or inner is found.get.node:
                continue
            name = _callee(inner)
            if name is None or name == "remote":
                continue
            if not _reads_result(inner, derived, found.get.node):
                continue
            if name in ORDERED_SINKS:
                return False
            if name not in CHEAP_CALLS and not name.startswith("assert") and not name[:1].isupper():
                site = model.call_site(inner)
                if site is None or not (model.call_name(site) or "").startswith("ray."):
                    works = True
    return works


def _callee(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def _reads_result(call: cst.Call, derived: set[str], get: cst.Call) -> bool:
    """Whether a call takes a result: as an argument (the get itself, or a name holding a result) or as
    the object whose method it calls (`table.to_parquet(path)`)."""
    for arg in call.args:
        if names_read(arg.value) & derived or any(node is get for node in iter_subtree(arg.value)):
            return True
    func = call.func
    return isinstance(func, cst.Attribute) and bool(names_read(func.value) & derived)


def _folds(assign: cst.Assign, derived: set[str], get: cst.Call) -> bool:
    """`state = merge(state, ray.get(ref))`: a result folded into a name the same value reads, a
    step that depends on the ones before it."""
    targets = set().union(set(), *(target_names(t.target) for t in assign.targets))
    read = names_read(assign.value)
    takes_result = bool(read & derived) or any(n is get for n in iter_subtree(assign.value))
    return takes_result and bool(targets & read) and any(isinstance(n, cst.Call) and n is not get for n in iter_subtree(assign.value))


def _wait_function(model: SemanticModel, get: CallSite) -> str | None:
    """`ray.wait` spelled as the file spells the Ray module in the get (`ray.get` -> `ray.wait`)."""
    func = get.node.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return None
    if model.qualified_name(func.value, get.scope, get.index) != "ray":
        return None
    return f"{func.value.value}.wait"


def _names_in(model: SemanticModel, get: CallSite) -> set[str]:
    """Every name used in the function (or module) that holds the get: a new name must not clash."""
    scope = get.scope.function or model.module_scope
    return {node.value for node in iter_subtree(scope.node) if isinstance(node, cst.Name)}
