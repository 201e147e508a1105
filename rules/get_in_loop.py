"""RAY001 get-in-loop: `ray.get` on a task submitted in the same loop iteration."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.model import (
    COMPREHENSIONS,
    CallSite,
    Loop,
    SemanticModel,
    Submission,
    child_nodes,
    iter_subtree,
    names_read,
)
from ray_lint.rule import Context, FixPlan, Invalid, Option, Rule, Valid


class GetInLoop(Rule):
    code = "RAY001"
    name = "get-in-loop"
    message = "`ray.get` waits for a task submitted in the same loop iteration, so the tasks run one at a time"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = (".remote(",)
    options = (
        Option(
            "extra-get-functions",
            [],
            "Qualified names of your own functions that block like `ray.get` (e.g. `mypkg.util.fetch`).",
        ),
    )
    docs = """
## What it does
Finds a `ray.get` inside a `for` or `while` loop, or inside a comprehension or generator
expression, that waits for a task (or actor call) submitted earlier in the same iteration.

## Why is this bad?
`ray.get` blocks until its task finishes, so the loop submits the next task only after the
previous one is done: the tasks run one at a time and the cluster sits idle. Ray's own
"Anti-pattern: Calling ray.get in a loop harms parallelism" page shows 4 one-second tasks
taking 4 s instead of 1 s. Measured on a 2-core machine with Ray 2.60: 8 tasks of 0.25 s take
2.03 s with a `ray.get` per iteration and 1.01 s with one `ray.get` after the loop (2.0×, the
number of CPUs).

ray-lint stays silent when the loop cannot be parallel or is already right:
- the loop needs the previous result to submit the next task (`x = ray.get(step.remote(x))`),
  or decides whether to go on from it (a `break` or the `while` condition);
- the ref came from `ray.wait`, from a list built before the loop, or from an earlier
  iteration (pipelining);
- the `ray.get` is in the loop's iterable (`for v in ray.get(refs)`), which runs once;
- the loop always exits in its first iteration.

The diagnostic is reported on the line of the `ray.get` call; put a `# noqa: RAY001` there.

## Example
```python
results = []
for x in items:
    results.append(ray.get(process.remote(x)))
```

## Use instead
```python
results = ray.get([process.remote(x) for x in items])
```
Or, to handle results as they finish, use `ray.wait` (see RAY002).

## Fix safety
The fix is unsafe: it starts every task before waiting for any, which changes when side
effects happen, how much memory the results take at once, and which exception surfaces
first. It is offered for comprehensions and generator expressions whose element is the
`ray.get`, and for a `for` loop whose only statement is `results.append(ray.get(...))`.

## Options
- `extra-get-functions`: qualified names of helpers that block like `ray.get`.

## References
- [Anti-pattern: Calling ray.get in a loop harms parallelism](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-loop.html)
- [Tips for first-time users: delay ray.get()](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
"""

    VALID = [
        Valid("import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n", "one get after submitting all"),
        Valid("import ray\nrefs = [f.remote(x) for x in xs]\nfor r in refs:\n    print(ray.get(r))\n", "refs built before the loop"),
        Valid("import ray\nfor v in ray.get([f.remote(x) for x in xs]):\n    print(v)\n", "get in the iterable runs once"),
        Valid(
            "import ray\npending = [f.remote(x) for x in xs]\nwhile pending:\n"
            "    ready, pending = ray.wait(pending)\n    print(ray.get(ready[0]))\n",
            "refs from ray.wait",
        ),
        Valid("import ray\nx = 0\nfor _ in range(10):\n    x = ray.get(step.remote(x))\n", "each step needs the previous result"),
        Valid(
            "import ray\ndone = False\nwhile not done:\n    done = ray.get(poll.remote())\n",
            "the loop condition depends on the result",
        ),
        Valid(
            "import ray\nfor x in xs:\n    if ray.get(check.remote(x)):\n        break\n",
            "search that stops at the first hit",
        ),
        Valid(
            "import ray\nnext_ref = f.remote(0)\nfor i in range(1, n):\n    ref, next_ref = next_ref, f.remote(i)\n"
            "    print(ray.get(ref))\n",
            "pipelining: the ref was submitted in the previous iteration",
        ),
        Valid("import ray\nfor x in xs:\n    return ray.get(f.remote(x))\n", "the loop exits in its first iteration"),
        Valid("for x in xs:\n    ray.get(f.remote(x))\n", "no `import ray`: `ray` is not Ray here"),
        Valid("import ray\nfor x in xs:\n    ray.put(ray.get(ref))\n", "the ref is not created in the loop"),
        Valid(
            "import ray\nimport time\nwhile time.time() < deadline:\n    statuses = ray.get(ctl.status.remote())\n"
            "    done = True\n    for s in statuses:\n        if s != 'ok':\n            done = False\n"
            "    if done:\n        return\n    time.sleep(1)\n",
            "polling until a condition read from the result holds",
        ),
        Valid(
            "import ray\nfor x in xs:\n    ref = f.remote(x)\n    ready, _ = ray.wait([ref], timeout=0)\n"
            "    if ready:\n        ray.get(ref)\n",
            "ray.wait said the ref is ready: the get does not block",
        ),
        Valid(
            "import ray\nnode = None\nfor actor in actors:\n    if node is None:\n"
            "        node = ray.get(actor.host.remote())\n    place(actor, node)\n",
            "runs once: guarded by a condition on an earlier result",
        ),
        Valid(
            "import ray\nfor batch in batches:\n    refs = [f.remote(x) for x in batch]\n    out.extend(ray.get(refs))\n",
            "one get per batch of parallel tasks",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfor x in xs:\n    results.append(ray.get(f.remote(x)))\n",
            3,
            fixed="import ray\nresults.extend(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n",
            2,
            fixed="import ray\nresults = ray.get([f.remote(x) for x in xs])\n",
        ),
        Invalid(
            "import ray\ntotal = sum(ray.get(f.remote(x)) for x in xs)\n",
            2,
            fixed="import ray\ntotal = sum(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid(
            "import ray\nseen = {ray.get(f.remote(x)) for x in xs}\n",
            2,
            fixed="import ray\nseen = set(ray.get([f.remote(x) for x in xs]))\n",
        ),
        Invalid("import ray\nfor x in xs:\n    ref = f.remote(x)\n    print(ray.get(ref))\n", 4),
        Invalid("import ray as r\ni = 0\nwhile i < n:\n    print(r.get(f.remote(i)))\n    i += 1\n", 4),
        Invalid("from ray import get as fetch\nfor x in xs:\n    print(fetch(f.options(num_cpus=2).remote(x)))\n", 3),
        Invalid("import ray\ncounter = Counter.remote()\nfor x in xs:\n    print(ray.get(counter.add.remote(x)))\n", 4),
        Invalid("import ray\nby_key = {k: ray.get(f.remote(k)) for k in keys}\n", 2),
        Invalid(
            "import ray\n\ndef main(xs):\n    out = []\n    for x in xs:\n        r = f.remote(x)\n"
            "        log(x)\n        out.append(ray.get(r))\n    return out\n",
            8,
        ),
    ]

    def check(self, ctx: Context) -> None:
        for qualified in ("ray.get", *self.settings["extra-get-functions"]):
            for site in ctx.model.calls_to(qualified):
                self._check_get(ctx, site)

    def _check_get(self, ctx: Context, get: CallSite) -> None:
        model = ctx.model
        if get.loop is None or not get.node.args:
            return
        argument = get.node.args[0].value
        origin = model.ref_origin(argument, get.scope, get.index)
        if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
            return
        submission = model.submission(origin.producer)
        producer = model.call_site(origin.producer)
        if submission is None or producer is None:
            return
        created_in = origin.binding.loop if origin.binding is not None else producer.loop
        loop = model.common_loop(get.loop, created_in)
        if loop is None or _exits_first_iteration(loop) or self._is_sequential(model, loop, submission, producer, get):
            return
        message = self.message + "; submit them all first and call `ray.get` once after the loop"
        if submission.kind == "actor-method":
            message += " (calls to one actor also queue behind each other: see RAY010)"
        ctx.report(get.node, message, self._fix(ctx, get, loop, origin.producer))

    def _is_sequential(
        self, model: SemanticModel, loop: Loop, submission: Submission, producer: CallSite, get: CallSite
    ) -> bool:
        """Whether the loop cannot run its tasks in parallel, or does not wait where it seems to: the next
        submission or the decision to go on needs a result fetched in the loop, the get runs only under a
        condition read from an earlier result, a `ray.wait` already said the ref is ready, or the loop
        polls (sleeps between rounds)."""
        facts = _LoopFacts(model, loop, ("ray.get", *self.settings["extra-get-functions"]))
        inputs = set().union(*(names_read(arg.value) for arg in submission.call.args))
        if submission.handle is not None:
            inputs |= names_read(submission.handle)
        if model.carried_names(loop, inputs, producer.index) & facts.derived:
            return True
        return (
            facts.exits_on_result
            or facts.polls
            or get.node in facts.guarded_nodes
            or _waited_before(model, get, producer)
        )

    def _fix(self, ctx: Context, get: CallSite, loop: Loop, producer: cst.Call) -> FixPlan | None:
        """Submit everything, then one `ray.get`: for a comprehension whose element is the get, and for a
        `for` loop whose only statement is `out.append(ray.get(...))`."""
        call = get.node
        if len(call.args) != 1 or call.args[0].value is not producer or get.loop is not loop:
            return None
        fetch = ctx.code_for(call.func)
        node = loop.node
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and node.elt is call:
            if node.for_in.asynchronous is not None:
                return None
            refs = ctx.code_for(cst.ListComp(elt=producer, for_in=node.for_in))
            text = f"{fetch}({refs})"
            if isinstance(node, cst.SetComp):
                text = f"set({text})"
            return self._plan(node, text)
        if isinstance(node, cst.For) and node.orelse is None and node.asynchronous is None:
            statement = _only_statement(node)
            if (
                isinstance(statement, cst.Expr)
                and isinstance(statement.value, cst.Call)
                and isinstance(statement.value.func, cst.Attribute)
                and statement.value.func.attr.value == "append"
                and len(statement.value.args) == 1
                and statement.value.args[0].value is call
            ):
                target = ctx.code_for(statement.value.func.value)
                refs = ctx.code_for(cst.ListComp(elt=producer, for_in=cst.CompFor(target=node.target, iter=node.iter)))
                return self._plan(node, f"{target}.extend({fetch}({refs}))")
        return None

    def _plan(self, node: cst.CSTNode, text: str) -> FixPlan:
        return FixPlan("Submit all tasks first, then call `ray.get` once", ((node, text),), Applicability.UNSAFE)


class _LoopFacts:
    """What a loop's body does with the results it fetches, by walking its statements in order and
    tracking which names hold a fetched result (directly, through other such names, or assigned under
    a condition that reads one). The walk repeats with the state one iteration leaves behind, so values
    carried to the next iteration count, until nothing changes.

    - `derived`: names that hold a result at some point of an iteration;
    - `exits_on_result`: a break, return or raise under a condition read from a result;
    - `guarded_nodes`: calls that run only under such a condition;
    - `polls`: the loop sleeps (`time.sleep`, `asyncio.sleep`): a polling loop is sequential by design.
    """

    SLEEPS = ("time.sleep", "asyncio.sleep")
    MAX_PASSES = 4

    def __init__(self, model: SemanticModel, loop: Loop, get_functions: tuple[str, ...]) -> None:
        self.model = model
        self.get_functions = get_functions
        self.derived: set[str] = set()
        self.exits_on_result = False
        self.polls = False
        self.guarded_nodes: set[cst.CSTNode] = set()
        if isinstance(loop.node, COMPREHENSIONS):
            statements: list[cst.CSTNode] = [loop.node]
        else:
            statements = _statements(loop.node.body)
        targets = _target_names(loop.node.target) if isinstance(loop.node, cst.For) else set()
        carried: set[str] = set()
        for _ in range(self.MAX_PASSES):
            state = carried - targets  # the loop's own target is rebound from its iterable each time
            if isinstance(loop.node, cst.While) and self._reads_result(loop.node.test, state):
                self.exits_on_result = True
            for statement in statements:
                state = self._visit(statement, state, guarded=False)
            self.derived |= state
            if state <= carried:
                break
            carried |= state

    def _reads_result(self, expr: cst.CSTNode, state: set[str]) -> bool:
        if names_read(expr) & state:
            return True
        for node in iter_subtree(expr, into_functions=False):
            if isinstance(node, cst.Call):
                site = self.model.call_site(node)
                if site is not None and self.model.call_name(site) in self.get_functions:
                    return True
        return False

    def _block(self, block: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        for statement in _statements(block):
            state = self._visit(statement, state, guarded)
        return state

    def _visit(self, node: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        """The state after `node`, given the state before it."""
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return state
        if isinstance(node, (cst.If, cst.While)):
            inner = guarded or self._reads_result(node.test, state)
            after = self._block(node.body, set(state), inner)
            if isinstance(node, cst.While):
                after = self._block(node.body, after, inner)  # a second round sees what the first left
            if isinstance(node.orelse, cst.If):
                after |= self._visit(node.orelse, set(state), inner)
            elif node.orelse is not None:
                after |= self._block(node.orelse.body, set(state), inner)
            return state | after
        if isinstance(node, cst.For):
            self._visit_expression(node.iter, state, guarded)
            inner_state = set(state)
            if self._reads_result(node.iter, state):
                inner_state |= _target_names(node.target)
            after = self._block(node.body, inner_state, guarded)
            after = self._block(node.body, after, guarded)
            if node.orelse is not None:
                after = self._block(node.orelse.body, after, guarded)
            return state | after
        if isinstance(node, cst.BaseCompoundStatement):  # try, with, match: run every part in order
            for child in child_nodes(node):
                if isinstance(child, (cst.BaseSuite, cst.ExceptHandler, cst.Else, cst.Finally)):
                    state = state | self._block(child, set(state), guarded)
                else:
                    self._visit_expression(child, state, guarded)
            return state
        return self._visit_expression(node, state, guarded)

    def _visit_expression(self, node: cst.CSTNode, state: set[str], guarded: bool) -> set[str]:
        """A simple statement, or a header part of a compound one."""
        if isinstance(node, (cst.Break, cst.Return, cst.Raise)) and guarded:
            self.exits_on_result = True
        for inner in iter_subtree(node, into_functions=False):
            if isinstance(inner, cst.Call):
                if guarded:
                    self.guarded_nodes.add(inner)
                site = self.model.call_site(inner)
                if site is not None and self.model.call_name(site) in self.SLEEPS:
                    self.polls = True
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            names = set().union(*(_target_names(t) for t in targets))
            holds_result = guarded or self._reads_result(node.value, state)
            if isinstance(node, cst.AugAssign):
                holds_result = holds_result or bool(names & state)
            return (state | names) if holds_result else (state - names)
        return state


def _target_names(target: cst.CSTNode) -> set[str]:
    """Names an assignment target binds (not those read inside attribute or subscript targets)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(set(), *(_target_names(element.value) for element in target.elements))
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _statements(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of a block (or of a compound statement's parts), flattening simple lines."""
    if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)):
        out: list[cst.CSTNode] = []
        for item in node.body:
            out.extend(item.body if isinstance(item, cst.SimpleStatementLine) else [item])
        return out
    if isinstance(node, (cst.Else, cst.Finally, cst.ExceptHandler)):
        return _statements(node.body)
    return [node]


def _waited_before(model: SemanticModel, get: CallSite, producer: CallSite) -> bool:
    """A `ray.wait` on the ref between its submission and the get: the get does not block."""
    names = names_read(get.node.args[0].value)
    for wait in model.calls_to("ray.wait"):
        if producer.index < wait.index < get.index and wait.scope is get.scope:
            if any(names_read(arg.value) & names for arg in wait.node.args):
                return True
    return False


def _exits_first_iteration(loop: Loop) -> bool:
    """A loop whose body always leaves at the first pass (a top-level break, return or raise)."""
    if not isinstance(loop.node, (cst.For, cst.While)):
        return False
    body = loop.node.body
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for line in lines:
        if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            if any(isinstance(s, (cst.Break, cst.Return, cst.Raise)) for s in line.body):
                return True
    return False


def _only_statement(loop: cst.For) -> cst.BaseSmallStatement | None:
    body = loop.body
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if len(lines) == 1 and isinstance(lines[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        if len(lines[0].body) == 1:
            return lines[0].body[0]
    return None
