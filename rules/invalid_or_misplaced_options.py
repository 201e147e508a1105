"""RAY094 invalid-or-misplaced-options: an option of `ray.remote`, `.options(...)` or `ray.method` that Ray 2.60
refuses: an unknown name, a task option on an actor (or the reverse), or a literal value its validators reject."""

from __future__ import annotations

import ast
import builtins
import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import CallSite, FunctionInfo, literal_string
from ray_lint.ray_api import (
    ALL_OPTION_NAMES,
    METHOD_CALL_OPTIONS,
    METHOD_OPTIONS,
    NONE,
    REMOTE_OPTIONS,
    RENAMED_OPTIONS,
    STRATEGY_NAMES,
    OptionSpec,
    RemoteKind,
    expected_to_raise,
    keyword_arg,
    value_text,
)
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# What to do instead of an option that belongs to the other kind.
Where = Literal["remote", "options", "method", "method-options"]
WHEN: dict[Where, str] = {
    "remote": "when `ray.remote` is applied",
    "options": "at the `.options(...)` call",
    "method": "when `@ray.method` is applied",
    "method-options": "when the method is called",
}
RAY_METHOD = ("ray.method", "ray.actor.method")


@dataclass(frozen=True)
class LiteralValue:
    """What the source says about a value: its type, and the value itself when every part is a literal."""

    kind: type
    value: object
    known: bool


def literal_value(expr: cst.BaseExpression) -> LiteralValue | None:
    """The literal value of `expr` (numbers, strings, True/False/None, containers of those); for a container
    display or comprehension with non-literal parts, or an f-string, only its type; None otherwise."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                         cst.UnaryOperation, cst.List, cst.Tuple, cst.Set, cst.Dict)):
        try:
            value = ast.literal_eval(value_text(expr).strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            return LiteralValue(type(value), value, True)
    number = _folded_number(expr)
    if number is not None:
        return LiteralValue(type(number), number, True)
    shapes: tuple[tuple[type, tuple[type[cst.CSTNode], ...]], ...] = (
        (list, (cst.List, cst.ListComp)),
        (tuple, (cst.Tuple,)),
        (set, (cst.Set, cst.SetComp)),
        (dict, (cst.Dict, cst.DictComp)),
        (str, (cst.FormattedString,)),
    )
    for kind, nodes in shapes:
        if isinstance(expr, nodes):
            return LiteralValue(kind, None, False)
    return None


ARITHMETIC: dict[type[cst.BaseBinaryOp], Callable[[float, float], float]] = {
    cst.Add: lambda a, b: a + b,
    cst.Subtract: lambda a, b: a - b,
    cst.Multiply: lambda a, b: a * b,
    cst.FloorDivide: lambda a, b: a // b,
    cst.Power: lambda a, b: a**b,
}


def _folded_number(expr: cst.BaseExpression, depth: int = 0) -> int | float | None:
    """Integer and float arithmetic on literals (`10**9`, `2 * 1024**3`), with small operands only."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _folded_number(expr.expression, depth + 1)
        return -inner if inner is not None else None
    if not isinstance(expr, cst.BinaryOperation) or depth > 8:
        return None
    operate = ARITHMETIC.get(type(expr.operator))
    left, right = _folded_number(expr.left, depth + 1), _folded_number(expr.right, depth + 1)
    if operate is None or left is None or right is None or abs(left) > 1e15 or abs(right) > 1e15:
        return None
    if isinstance(expr.operator, cst.Power) and not 0 <= right <= 64:
        return None
    try:
        return operate(left, right)
    except (OverflowError, ZeroDivisionError):
        return None


def spec_problem(name: str, spec: OptionSpec, value: LiteralValue) -> str | None:
    """Ray's error for `value` as option `name`, by the table row `spec`; None if it passes or is unknown."""
    if spec.types is not None:
        accepted = isinstance(value.value, spec.types) if value.known else issubclass(value.kind, spec.types)
        if not accepted:
            names = ", ".join(t.__name__ for t in spec.types)
            return f"TypeError: The type of keyword '{name}' must be ({names}), but received type {value.kind.__name__}"
    if spec.check is not None and value.known:
        return spec.check(value.value)
    return None


def suggestion(name: str, candidates: list[str]) -> str | None:
    """The valid option `name` was most likely meant to be."""
    if RENAMED_OPTIONS.get(name) in candidates:
        return RENAMED_OPTIONS[name]
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return found[0] if found else None


def _arg_keyword(arg: cst.Arg) -> str:
    assert arg.keyword is not None
    return arg.keyword.value


def _keywords(call: cst.Call) -> Iterator[cst.Arg]:
    yield from (arg for arg in call.args if arg.keyword is not None)


def _has_unpacked(call: cst.Call | None) -> bool:
    return call is not None and any(arg.star == "**" for arg in call.args)


def _kind_of(remote: RemoteDef | None) -> RemoteKind | None:
    """The kind Ray will see: known only when `ray.remote` gets the definition itself (another decorator
    between them may turn a function into something else)."""
    if remote is None:
        return None
    decorators = remote.target.decorators
    if isinstance(remote.declared_at, cst.Decorator):
        return remote.kind if decorators and decorators[-1] is remote.declared_at else None
    return remote.kind if not decorators else None


def _truthy(expr: cst.BaseExpression | None) -> bool:
    value = literal_value(expr) if expr is not None else None
    return value is not None and value.known and bool(value.value)


# ------------------------------------------------------------------ the experiment

STAND_IN: dict[RemoteKind, str] = {"task": "work", "actor": "Worker"}
# Empty values of a type, for a value the model cannot write out (an f-string, a list of the code's names).
EMPTY: dict[type, str] = {list: "[]", tuple: "()", set: "set()", dict: "{}", str: "''"}
# Option values the model writes as the code does: literals and builtin names (exception classes).
REPLAYABLE = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.Name, ast.Load,
              ast.expr_context, ast.operator, ast.unaryop)
# B's ending (A's too, when Ray took its options): the call ran, or waits for more than the cluster has.
RUN = """
ready, _ = ray.wait([ref], timeout=5)
if ready:
    ray.get(ref)
    __ray_lint_evidence__ = {"right": "it ran"}
else:
    __ray_lint_evidence__ = {"right": "accepted; it waits for more than this cluster has"}
"""
@dataclass(frozen=True)
class OptionsFacts:
    """The flagged call, replayable on a stand-in task `work` or actor class `Worker` (method `ping`): what
    `ray.remote` applies to, where Ray reads the arguments, the arguments as flagged and as fixed (the fix's,
    or without the refused ones; None: no arguments at all), the options of the stand-in's own
    `ray.remote(...)` that the check depends on, and whether the task yields."""

    kind: RemoteKind
    where: Where
    flagged: str
    fixed: str | None
    declared: str = ""
    generator: bool = False


class InvalidOrMisplacedOptionsExperiment(ReproductionExperiment[OptionsFacts]):
    """The flagged arguments on a stand-in task or actor, given where the code gives them (`ray.remote`,
    `.options`, `@ray.method`, an actor method's `.options`), which is then submitted and called; B gives
    the fixed arguments, or leaves the refused ones out. The user's script runs instead when it has an
    entry point and the fix of this finding leaves no other in the file (Ray stops at the first)."""

    facts_type = OptionsFacts
    shares_driver = True
    expected = (
        r"(?m)Invalid option keyword|decorator must be applied|Unexpected keyword argument to @ray\.method"
        r"|is not supported in '\.options\(\)'|positional argument|must be specified to use `get_if_exists`"
        r"|cannot be an empty string|Invalid scheduling_strategy|is not implemented for tasks|The type of keyword"
        r"|only accepts|must be one of|retry_exceptions must be|num_returns must be|must be a positive integer"
        r"|must be > 0, or -1|is not allowed|cannot be overridden|an integer is required|not supported between"
        r"|got an unexpected keyword argument|actor died unexpectedly|^AssertionError\s*$"
    )

    def model(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        if facts.kind == "actor" and facts.flagged.startswith("object_store_memory="):
            return (
                "not run: on Ray 2.60 an actor with `object_store_memory` crashes the raylet when its job ends "
                "(local_resource_manager.cc:119, check failed), which would take the verify cluster down"
            )
        call = {"remote": "ray.remote({})", "options": ".options({})", "method": "@ray.method({})", "method-options": ".ping.options({})"}
        flagged = call[facts.where].format(facts.flagged)
        fixed = call[facts.where].format(facts.fixed) if facts.fixed is not None else "without it"
        declared = f" (declared with `ray.remote({facts.declared})`)" if facts.declared else ""
        return Plan(
            Variant(flagged, script(_program(facts, facts.flagged))),
            Variant(fixed, script(_program(facts, facts.fixed))),
            "modelled",
            f"a stand-in {facts.kind}{declared} given `{flagged}`, created and called; and {f'`{fixed}`' if facts.fixed is not None else fixed}",
        )


def _program(facts: OptionsFacts, args: str | None) -> str:
    """The stand-in, given `args` where the code gives them, created and called once."""
    stand_in = STAND_IN[facts.kind]
    if facts.kind == "task":
        lines = [f"def work():\n    {'yield' if facts.generator else 'return'} 1\n"]
    else:
        decorator = f"    @ray.method({args})\n" if facts.where == "method" and args is not None else ""
        lines = [f"class Worker:\n{decorator}    def ping(self):\n        return 1\n"]
    if facts.where != "remote":
        lines.append(f"Remote = ray.remote({facts.declared})({stand_in})" if facts.declared else f"Remote = ray.remote({stand_in})")
    elif args is None:
        lines.append(f"Remote = ray.remote({stand_in})")
    elif re.match(rf"{stand_in}\s*(,|$)", args):  # the code applies `ray.remote` to the definition and options at once
        lines.append(f"Remote = ray.remote({args})")
    else:
        lines.append(f"Remote = ray.remote({args})({stand_in})")
    options = f".options({args})" if facts.where == "options" and args is not None else ""
    if facts.kind == "task":
        lines.append(f"ref = next(Remote{options}.remote())" if facts.generator else f"ref = Remote{options}.remote()")
        return "\n".join(lines) + RUN
    method = f".options({args})" if facts.where == "method-options" and args is not None else ""
    lines += [f"handle = Remote{options}.remote()", f"ref = handle.ping{method}.remote()"]
    return "\n".join(lines) + RUN


def _replay(expr: cst.BaseExpression, stand_in: str = "None") -> str:
    """A value as the model writes it: as written when it is made of literals and builtin names; else an
    empty value of its type (an f-string, a list of the code's classes), or `stand_in` (the definition a
    positional argument of `ray.remote` stands for; None for any other value)."""
    text = value_text(expr).strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        tree = None
    if tree is not None and all(
        isinstance(node, REPLAYABLE) and (not isinstance(node, ast.Name) or hasattr(builtins, node.id)) for node in ast.walk(tree)
    ):
        return text
    value = literal_value(expr)
    return EMPTY.get(value.kind, "None") if value is not None else stand_in


def _replay_arg(arg: cst.Arg, stand_in: str = "None") -> str:
    if arg.keyword is None:
        return _replay(arg.value, stand_in)
    return f"{arg.keyword.value}={_replay(arg.value)}"


def _replay_options(remote: RemoteDef | None, names: tuple[str, ...]) -> str:
    """The options `names` of a definition's own `ray.remote(...)`, as the model writes them."""
    if remote is None:
        return ""
    return ", ".join(f"{name}={_replay(remote.options.values[name])}" for name in names if name in remote.options.values)


def _facts(kind: RemoteKind | None, where: Where, arg: cst.Arg, fixed: str | None = None, declared: str = "") -> OptionsFacts:
    """The facts of one refused keyword (a task stands in where the kind is not known)."""
    return OptionsFacts(kind or "task", where, _replay_arg(arg), fixed, declared)


class InvalidOrMisplacedOptions(Rule):
    code = "RAY094"
    name = "invalid-or-misplaced-options"
    message = "An option Ray refuses for this remote function, actor or actor method: unknown, misplaced or invalid"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = ("ray.remote(", "@remote(", " remote(", "=remote(", "(remote(", "\nremote(", ".options(", "ray.method(", "@method(")
    also_tokens = ("ray",)
    experiment = InvalidOrMisplacedOptionsExperiment()
    docs = """
## What it does
Checks the options given to `@ray.remote(...)` / `ray.remote(...)(f)`, to `.options(...)` of a
remote function or actor class defined in the file, to `@ray.method(...)`, and to
`handle.method.options(...)` on a handle of such an actor, against a copy of Ray 2.60's own option
table (`ray/_common/ray_option_utils.py`, and `ray/actor.py` for actor methods). It reports:

- an unknown option name (`num_cpu=2`, `max_retry=3`), with a "did you mean" suggestion;
- a task option on an actor class (`max_retries`, `num_returns`, `retry_exceptions`, `max_calls`)
  or an actor option on a function (`max_restarts`, `max_task_retries`, `max_concurrency`,
  `lifetime`, `name`-less `get_if_exists`, `namespace`, `concurrency_groups`,
  `max_pending_calls`, `allow_out_of_order_execution`, ...);
- a literal value of the wrong type or range: `max_retries=-2`, `max_restarts=1.5`,
  `num_returns=-1`, `lifetime="permanent"`, `retry_exceptions="ValueError"` or a list holding
  strings or non-`Exception` classes, `enable_task_events=None`, `runtime_env="env.yaml"`,
  `object_store_memory=` on a task, `_num_objects_per_yield=0`, and so on;
- `max_calls` in a task's `.options(...)`, `concurrency_groups` in an actor's `.options(...)`,
  `get_if_exists=True` with no `name` (in the decorator or the call), and a
  `_num_objects_per_yield` in `.options(...)` that differs from the decorator's;
- an actor `name=""` or `namespace=""`, and a `scheduling_strategy` string other than
  `"DEFAULT"` or `"SPREAD"` (refused when the actor or task is submitted);
- `object_store_memory=` on an actor: Ray accepts it with a DeprecationWarning, and it reserves
  nothing;
- `ray.remote()` with empty parentheses, `ray.remote(f, num_cpus=1)`, `@ray.remote(2)`, and
  positional arguments to `.options(...)`;
- `@ray.method(...)` with an unknown keyword or positional arguments, a negative `num_returns` or
  a string other than `"streaming"`/`"dynamic"`, a `retry_exceptions` that is not a bool, list or
  tuple, `_num_objects_per_yield` below 1, a non-string `tensor_transport`, or a
  `concurrency_group` that the actor's decorator does not declare in `concurrency_groups`;
- `handle.method.options(...)` with a keyword an actor method call does not take (such as
  `num_cpus`), `_num_objects_per_yield`, or an undeclared `concurrency_group`.

ray-lint is silent for:
- options passed through `**kwargs` (only literal keywords are checked; a `**` also turns off the
  checks that need the full set, such as `get_if_exists` without `name`);
- values that are not literals, and the values of `label_selector` / `fallback_strategy`;
- resource quantities and `resources=` dict contents: RAY046 (`resources-dict-cpu-gpu`) and
  RAY047 (`bad-resource-quantity`) report those;
- `num_returns="streaming"` / `"dynamic"` on a function that does not yield, and the legacy
  `placement_group=` options: those belong to the generator and placement-group rules;
- `tensor_transport` names, which depend on the transports registered at run time;
- the kind of target when another decorator sits between `ray.remote` and the definition (only
  names that no kind accepts are reported there), and `.options(...)` on objects not known to be
  Ray remote functions or actors (a Serve deployment's `.options` takes other keywords);
- code under `with pytest.raises(...)` or `self.assertRaises(...)`, which tests Ray's validation.

The table mirrors Ray 2.60: an option added by a later Ray release is reported as unknown.

## Why is this bad?
Ray validates options when `ray.remote` or `@ray.method` is applied, at `.options(...)`, or when the
task or actor is submitted, and raises `ValueError` ("Invalid option keyword max_retries for
actors"), `TypeError` or `AssertionError`. Raised at decoration, the error fails the import of the
module; raised at submission, it fails a job that may already have done work. Every reported case
was checked to raise (or, for `object_store_memory` on an actor, to warn) on Ray 2.60. The
`ray.remote()` and `@ray.method` keyword checks are `assert` statements in Ray, so they do not
run under `python -O`, where the option is silently ignored instead. A `.options(concurrency_group=...)`
naming an undeclared group crashes the actor's worker process ("Failed to look up the executor
of the given concurrency group").

## Example
```python
@ray.remote(num_gpus=1, max_retries=3, num_returns=2)
class Trainer:
    @ray.method(concurrency_group="io")
    def load(self, path):
        ...

@ray.remote(max_restarts=2, lifetime="detached")
def preprocess(batch):
    ...
```

## Use instead
```python
@ray.remote(num_gpus=1, max_restarts=3, max_task_retries=3, concurrency_groups={"io": 2})
class Trainer:
    @ray.method(concurrency_group="io")
    def load(self, path):
        ...

@ray.remote(max_retries=2)
def preprocess(batch):
    ...
```
A misplaced option usually has a counterpart of the other kind: a task's retries are
`max_retries`, an actor's are `max_restarts` (the actor process) and `max_task_retries` (its
method calls); an actor sets `num_returns` and `retry_exceptions` per method with
`@ray.method(...)`; an actor is one long-lived worker, so it has no `max_calls`; a task runs one
call, so limit its parallelism with resources (or make it an actor) rather than
`max_concurrency`. An actor method call takes no resources: the actor reserves them, in
`@ray.remote(...)` on the class. `max_calls` and `concurrency_groups` are set in
`@ray.remote(...)`, not `.options(...)`, and an actor method's `_num_objects_per_yield` in
`@ray.method(...)`. Pass `None` rather than `""` for no actor `name` or `namespace`, and give
`scheduling_strategy` `"DEFAULT"`, `"SPREAD"` or a strategy object.

## Fix safety
Three fixes are offered. `ray.remote()` becomes `ray.remote`, and `ray.remote(f, num_cpus=1)`
becomes `ray.remote(num_cpus=1)(f)`: both are safe, since the call could not run before and the
options are the same. An option that Ray itself renamed (`max_reconstructions` to `max_restarts`,
`num_return_vals` to `num_returns`) is renamed safely: the new name means what the old one did, and
the code could not run as written. An unknown option whose name is only close to a valid one is
renamed to it too (`num_cpu=2` to `num_cpus=2`); that fix is unsafe, because the suggestion is a
guess at what was meant and changes how the task or actor is scheduled.

## References
- [ray.remote](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
- [ray.method](https://docs.ray.io/en/latest/ray-core/api/doc/ray.method.html)
- [Actor fault tolerance (max_restarts, max_task_retries)](https://docs.ray.io/en/latest/ray-core/fault_tolerance/actors.html)
- [Task fault tolerance (max_retries, retry_exceptions)](https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html)
- [Named actors (name, namespace, get_if_exists, lifetime)](https://docs.ray.io/en/latest/ray-core/actors/named-actors.html)
- [Concurrency groups](https://docs.ray.io/en/latest/ray-core/actors/concurrency_group_api.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote(num_cpus=1, num_gpus=0, memory=10**9, resources={'pool': 1}, accelerator_type='A100',\n"
            "            runtime_env={'pip': ['numpy']}, scheduling_strategy='SPREAD', name='prep', enable_task_events=False,\n"
            "            label_selector={'zone': 'us'}, _labels={'team': 'ml'})\ndef f():\n    pass\n",
            "common options on a task",
        ),
        Valid(
            "import ray\n@ray.remote(max_calls=1, max_retries=-1, num_returns=2, retry_exceptions=[ValueError, KeyError],\n"
            "            object_store_memory=None)\ndef f():\n    return 1, 2\n",
            "task-only options on a task",
        ),
        Valid(
            "import ray\n@ray.remote(num_returns='streaming', _generator_backpressure_num_objects=-1, _num_objects_per_yield=4)\n"
            "def gen(n):\n    yield from range(n)\n\ng = gen.options(num_returns='streaming', _num_objects_per_yield=4).remote(3)\n",
            "generator options",
        ),
        Valid(
            "import ray\n@ray.remote(num_cpus=2, max_restarts=-1, max_task_retries=3, max_concurrency=8, lifetime='detached',\n"
            "            name='svc', namespace='prod', get_if_exists=True, max_pending_calls=100,\n"
            "            concurrency_groups={'io': 2}, allow_out_of_order_execution=False, enable_tensor_transport=None)\n"
            "class Service:\n    @ray.method(concurrency_group='io')\n    def load(self):\n        pass\n",
            "actor-only options on an actor, and a declared concurrency group",
        ),
        Valid(
            "import ray\n@ray.remote(max_calls=1)\ndef f():\n    pass\n\n@ray.remote(name='a')\nclass A:\n    pass\n\n"
            "r = f.options(max_retries=0, name='f1').remote()\nh = A.options(get_if_exists=True, lifetime='non_detached').remote()\n",
            "valid `.options`; `get_if_exists` with the decorator's name",
        ),
        Valid(
            "import ray\n@ray.remote\nclass A:\n    @ray.method(num_returns=2, max_task_retries=-1, retry_exceptions=True, enable_task_events=False)\n"
            "    def pair(self):\n        return 1, 2\n\n    @ray.method()\n    def one(self):\n        return 1\n\n"
            "a = A.remote()\nx, y = a.pair.options(num_returns=2, name='p').remote()\n",
            "@ray.method options and actor-method options",
        ),
        Valid(
            "import ray\n@ray.remote(concurrency_groups={'io': 2, 'compute': 4}, runtime_env={'env_vars': {'A': '1'}})\nclass A:\n"
            "    async def m(self):\n        return 1\n\na = A.remote()\nr = a.m.options(concurrency_group='compute').remote()\n"
            "d = a.m.options(concurrency_group='').remote()\n",
            "declared groups, and the default group ''",
        ),
        Valid("import ray\n\ndef f():\n    pass\n\ng = ray.remote(f)\nh = ray.remote(num_cpus=1, max_retries=0)(f)\n", "ray.remote applied correctly"),
        Valid("import ray\n@ray.remote(**OPTIONS)\nclass A:\n    pass\n\nh = A.options(**overrides).remote()\n", "options through **kwargs"),
        Valid(
            "import ray\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    pass\n\napp = Model.options(num_replicas=2, max_ongoing_requests=8).bind()\n",
            "a Serve deployment's `.options` takes other keywords",
        ),
        Valid("@ray.remote(max_restarts=2)\ndef f():\n    pass\n", "no `import ray`: not Ray"),
        Valid(
            "import pytest\nimport ray\n\ndef test_rejects():\n    with pytest.raises(ValueError):\n        ray.remote(max_restarts=2)(f)\n",
            "a test of Ray's own validation",
        ),
        Valid(
            "import ray\n@ray.remote(max_restarts=2)\n@register\ndef f():\n    pass\n",
            "another decorator may turn the function into something else: kind unknown",
        ),
        Valid("import ray\n@ray.remote(num_cpus=-1, resources={'CPU': 1})\ndef f():\n    pass\n", "quantities and CPU keys: RAY047 and RAY046"),
    ]
    INVALID = [
        Invalid("import ray\n\n@ray.remote(max_retries=3)\nclass Trainer:\n    pass\n", 3, note="task-only option on an actor"),
        Invalid("import ray\n@ray.remote(max_restarts=2)\ndef f():\n    pass\n", 2, note="actor-only option on a task"),
        Invalid(
            "import ray\n@ray.remote(num_cpu=2)\ndef f():\n    pass\n",
            2,
            fixed="import ray\n@ray.remote(num_cpus=2)\ndef f():\n    pass\n",
            note="a typo",
        ),
        Invalid("import ray\n\ndef f():\n    pass\n\ng = ray.remote(max_retries=-2)(f)\n", 6, note="below -1"),
        Invalid("import ray\n@ray.remote(lifetime='permanent')\nclass A:\n    pass\n", 2),
        Invalid("import ray\n@ray.remote(retry_exceptions=['ValueError'])\ndef f():\n    pass\n", 2, note="strings, not exception classes"),
        Invalid("import ray\n@ray.remote\ndef f():\n    pass\n\nr = f.options(max_calls=1).remote()\n", 6, note="max_calls in .options"),
        Invalid("import ray\n@ray.remote\nclass A:\n    pass\n\nh = A.options(get_if_exists=True).remote()\n", 6, note="get_if_exists without a name"),
        Invalid("import ray\n@ray.remote\nclass A:\n    pass\n\nh = A.options(num_returns=2).remote()\n", 6, note="task option in an actor's .options"),
        Invalid(
            "import ray\n\n@ray.remote()\ndef f():\n    pass\n",
            3,
            fixed="import ray\n\n@ray.remote\ndef f():\n    pass\n",
            note="empty parentheses",
        ),
        Invalid(
            "import ray\n\ndef f():\n    pass\n\ng = ray.remote(f, num_cpus=2)\n",
            6,
            fixed="import ray\n\ndef f():\n    pass\n\ng = ray.remote(num_cpus=2)(f)\n",
            note="function and options together",
        ),
        Invalid(
            "import ray\n\nclass A:\n    @ray.method(max_retries=2)\n    def m(self):\n        pass\n",
            4,
            fixed="import ray\n\nclass A:\n    @ray.method(max_task_retries=2)\n    def m(self):\n        pass\n",
            note="@ray.method keyword",
        ),
        Invalid(
            "import ray\n@ray.remote(concurrency_groups={'io': 2})\nclass A:\n    @ray.method(concurrency_group='compute')\n    def m(self):\n        pass\n",
            4,
            note="undeclared concurrency group",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass A:\n    def m(self):\n        pass\n\na = A.remote()\nr = a.m.options(num_cpus=2).remote()\n",
            8,
            note="an actor method call takes no resources",
        ),
        Invalid("import ray\n@ray.remote\nclass A:\n    pass\n\nh = A.options(name='').remote()\n", 6, note="empty actor name"),
        Invalid("import ray\n@ray.remote(enable_task_events=None)\ndef f():\n    pass\n", 2, note="bool only"),
        Invalid(
            "import ray\n@ray.remote(max_reconstructions=3)\nclass A:\n    pass\n",
            2,
            fixed="import ray\n@ray.remote(max_restarts=3)\nclass A:\n    pass\n",
            note="the pre-1.0 name",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        expected = expected_to_raise(model)
        for site in model.calls_to("ray.remote"):
            if id(site.node) not in expected:
                self._check_remote(ctx, site, model.remote_declared_by(site.node))
        for site in model.calls_by_tail.get("options", ()):
            if id(site.node) not in expected and isinstance(site.node.func, cst.Attribute):
                self._check_options(ctx, site, site.node.func.value)
        decorated = {id(d.decorator): info for info in model.functions for d in info.node.decorators}
        for qualified in RAY_METHOD:
            for site in model.calls_to(qualified):
                if id(site.node) not in expected and id(site.node) in decorated:
                    self._check_method(ctx, site.node, decorated[id(site.node)])

    # ------------------------------------------------------------------ ray.remote(...)

    def _check_remote(self, ctx: Context, site: CallSite, remote: RemoteDef | None) -> None:
        call = site.node
        if any(arg.star == "*" for arg in call.args):
            return
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        keywords = list(_keywords(call))
        kind = _kind_of(remote)
        if not call.args:
            fix = FixPlan("Remove the empty parentheses", ((call, ctx.code_for(call.func)),), Applicability.SAFE)
            facts = OptionsFacts(kind or "task", "remote", "", None)
            ctx.report(call, "`ray.remote()` with empty parentheses raises `AssertionError`", fix, facts=facts)
            return
        if positional and (keywords or len(positional) > 1 or literal_value(positional[0].value) is not None):
            stand_in = STAND_IN[kind or "task"]
            flagged = ", ".join(_replay_arg(arg, stand_in) for arg in call.args if not arg.star)
            split = len(positional) == 1 and keywords and literal_value(positional[0].value) is None
            fixed = ", ".join(_replay_arg(arg) for arg in keywords) if split else None
            ctx.report(
                call,
                "`ray.remote` takes the function or class alone, or only keyword options",
                self._split_fix(ctx, call, positional, keywords),
                facts=OptionsFacts(kind or "task", "remote", flagged, fixed),
            )
            return
        for arg in keywords:
            self._check_keyword(ctx, arg, kind, "remote", site)
        if kind != "task" and not _has_unpacked(call):
            self._check_get_if_exists(ctx, call, None)

    def _split_fix(self, ctx: Context, call: cst.Call, positional: list[cst.Arg], keywords: list[cst.Arg]) -> FixPlan | None:
        """`ray.remote(f, num_cpus=1)` -> `ray.remote(num_cpus=1)(f)`."""
        if len(positional) != 1 or not keywords or _has_unpacked(call) or literal_value(positional[0].value) is not None:
            return None
        options = ", ".join(f"{_arg_keyword(arg)}={value_text(arg.value)}" for arg in keywords)
        text = f"{ctx.code_for(call.func)}({options})({ctx.code_for(positional[0].value)})"
        return FixPlan("Apply `ray.remote(...)` with the options to the function", ((call, text),), Applicability.SAFE)

    # ------------------------------------------------------------------ .options(...)

    def _check_options(self, ctx: Context, site: CallSite, receiver: cst.BaseExpression) -> None:
        model = ctx.model
        call = site.node
        remote = model.remote_def_of(receiver, site.scope, site.index)
        if remote is None:
            if isinstance(receiver, cst.Attribute):
                actor = model.actor_of_handle(receiver.value, site.scope, site.index)
                if actor is not None and actor.kind == "actor":
                    self._check_method_options(ctx, call, actor, receiver.attr.value)
            return
        kind = _kind_of(remote)
        if any(arg.keyword is None and not arg.star for arg in call.args):
            flagged = ", ".join(_replay_arg(arg) for arg in call.args if not arg.star)
            fixed = ", ".join(_replay_arg(arg) for arg in _keywords(call)) or None
            ctx.report(
                call,
                "`.options(...)` takes keyword options only; a positional argument raises `TypeError`",
                facts=OptionsFacts(kind or "task", "options", flagged, fixed),
            )
            return
        for arg in _keywords(call):
            name = _arg_keyword(arg)
            if kind == "task" and name == "max_calls":
                ctx.report(arg, "`max_calls` cannot be set in `.options(...)`, only in `@ray.remote(...)`", facts=_facts(kind, "options", arg))
            elif kind == "actor" and name == "concurrency_groups":
                message = "`concurrency_groups` cannot be set in `.options(...)`, only in `@ray.remote(...)`"
                ctx.report(arg, message, facts=_facts(kind, "options", arg))
            elif kind == "task" and name == "_num_objects_per_yield":
                self._check_yield_override(ctx, arg, remote)
            else:
                self._check_keyword(ctx, arg, kind, "options", site)
        if kind == "actor" and not _has_unpacked(call) and not _has_unpacked(remote.options.node):
            self._check_get_if_exists(ctx, call, remote)

    def _check_yield_override(self, ctx: Context, arg: cst.Arg, remote: RemoteDef) -> None:
        """Ray refuses a `_num_objects_per_yield` in `.options(...)` that differs from the decorator's (1 by default)."""
        if _has_unpacked(remote.options.node):
            return
        given = literal_value(arg.value)
        declared = remote.options.values.get("_num_objects_per_yield")
        default = literal_value(declared) if declared is not None else LiteralValue(int, 1, True)
        if given is None or not given.known or default is None or not default.known:
            return
        if given.value != (default.value or 1):
            declared_options = _replay_options(remote, ("num_returns", "_num_objects_per_yield"))
            facts = OptionsFacts("task", "options", _replay_arg(arg), None, declared_options, generator=True)
            ctx.report(arg, "`_num_objects_per_yield` cannot be overridden in `.options(...)`, only in `@ray.remote(...)`", facts=facts)

    def _check_get_if_exists(self, ctx: Context, call: cst.Call, remote: RemoteDef | None) -> None:
        arg = keyword_arg(call, "get_if_exists")
        if arg is None or not _truthy(arg.value):
            return
        names = [keyword_arg(call, "name")]
        if remote is not None:
            names.append(keyword_arg(remote.options.node, "name") if remote.options.node is not None else None)
        if any(name is not None and not _is_none(name.value) for name in names):
            return
        facts = _facts("actor", "remote" if remote is None else "options", arg)
        ctx.report(arg, "`get_if_exists=True` without a `name` raises `ValueError`", facts=facts)

    # ------------------------------------------------------------------ one keyword option

    def _check_keyword(self, ctx: Context, arg: cst.Arg, kind: RemoteKind | None, where: Where, site: CallSite) -> None:
        name = _arg_keyword(arg)
        kinds: list[RemoteKind] = [kind] if kind is not None else ["task", "actor"]
        specs = [REMOTE_OPTIONS[k][name] for k in kinds if name in REMOTE_OPTIONS[k]]
        if not specs:
            if kind is None or name not in ALL_OPTION_NAMES:
                self._report_unknown(ctx, site.node, arg, kind, where)
            else:
                self._report_misplaced(ctx, arg, kind, where)
            return
        value = literal_value(arg.value)
        if value is not None:
            problems = [spec_problem(name, spec, value) for spec in specs]
            if all(problems):
                error = (problems[0] or "").split(":", 1)[0]
                message = f"`{name}={ctx.snippet(arg.value, 20)}` makes Ray raise `{error}` {WHEN[where]}"
                ctx.report(arg.value, message, facts=_facts(kind, where, arg))
                return
            if name == "retry_exceptions" and "task" in kinds:
                problem = _retry_exception_problem(ctx.model, arg.value, site)
                if problem:
                    message = f"In `retry_exceptions`, {problem}, so Ray raises `ValueError`"
                    ctx.report(arg.value, message, facts=_facts("task", where, arg))
                return
            self._check_submission(ctx, arg, kind, value, where)

    def _check_submission(self, ctx: Context, arg: cst.Arg, kind: RemoteKind | None, value: LiteralValue, where: Where) -> None:
        """Values the option table accepts but Ray refuses when the task or actor is submitted."""
        name = _arg_keyword(arg)
        if not value.known:
            return
        facts = _facts(kind, where, arg)
        if name == "scheduling_strategy" and isinstance(value.value, str) and value.value not in STRATEGY_NAMES:
            message = f"`scheduling_strategy={ctx.snippet(arg.value, 24)}` is not a strategy, so submitting raises `ValueError`"
            ctx.report(arg.value, message, facts=facts)
        elif kind == "actor" and name in ("name", "namespace") and value.value == "":
            ctx.report(arg.value, f"An empty actor `{name}` raises `ValueError` when the actor is created", facts=facts)
        elif kind == "actor" and name == "object_store_memory" and value.value is not None:
            ctx.report(arg, "`object_store_memory` on an actor is deprecated and reserves no object store memory", facts=facts)

    def _report_unknown(self, ctx: Context, call: cst.Call, arg: cst.Arg, kind: RemoteKind | None, where: Where) -> None:
        name = _arg_keyword(arg)
        target = {"task": "remote functions", "actor": "actors", None: "remote functions or actors"}[kind]
        guess = suggestion(name, ALL_OPTION_NAMES)
        fix = None
        hint = ""
        if guess is not None:
            valid_here = kind is None or guess in REMOTE_OPTIONS[kind]
            hint = f"; did you mean `{guess}`?" if valid_here else f" (`{guess}` is for {'actors' if kind == 'task' else 'remote functions'})"
            if valid_here and kind is not None and not _has_keyword(call, guess):
                # Ray's own rename of an option keeps its meaning; a close name is a guess at it.
                sure = RENAMED_OPTIONS.get(name) == guess
                fix = FixPlan(f"Rename `{name}` to `{guess}`", ((arg.keyword, guess),), Applicability.SAFE if sure else Applicability.UNSAFE)
        renamed = f"{guess}={_replay(arg.value)}" if fix is not None else None
        ctx.report(arg, f"`{name}` is not a Ray option for {target}{hint}", fix, facts=_facts(kind, where, arg, renamed))

    def _report_misplaced(self, ctx: Context, arg: cst.Arg, kind: RemoteKind, where: Where) -> None:
        name = _arg_keyword(arg)
        other = "actors" if kind == "task" else "remote functions (tasks)"
        ctx.report(arg, f"`{name}` is an option of {other} only, so Ray raises `ValueError`", facts=_facts(kind, where, arg))

    # ------------------------------------------------------------------ @ray.method(...) and handle.method.options(...)

    def _check_method(self, ctx: Context, call: cst.Call, method: FunctionInfo) -> None:
        groups = _replay_options(_actor_of(ctx.model, method), ("concurrency_groups",))
        if any(arg.keyword is None for arg in call.args):
            if not any(arg.star for arg in call.args):
                facts = OptionsFacts("actor", "method", ", ".join(_replay_arg(arg) for arg in call.args), None, groups)
                ctx.report(call, "`@ray.method` takes keyword options only; a positional argument raises `AssertionError`", facts=facts)
            return
        for arg in _keywords(call):
            name = _arg_keyword(arg)
            spec = METHOD_OPTIONS.get(name)
            if spec is None:
                guess = suggestion(name, sorted(METHOD_OPTIONS))
                hint = f"; did you mean `{guess}`?" if guess else ""
                fix = None
                if guess is not None and not _has_keyword(call, guess):
                    fix = FixPlan(f"Rename `{name}` to `{guess}`", ((arg.keyword, guess),), Applicability.UNSAFE)
                renamed = f"{guess}={_replay(arg.value)}" if fix is not None else None
                facts = _facts("actor", "method", arg, renamed, groups)
                ctx.report(arg, f"`{name}` is not an option of `@ray.method`{hint}", fix, facts=facts)
                continue
            value = literal_value(arg.value)
            if value is None or not value.known:
                continue
            at_decoration = spec_problem(name, spec, value)
            at_call = _method_call_problem(name, value.value)
            if at_decoration or at_call:
                when = WHEN["method"] if at_decoration else WHEN["method-options"]
                error = (at_decoration or at_call or "").split(":", 1)[0]
                message = f"`{name}={ctx.snippet(arg.value, 20)}` in `@ray.method` makes Ray raise `{error}` {when}"
                ctx.report(arg.value, message, facts=_facts("actor", "method", arg, None, groups))
            elif name == "concurrency_group" and isinstance(value.value, str):
                declared = _declared_groups(ctx.model, method)
                if declared is not None and _undeclared(value.value, declared):
                    message = _undeclared_group(value.value, declared, "creating the actor raises `AssertionError`")
                    ctx.report(arg.value, message, facts=_facts("actor", "method", arg, None, groups))

    def _check_method_options(self, ctx: Context, call: cst.Call, actor: RemoteDef, method_name: str) -> None:
        groups = _replay_options(actor, ("concurrency_groups",))
        for arg in _keywords(call):
            name = _arg_keyword(arg)
            facts = _facts("actor", "method-options", arg, None, groups)
            if name not in METHOD_CALL_OPTIONS:
                guess = suggestion(name, sorted(METHOD_CALL_OPTIONS))
                hint = f"; did you mean `{guess}`?" if guess else ""
                ctx.report(arg, f"`{name}` is not an option of an actor method call{hint}", facts=facts)
                continue
            value = literal_value(arg.value)
            if name == "_num_objects_per_yield":
                ctx.report(arg, "`_num_objects_per_yield` cannot be overridden per actor method call, only in `@ray.method`", facts=facts)
                continue
            if value is None or not value.known:
                continue
            problem = spec_problem(name, METHOD_OPTIONS["num_returns"], value) if name == "num_returns" else None
            if problem:
                message = f"`num_returns={ctx.snippet(arg.value, 20)}` makes Ray raise `{problem.split(':', 1)[0]}` at the `.options(...)` call"
                ctx.report(arg.value, message, facts=facts)
            elif name == "concurrency_group" and isinstance(value.value, str):
                declared = _declared_groups_of(actor)
                if declared is not None and _undeclared(value.value, declared):
                    consequence = f"calling `{method_name}` with it crashes the actor's worker"
                    ctx.report(arg.value, _undeclared_group(value.value, declared, consequence), facts=facts)

def _has_keyword(call: cst.Call, name: str) -> bool:
    """Whether `call` already passes `name` (a rename to it would repeat a keyword)."""
    return keyword_arg(call, name) is not None


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _method_call_problem(name: str, value: object) -> str | None:
    """Values `@ray.method` accepts but Ray refuses when the method is called (`ActorMethod._remote`)."""
    if name == "num_returns" and isinstance(value, str) and value not in ("streaming", "dynamic"):
        return "TypeError: an integer is required"
    if name == "retry_exceptions" and not isinstance(value, (bool, list, tuple, NONE)):
        return "AssertionError: retry_exceptions can either be boolean or list/tuple of exception types"
    return None


def _retry_exception_problem(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> str | None:
    """Why a `retry_exceptions` list is not all `Exception` subclasses (Ray's `issubclass_safe(x, Exception)`):
    a literal item, or a builtin class outside `Exception` such as `KeyboardInterrupt`."""
    if not isinstance(expr, (cst.List, cst.Tuple)):
        return None
    for element in expr.elements:
        if isinstance(element, cst.StarredElement):
            return None
        item = element.value
        if literal_value(item) is not None or literal_string(item) is not None:
            return f"`{value_text(item)}` is not an exception class"
        if isinstance(item, cst.Name) and model.reaching_binding(item.value, site.scope, site.index) is None:
            builtin = getattr(builtins, item.value, None)
            if isinstance(builtin, type) and issubclass(builtin, BaseException) and not issubclass(builtin, Exception):
                return f"`{item.value}` is not a subclass of `Exception`"
    return None


def _declared_groups(model: SemanticModel, method: FunctionInfo) -> set[str] | None:
    """The concurrency groups declared for the actor class that `method` is defined in, if known."""
    actor = _actor_of(model, method)
    return _declared_groups_of(actor) if actor is not None else None


def _actor_of(model: SemanticModel, method: FunctionInfo) -> RemoteDef | None:
    """The actor class that `method` is defined in."""
    if method.owner is None:
        return None
    return next((r for r in model.remote_defs if r.target is method.owner.node and r.kind == "actor"), None)


def _declared_groups_of(actor: RemoteDef) -> set[str] | None:
    """The group names of a decorated actor's literal `concurrency_groups={...}` (empty when absent); None when
    they cannot be known: options through `**`, a non-literal value, or an actor made by `ray.remote(...)(cls)`."""
    if not isinstance(actor.declared_at, cst.Decorator) or actor.options.has_unpacked:
        return None
    value = actor.options.values.get("concurrency_groups")
    if value is None or _is_none(value):
        return set()
    if not isinstance(value, cst.Dict):
        return None
    names: set[str] = set()
    for element in value.elements:
        key = literal_string(element.key) if isinstance(element, cst.DictElement) else None
        if key is None:
            return None
        names.add(key)
    return names


def _undeclared(group: str, declared: set[str]) -> bool:
    """Whether a concurrency group name is missing: "" is the default group, `_ray...` groups are Ray's own."""
    return group not in declared and group != "" and not group.startswith("_ray")


def _undeclared_group(name: str, declared: set[str], consequence: str) -> str:
    return f"Concurrency group `{name}` is not declared, so {consequence}"
