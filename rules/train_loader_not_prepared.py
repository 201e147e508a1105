"""RAY214 train-loader-not-prepared: a Ray Train loop iterates a torch DataLoader that every worker reads whole."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant
from ray_lint.libraries import TRAIN_TOKENS, TRAINER_CALL_TOKENS
from ray_lint.libraries.train import (
    TRAIN_RUN_TIMEOUT_S,
    TorchLoader,
    TrainFacts,
    TrainLoop,
    rank_guard,
    torch_trainer_part,
)
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, iter_subtree, names_read
from ray_lint.rule import Context, Invalid, Rule, Valid

# Calls whose data is already split across workers: a loader over them needs no sampler.
SHARDED = frozenset({"get_dataset_shard", "iter_torch_batches", "iter_batches"})


class WholeDatasetExperiment(ReproductionExperiment[None]):
    """Two CPU workers iterate a 16-sample DataLoader, as built and through `prepare_data_loader`,
    one after the other in one run (one start of Ray Train serves both forms), and count what they read:
    16 each without it, 8 each with it."""

    facts_type = type(None)
    least_timeout_s = TRAIN_RUN_TIMEOUT_S
    COUNT = """\
def {name}():
    loader = torch.utils.data.DataLoader(list(range(16)), batch_size=4)
    {form}
    keep(sum(len(batch) for batch in loader))
"""
    COMPARE = """
if len(kept) != 2:
    raise RuntimeError(f"expected 2 workers' counts, got {len(kept)}")
if kept[0] + kept[1] > 16:
    __ray_lint_evidence__ = {"wrong": f"the 2 workers read {kept[0]} and {kept[1]} of the 16 samples: each read all of them"}
else:
    __ray_lint_evidence__ = {"right": f"the 2 workers read {kept[0]} and {kept[1]} of the 16 samples"}
"""

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("loader not prepared", ""),
            Variant("prepare_data_loader", ""),
            "modelled",
            "a 2-worker CPU TorchTrainer iterates a DataLoader of 16 samples once, as built and prepared, in one run",
            part=torch_trainer_part(self.COUNT, "pass", "loader = ray.train.torch.prepare_data_loader(loader)", self.COMPARE),
        )


class TrainLoaderNotPrepared(Rule):
    code = "RAY214"
    name = "train-loader-not-prepared"
    message = "A Ray Train loop iterates a DataLoader that every worker reads whole"
    severity = Severity.WARNING
    category = "correctness"
    tokens = ("DataLoader",)
    also_tokens = TRAIN_TOKENS
    anchor_tokens = TRAINER_CALL_TOKENS
    experiment = WholeDatasetExperiment()
    docs = """
## What it does
Finds a torch `DataLoader(...)` built in a function handed to a Ray Train trainer (or got there
from a helper of the module that returns it), bound to a name or kept in a dict
(`loaders["train"] = DataLoader(...)`, `{"train": DataLoader(...)}`), and iterated there (`for
batch in loader`, `for batch in loaders[phase]`, or handed to a helper of the module), with no
`ray.train.torch.prepare_data_loader`, no `sampler=` / `batch_sampler=` (a `DistributedSampler`)
and no Ray Data shard behind it.

## Why is this bad?
Ray Train runs the loop once per worker. A plain `DataLoader` knows nothing of the other
workers, so each of the N workers reads the whole dataset: an epoch costs N times the work, the
model sees every sample N times per epoch, and "epochs" no longer mean what the config says.
`prepare_data_loader` gives the loader a `DistributedSampler`, so each worker reads 1/N of it.
Measured with Ray 2.60 on 2 CPU workers: over a 16-sample loader each worker reads 16 samples;
after `prepare_data_loader`, 8 each.

ray-lint is silent for one-worker trainers, loaders given a sampler (a `DistributedSampler`, or
a custom one that shards), loaders over `ray.train.get_dataset_shard(...)` data, loaders built
under a rank guard (evaluation on rank 0), and loaders handed to another library that shards them
itself: Hugging Face Accelerate's `accelerator.prepare(model, optimizer, loader)` (Ray Train's
Accelerate guide uses it instead of `prepare_data_loader`) or Lightning Fabric's
`fabric.setup_dataloaders(loader)`; any `.prepare(...)` given the loader counts so. A loader that
a helper of the module builds and returns (`loader = build_loader(batch_size)`) counts as built
where the loop calls the helper, unless the helper prepares it itself or returns something else
on another path. A loader kept in a dict is reported only when the loop prepares no loader at all
(which entries a preparation such as `{k: prepare_data_loader(v) for k, v in loaders.items()}` is
given is not followed), and only where the loop reads its entry: `loaders[phase]` reads every
entry, `loaders["val"]` not the one under `"train"`.
An `IterableDataset` that shards itself by rank is not recognised: mark such a line with
`# noqa: RAY214`.

## Example
```python
def train_func(config):
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for epoch in range(config["epochs"]):
        for x, y in loader:
            ...
```

## Use instead
```python
def train_func(config):
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    loader = ray.train.torch.prepare_data_loader(loader)
    for epoch in range(config["epochs"]):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        for x, y in loader:
            ...
```

## Fix safety
No fix: `prepare_data_loader` also moves batches to the worker's device, and the shuffled
loader then needs `set_epoch` each epoch (RAY215).

## References
- [Ray Train: Get started with PyTorch](https://docs.ray.io/en/latest/train/getting-started-pytorch.html)
- [`ray.train.torch.prepare_data_loader`](https://docs.ray.io/en/latest/train/api/doc/ray.train.torch.prepare_data_loader.html)
"""

    VALID = [
        Valid(
            "from torch.utils.data import DataLoader\nimport ray.train.torch\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8)\n"
            "    loader = ray.train.torch.prepare_data_loader(loader)\n    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "prepared",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler\n"
            "from ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    sampler = DistributedSampler(config['data'])\n"
            "    loader = DataLoader(config['data'], batch_size=8, sampler=sampler)\n    for epoch in range(3):\n"
            "        sampler.set_epoch(epoch)\n        for batch in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "a DistributedSampler of the user's own",
        ),
        Valid(
            "import ray.train\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    shard = ray.train.get_dataset_shard('train')\n"
            "    loader = DataLoader(shard.iter_torch_batches(batch_size=None), batch_size=None)\n"
            "    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2), datasets={'train': ds}).fit()\n",
            "over a Ray Data shard",
        ),
        Valid(
            "import ray.train\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    if ray.train.get_context().get_world_rank() == 0:\n"
            "        val_loader = DataLoader(config['val'], batch_size=8)\n        for batch in val_loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "an evaluation loader on rank 0 only",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8)\n    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(use_gpu=True)).fit()\n",
            "one worker (ScalingConfig's default)",
        ),
        Valid(
            "from torch.utils.data import DataLoader\n\n"
            "def train_func(data):\n    loader = DataLoader(data, batch_size=8)\n    for batch in loader:\n        pass\n",
            "not a Ray Train loop",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def build_loader(data, batch_size):\n    return DataLoader(data, batch_size=batch_size, shuffle=True)\n\n"
            "def train_func(config):\n    loader = prepare_data_loader(build_loader(config['data'], 64))\n"
            "    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "a helper's loader, prepared where the loop gets it",
        ),
        Valid(
            "import ray.train.torch\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def build_loader(data):\n    loader = DataLoader(data, batch_size=64, shuffle=True)\n"
            "    return ray.train.torch.prepare_data_loader(loader)\n\n"
            "def train_func(config):\n    loader = build_loader(config['data'])\n    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "the helper prepares the loader it returns",
        ),
        Valid(
            "import ray.train\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def make_loader(batches):\n    return DataLoader(batches, batch_size=None)\n\n"
            "def train_func(config):\n    shard = ray.train.get_dataset_shard('train')\n"
            "    loader = make_loader(shard.iter_torch_batches(batch_size=32))\n    for batch in loader:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2), datasets={'train': ds}).fit()\n",
            "a helper's loader over a Ray Data shard",
        ),
        Valid(
            "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    accelerator = Accelerator(mixed_precision='fp16')\n"
            "    train_loader = DataLoader(config['train'], batch_size=64, shuffle=True)\n"
            "    eval_loader = DataLoader(config['eval'], batch_size=64)\n"
            "    model, optimizer, train_loader, eval_loader = accelerator.prepare(\n"
            "        config['model'], config['optimizer'], train_loader, eval_loader\n    )\n"
            "    for epoch in range(config['epochs']):\n        for batch in train_loader:\n            pass\n"
            "        for batch in eval_loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=4, use_gpu=True)).fit()\n",
            "Accelerate shards the loaders it prepares",
        ),
        Valid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer, prepare_data_loader\n\n"
            "def train_func(config):\n    loaders = {x: DataLoader(config[x], batch_size=8, shuffle=True) for x in ('train', 'val')}\n"
            "    loaders = {x: prepare_data_loader(loader) for x, loader in loaders.items()}\n"
            "    for phase in ('train', 'val'):\n        for batch in loaders[phase]:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "loaders kept in a dict, prepared through a comprehension",
        ),
    ]
    INVALID = [
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8, shuffle=True)\n"
            "    for epoch in range(config['epochs']):\n        for x, y in loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=4)).fit()\n",
            6,
        ),
        Invalid(
            "import torch\nimport ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    train_loader = torch.utils.data.DataLoader(config['data'], batch_size=8)\n"
            "    for step, batch in enumerate(train_loader):\n        pass\n\n"
            "TorchTrainer(train_loop_per_worker=train_func, scaling_config=ray.train.ScalingConfig(num_workers=2)).fit()\n",
            6,
            note="through enumerate",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def run_epoch(loader):\n    for batch in loader:\n        pass\n\n"
            "def train_func(config):\n    loader = DataLoader(config['data'], batch_size=8)\n    for _ in range(3):\n"
            "        run_epoch(loader)\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            10,
            note="iterated by a helper",
        ),
        Invalid(
            "from torch.utils.data import DataLoader as Loader\nfrom tqdm import tqdm\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    train = Loader(config['train'])\n    val = Loader(config['val'])  # never read\n"
            "    for batch in tqdm(train):\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=config_workers())).fit()\n",
            7,
            note="an aliased import, tqdm; the worker count is unknown",
        ),
        Invalid(
            "import functools\nfrom torch.utils.data import DataLoader\nfrom ray import train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config, data):\n    loader = DataLoader(data, batch_size=config['batch_size'], num_workers=4)\n"
            "    for batch in loader:\n        pass\n\n"
            "TorchTrainer(functools.partial(train_func, data=load()), scaling_config=train.ScalingConfig(num_workers=2)).fit()\n",
            7,
            note="the DataLoader's own `num_workers` is not Ray Train's",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def build_data_loader(batch_size):\n    loader = DataLoader(load_mnist(), batch_size=batch_size, shuffle=True)\n"
            "    return loader\n\n"
            "def train_func(config):\n    data_loader = build_data_loader(config['batch_size'])\n"
            "    for epoch in range(config['num_epochs']):\n        for images, labels in data_loader:\n            pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)).fit()\n",
            10,
            note="built by a helper that returns it",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loaders = {}\n"
            "    loaders['train'] = DataLoader(config['train'], batch_size=8, shuffle=True)\n"
            "    for epoch in range(config['epochs']):\n        for phase in ('train',):\n"
            "            for batch in loaders[phase]:\n                pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            7,
            note="kept in a dict, read by a key that varies (PyTorch's `dataloaders[phase]` idiom)",
        ),
        Invalid(
            "from torch.utils.data import DataLoader\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    loaders = {\n        'train': DataLoader(config['train'], batch_size=8, shuffle=True),\n"
            "        'val': DataLoader(config['val'], batch_size=8),  # never read\n    }\n"
            "    for batch in loaders['train']:\n        pass\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            7,
            note="a dict literal: only the entry read is reported",
        ),
    ]

    def check(self, ctx: Context) -> None:
        facts = ctx.model.analysis(TrainFacts)
        for loop in facts.loops:
            if loop.num_workers == 1:
                continue
            for loader in facts.torch_loaders(loop):
                if _reads_whole(ctx.model, loop, loader):
                    whole = (
                        f"Every worker of `{loop.function.node.name.value}` reads this DataLoader whole"
                        if loader.got is loader.built
                        else f"Every worker reads the DataLoader `{ctx.model.source_of(loader.got.node.func)}` returns whole"
                    )
                    ctx.report(loader.got.node, f"{whole}: use `prepare_data_loader`")


def _reads_whole(model: SemanticModel, loop: TrainLoop, loader: TorchLoader) -> bool:
    """Iterated, with nothing that splits it across workers, and not built for rank 0 alone."""
    if loader.prepared or loader.taken_over or loader.sampler is not None or not loader.reads:
        return False
    if rank_guard(model, loop.function, loader.got.node) is not None:
        return False
    return not any(_over_shard(model, site) for site in {id(site): site for site in (loader.built, loader.got)}.values())


def _over_shard(model: SemanticModel, site: CallSite) -> bool:
    """The call is given Ray Data shard data: `DataLoader(shard)` after `shard = ray.train.get_dataset_shard(...)`,
    or a helper's `build_loader(shard.iter_torch_batches())`."""
    for arg in site.node.args:
        if _mentions_shard(arg.value):
            return True
        for name in names_read(arg.value):
            binding = model.sole_assignment(name, site.scope, site.index)
            if binding is not None and binding.value is not None and _mentions_shard(binding.value):
                return True
    return False


def _mentions_shard(expr: cst.BaseExpression) -> bool:
    return any(
        (isinstance(node, cst.Name) and node.value in SHARDED) or (isinstance(node, cst.Attribute) and node.attr.value in SHARDED)
        for node in iter_subtree(expr)
    )
