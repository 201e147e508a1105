"""How a loop runs, for rules that weigh work submitted inside it: how many iterations it has, whether it
always leaves in the first one, whether it sleeps, which of its statements run in one iteration only."""

from __future__ import annotations

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import COMPREHENSIONS, Loop, block_statements, is_name

SLEEPS = ("time.sleep", "asyncio.sleep")


def enclosing_iterations(model: SemanticModel, loop: Loop) -> int | None:
    """How many times code in `loop` runs, counting the loops around it in the same function: the
    product of their literal counts (`range(k)`, a literal list), or None when one is unknown."""
    total = 1
    current: Loop | None = loop
    while current is not None:
        count = model.literal_iterations(current)
        if count is None:
            return None
        total *= count
        current = current.parent
    return total


def exits_in_first_iteration(loop: Loop) -> bool:
    """A `for` or `while` whose body always leaves at its top level (`break`, `return`, `raise`)."""
    if isinstance(loop.node, COMPREHENSIONS):
        return False
    return any(isinstance(statement, (cst.Break, cst.Return, cst.Raise)) for statement in block_statements(loop.node.body))


def sleeps_in(model: SemanticModel, loop: Loop) -> bool:
    """Whether the loop sleeps (a polling or pacing loop: the sleep, not the task, sets its pace)."""
    return any(loop.contains_index(site.index) for name in SLEEPS for site in model.calls_to(name))


def runs_in_one_iteration(model: SemanticModel, loop: Loop, node: cst.CSTNode) -> bool:
    """Whether `node`, in the body of the `for` loop `loop`, runs in one iteration at most: under `if i == 0:`
    (or `if not i:`, or any integer) where `i` counts the loop (`for i in range(n)`, `for i, x in
    enumerate(xs)`). A rank-0 step, such as asking the first worker for an address, is done once, not once
    per item."""
    counter = _counter(loop.node) if isinstance(loop.node, cst.For) else None
    if counter is None:
        return False
    path = model.path_within(loop.node.body, node) or []
    return any(
        isinstance(parent, cst.If) and child is parent.body and _tests_one_value(parent.test, counter)
        for parent, child in zip(path, path[1:])
    )


def _counter(loop: cst.For) -> str | None:
    """The name that counts the loop's iterations: the target of `range(...)`, or the first of `enumerate(...)`'s."""
    call = loop.iter
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    target: cst.BaseExpression = loop.target
    if call.func.value == "enumerate" and isinstance(target, (cst.Tuple, cst.List)) and target.elements:
        target = target.elements[0].value
    elif call.func.value != "range":
        return None
    return target.value if isinstance(target, cst.Name) else None


def _tests_one_value(test: cst.BaseExpression, counter: str) -> bool:
    """`counter == 3`, `0 == counter` or `not counter`: true in one iteration of a counted loop."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return is_name(test.expression, counter)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    left, right = test.left, test.comparisons[0].comparator
    return (is_name(left, counter) and isinstance(right, cst.Integer)) or (is_name(right, counter) and isinstance(left, cst.Integer))
