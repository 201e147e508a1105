"""RAY090 init-twice: `ray.init` runs a second time in the same process, which Ray refuses."""

from __future__ import annotations

from collections import defaultdict

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    CallSite,
    Loop,
    Scope,
    block_statements,
    child_nodes,
    iter_subtree,
    literal_string,
    root_name,
)
from ray_lint.ray_api import tolerates_reinit
from ray_lint.rule import INIT_CALLED, Context, Invalid, Rule, Valid

# Calls that end a connection (`ray.shutdown()`, `context.disconnect()`, `cluster.shutdown()`) or ask whether one exists.
RESET_TAILS = ("shutdown", "disconnect")
EXIT_FUNCTIONS = ("sys.exit", "os._exit", "exit", "quit")
# Compound parts that make what is below them run only sometimes, or maybe not after what came before.
CONDITIONAL = (
    cst.If, cst.Else, cst.IfExp, cst.BooleanOperation, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler,
    cst.Finally, cst.Match, cst.MatchCase, cst.CompIf, cst.Lambda,
)
BLOCKS = (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)
EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


def _is_main_check(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":`: a script's body, which runs whenever the script does."""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison) or len(node.test.comparisons) != 1:
        return False
    left, right = node.test.left, node.test.comparisons[0].comparator
    names = {left.value if isinstance(left, cst.Name) else literal_string(left), right.value if isinstance(right, cst.Name) else literal_string(right)}
    return names == {"__name__", "__main__"} and isinstance(node.test.comparisons[0].operator, cst.Equal)


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """Each node's parent under `root`, not descending into nested functions and lambdas (other scopes)."""
    parents: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in child_nodes(node):
            parents[id(child)] = node
            if not isinstance(child, (cst.FunctionDef, cst.Lambda)):
                stack.append(child)
    return parents


def _path(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> list[cst.CSTNode]:
    """`node` and its ancestors, innermost first."""
    path = [node]
    while id(path[-1]) in parents:
        path.append(parents[id(path[-1])])
    return path


def exits_after(model: SemanticModel, scope: Scope, path: list[cst.CSTNode]) -> bool:
    """Whether a block on `path` (innermost first) has a `return`, `raise`, `break`, `continue` or
    `sys.exit()` after the statement that leads to the call: the code after the block may not run."""
    on_path = {id(node) for node in path}
    for block in path:
        if not isinstance(block, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)):
            continue
        statements = block_statements(block)
        position = next((i for i, s in enumerate(statements) if id(s) in on_path), None)
        if position is None:
            continue
        for statement in statements[position + 1 :]:
            if isinstance(statement, EXITS) or _calls_exit(model, scope, statement):
                return True
    return False


def _calls_exit(model: SemanticModel, scope: Scope, statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.Expr) or not isinstance(statement.value, cst.Call):
        return False
    func = statement.value.func
    if isinstance(func, cst.Name) and func.value in ("exit", "quit"):
        return True
    return model.qualified_name(func, scope, AFTER_ALL) in EXIT_FUNCTIONS


def _imported_between(model: SemanticModel, first: CallSite, second: CallSite) -> bool:
    """Whether Ray is imported again between the two calls (`import ray` opening a notebook cell or a
    pasted snippet): the code from there on is a self-contained alternative, not a continuation."""
    root = root_name(second.node.func)
    if root is None:
        return False
    binding = model.reaching_binding(root, second.scope, second.index)
    return binding is not None and binding.kind == "import" and first.index < binding.index < second.index


def _worker_body(model: SemanticModel, site: CallSite) -> str | None:
    """The remote function or actor method whose body makes the call, as a message names it: that body
    runs in a Ray worker, which Ray connected before it ran any of it. None when the body may also run
    outside Ray: a class or function made remote by a `ray.remote(...)` call and also called directly."""
    found = model.remote_of_scope(site.scope)
    if found is None:
        return None
    remote, function = found
    if not isinstance(remote.declared_at, cst.Decorator):
        for direct in model.calls_by_tail.get(remote.name, ()):
            func = direct.node.func
            binding = model.reaching_binding(func.value, direct.scope, direct.index) if isinstance(func, cst.Name) else None
            if binding is not None and binding.node is remote.target:
                return None
    if function.owner is None:
        return f"remote function `{function.node.name.value}`"
    return f"actor method `{function.owner.node.name.value}.{function.node.name.value}`"


def _client_or_unknown_address(call: cst.Call) -> bool:
    """Whether `ray.init` may get an address with a protocol (`ray://`, `anyscale://`): Ray then connects
    a Ray Client instead, which does not check the worker's own connection."""
    for position, arg in enumerate(call.args):
        if arg.star:
            return True
        if (arg.keyword is None and position == 0) or (arg.keyword is not None and arg.keyword.value == "address"):
            address = literal_string(arg.value)
            return address is None or "://" in address
    return False


def _is_with_item(site: CallSite) -> bool:
    """`with ray.init(...):` shuts Ray down when the block ends."""
    statement = site.statement
    return isinstance(statement, cst.With) and any(item.item is site.node for item in statement.items)


# The probe that runs a variant has connected it to the cluster and made `ray.init` a stand-in (the
# cluster is shared); `ray._private.worker.init` is still Ray's own function, which the model calls.
REAL_INIT = """
real_init = ray._private.worker.init  # Ray's own `ray.init`: the probe replaced only the `ray.init` name
assert ray.is_initialized()  # this process is connected, as after the first `ray.init()`
"""
TWICE = REAL_INIT + """
real_init()
"""
GUARDED = REAL_INIT + """
if not ray.is_initialized():
    real_init()

@ray.remote
def ping():
    return "pong"

__ray_lint_evidence__ = {"right": f"the guarded call did not run again, and a task returned {ray.get(ping.remote(), timeout=30)!r}"}
"""


class InitTwiceExperiment(ReproductionExperiment[None]):
    """Ray's own `ray.init` called in a process already connected to Ray, as the second call runs,
    against the same call guarded by `if not ray.is_initialized():`. The same for every finding: the
    second call's arguments do not matter, the connection check comes first."""

    facts_type = type(None)
    expected = r"Maybe you called ray.init twice by accident"
    beside_others = True  # the second `ray.init` raises whatever else runs

    def plan(self, subject: Subject) -> Plan:
        """Always the model: the script's own `ray.init` calls are stand-ins when a variant runs, so the
        script as written cannot show the error."""
        return self.model(subject)

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("ray.init again", script(TWICE)),
            Variant("guarded by ray.is_initialized()", script(GUARDED)),
            "modelled",
            "Ray's own `ray.init()` in a process already connected to Ray, and the same call guarded",
        )


class InitTwice(Rule):
    code = "RAY090"
    name = "init-twice"
    message = "`ray.init` is called again while Ray is already initialized, which raises RuntimeError"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = INIT_CALLED
    experiment = InitTwiceExperiment()
    docs = """
## What it does
Finds a `ray.init(...)` call (through any alias) that runs while an earlier one in the same
function (or at module level, or in a notebook's earlier cell) is still in effect:
- a second `ray.init` that always follows the first, with no `ray.shutdown()` between them;
- a `ray.init` in the body of a `for` or `while` loop that has no `ray.shutdown()`, so the
  second iteration calls it again;
- a `ray.init` in the body of a remote function or of a method of an actor class (decorated, or
  made an actor by `ray.remote(Cls)`): that code runs in a Ray worker, which Ray connected before
  it ran it, so the call is always a second one.

## Why is this bad?
Ray 2.60 checks whether the process is already connected at the start of `ray.init`
(`ray/_private/worker.py`) and raises

```
RuntimeError: Maybe you called ray.init twice by accident? This error can be suppressed by
passing in 'ignore_reinit_error=True' or by calling 'ray.shutdown()' prior to 'ray.init()'.
```

The second call's arguments (another `address`, `num_cpus`, `runtime_env`, `namespace`) are
never applied: with `ignore_reinit_error=True` they are silently ignored and the first
cluster is kept. A Ray worker (a task or an actor) is connected before any of its code runs: in
Ray 2.60, `ray.init()` and `ray.init(address="auto")` in an actor method or a task raise this
error, and `ray.is_initialized()` is true there.

ray-lint is silent when:
- the second call passes `ignore_reinit_error` (unless it is a literal false) or `**kwargs`;
- a call between the two ends the connection (`ray.shutdown()`, `ctx.disconnect()`, a function
  of this module that calls `ray.shutdown()`) or checks for it (`ray.is_initialized()`), or the
  loop has one;
- the two are in different branches (`if`/`else`, `try`/`except`), the second is under a
  condition of its own (including `if not ray.is_initialized():`), or either is inside a `try`;
- a `return`, `raise`, `break`, `continue` or `sys.exit()` follows the first call in its block,
  or the loop has a `return`, `raise` or `break`, or runs once;
- the first call is a `with ray.init(...):` item;
- the calls are in different functions: the order in which functions run is not followed;
- in a remote function or actor method: the address has a protocol (`ray://`, `anyscale://`) or
  is not a literal (Ray then connects a Ray Client, which does not check the worker's own
  connection); the call is inside a `try`, or the function checks `ray.is_initialized()` or calls
  `ray.shutdown()`; the class or function is made remote by a `ray.remote(...)` call and also
  called directly in the module (its code runs outside Ray too); a function nested in the body;
- Ray is imported again between the two calls, as a notebook cell or a pasted snippet that
  stands on its own does (`import ray` then `ray.init(...)`): it is an alternative to the code
  before it, not the next step.

## Example
```python
ray.init(num_cpus=2)
...
if __name__ == "__main__":
    ray.init(address="auto")
    main()
```

## Use instead
```python
if __name__ == "__main__":
    ray.init(address="auto")
    main()
```
Where code may run with Ray already started (a library, a notebook cell run twice), guard the
call: `if not ray.is_initialized(): ray.init(...)`.

## Fix safety
There is no automatic fix: which of the two calls (and which arguments) should stay is a choice
for the author.

## References
- [ray.init](https://docs.ray.io/en/latest/ray-core/api/doc/ray.init.html)
- [ray.shutdown](https://docs.ray.io/en/latest/ray-core/api/doc/ray.shutdown.html)
- [ray.is_initialized](https://docs.ray.io/en/latest/ray-core/api/doc/ray.is_initialized.html)
"""

    VALID = [
        Valid("import ray\nray.init()\nrun()\nray.shutdown()\nray.init(num_cpus=2)\n", "shutdown between"),
        Valid("import ray\nray.init()\nray.init(ignore_reinit_error=True)\n", "ignore_reinit_error"),
        Valid("import ray\nray.init()\nif not ray.is_initialized():\n    ray.init()\n", "guarded"),
        Valid("import ray\nif args.local:\n    ray.init(num_cpus=2)\nelse:\n    ray.init(address='auto')\n", "exclusive branches"),
        Valid(
            "import ray\ntry:\n    ray.init(address='auto')\nexcept ConnectionError:\n    ray.init()\n",
            "fallback after a failed connection",
        ),
        Valid(
            "import ray\n\ndef setup(local):\n    if local:\n        ray.init(num_cpus=2)\n        return\n"
            "    ray.init(address='auto')\n",
            "the first branch returns",
        ),
        Valid("import ray\nfor config in configs:\n    ray.init(**config)\n    run()\n    ray.shutdown()\n", "shutdown in the loop"),
        Valid(
            "import ray\nwhile True:\n    try:\n        ray.init(address=addr)\n        break\n    except ConnectionError:\n"
            "        time.sleep(1)\n",
            "a retry loop",
        ),
        Valid("import ray\n\ndef a():\n    ray.init()\n\ndef b():\n    ray.init()\n", "different functions"),
        Valid("import ray\nwith ray.init():\n    run()\nwith ray.init(num_cpus=1):\n    run()\n", "with-blocks shut down"),
        Valid(
            "import ray\n\ndef cleanup():\n    ray.shutdown()\n\nray.init()\ncleanup()\nray.init()\n",
            "a helper of this module shuts Ray down",
        ),
        Valid("import ray\nray.init()\nif cluster:\n    ray.init(address='auto')\n", "the second has its own condition"),
        Valid("import myframework as ray\nray.init()\nray.init()\n", "not Ray"),
        Valid("import ray\nfor _ in range(1):\n    ray.init()\n", "a loop that runs once"),
        Valid(
            "import ray\nray.init(address='auto')\nprint(ray.cluster_resources())\n"
            "# ray-lint: end of notebook cell\nimport ray\nray.init(address='ray://localhost:10001')\n",
            "a notebook cell that imports Ray again: an alternative way in, not a second step",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Bridge:\n    def connect(self):\n        ray.init('ray://other-cluster:10001')\n",
            "a Ray Client address: Ray connects a client, which does not check the worker's own connection",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef work(x):\n    if not ray.is_initialized():\n        ray.init()\n    return x\n",
            "guarded: in a worker, `ray.is_initialized()` is true",
        ),
        Valid(
            "import ray\n\nclass Pipeline:\n    def run(self, x):\n        ray.init(num_cpus=2)\n        return x\n\n"
            "remote_pipeline = ray.remote(Pipeline)\nPipeline().run(1)\n",
            "the class made an actor by a call is also used directly, outside Ray",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef work(x):\n    def local_run():\n        ray.init()\n    return x\n",
            "a nested function: it may run anywhere",
        ),
    ]
    INVALID = [
        Invalid("import ray\nray.init(num_cpus=2)\nrun()\nray.init(address='auto')\n", 4),
        Invalid(
            "import ray\nray.init()\n\nif __name__ == '__main__':\n    ray.init(address='auto')\n    main()\n",
            5,
            note="a module-level init and another in the script's main block",
        ),
        Invalid("import ray\nif args.debug:\n    ray.init(num_cpus=1)\nray.init(address=args.address)\n", 4, note="the first is conditional"),
        Invalid(
            "import ray\n\ndef main():\n    ray.init()\n    data = load()\n    ray.init(runtime_env={'pip': ['torch']})\n",
            6,
        ),
        Invalid(
            "import ray\nfor seed in range(5):\n    ray.init(num_cpus=2)\n    run(seed)\n",
            3,
            note="every iteration starts Ray again",
        ),
        Invalid("from ray import init\ninit()\ninit(ignore_reinit_error=False)\n", 3, note="explicitly false"),
        Invalid(
            "import ray\nray.init()\n\ndef reconnect():\n    ray.shutdown()\n    ray.init()\n\nray.init(address='auto')\n",
            8,
            note="a shutdown in a function that is defined, not called, between them",
        ),
        Invalid(
            "import ray as r\nwhile queue:\n    with timer():\n        r.init()\n        process(queue.pop())\n",
            4,
            note="inside a with block in a while loop",
        ),
        Invalid(
            "import ray\n\nclass Pipeline:\n    def remote_run(self, x):\n        ray.init(address='auto')\n        return x\n\n"
            "def main():\n    p = ray.remote(Pipeline).remote()\n    print(ray.get(p.remote_run.remote(2)))\n",
            5,
            note="a method of a class made an actor by `ray.remote(Pipeline)`",
        ),
        Invalid(
            "import ray\n\n@ray.remote(num_cpus=1)\ndef work(x):\n    ray.init()\n    return x * 2\n",
            5,
            note="a task's body runs in a worker",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        inits = model.calls_to("ray.init")
        if not inits:
            return
        resets_by_scope = self._reset_indices(model)
        groups: dict[int, list[CallSite]] = defaultdict(list)
        for site in inits:
            if not self._check_in_worker(ctx, site, resets_by_scope):
                groups[id(self._root_scope(model, site))].append(site)
        for key, sites in groups.items():
            resets = resets_by_scope.get(key, [])
            parents: dict[int, cst.CSTNode] | None = None
            for position, second in enumerate(sites):
                if tolerates_reinit(second.node):
                    continue
                loop = self._repeating_loop(model, second, resets)
                if parents is None and (position > 0 or loop is not None):
                    parents = _parents(self._root_scope(model, second).node)
                if parents is None:
                    continue
                first = self._earlier_init(model, sites[:position], second, resets, parents)
                if first is not None:
                    ctx.report(
                        second.node,
                        f"`ray.init` runs again after the one on {ctx.line_of(first.node)}, with no `ray.shutdown()` between",
                    )
                elif loop is not None and self._unconditional_in(second, loop, parents):
                    ctx.report(
                        second.node,
                        f"`ray.init` runs in every iteration of the loop on {ctx.line_of(loop.node)}, with no `ray.shutdown()`",
                    )

    def _check_in_worker(self, ctx: Context, site: CallSite, resets_by_scope: dict[int, list[int]]) -> bool:
        """Report a `ray.init` in the body of a remote function or actor method, which runs in a worker
        that Ray already connected; whether the call is in such a body."""
        model = ctx.model
        where = _worker_body(model, site)
        if where is None:
            return False
        root = self._root_scope(model, site)
        if tolerates_reinit(site.node) or _client_or_unknown_address(site.node) or resets_by_scope.get(id(root)):
            return True
        path = model.path_within(root.node, site.node) or []
        if not any(isinstance(node, (cst.Try, cst.TryStar)) for node in path):
            ctx.report(site.node, f"`ray.init` in {where} raises: Ray is already initialized in its worker")
        return True

    def _root_scope(self, model: SemanticModel, site: CallSite) -> Scope:
        return site.scope.function or model.module_scope

    def _reset_indices(self, model: SemanticModel) -> dict[int, list[int]]:
        """Event numbers of calls that end Ray's connection or test for it (including calls of this module's
        functions that call `ray.shutdown()`), by the scope that runs them: a call in a function defined
        between two inits does not run between them."""
        helpers = set()
        for site in model.calls_to("ray.shutdown"):
            function = site.scope.function
            if function is not None and isinstance(function.node, cst.FunctionDef):
                helpers.add(function.node.name.value)
        sites = [site for tail in (*RESET_TAILS, *helpers) for site in model.calls_by_tail.get(tail, ())]
        sites += model.calls_to("ray.is_initialized")
        indices: dict[int, list[int]] = defaultdict(list)
        for site in sites:
            indices[id(self._root_scope(model, site))].append(site.index)
        return indices

    def _earlier_init(
        self,
        model: SemanticModel,
        earlier: list[CallSite],
        second: CallSite,
        resets: list[int],
        parents: dict[int, cst.CSTNode],
    ) -> CallSite | None:
        """The latest earlier `ray.init` of the same function that every run through it reaches before `second`."""
        second_path = _path(second.node, parents)
        on_second = {id(node): depth for depth, node in enumerate(second_path)}
        for first in reversed(earlier):
            if _is_with_item(first) or any(first.index < i < second.index for i in resets):
                continue
            if _imported_between(model, first, second):
                continue
            first_path = _path(first.node, parents)
            common = next((depth for depth, node in enumerate(first_path) if id(node) in on_second), None)
            if common is None:
                continue
            junction = first_path[common]
            if isinstance(junction, (*CONDITIONAL, cst.For, cst.While, cst.With)):
                continue  # the two are in different parts of one compound statement
            below_second = second_path[: on_second[id(junction)]]
            if any(isinstance(node, CONDITIONAL) and not _is_main_check(node) for node in below_second):
                continue
            below_first = first_path[:common]
            if any(isinstance(node, (cst.Try, cst.TryStar)) for node in below_first):
                continue
            if exits_after(model, first.scope, below_first):
                continue
            return first
        return None

    def _repeating_loop(self, model: SemanticModel, site: CallSite, resets: list[int]) -> Loop | None:
        """The `for`/`while` loop that runs this call again on its next iteration with Ray still initialized."""
        loop = site.loop
        if loop is None or not isinstance(loop.node, (cst.For, cst.While)) or _is_with_item(site):
            return None
        iterations = model.literal_iterations(loop)
        if iterations is not None and iterations <= 1:
            return None
        if any(loop.contains_index(i) for i in resets):
            return None
        for node in iter_subtree(loop.node.body, into_functions=False):
            if isinstance(node, (cst.Return, cst.Raise, cst.Break)) or (
                isinstance(node, cst.Expr) and _calls_exit(model, site.scope, node)
            ):
                return None
        return loop

    def _unconditional_in(self, site: CallSite, loop: Loop, parents: dict[int, cst.CSTNode]) -> bool:
        """Whether every iteration of `loop` reaches the call: no condition or `try` between the loop's body and it."""
        for node in _path(site.node, parents)[1:]:
            if node is loop.node:
                return True
            if isinstance(node, (*CONDITIONAL, cst.For, cst.While)):
                return False
        return False
