"""RAY215 train-missing-set-epoch: a distributed, shuffled DataLoader is read every epoch without `set_epoch`."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant
from ray_lint.libraries import TRAIN_TOKENS, TRAINER_CALL_TOKENS, keyword_value
from ray_lint.libraries.train import (
    TRAIN_RUN_TIMEOUT_S,
    TorchLoader,
    TrainFacts,
    TrainLoop,
    torch_trainer_part,
)
from ray_lint.model import SemanticModel
from ray_lint.python_model import Loop
from ray_lint.rule import Context, Invalid, Rule, Valid

DISTRIBUTED_SAMPLERS = frozenset({"torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"})


class SameOrderExperiment(ReproductionExperiment[None]):
    """Two CPU workers read a shuffled, prepared 16-sample DataLoader for 2 epochs, with and without
    `sampler.set_epoch(epoch)`, one after the other in one run (one start of Ray Train serves both forms),
    and keep rank 0's first batch of each epoch."""

    facts_type = type(None)
    least_timeout_s = TRAIN_RUN_TIMEOUT_S
    EPOCHS = """\
def {name}():
    loader = torch.utils.data.DataLoader(list(range(16)), batch_size=4, shuffle=True)
    loader = ray.train.torch.prepare_data_loader(loader)
    firsts = []
    for epoch in range(2):
        {form}
        firsts.append(next(iter(loader)).tolist())
    keep(firsts)
"""
    COMPARE = """
first_0, first_1 = kept[0]
if first_0 == first_1:
    __ray_lint_evidence__ = {"wrong": f"rank 0's first batch is {first_0} in epoch 0 and in epoch 1: the same order"}
else:
    __ray_lint_evidence__ = {"right": f"rank 0's first batch is {first_0} in epoch 0, {first_1} in epoch 1"}
"""

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("no set_epoch", ""),
            Variant("set_epoch", ""),
            "modelled",
            "a 2-worker CPU TorchTrainer reads a shuffled, prepared DataLoader of 16 samples for 2 epochs, "
            "without and with set_epoch, in one run",
            part=torch_trainer_part(self.EPOCHS, "pass", "loader.sampler.set_epoch(epoch)", self.COMPARE),
        )


class TrainMissingSetEpoch(Rule):
    code = "RAY215"
    name = "train-missing-set-epoch"
    message = "A shuffled distributed DataLoader is read each epoch without `sampler.set_epoch(epoch)`"
    severity = Severity.WARNING
    category = "correctness"
    tokens = ("DataLoader",)
    also_tokens = TRAIN_TOKENS
    anchor_tokens = TRAINER_CALL_TOKENS
    experiment = SameOrderExperiment()
    docs = """
## What it does
Finds, in a function handed to a Ray Train trainer, a `DataLoader` that a `DistributedSampler`
shuffles (`DataLoader(..., shuffle=True)` passed to `ray.train.torch.prepare_data_loader` with
more than one worker, or `DataLoader(..., sampler=DistributedSampler(...))` with the sampler's
default `shuffle=True`) and that is read inside a loop (the epoch loop), while the function and
its helpers never call `.set_epoch(...)`.

## Why is this bad?
A `DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and its epoch only
changes through `set_epoch`. Without it every epoch reads the same permutation: each worker sees
its samples in the same order every epoch, which weakens shuffling and can hurt convergence.
Ray 2.60's `prepare_data_loader` (`ray/train/torch/train_loop_utils.py`, and the v2 copy in
`ray/train/v2/torch/train_loop_utils.py`) adds the sampler but never calls `set_epoch` itself;
its docstring asks the loop to. Measured with Ray 2.60 on 2 CPU workers: rank 0's first batch is
the same in epochs 0 and 1 without `set_epoch`, and differs with it.

ray-lint is silent for `shuffle=False` (or no `shuffle=`), a `DistributedSampler(..., shuffle=False)`,
a loop that calls `set_epoch` anywhere (also in a helper), a loader read once (not in a loop, or
in `range(1)`), a prepared loader of a one-worker trainer (Ray adds no sampler), and Ray Data
iterators, which shuffle per epoch through their own options.

## Example
```python
loader = ray.train.torch.prepare_data_loader(DataLoader(train_set, batch_size=64, shuffle=True))
for epoch in range(config["epochs"]):
    for x, y in loader:
        ...
```

## Use instead
```python
loader = ray.train.torch.prepare_data_loader(DataLoader(train_set, batch_size=64, shuffle=True))
for epoch in range(config["epochs"]):
    if ray.train.get_context().get_world_size() > 1:
        loader.sampler.set_epoch(epoch)
    for x, y in loader:
        ...
```

## Fix safety
No fix: the epoch's name and where the call goes (before the loader is iterated) depend on the loop.

## References
- [`ray.train.torch.prepare_data_loader`](https://docs.ray.io/en/latest/train/api/doc/ray.train.torch.prepare_data_loader.html)
- [`torch.utils.data.distributed.DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
"""

    VALID = [
        Valid(
            "import ray.train\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(DataLoader(config['data'], batch_size=8, shuffle=True))\n"
            "    for epoch in range(config['epochs']):\n        if ray.train.get_context().get_world_size() > 1:\n"
            "            loader.sampler.set_epoch(epoch)\n        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "set_epoch each epoch",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(DataLoader(config['data'], batch_size=8))\n"
            "    for epoch in range(config['epochs']):\n        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "not shuffled: the order is meant to be the same",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8, shuffle=True)\n"
            "    loader = prepare_data_loader(loader)\n    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "one epoch",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler\n"
            "from ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    sampler = DistributedSampler(config['data'], shuffle=False)\n"
            "    loader = DataLoader(config['data'], sampler=sampler)\n    for epoch in range(3):\n"
            "        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "a sampler that does not shuffle",
        ),
        Valid(
            "import ray.train\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    shard = ray.train.get_dataset_shard('train')\n    for epoch in range(3):\n"
            "        for batch in shard.iter_torch_batches(batch_size=32, local_shuffle_buffer_size=256):\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2), datasets={'train': ds}).fit()\n",
            "a Ray Data shard: its iterator shuffles every epoch",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(DataLoader(config['data'], shuffle=True))\n"
            "    for epoch in range(5):\n        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=1)).fit()\n",
            "one worker: prepare_data_loader adds no sampler, the DataLoader's own shuffle reshuffles",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def run_epoch(loader, epoch):\n    loader.sampler.set_epoch(epoch)\n    for batch in loader:\n        pass\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(DataLoader(config['data'], shuffle=True))\n"
            "    for epoch in range(5):\n        run_epoch(loader, epoch)\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "set_epoch in the helper that runs the epoch",
        ),
    ]
    INVALID = [
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8, shuffle=True)\n"
            "    loader = prepare_data_loader(loader)\n    for epoch in range(config['epochs']):\n"
            "        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            9,
        ),
        Invalid(
            "import torch\nimport ray.train.torch\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loader = ray.train.torch.prepare_data_loader(\n"
            "        torch.utils.data.DataLoader(config['data'], batch_size=8, shuffle=True)\n    )\n"
            "    for epoch in range(10):\n        for step, batch in enumerate(loader):\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=4)).fit()\n",
            11,
            note="the DataLoader built inside the prepare call",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler\n"
            "from ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    sampler = DistributedSampler(config['data'])\n"
            "    loader = DataLoader(config['data'], batch_size=8, sampler=sampler)\n    for epoch in range(3):\n"
            "        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=1)).fit()\n",
            10,
            note="a user's DistributedSampler shuffles by default, whatever the worker count",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def run_epoch(loader):\n    for batch in loader:\n        pass\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(DataLoader(config['data'], shuffle=True))\n"
            "    epoch = 0\n    while epoch < config['epochs']:\n        run_epoch(loader)\n        epoch += 1\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            13,
            note="the epoch loop calls a helper that reads the loader",
        ),
        Invalid(
            "import torch.utils.data as tud\nimport ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loader = tud.DataLoader(config['data'], sampler=tud.DistributedSampler(config['data']))\n"
            "    for epoch in range(3):\n        for x, y in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ray.train.ScalingConfig(num_workers=2)).fit()\n",
            8,
            note="the sampler built inline, through a module alias",
        ),
    ]

    def check(self, ctx: Context) -> None:
        facts = ctx.model.analysis(TrainFacts)
        for loop in facts.loops:
            if any(isinstance(site.node.func, cst.Attribute) and site.node.func.attr.value == "set_epoch" for site in facts.calls_in(loop)):
                continue
            for loader in facts.torch_loaders(loop):
                if not _shuffled_by_distributed_sampler(ctx.model, loop, loader):
                    continue
                for node, outer in loader.reads:
                    if outer is not None and _repeats(ctx.model, outer):
                        ctx.report(
                            node,
                            f"Same order every epoch: `{loop.function.node.name.value}` never calls "
                            "`sampler.set_epoch(epoch)`",
                        )
                        break


def _shuffled_by_distributed_sampler(model: SemanticModel, loop: TrainLoop, loader: TorchLoader) -> bool:
    """A prepared `shuffle=True` loader of a trainer with several workers (or an unknown count), or a loader
    given a `DistributedSampler` that shuffles (its default)."""
    site = loader.built
    if loader.sampler is None:
        shuffle = keyword_value(site.node, "shuffle")
        return loader.prepared and loop.num_workers != 1 and isinstance(shuffle, cst.Name) and shuffle.value == "True"
    sampler: cst.BaseExpression | None = loader.sampler
    scope, at = site.scope, site.index
    if isinstance(sampler, cst.Name):
        binding = model.sole_assignment(sampler.value, scope, at)
        sampler, scope, at = (binding.value, binding.scope, binding.index) if binding is not None else (None, scope, at)
    if not isinstance(sampler, cst.Call) or model.qualified_name(sampler.func, scope, at) not in DISTRIBUTED_SAMPLERS:
        return False
    shuffle = keyword_value(sampler, "shuffle")
    return shuffle is None or (isinstance(shuffle, cst.Name) and shuffle.value == "True")


def _repeats(model: SemanticModel, loop: Loop) -> bool:
    iterations = model.literal_iterations(loop)
    return iterations is None or iterations > 1
