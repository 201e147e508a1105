"""RAY114 raise-object-store-proportion: `RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION` raised above Ray's
default, which takes memory from the workers' heap (and from Ray Data's UDFs) for the object store."""

from __future__ import annotations

from ray_lint.analyses.env_writes import EnvWrite, environ_writes, runtime_env_writes
from ray_lint.diagnostics import Severity
from ray_lint.model import SemanticModel
from ray_lint.python_model import literal_number, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

VARIABLE = "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"
# `DEFAULT_OBJECT_STORE_MEMORY_PROPORTION` in ray/_private/ray_constants.py (Ray 2.60): read from the
# environment when `ray` is imported.
DEFAULT_PROPORTION = 0.3


def _proportion(write: EnvWrite) -> float | None:
    """The literal proportion written (`"0.6"` or `0.6`), else None."""
    text = literal_string(write.value)
    if text is not None:
        try:
            return float(text)
        except ValueError:
            return None
    return literal_number(write.value)


def _ray_imported_before(model: SemanticModel, write: EnvWrite) -> bool:
    """Whether Ray is already imported when the driver's write runs: Ray reads the variable once, on import,
    so a write at module level after `import ray`, or in a function of a module that imports Ray at its top,
    changes nothing for this process's `ray.init`."""
    imports = [
        binding.index
        for bindings in model.module_scope.bindings.values()
        for binding in bindings
        if binding.kind == "import" and binding.imported is not None and binding.imported.split(".")[0] == "ray"
    ]
    if not imports:
        return False
    return write.scope is not model.module_scope or min(imports) < write.at


class RaiseObjectStoreProportion(Rule):
    code = "RAY114"
    name = "raise-object-store-proportion"
    message = "Raising the object store's share of memory leaves less heap for tasks and UDFs"
    severity = Severity.INFO
    category = "resource"
    preview = True
    tokens = (VARIABLE,)
    no_experiment = (
        "its cost is less heap for tasks on a loaded node, a memory effect a model cannot show without "
        "exhausting the machine"
    )
    docs = """
## What it does
Finds `RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION` set to a literal above Ray's default of 0.3:
through `os.environ[...] = ...`, `os.environ.setdefault/update`, `os.putenv`, or the `env_vars`
of a `runtime_env`.

## Why is this bad?
The object store takes that share of a node's memory when the node starts; the rest is heap
for the workers. Old Ray Data versions suggested raising it in a warning; Ray Data's guide to
avoiding OOMs now says not to: a larger store leaves less heap to the UDFs, which are what runs
out of memory, and the OOM killer then kills and retries workers. Ray Data already spills and
backs off when the store is full.

The setting is also easy to put where it does nothing. Ray 2.60 reads it once, when `ray` is
imported (`ray/_private/ray_constants.py`), and uses it when a node starts: a write after
`import ray` does not change the cluster this process's `ray.init()` starts, and `env_vars` of
a `runtime_env` reach only the workers, never the node's object store. The finding's message
says so in those cases.

This is a heuristic (info, preview): a shuffle-heavy job with small UDFs may have been tuned
deliberately. ray-lint is silent on values at or below the default (lowering the share leaves
more heap) and on values it cannot read.

## Example
```python
def main():
    os.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = "0.6"
    ray.init()
```

## Use instead
```python
def main():
    ray.init()  # the default share; set `memory=` on memory-hungry UDFs instead
```

## Fix safety
There is no automatic fix: removing a deliberate setting changes how much spills.

## References
- [Ray Data: how to avoid out-of-memory errors](https://docs.ray.io/en/latest/data/how-to-avoid-ooms.html)
- [Ray Core: memory management](https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html)
"""

    VALID = [
        Valid('import os\nos.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = "0.2"\nimport ray\n', "lowered"),
        Valid('import os\nos.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = "0.3"\nimport ray\n', "the default"),
        Valid(
            'import os\nos.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = str(args.store_share)\nimport ray\n',
            "a value the code does not show",
        ),
        Valid('import os\nshare = os.environ.get("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", "0.6")\n', "a read"),
        Valid(
            'import os\nos.environ.pop("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", None)\nimport ray\n',
            "removed: back to the default",
        ),
        Valid('import os\nos.environ["RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES"] = str(10**10)\n', "another variable"),
    ]
    INVALID = [
        Invalid('import os\nos.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = "0.6"\nimport ray\n', 2),
        Invalid('import os\nos.environ.setdefault("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", "0.5")\n', 2),
        Invalid('import os\nos.putenv("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", "0.8")\n', 2),
        Invalid(
            'import ray\nray.init(runtime_env={"env_vars": {\n    "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION": "0.5",\n}})\n',
            3,
            note="a runtime_env does not reach the object store: reported as doing nothing",
        ),
        Invalid(
            'import os\nimport ray\n\ndef main():\n    os.environ["RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"] = "0.6"\n    ray.init()\n',
            5,
            note="after `import ray`: reported as doing nothing here",
        ),
        Invalid('import os\nos.environ.update({"RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION": "0.45"})\n', 2),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for write in (*environ_writes(model), *runtime_env_writes(model)):
            if write.variable != VARIABLE:
                continue
            proportion = _proportion(write)
            if proportion is None or proportion <= DEFAULT_PROPORTION:
                continue
            raised = f"Object store share raised to {proportion:g} (default {DEFAULT_PROPORTION:g})"
            if write.site is not None:
                ctx.report(write.node, f"{raised} in `runtime_env`: no effect, set at node start")
            elif _ray_imported_before(model, write):
                ctx.report(write.node, f"{raised} after `import ray`: no effect on `ray.init()`")
            else:
                ctx.report(write.node, f"{raised}: less heap for tasks and UDFs")
