"""RAY212 broadcast-large-from-rank-zero: `ray.train.collective.broadcast_from_rank_zero` given an object
the code shows to be far over the 1000 bytes Ray Train allows it."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant
from ray_lint.libraries import TRAIN_TOKENS, keyword_value
from ray_lint.libraries.train import TRAIN_RUN_TIMEOUT_S, torch_trainer_part
from ray_lint.libraries.tune import short_size
from ray_lint.model import SemanticModel
from ray_lint.python_model import Scope
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import LOADERS_OPTION, Size, size_of

BROADCASTS = frozenset({
    "ray.train.collective.broadcast_from_rank_zero", "ray.train.collective.collectives.broadcast_from_rank_zero",
})
# `_MAX_BROADCAST_SIZE_BYTES` in ray/train/v2/_internal/execution/collective_impl.py (Ray 2.60): above it,
# Ray logs "Data size N bytes exceeds the maximum broadcast size of 1000 bytes".
MAX_BROADCAST_BYTES = 1000


def _largest_branch(
    model: SemanticModel, data: cst.BaseExpression, scope: Scope, at: int, loaders: frozenset[str]
) -> Size | None:
    """The size of `data`, or of the larger branch of the `x if rank == 0 else None` it is (or a name is
    bound to): rank 0 broadcasts its branch, the other ranks pass the other."""
    if isinstance(data, cst.Name):
        binding = model.reaching_binding(data.value, scope, at)
        if binding is not None and binding.kind == "assign" and isinstance(binding.value, cst.IfExp):
            data, scope, at = binding.value, binding.scope, binding.index
    if not isinstance(data, cst.IfExp):
        return size_of(model, data, scope, at, loaders)
    sizes = [size for branch in (data.body, data.orelse) if (size := size_of(model, branch, scope, at, loaders)) is not None]
    return max(sizes, key=lambda size: -1 if size.bytes is None else size.bytes, default=None)



class BroadcastWarningExperiment(ReproductionExperiment[None]):
    """Two CPU workers of one Ray Train run broadcast 100 kB from rank 0 with `broadcast_from_rank_zero`,
    then (the fix on the rule's page) the path of a file that holds it, and keep what Ray Train logged
    about the broadcast: Ray 2.60 warns that the data exceeds the 1000 bytes it allows, and goes on."""

    facts_type = type(None)
    least_timeout_s = TRAIN_RUN_TIMEOUT_S
    STEP = """\
def {name}():
    import importlib
    import logging

    collective = importlib.import_module("ray.train.collective")  # not imported in a Train worker by default
    rank = ray.train.get_context().get_world_rank()

    def through_a_file(data):
        path = None
        if rank == 0:
            path = os.path.join(KEPT, "broadcast.bin")
            with open(path, "wb") as handle:
                handle.write(data)
        path = collective.broadcast_from_rank_zero(path)
        with open(path, "rb") as handle:
            return handle.read()

    class Logged(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    messages, handler = [], Logged()
    logger = logging.getLogger("ray.train.v2._internal.execution.collective_impl")
    logger.addHandler(handler)
    try:
        received = {form}
    finally:
        logger.removeHandler(handler)
    keep({{"size": len(received), "logged": messages}})
"""
    COMPARE = """
warned = [message for message in kept[0]["logged"] if "exceeds the maximum broadcast size" in message]
if warned:
    __ray_lint_evidence__ = {"wrong": f"Ray Train warned on rank 0: {warned[0]}; rank 1 still got the {kept[1]['size']} bytes"}
else:
    __ray_lint_evidence__ = {"right": f"no warning; rank 1 got the {kept[1]['size']} bytes"}
"""

    def model(self, subject: Subject) -> Plan:
        flagged = "collective.broadcast_from_rank_zero(bytes(100_000) if rank == 0 else None)"
        return Plan(
            Variant("broadcast the data", ""),
            Variant("broadcast a file's path", ""),
            "modelled",
            "a 2-worker CPU TorchTrainer hands 100 kB from rank 0 to rank 1, by broadcast and through a file, in one run",
            part=torch_trainer_part(self.STEP, flagged, "through_a_file(bytes(100_000))", self.COMPARE),
        )

class BroadcastLargeFromRankZero(Rule):
    code = "RAY212"
    name = "broadcast-large-from-rank-zero"
    message = "`broadcast_from_rank_zero` is for small control data, not arrays, models or datasets"
    severity = Severity.WARNING
    category = "api-misuse"
    preview = True
    tokens = ("broadcast_from_rank_zero",)
    also_tokens = TRAIN_TOKENS
    options = (LOADERS_OPTION,)
    experiment = BroadcastWarningExperiment()
    docs = """
## What it does
Finds `ray.train.collective.broadcast_from_rank_zero(data)` where `data` is an object whose size
the code shows to be over 1000 bytes: an allocation with a literal shape (`np.zeros(10_000)`), a
value loaded by a data loader (`torch.load`, `pd.read_csv`, `np.load`...: the `large-loaders`
option) or a value marked `# ray-lint: large`.

## Why is this bad?
`broadcast_from_rank_zero` is a barrier that hands rank 0's value to every worker through Ray
Train's one synchronization actor: each worker's copy is pickled, stored and fetched through
that actor. Its documentation limits it to small (under 1 KB) control data, such as a run id
or a decision. Ray 2.60 checks the pickled size against 1000 bytes (`_MAX_BROADCAST_SIZE_BYTES`)
and logs "Data size N bytes exceeds the maximum broadcast size of 1000 bytes" (the docstring's
`ValueError` is not raised in 2.60; older and newer versions may differ). Weights, arrays and
datasets belong in the object store (`ray.put` before training, or a checkpoint), in the
training framework's own collectives (`torch.distributed.broadcast`), or in each worker's
own load.

ray-lint is silent when the size is unknown (a variable, a dict the code builds), when it is
small (`{"run_id": run_id}`), and on `None`, which the other ranks pass.

## Example
```python
weights = torch.load("init.pt") if rank == 0 else None
weights = broadcast_from_rank_zero(weights)
```

## Use instead
```python
path = "init.pt" if rank == 0 else None
path = broadcast_from_rank_zero(path)  # a few bytes
weights = torch.load(path)
```

## Fix safety
There is no automatic fix: where the data should travel instead depends on the program.

## References
- [ray.train.collective.broadcast_from_rank_zero](https://docs.ray.io/en/latest/train/api/doc/ray.train.collective.broadcast_from_rank_zero.html)
"""

    VALID = [
        Valid(
            "from ray.train.collective import broadcast_from_rank_zero\n\ndef loop(config):\n"
            "    run_id = broadcast_from_rank_zero({'run_id': make_id()})\n",
            "small control data",
        ),
        Valid(
            "import numpy as np\nfrom ray.train.collective import broadcast_from_rank_zero\n\ndef loop(config):\n"
            "    seeds = broadcast_from_rank_zero(np.arange(16))\n",
            "128 bytes of seeds",
        ),
        Valid(
            "from ray.train.collective import broadcast_from_rank_zero\n\ndef loop(config):\n"
            "    data = broadcast_from_rank_zero(build_plan(config))\n",
            "size unknown",
        ),
        Valid(
            "import numpy as np\n\ndef broadcast_from_rank_zero(x):\n    return x\n\n"
            "out = broadcast_from_rank_zero(np.zeros(1_000_000))\n",
            "a function of this module, not Ray Train's",
        ),
        Valid(
            "import torch\nfrom ray import train\nfrom ray.train.collective import broadcast_from_rank_zero\n\n"
            "def loop(config):\n    path = 'init.pt' if train.get_context().get_world_rank() == 0 else None\n"
            "    path = broadcast_from_rank_zero(path)\n    weights = torch.load(path)\n",
            "the path is broadcast, each worker loads",
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom ray import train\nfrom ray.train.collective import broadcast_from_rank_zero\n\n"
            "def loop(config):\n    rank = train.get_context().get_world_rank()\n"
            "    weights = torch.load('init.pt') if rank == 0 else None\n    weights = broadcast_from_rank_zero(weights)\n",
            8,
            note="a conditional value: the loaded branch counts",
        ),
        Invalid(
            "import numpy as np\nimport ray.train.collective\n\ndef loop(config):\n"
            "    table = ray.train.collective.broadcast_from_rank_zero(np.zeros((1000, 1000)))\n",
            5,
        ),
        Invalid(
            "import pandas as pd\nfrom ray.train import collective\n\ndef loop(config):\n"
            "    frame = pd.read_parquet(config['path'])\n    frame = collective.broadcast_from_rank_zero(frame)\n",
            6,
        ),
        Invalid(
            "from ray.train.collective import broadcast_from_rank_zero as bcast\n\ndef loop(config):\n"
            "    payload = bcast(data=bytes(50_000))\n",
            4,
        ),
        Invalid(
            "from ray.train.collective import broadcast_from_rank_zero\n\ndef loop(config):\n"
            "    index = build_index()  # ray-lint: large\n    index = broadcast_from_rank_zero(index)\n",
            5,
        ),
    ]

    def check(self, ctx: Context) -> None:
        loaders = frozenset(self.settings[LOADERS_OPTION.name])
        for name in sorted(BROADCASTS):
            for site in ctx.model.calls_to(name):
                call = site.node
                data = keyword_value(call, "data")
                if data is None and call.args and call.args[0].keyword is None and not call.args[0].star:
                    data = call.args[0].value
                if data is None:
                    continue
                size = _largest_branch(ctx.model, data, site.scope, site.index, loaders)
                if size is None or not size.at_least(MAX_BROADCAST_BYTES + 1):
                    continue
                ctx.report(
                    call,
                    f"`broadcast_from_rank_zero` given {short_size(size)}: Ray Train allows {MAX_BROADCAST_BYTES} bytes",
                )
