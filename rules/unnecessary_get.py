"""RAY004 unnecessary-get: a value fetched with `ray.get` only to be passed straight into other remote calls."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ray_lint.analyses.actor_state import is_accessor
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import OUT_OF_BAND_ARRAY, Experiment, Plan, Subject, Variant, script, timed
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, COMPREHENSIONS, CallSite, Scope, child_nodes, iter_subtree, target_names
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

_SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, *COMPREHENSIONS)
# Parents under which a Name is a definition, not a read.
_DEFINING_PARENTS = (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName, cst.NameItem)


@dataclass(eq=False)
class _Occurrence:
    """A Name node in a scope's code: its parent, the scope it is evaluated in, and its walk index."""

    node: cst.Name
    parent: cst.CSTNode
    scope: Scope
    index: int


@dataclass(eq=False)
class _ScopeIndex:
    """The code of one function (or the module) walked once in evaluation order: where every node
    starts and ends in the walk, its parent, and every Name by its text. Answers the def-use
    questions this rule asks ("which reads of `v` come after this statement?")."""

    start: dict[int, int] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)
    parent: dict[int, cst.CSTNode] = field(default_factory=dict)
    names: dict[str, list[_Occurrence]] = field(default_factory=dict)

    @classmethod
    def build(cls, model: SemanticModel, scope: Scope) -> _ScopeIndex:
        index = cls()
        scope_of = {id(s.node): s for s in model.scopes}
        counter = 0
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None, Scope] | cst.CSTNode] = [(scope.node, None, scope)]
        while stack:
            item = stack.pop()
            if isinstance(item, cst.CSTNode):  # leaving a node: its subtree is done
                index.end[id(item)] = counter
                continue
            node, parent, current = item
            counter += 1
            index.start[id(node)] = counter
            if parent is not None:
                index.parent[id(node)] = parent
                if isinstance(node, cst.Name):
                    index.names.setdefault(node.value, []).append(_Occurrence(node, parent, current, counter))
            inner = scope_of.get(id(node), current) if node is not scope.node and isinstance(node, _SCOPE_NODES) else current
            stack.append(node)
            stack.extend((child, node, inner) for child in reversed(list(child_nodes(node))))
        return index

    def within(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        return self.start[id(ancestor)] <= self.start[id(node)] <= self.end[id(ancestor)]


def _resolves_to(occurrence: _Occurrence, name: str, owner: Scope) -> tuple[bool, bool]:
    """Whether a Name read in `occurrence.scope` is the variable `name` of `owner`, and whether it is read
    from a nested function, lambda or class (code that may run at any time)."""
    scope: Scope | None = occurrence.scope
    nested = False
    while scope is not None and scope is not owner:
        if name in scope.bindings and scope.kind != "class":
            return False, nested
        if scope.kind in ("function", "lambda", "class"):
            nested = True
        scope = scope.parent
    return scope is owner, nested


def _statements_after(index: _ScopeIndex, statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements that follow `statement` in its own block, simple lines flattened."""
    line = index.parent.get(id(statement))
    block = index.parent.get(id(line)) if line is not None else None
    if isinstance(line, cst.SimpleStatementSuite):
        siblings: list[cst.CSTNode] = list(line.body)
    elif isinstance(line, cst.SimpleStatementLine) and isinstance(block, (cst.IndentedBlock, cst.Module)):
        siblings = []
        for item in block.body:
            siblings.extend(item.body if isinstance(item, cst.SimpleStatementLine) else [item])
    else:
        return []
    position = next((i for i, s in enumerate(siblings) if s is statement), None)
    return [] if position is None else siblings[position + 1 :]


def _rebinding_end(index: _ScopeIndex, statement: cst.CSTNode, name: str) -> int | None:
    """Where the value bound by `statement` stops reaching reads: the end of the next plain assignment to
    `name` in the same block, when no `break` or `continue` between them can jump past it."""
    for later in _statements_after(index, statement):
        if isinstance(later, cst.Assign) and any(name in target_names(t.target) for t in later.targets):
            return index.end[id(later)]
        if isinstance(later, cst.AnnAssign) and later.value is not None and name in target_names(later.target):
            return index.end[id(later)]
        if any(isinstance(node, (cst.Break, cst.Continue)) for node in iter_subtree(later, into_functions=False)):
            return None
    return None


def _outermost_loop(index: _ScopeIndex, statement: cst.CSTNode, root: cst.CSTNode) -> cst.CSTNode | None:
    """The outermost `for` or `while` of the scope that holds `statement`."""
    found = None
    node = index.parent.get(id(statement))
    while node is not None and node is not root:
        if isinstance(node, (cst.For, cst.While)):
            found = node
        node = index.parent.get(id(node))
    return found


class UnnecessaryGetExperiment(Experiment[None]):
    """The user's code as written and with the ref passed on (its entry point, else the tests that call
    it), timing the function that holds the get; or, when it cannot run as is, a model: 4 arrays of
    32 MiB, made by tasks before the clock starts, each fetched to the driver and passed to a second
    task, against each ref passed to it. What the get costs grows with the value's size, so small
    values show little."""

    facts_type = type(None)
    shares_driver = True
    more_parallelism = False  # both forms run the same tasks; B saves the trip through the driver and a copy
    MIB = 32
    CALLS = 4

    def plan(self, subject: Subject) -> Plan | str:
        return self.on_user_code_or(subject, self.model())

    def model(self) -> Plan:
        made = (
            OUT_OF_BAND_ARRAY + f"@ray.remote\ndef load(i):\n    return Array(bytearray({self.MIB} * 2**20))\n\n"
            "@ray.remote\ndef use(block):\n    return len(block.buffer)\n\n"
            f"refs = [load.remote(i) for i in range({self.CALLS})]\nray.wait(refs, num_returns=len(refs))\n"
        )
        return Plan(
            Variant("fetched, then passed", script(made + timed("return [ray.get(use.remote(ray.get(ref))) for ref in refs]"))),
            Variant("ref passed", script(made + timed("return [ray.get(use.remote(ref)) for ref in refs]"))),
            "modelled",
            f"{self.CALLS} arrays of {self.MIB} MiB, each read by a second task",
        )


class UnnecessaryGet(Rule):
    code = "RAY004"
    name = "unnecessary-get"
    message = "A value is fetched with `ray.get` only to be passed into another remote call"
    severity = Severity.WARNING
    category = "perf"
    supersedes = ("RAY001",)  # passing the ref removes the get, in a loop or not
    preview = True  # the fetched value is often a small fact in one-off setup (benchmarks/real: 4 of 5 right)
    fixable = True
    tokens = (".remote(",)
    also_tokens = ("get",)
    experiment = UnnecessaryGetExperiment()
    docs = """
## What it does
Finds a `ray.get(ref)` whose value is used for nothing but being passed, as a top-level
argument, into other `.remote(...)` calls: `v = ray.get(ref)` where every read of `v` is an
argument of a task, actor-method or actor-constructor call, or `g.remote(ray.get(ref))`
written in one expression. `ref` must be one ObjectRef the module shows being made
(`f.remote(...)`, `actor.m.remote(...)`, `ray.put(...)`, a name bound to one, or the loop
variable of a loop over a list of them).

## Why is this bad?
`ray.get` copies the object from the node that made it into the calling process, and the next
`.remote(...)` call serializes it again and uploads it to the object store, for the next task's
worker to download. Passing the ObjectRef instead lets Ray hand the object from the producer to
the consumer directly: the caller never holds the data, and the consumer can be scheduled next to
it. Ray also resolves a top-level ObjectRef argument before the task starts, so the task receives
the value exactly as before. Measured on a 2-core machine with Ray 2.60: a 128 MB array fetched to
the driver and passed on takes 0.966 s, passing the ref takes 0.055 s (17×).

ray-lint is silent when the value is needed where it was fetched:
- it is read in any other way (printed, branched on, indexed, measured, transformed, stored in
  an attribute or container, returned, passed to a plain function or `.options(...)`);
- it is passed inside a container (`g.remote([v])`) or unpacked (`g.remote(*v)`): the ref would
  then reach the task unresolved;
- `ray.get` has a `timeout`, or sits in the body of a `try` that catches exceptions: the caller
  handles the producer's failure (or slowness) there;
- `ray.get` gets a list of refs (the fix would pass the list unresolved);
- the producer, a task or actor method of this module, may return an ObjectRef itself
  (`return ray.put(x)`): `ray.get` then yields that inner ref, which passing the outer one
  would not resolve;
- a nested function, lambda or class reads the name, or a `global`/`nonlocal` declares it;
- the name is annotated (`v: Tensor = ray.get(ref)`) or bound with other names at once;
- a `ray.kill` runs between the get and the call that takes the value (a checkpoint fetched
  from an actor that is then replaced);
- the ref comes from an actor method that reads a small fact (`is_*`, `has_*`, `ping`, or a
  `get_*`/`alloc_*` of a rank, an address, an id, a port, ...): it costs nothing to fetch.

Reads are followed linearly, as the semantic model does: a later assignment to the name in the
same block ends the value's reach; in a loop, reads earlier in the loop body count too.

## Example
```python
rollout = ray.get(generate_rollout.remote())
reduced = ray.get(reduce.remote(rollout))
```

## Use instead
```python
rollout = generate_rollout.remote()
reduced = ray.get(reduce.remote(rollout))
```

## Fix safety
The fix replaces `ray.get(ref)` with `ref` and is unsafe. Errors change place and time: a
failure of the producer no longer raises at this line but fails the consuming task, and surfaces
where its result is fetched (or never, if nothing fetches it). The caller no longer waits for the
producer before going on, so code between the two calls now runs while the producer is still
working. The value's fate is also shared with the producer's node: a copy fetched on purpose to
survive the loss of that node or actor (or to free it early) is no longer made.

## References
- [Anti-pattern: Calling ray.get unnecessarily harms performance](https://docs.ray.io/en/latest/ray-core/patterns/unnecessary-ray-get.html)
- [Tips for first-time users: delay ray.get()](https://docs.ray.io/en/latest/ray-core/tips-for-first-time.html)
- [Passing object arguments](https://docs.ray.io/en/latest/ray-core/objects.html#passing-object-arguments)
"""

    VALID = [
        Valid(
            "import ray\nstate = ray.get(old.save.remote())\nray.kill(old)\nnew = Trainer.remote()\n"
            "new.restore.remote(state)\n",
            "a checkpoint kept while its actor is killed and replaced",
        ),
        Valid(
            "import ray\naddr = ray.get(w0.get_coordinator_address.remote())\nrefs = [w.setup.remote(addr) for w in workers]\n",
            "a small fact from an accessor (an address): its round trip costs nothing",
        ),
        Valid(
            "import ray\nrollout = ray.get(generate.remote())\nprint(rollout.shape)\nreduced = reduce.remote(rollout)\n",
            "the value is also used locally",
        ),
        Valid(
            "import ray\nrollout = ray.get(generate.remote())\nreduced = reduce.remote(rollout * 2)\n",
            "the value is transformed before it is passed on",
        ),
        Valid(
            "import ray\nx = ray.get(step.remote())\nif x > 0:\n    out = consume.remote(x)\n",
            "the value decides a branch",
        ),
        Valid("import ray\nparts = ray.get([f.remote(i) for i in range(4)])\nout = merge.remote(parts)\n", "a list of refs: the fix would pass them unresolved"),
        Valid("import ray\nv = ray.get(f.remote())\nout = g.remote([v])\n", "passed inside a container"),
        Valid("import ray\nv = ray.get(f.remote(), timeout=30)\nout = g.remote(v)\n", "a timeout: the caller wants to fail fast here"),
        Valid("v = ray.get(f.remote())\nout = g.remote(v)\n", "no `import ray`: `ray` is not Ray here"),
        Valid(
            "import ray\nv = ray.get(f.remote())\nout = g.remote(v)\nv.close()\n",
            "a later local use",
        ),
        Valid(
            "import ray\nv = ray.get(f.remote())\nout = g.options(name=v).remote()\n",
            "an option, not a task argument",
        ),
        Valid(
            "import ray\nv = ray.get(f.remote())\nout = g.remote(v)\nreturn v\n",
            "also returned",
        ),
        Valid(
            "import ray\nv = ray.get(f.remote())\nout = g.remote(v)\ncallback = lambda: v\n",
            "captured by a lambda",
        ),
        Valid(
            "import ray\nfor x in xs:\n    if x:\n        log(v)\n    v = ray.get(f.remote(x))\n    g.remote(v)\n",
            "read at the top of the next iteration",
        ),
        Valid(
            "import ray\nv = ray.get(ref)\nout = g.remote(v)\n",
            "what `ref` holds is not known: it may be a list of refs",
        ),
        Valid(
            "import ray\nv = ray.get(f.remote())\nout = g.remote(*v)\n",
            "unpacked into several arguments",
        ),
        Valid(
            "import ray\n@ray.remote\ndef stage():\n    return ray.put(load())\n\nv = ray.get(stage.remote())\nout = g.remote(v)\n",
            "the task returns a ref: `v` is that inner ref, which Ray resolves for `g`; the outer one would not be",
        ),
        Valid(
            "import ray\ntry:\n    v = ray.get(f.remote())\nexcept ray.exceptions.RayTaskError:\n    v = DEFAULT\nout = g.remote(v)\n",
            "fetched to handle the producer's failure here",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nrollout = ray.get(generate.remote())\nreduced = ray.get(reduce.remote(rollout))\n",
            2,
            fixed="import ray\nrollout = generate.remote()\nreduced = ray.get(reduce.remote(rollout))\n",
        ),
        Invalid(
            "import ray\nout = consume.remote(ray.get(produce.remote(1)), 2)\nray.shutdown()\n",
            2,
            fixed="import ray\nout = consume.remote(produce.remote(1), 2)\nray.shutdown()\n",
            note="fetched and passed in one expression",
        ),
        Invalid(
            "import ray\n\ndef run(learner, workers):\n    weights = ray.get(learner.get_weights.remote())\n"
            "    return [w.set_weights.remote(weights) for w in workers]\n\nray.init()\n",
            4,
            fixed="import ray\n\ndef run(learner, workers):\n    weights = learner.get_weights.remote()\n"
            "    return [w.set_weights.remote(weights) for w in workers]\n\nray.init()\n",
            note="an actor result broadcast to other actors",
        ),
        Invalid(
            "from ray import get as fetch\nref = load.remote(path)\ndata = fetch(ref)\nmodel = Trainer.remote(config=data)\n"
            "print(fetch(model.ready.remote()))\n",
            3,
            fixed="from ray import get as fetch\nref = load.remote(path)\ndata = ref\nmodel = Trainer.remote(config=data)\n"
            "print(fetch(model.ready.remote()))\n",
            note="an aliased get; a keyword argument of an actor constructor",
        ),
        Invalid(
            "import ray\nrefs = [shard.remote(i) for i in range(8)]\nfor r in refs:\n    part = ray.get(r)\n    out.append(index.remote(part))\n"
            "ray.shutdown()\n",
            4,
            fixed="import ray\nrefs = [shard.remote(i) for i in range(8)]\nfor r in refs:\n    part = r\n    out.append(index.remote(part))\n"
            "ray.shutdown()\n",
            note="the loop variable over a list of refs",
        ),
        Invalid(
            "import ray\nx = ray.get(a.remote())\ny = b.remote(x)\nx = ray.get(y)\nprint(x)\n",
            2,
            fixed="import ray\nx = a.remote()\ny = b.remote(x)\nx = ray.get(y)\nprint(x)\n",
            note="a later assignment ends the value's reach",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        indexes: dict[int, _ScopeIndex] = {}
        for get in model.calls_to("ray.get"):
            ref = self._single_ref_argument(model, get)
            if ref is None:
                continue
            targets = self._targets(model, get, indexes)
            if not targets or _killed_between(model, get, targets):
                continue
            first = min(targets, key=lambda call: (model.position(call).start.line, model.position(call).start.column))
            where = ctx.line_of(first) + (f" and {len(targets) - 1} more" if len(targets) > 1 else "")
            statement = get.statement
            if isinstance(statement, cst.Assign) and statement.value is get.node:
                fetched = f"`{ctx.snippet(statement.targets[0].target, limit=20)}`"
            else:
                fetched = "The value"
            plan = FixPlan("Pass the ObjectRef instead of fetching it", ((get.node, ctx.code_for(ref)),), Applicability.UNSAFE)
            ctx.report(
                get.node,
                f"{fetched} is fetched with `ray.get` only to be passed to a task ({where})",
                plan,
            )

    def _single_ref_argument(self, model: SemanticModel, get: CallSite) -> cst.BaseExpression | None:
        """The argument of `ray.get(ref)` when it is exactly one ObjectRef the module shows being made."""
        args = get.node.args
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            return None
        ref = args[0].value
        origin = model.ref_origin(ref, get.scope, get.index)
        if origin is not None:
            if origin.kind != "ref" or (isinstance(origin.producer, cst.Call) and _producer_returns_ref(model, origin.producer)):
                return None
            submission = model.submission(origin.producer) if isinstance(origin.producer, cst.Call) else None
            if submission is not None and is_accessor(submission.method):
                return None  # an address, a rank or a flag: its round trip costs nothing worth a finding
            return ref
        if isinstance(ref, cst.Name) and _loop_variable_over_refs(model, ref, get):
            return ref
        return None

    def _targets(self, model: SemanticModel, get: CallSite, indexes: dict[int, _ScopeIndex]) -> list[cst.Call]:
        """The remote calls the fetched value goes into, when that is all that happens to it; else none."""
        owner = get.scope
        while owner.kind == "comprehension" and owner.parent is not None:
            owner = owner.parent
        index = indexes.get(id(owner))
        if index is None:
            index = indexes[id(owner)] = _ScopeIndex.build(model, owner)
        if id(get.node) not in index.parent or _guarded_by_handler(index, get.node, owner.node):
            return []
        statement = get.statement
        if isinstance(statement, cst.Assign) and statement.value is get.node:
            if owner is not get.scope or len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
                return []
            return self._reads_are_arguments(model, index, owner, statement, statement.targets[0].target.value)
        call = _remote_call_of_argument(model, index, get.node)
        return [call] if call is not None else []

    def _reads_are_arguments(
        self, model: SemanticModel, index: _ScopeIndex, owner: Scope, statement: cst.Assign, name: str
    ) -> list[cst.Call]:
        """The remote calls that read `name` as bound by `statement`, when every such read is a top-level
        argument of one; else none."""
        if any(name in scope.globals for scope in model.scopes):
            return []
        binding_nodes = {id(b.node) for b in owner.bindings.get(name, ()) if b.kind != "augassign"}
        after, stop = index.end[id(statement)], _rebinding_end(index, statement, name)
        loop = _outermost_loop(index, statement, owner.node) if stop is None else None
        targets: list[cst.Call] = []
        for occurrence in index.names.get(name, ()):
            if id(occurrence.node) in binding_nodes or isinstance(occurrence.parent, _DEFINING_PARENTS):
                continue
            ours, nested = _resolves_to(occurrence, name, owner)
            if not ours:
                continue
            if nested:
                return []  # a closure may read it at any time
            reached = occurrence.index > after and (stop is None or occurrence.index <= stop)
            carried = loop is not None and occurrence.index < index.start[id(statement)] and index.within(occurrence.node, loop)
            if not (reached or carried):
                continue
            call = _remote_call_of_argument(model, index, occurrence.node)
            if call is None:
                return []
            targets.append(call)
        return targets


def _remote_call_of_argument(model: SemanticModel, index: _ScopeIndex, node: cst.CSTNode) -> cst.Call | None:
    """The `.remote(...)` call that takes `node` as a whole top-level argument (not `*node`)."""
    arg = index.parent.get(id(node))
    if not isinstance(arg, cst.Arg) or arg.value is not node or arg.star:
        return None
    call = index.parent.get(id(arg))
    if not isinstance(call, cst.Call) or model.submission(call) is None:
        return None
    return call


def _guarded_by_handler(index: _ScopeIndex, node: cst.CSTNode, root: cst.CSTNode) -> bool:
    """Whether `node` is in the body of a `try` that catches exceptions: the caller fetches the value to
    handle the producer's failure itself, which passing the ref would move into the consumer."""
    current = index.parent.get(id(node))
    while current is not None and current is not root:
        if isinstance(current, (cst.Try, cst.TryStar)) and current.handlers and index.within(node, current.body):
            return True
        current = index.parent.get(id(current))
    return False


def _producer_returns_ref(model: SemanticModel, call: cst.Call) -> bool:
    """Whether the task or actor method that `call` runs may return an ObjectRef (`return ray.put(x)`,
    `return child.remote()`): `ray.get` then yields that inner ref, which Ray resolves when it is passed
    on, while passing the outer ref would hand the task the inner ref itself."""
    submission = model.submission(call)
    if submission is None or submission.remote is None:
        return False
    remote = submission.remote
    if submission.kind == "task" and isinstance(remote.target, cst.FunctionDef):
        info = model.function_info(remote.target)
    elif submission.kind == "actor-method" and remote.cls is not None and submission.method is not None:
        info = model.method(remote.cls, submission.method)
    else:
        return False
    if info is None:
        return False
    for node in iter_subtree(info.node.body, into_functions=False):
        if isinstance(node, cst.Return) and node.value is not None and model.ref_origin(node.value, info.scope, AFTER_ALL):
            return True
    return False


def _loop_variable_over_refs(model: SemanticModel, name: cst.Name, get: CallSite) -> bool:
    """`r` in `for r in refs` (or a comprehension's `for r in refs`) where `refs` is a list of ObjectRefs."""
    binding = model.reaching_binding(name.value, get.scope, get.index)
    if binding is None or binding.kind != "loop-target" or binding.loop is None or binding.source is None:
        return False
    loop = binding.loop.node
    if isinstance(loop, cst.For):
        whole = loop.target is binding.node
    elif isinstance(loop, cst.While):
        whole = False
    else:
        whole = False
        comp_for: cst.CompFor | None = loop.for_in
        while comp_for is not None:
            whole = whole or comp_for.target is binding.node
            comp_for = comp_for.inner_for_in
    if not whole:
        return False
    origin = model.ref_origin(binding.source, binding.scope, binding.index)
    return origin is not None and origin.kind == "ref-list"


def _killed_between(model: SemanticModel, get: CallSite, targets: list[cst.Call]) -> bool:
    """A `ray.kill` between the get and the calls that take the value (a checkpoint fetched from an actor
    that is then replaced): the code keeps the value on purpose while the producer goes away."""
    sites = [site for site in map(model.call_site, targets) if site is not None]
    last = max((site.index for site in sites), default=get.index)
    return any(get.index < kill.index < last and kill.scope is get.scope for kill in model.calls_to("ray.kill"))
