"""RAY080 is-initialized-not-called: `if not ray.is_initialized:` tests the function object, which is always true."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, Scope, child_nodes
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

QUALIFIED = "ray.is_initialized"


def _truth_tested(node: cst.CSTNode) -> Iterator[tuple[cst.BaseExpression, str]]:
    """The expressions whose truth `node` tests directly, with a word for where."""
    if isinstance(node, (cst.If, cst.While)):
        yield node.test, "`if`" if isinstance(node, cst.If) else "`while`"
    elif isinstance(node, cst.IfExp):
        yield node.test, "a conditional expression"
    elif isinstance(node, cst.Assert):
        yield node.test, "`assert`"
    elif isinstance(node, cst.CompIf):
        yield node.test, "a comprehension's `if`"
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        yield node.expression, "`not`"
    elif isinstance(node, cst.BooleanOperation):
        word = "`and`" if isinstance(node.operator, cst.And) else "`or`"
        yield node.left, word
        yield node.right, word
    elif isinstance(node, cst.MatchCase) and node.guard is not None:
        yield node.guard, "a `case` guard"


def _scoped_walk(model: SemanticModel) -> Iterator[tuple[cst.CSTNode, Scope]]:
    """Every node of the module with the scope its names are looked up in."""
    scope_of_node = {id(scope.node): scope for scope in model.scopes}
    stack: list[tuple[cst.CSTNode, Scope]] = [(model.module, model.module_scope)]
    while stack:
        node, scope = stack.pop()
        yield node, scope
        inner = scope_of_node.get(id(node), scope)
        stack.extend((child, inner) for child in reversed(list(child_nodes(node))))

@dataclass(frozen=True)
class GuardFacts:
    """Whether the uncalled function is negated (`not ray.is_initialized`): a guard around `ray.init`."""

    negated: bool


# Each variant starts a new process, where Ray is not initialized yet: its own process is connected.
GUARD_MODEL = """
import subprocess
import sys

driver = "import ray\\n" + f'''
{guard}
'''
done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=60)
if done.returncode != 0:
    raise RuntimeError(done.stderr[-1500:])
said = done.stdout.split()[-1:]
"""

INIT_GUARD = GUARD_MODEL.format(guard="""
if not ray.is_initialized{call}:
    ray.init(address={ray.get_runtime_context().gcs_address!r})
print(ray.is_initialized())
""") + """
if said == ["True"]:
    __ray_lint_evidence__ = {"right": "the guard ran ray.init(), and Ray is initialized after it"}
else:
    __ray_lint_evidence__ = {
        "wrong": "in a process without Ray, `if not ray.is_initialized:` skipped ray.init(): Ray was still not initialized after it"
    }
"""

TEARDOWN_GUARD = GUARD_MODEL.format(guard="""
ran = False
if ray.is_initialized{call}:
    ran = True  # stands for ray.shutdown() and the rest of a teardown
print(ran)
""") + """
if said == ["False"]:
    __ray_lint_evidence__ = {"right": "the guarded teardown was skipped: Ray was not initialized"}
else:
    __ray_lint_evidence__ = {"wrong": "in a process without Ray, `if ray.is_initialized:` ran its body all the same"}
"""


class IsInitializedExperiment(ReproductionExperiment[GuardFacts]):
    """Runs the guard in a new process, where Ray is not initialized: `if not ray.is_initialized:
    ray.init(...)`, then asks Ray whether it is initialized, or `if ray.is_initialized:` around a
    teardown, then says whether the body ran; the fix calls the function. Always a model: the verifier
    connects the user's script to its cluster before it starts, so the script's own guard cannot show
    the difference."""

    facts_type = GuardFacts
    beside_others = True  # the function object is true whatever else runs

    def plan(self, subject: Subject) -> Plan:
        return self.model(subject)

    def model(self, subject: Subject) -> Plan:
        if self.facts(subject).negated:
            guard, shape = INIT_GUARD, "a new driver process guards ray.init() with `if not ray.is_initialized`"
        else:
            guard, shape = TEARDOWN_GUARD, "a new process, without Ray, guards a teardown with `if ray.is_initialized`"
        return Plan(
            Variant("not called", script(guard.replace("{call}", ""))),
            Variant("called", script(guard.replace("{call}", "()"))),
            "modelled",
            shape,
        )


class IsInitializedNotCalled(Rule):
    code = "RAY080"
    name = "is-initialized-not-called"
    message = "`ray.is_initialized` is tested without being called: a function object is always true"
    severity = Severity.ERROR
    category = "correctness"
    fixable = True
    experiment = IsInitializedExperiment()
    # The bug is the name not followed by `(`: a file that only calls it never matches these.
    tokens = ("is_initialized:", "is_initialized ", "is_initialized)", "is_initialized\n", "is_initialized\r", "is_initialized,")
    docs = """
## What it does
Finds `ray.is_initialized` (through any alias, e.g. `from ray import is_initialized`) used as a
condition without being called: the test of an `if`, `while`, `assert` or conditional
expression, the operand of `not`, `and` or `or`, a comprehension's `if`, or a `case` guard.

## Why is this bad?
`ray.is_initialized` is a function; `ray.is_initialized()` is the bool. A function object is
always true, so the test never depends on whether Ray is running:
- `if not ray.is_initialized: ray.init(...)` never calls `ray.init`. The first `.remote()` or
  `ray.get` then starts a default local cluster with none of the arguments written there
  (`num_cpus`, `address`, `runtime_env`, `namespace`, ...), or the program runs against a
  cluster other than the one intended;
- `if ray.is_initialized: ray.shutdown()` always runs its body, and
  `assert ray.is_initialized` never fails.

ray-lint is silent when the function is passed or stored without being tested
(`wait_until(ray.is_initialized)`, `check = ray.is_initialized`), compared (`is`, `==`), or when
the name is not Ray's (`torch.distributed.is_initialized`, or `ray` never imported).

## Example
```python
if not ray.is_initialized:
    ray.init(num_cpus=4, runtime_env={"pip": ["torch"]})
```

## Use instead
```python
if not ray.is_initialized():
    ray.init(num_cpus=4, runtime_env={"pip": ["torch"]})
```

## Fix safety
The fix adds `()`, so the test means what it says. It is unsafe (it applies with `--unsafe-fixes`):
the code guarded by the test starts to run, or stops running, according to Ray's state. That is
what the author meant, but a program may have come to depend on the old constant: a
`ray.init(num_cpus=2)` behind `if not ray.is_initialized:` never ran before, so Ray started with
its defaults, and after the fix it runs with those arguments.

## References
- [ray.is_initialized](https://docs.ray.io/en/latest/ray-core/api/doc/ray.is_initialized.html)
- [ray.init](https://docs.ray.io/en/latest/ray-core/api/doc/ray.init.html)
"""

    VALID = [
        Valid("import ray\nif not ray.is_initialized():\n    ray.init()\n", "called"),
        Valid("import ray\nwait_until(ray.is_initialized, timeout=10)\n", "passed as a callback, not tested"),
        Valid("import ray\ncheck = ray.is_initialized\nif check():\n    pass\n", "stored, then called"),
        Valid("import torch.distributed as dist\nif not dist.is_initialized:\n    pass\n", "not Ray's function"),
        Valid("if not ray.is_initialized:\n    ray.init()\n", "no Ray import"),
        Valid("import ray\nassert ray.is_initialized is not None\n", "a comparison, not a truth test"),
        Valid("import ray\nstarted = ray.is_initialized() and ray.cluster_resources()\n", "called inside `and`"),
        Valid(
            "import ray\n\nclass Runner:\n    def is_initialized(self):\n        return True\n\n"
            "    def run(self):\n        if not self.is_initialized:\n            pass\n",
            "another object's attribute",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nif not ray.is_initialized:\n    ray.init(num_cpus=4)\n",
            2,
            fixed="import ray\nif not ray.is_initialized():\n    ray.init(num_cpus=4)\n",
        ),
        Invalid(
            "import ray\n\ndef teardown():\n    if ray.is_initialized:\n        ray.shutdown()\n",
            4,
            fixed="import ray\n\ndef teardown():\n    if ray.is_initialized():\n        ray.shutdown()\n",
        ),
        Invalid(
            "from ray import is_initialized\nassert is_initialized, 'call ray.init first'\n",
            2,
            fixed="from ray import is_initialized\nassert is_initialized(), 'call ray.init first'\n",
        ),
        Invalid(
            "import ray as r\nready = r.is_initialized and r.cluster_resources().get('GPU', 0) > 0\n",
            2,
            fixed="import ray as r\nready = r.is_initialized() and r.cluster_resources().get('GPU', 0) > 0\n",
        ),
        Invalid(
            "import ray\nmode = 'attached' if ray.is_initialized else 'local'\n",
            2,
            fixed="import ray\nmode = 'attached' if ray.is_initialized() else 'local'\n",
        ),
        Invalid(
            "import ray\nwhile not ray.is_initialized:\n    time.sleep(1)\n",
            2,
            fixed="import ray\nwhile not ray.is_initialized():\n    time.sleep(1)\n",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        reported: set[int] = set()
        for node, scope in _scoped_walk(model):
            for tested, where in _truth_tested(node):
                if id(tested) in reported or not isinstance(tested, (cst.Name, cst.Attribute)):
                    continue
                if model.qualified_name(tested, scope, AFTER_ALL) != QUALIFIED:
                    continue
                reported.add(id(tested))
                code = ctx.code_for(tested)
                ctx.report(
                    tested,
                    f"`{code}` is tested by {where} but never called, so it is always true",
                    fix=FixPlan(f"Call `{code}()`", ((tested, f"{code}()"),), Applicability.UNSAFE),
                    facts=GuardFacts(negated=where == "`not`"),
                )
