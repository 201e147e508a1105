"""RAY213 train-model-not-prepared: a Ray Train loop trains a torch model that no DDP wrapper synchronizes."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant
from ray_lint.libraries import TRAIN_TOKENS, TRAINER_CALL_TOKENS, defined_function_or_class
from ray_lint.libraries.train import TRAIN_RUN_TIMEOUT_S, TrainFacts, TrainLoop, torch_trainer_part
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, ClassInfo, FunctionInfo, scope_within
from ray_lint.rule import Context, Invalid, Rule, Valid

# Calls (by their last name, so that any import style counts) after which gradients are averaged across
# workers: Ray Train's own preparation, DDP / FSDP, DeepSpeed and Accelerate, the Lightning and Hugging Face
# integrations (their trainers wrap the model), and a hand-written all-reduce of the gradients.
SYNCHRONIZING = frozenset({
    "prepare_model", "DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard",
    "prepare_trainer", "RayDDPStrategy", "RayFSDPStrategy", "RayDeepSpeedStrategy", "prepare", "initialize",
    "all_reduce", "allreduce",
})
NN_MODULES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# `torch.nn.<Name>(...)` that are not models: losses end in "Loss"; these hold no trainable layers.
NN_NOT_MODELS = frozenset({"Parameter", "Identity", "Flatten", "Dropout", "ReLU", "GELU", "Sigmoid", "Tanh", "Softmax"})
MAX_BASES_DEPTH = 4  # how many local base classes are followed to reach `nn.Module`


class ModelStepExperiment(ReproductionExperiment[None]):
    """Two CPU workers (gloo) start from the same linear model and take one SGD step on different data,
    with the model as built and wrapped by `prepare_model`, one after the other in one run (one start of Ray
    Train serves both forms): the weights differ across workers without it."""

    facts_type = type(None)
    least_timeout_s = TRAIN_RUN_TIMEOUT_S
    STEP = """\
def {name}():
    torch.manual_seed(0)  # the same initial weights on both workers
    model = torch.nn.Linear(4, 1)
    {form}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    rank = ray.train.get_context().get_world_rank()
    inputs = torch.randn(8, 4, generator=torch.Generator().manual_seed(rank))  # each worker its own data
    loss = torch.nn.functional.mse_loss(model(inputs), inputs.sum(dim=1, keepdim=True))
    loss.backward()
    optimizer.step()
    keep([round(w, 6) for w in next(model.parameters()).detach().flatten().tolist()])
"""
    COMPARE = """
if len(kept) != 2:
    raise RuntimeError(f"expected 2 workers' weights, got {len(kept)}")
if kept[0] == kept[1]:
    __ray_lint_evidence__ = {"right": "both workers hold the same weights after one step"}
else:
    __ray_lint_evidence__ = {"wrong": f"after one step the 2 workers hold different weights: {kept[0][:2]}... vs {kept[1][:2]}..."}
"""

    def model(self, subject: Subject) -> Plan:
        return Plan(
            Variant("model not prepared", ""),
            Variant("prepare_model", ""),
            "modelled",
            "a 2-worker CPU TorchTrainer takes one SGD step of a linear model on different data per worker, "
            "as built and prepared, in one run",
            part=torch_trainer_part(self.STEP, "pass", "model = ray.train.torch.prepare_model(model)", self.COMPARE),
        )


class TrainModelNotPrepared(Rule):
    code = "RAY213"
    name = "train-model-not-prepared"
    message = "A Ray Train loop trains a torch model that is never prepared for distributed training"
    severity = Severity.ERROR
    category = "correctness"
    tokens = ("backward", ".step(")
    also_tokens = TRAIN_TOKENS
    anchor_tokens = TRAINER_CALL_TOKENS
    experiment = ModelStepExperiment()
    docs = """
## What it does
Finds a function handed to a Ray Train trainer (`TorchTrainer(train_loop_per_worker=...)`, by name
or through `functools.partial`) that builds a torch model (an instance of an `nn.Module` subclass
of the module, `nn.Sequential(...)` or another `torch.nn` layer, `torchvision.models.*`,
`transformers.AutoModel*.from_pretrained`, or a call to a helper of the module that builds one)
and trains it (`.backward()` or an optimizer's `.step()`, in the loop or a helper it calls),
while nothing in the loop or its helpers wraps the model for distributed training:
`ray.train.torch.prepare_model`, `DistributedDataParallel`, FSDP (`FullyShardedDataParallel`,
`fully_shard`), `deepspeed.initialize`, `accelerator.prepare`, Lightning's and Hugging Face's
`prepare_trainer`, or a hand-written `all_reduce`.

## Why is this bad?
Ray Train starts one process per worker and sets up the process group, but it does not touch the
model: without `prepare_model` (which wraps it in `DistributedDataParallel`) every worker trains
its own copy on its own shard of the data, and gradients are never averaged. Training then runs N
times for the price of one model trained on 1/N of the data, and the checkpoint holds whichever
copy rank 0 had. Nothing fails or warns. Measured with Ray 2.60 on 2 CPU workers (gloo): after
one SGD step on different data the two workers' weights differ; with `prepare_model` they are equal.

ray-lint is silent when the trainer has one worker (`ScalingConfig(num_workers=1)`, or a
`ScalingConfig` that names no `num_workers`), when the model is only evaluated (no backward or
optimizer step), and when any of the wrappers above appears in the loop or in a helper it calls
(`build_model()` that returns `prepare_model(net)`).

## Example
```python
def train_func(config):
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()

TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=4)).fit()
```

## Use instead
```python
def train_func(config):
    model = ray.train.torch.prepare_model(ResNet())
    ...
```

## Fix safety
No fix: where the model is wrapped matters (before the optimizer is built, after loading weights),
and `prepare_model` also moves it to the worker's device.

## References
- [Ray Train: Get started with PyTorch](https://docs.ray.io/en/latest/train/getting-started-pytorch.html)
- [`ray.train.torch.prepare_model`](https://docs.ray.io/en/latest/train/api/doc/ray.train.torch.prepare_model.html)
"""

    VALID = [
        Valid(
            "import torch\nfrom torch import nn\nimport ray.train.torch\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\ndef train_func():\n    model = nn.Linear(4, 1)\n"
            "    model = ray.train.torch.prepare_model(model)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "the model is prepared",
        ),
        Valid(
            "import torch\nfrom torch import nn\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer, prepare_model\n\n"
            "def build_model():\n    return prepare_model(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))\n\n"
            "def train_func():\n    model = build_model()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "prepared inside the helper that builds it",
        ),
        Valid(
            "import torch\nfrom torch import nn\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 1)\n\n"
            "def train_func():\n    model = Net()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=1)).fit()\n",
            "one worker: nothing to synchronize",
        ),
        Valid(
            "import torch\nimport torchvision\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def evaluate():\n    model = torchvision.models.resnet18()\n    model.eval()\n    with torch.no_grad():\n"
            "        return model(torch.randn(1, 3, 32, 32)).argmax().item()\n\n"
            "TorchTrainer(evaluate, scaling_config=ScalingConfig(num_workers=4)).fit()\n",
            "the model is only evaluated",
        ),
        Valid(
            "import lightning.pytorch as pl\nimport ray.train.lightning\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\nfrom models import LitNet\n\n"
            "def train_func():\n    model = LitNet()\n    trainer = pl.Trainer(strategy=ray.train.lightning.RayDDPStrategy(),\n"
            "                         plugins=[ray.train.lightning.RayLightningEnvironment()])\n"
            "    trainer = ray.train.lightning.prepare_trainer(trainer)\n    trainer.fit(model)\n"
            "    trainer.optimizers[0].step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "Lightning with Ray's DDP strategy and prepare_trainer",
        ),
        Valid(
            "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "from ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func():\n    model = DDP(nn.Linear(4, 1))\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            "wrapped in DDP by hand",
        ),
        Valid(
            "import torch\nfrom torch import nn\n\n"
            "def train_func():\n    model = nn.Linear(4, 1)\n    loss_fn = nn.MSELoss()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    loss_fn(model(torch.randn(2, 4)), torch.zeros(2, 1)).backward()\n    opt.step()\n\n"
            "train_func()\n",
            "a plain training function, not handed to a Ray Train trainer",
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom torch import nn\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func():\n    model = nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            7,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nimport ray.train\nfrom ray.train.torch import TorchTrainer\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 1)\n\n"
            "class DeepNet(Net):\n    pass\n\n"
            "def train_func(config):\n    net = DeepNet()\n    opt = torch.optim.Adam(net.parameters())\n"
            "    for _ in range(config['steps']):\n        net.fc(torch.randn(2, 4)).sum().backward()\n        opt.step()\n\n"
            "trainer = TorchTrainer(train_loop_per_worker=train_func, train_loop_config={'steps': 3},\n"
            "                       scaling_config=ray.train.ScalingConfig(num_workers=4, use_gpu=True))\n",
            15,
            note="a subclass of a local nn.Module subclass",
        ),
        Invalid(
            "import torch\nimport torchvision\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def build_model():\n    return torchvision.models.resnet18(num_classes=10)\n\n"
            "def train_func():\n    model = build_model()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    model(torch.randn(1, 3, 32, 32)).sum().backward()\n    opt.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()\n",
            10,
            note="built by a helper; the call to it is reported",
        ),
        Invalid(
            "import functools\nimport torch\nfrom torch import nn\nfrom ray import train\nfrom ray.train.torch import TorchTrainer\n\n"
            "def fit_one_epoch(model, opt):\n    model(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n"
            "def train_func(config, lr):\n    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n"
            "    opt = torch.optim.SGD(model.parameters(), lr=lr)\n    fit_one_epoch(model, opt)\n\n"
            "TorchTrainer(functools.partial(train_func, lr=0.1), scaling_config=train.ScalingConfig(num_workers=8)).fit()\n",
            12,
            note="trained in a helper; the loop handed over through functools.partial",
        ),
        Invalid(
            "import torch\nfrom transformers import AutoModelForSequenceClassification\nfrom ray.train import ScalingConfig\n"
            "from ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    model = AutoModelForSequenceClassification.from_pretrained('bert-base-cased')\n"
            "    optimizer = torch.optim.AdamW(model.parameters())\n    for batch in config['batches']:\n"
            "        model(**batch).loss.backward()\n        optimizer.step()\n\n"
            "TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=config_workers())).fit()\n",
            7,
            note="a Hugging Face model in a plain torch loop; the worker count is unknown",
        ),
    ]

    def check(self, ctx: Context) -> None:
        facts = ctx.model.analysis(TrainFacts)
        for loop in facts.loops:
            if loop.num_workers == 1:
                continue
            calls = facts.calls_in(loop)
            if any(_tail(site.node.func) in SYNCHRONIZING for site in calls) or not any(_trains(site) for site in calls):
                continue
            built = _first_model_built(ctx.model, loop, calls)
            if built is not None:
                ctx.report(
                    built.node,
                    f"`{loop.function.node.name.value}` trains this model without `prepare_model`: each worker trains its own copy",
                )


def _tail(func: cst.BaseExpression) -> str | None:
    """The called name's last part: `prepare_model` for `ray.train.torch.prepare_model(...)`."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _trains(site: CallSite) -> bool:
    """`loss.backward()`, or `<optimizer>.step()` on a name that says it is an optimizer."""
    func = site.node.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "backward":
        return True
    return func.attr.value == "step" and isinstance(func.value, cst.Name) and "optim" in func.value.value.lower()


def _first_model_built(model: SemanticModel, loop: TrainLoop, calls: list[CallSite]) -> CallSite | None:
    """The first call in the loop's own body that builds a model, itself or through a helper that does."""
    building_helpers = {
        id(helper.node) for helper in loop.helpers
        if any(scope_within(site.scope, helper.scope) and _builds_model(model, site) for site in calls)
    }
    for site in calls:
        if not scope_within(site.scope, loop.function.scope):
            continue
        if _builds_model(model, site):
            return site
        called = defined_function_or_class(model, site.node.func, site.scope, site.index)
        if isinstance(called, FunctionInfo) and id(called.node) in building_helpers:
            return site
    return None


def _builds_model(model: SemanticModel, site: CallSite) -> bool:
    name = model.call_name(site) or ""
    if name.startswith("torch.nn.") and name.count(".") == 2:
        layer = name.rsplit(".", 1)[1]
        return layer[:1].isupper() and not layer.endswith("Loss") and layer not in NN_NOT_MODELS
    if name.startswith("torchvision.models.") or name == "timm.create_model":
        return True
    if name.startswith("transformers.") and "Model" in name and name.endswith(".from_pretrained"):
        return True
    found = defined_function_or_class(model, site.node.func, site.scope, site.index)
    return isinstance(found, ClassInfo) and _is_nn_module(model, found, 0)


def _is_nn_module(model: SemanticModel, cls: ClassInfo, depth: int) -> bool:
    """Whether a class of the module subclasses `torch.nn.Module`, directly or through local classes."""
    if depth > MAX_BASES_DEPTH:
        return False
    at = model.definition_index(cls.node, cls.scope.parent or model.module_scope)
    for base in cls.node.bases:
        if model.qualified_name(base.value, cls.scope.parent or model.module_scope, at) in NN_MODULES:
            return True
        local = defined_function_or_class(model, base.value, cls.scope.parent or model.module_scope, at)
        if isinstance(local, ClassInfo) and _is_nn_module(model, local, depth + 1):
            return True
    return False
