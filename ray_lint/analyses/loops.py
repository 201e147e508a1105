"""How a loop runs, for rules that weigh work submitted inside it: how many iterations it has, whether it
always leaves in the first one, whether it sleeps."""

from __future__ import annotations

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import COMPREHENSIONS, Loop, block_statements

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
