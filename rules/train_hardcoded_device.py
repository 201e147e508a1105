"""RAY216 train-hardcoded-device: a Ray Train loop pins a literal CUDA device index, the same on every worker."""

from __future__ import annotations

import re

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.libraries import TRAIN_TOKENS, TRAINER_CALL_TOKENS, keyword_value
from ray_lint.libraries.train import TrainFacts
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, literal_string
from ray_lint.rule import Context, Invalid, Rule, Valid

# `"cuda:0"`, `"cuda:1"`: a device string that names an index (a bare `"cuda"` names none).
_INDEXED_CUDA = re.compile(r"cuda:(\d+)")
# `torch.cuda` functions that make an index the current device (`get_device_name(0)` only asks).
_SETS_CURRENT_DEVICE = ("torch.cuda.set_device", "torch.cuda.device")

_PREAMBLE = "import torch\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"


def _trainer(workers: int, use_gpu: str | None = "True") -> str:
    """The last line of an example: a `TorchTrainer` of `workers` workers, `use_gpu` as written (or none)."""
    gpu = "" if use_gpu is None else f", use_gpu={use_gpu}"
    return f"\nTorchTrainer(train_func, scaling_config=ScalingConfig(num_workers={workers}{gpu})).fit()\n"


class TrainHardcodedDevice(Rule):
    code = "RAY216"
    name = "train-hardcoded-device"
    message = "A Ray Train loop pins a literal CUDA device index, the same GPU on every worker of a node"
    severity = Severity.WARNING
    category = "resource"
    preview = True  # `cuda:0` is right when each node runs one worker, which the code does not say
    tokens = ("cuda",)
    also_tokens = TRAIN_TOKENS
    anchor_tokens = TRAINER_CALL_TOKENS
    no_experiment = (
        "it needs a node with 2 real GPUs: logical GPUs have no CUDA device to put a model on"
    )
    docs = """
## What it does
Finds, in a function handed to a Ray Train trainer (or a helper it calls), a CUDA device with a
literal index: `.to("cuda:0")`, `.to(device="cuda:1")`, `.cuda(0)`, `torch.device("cuda:0")`,
`torch.device("cuda", 0)`, `device="cuda:0"` (as in `iter_torch_batches(device="cuda:0")`),
`torch.cuda.set_device(0)` or `torch.cuda.device(0)`, when the trainer has more than one worker
(or an unknown count) and does not say `use_gpu=False`.

## Why is this bad?
In Ray 2.60 `TorchTrainer` shares the node's GPUs among its workers: `_TorchBackend` sets
`share_cuda_visible_devices = True` (`ray/train/torch/config.py`), so each worker's
`CUDA_VISIBLE_DEVICES` lists the GPUs of every worker of the trainer on its node
(`ray/train/v2/_internal/callbacks/accelerators.py`, `_share_cuda_visible_devices`; Train v1:
`ray/train/_internal/backend_executor.py`), unless `TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES=0`.
`cuda:0` is then the same GPU in every worker of a node: they all put their model and batches on
it, running out of its memory or taking turns, while the other GPUs reserved for them stay idle;
an index past the GPUs a worker sees raises `invalid device ordinal`.

A bare `"cuda"` or `.cuda()` is fine: before the training function runs, Ray 2.60 enters
`TorchConfig.train_func_context`, `TorchConfigContextManager`, which calls
`torch.cuda.set_device(ray.train.torch.get_device())` (`ray/train/torch/config.py`, entered by
`construct_train_func` in `ray/train/v2/_internal/util.py` for Train v2, the default, and in
`ray/train/_internal/utils.py` for v1), and `prepare_model` does the same
(`ray/train/v2/torch/train_loop_utils.py`). A device without an index is the current one: the
worker's own GPU.

ray-lint is silent when the trainer says `use_gpu=False` (or names no `use_gpu`), has one worker,
and for indices that are not literals (`get_device()`, a variable, a config value). It is a
preview rule: a trainer with one worker per node is right to say `cuda:0`.

## Example
```python
def train_func(config):
    model = Net().to("cuda:0")
    for x, y in loader:
        x, y = x.cuda(0), y.cuda(0)
```

## Use instead
```python
def train_func(config):
    device = ray.train.torch.get_device()
    model = Net().to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
```

## Fix safety
No fix: dropping the index is right only after Ray has set the current device, which ray-lint does
not see for every trainer; the code should ask `get_device()` instead.

## References
- [`ray.train.torch.get_device`](https://docs.ray.io/en/latest/train/api/doc/ray.train.torch.get_device.html)
- [Ray Train: Get started with PyTorch](https://docs.ray.io/en/latest/train/getting-started-pytorch.html)
- [`torch.cuda.set_device`](https://pytorch.org/docs/stable/generated/torch.cuda.set_device.html)
"""

    VALID = [
        Valid(
            "import torch\nimport ray.train.torch\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    device = ray.train.torch.get_device()\n    x = torch.zeros(4).to(device)\n"
            + _trainer(4),
            "the device Ray assigned",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    model = torch.nn.Linear(4, 2).cuda()\n    x = torch.zeros(4).to('cuda')\n"
            "    y = torch.zeros(4, device=torch.device('cuda'))\n" + _trainer(4),
            "no index: TorchConfigContextManager has set the worker's own GPU as the current device",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).to('cuda:0')\n"
            + _trainer(4, "False"),
            "a CPU trainer",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).cuda(0)\n"
            + _trainer(4, None),
            "ScalingConfig's default use_gpu is False",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).to('cuda:0')\n"
            + _trainer(1),
            "one worker: cuda:0 is its only GPU",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).to(f\"cuda:{config['gpu']}\")\n"
            + _trainer(2),
            "an index the code computes",
        ),
        Valid(
            _PREAMBLE
            + "def train_func(config):\n    print(torch.cuda.get_device_name(0))\n"
            + _trainer(2),
            "asks about GPU 0 without using it",
        ),
        Valid(
            "import torch\n\ndef train_func(config):\n    return torch.zeros(4).cuda(0)\n\ntrain_func({})\n",
            "not a Ray Train loop",
        ),
    ]
    INVALID = [
        Invalid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).to('cuda:0')\n"
            + _trainer(4),
            6,
        ),
        Invalid(
            _PREAMBLE
            + "def train_func(config):\n    model = torch.nn.Linear(4, 2).cuda(0)\n"
            + _trainer(4),
            6,
        ),
        Invalid(
            _PREAMBLE
            + "def train_func(config):\n    device = torch.device('cuda', 0)\n    return device\n"
            + _trainer(2),
            6,
        ),
        Invalid(
            _PREAMBLE
            + "def train_func(config):\n    torch.cuda.set_device(0)\n    return torch.zeros(4).cuda()\n"
            + _trainer(2),
            6,
            note="the later bare .cuda() follows it to GPU 0",
        ),
        Invalid(
            _PREAMBLE + "def move(batch):\n    return batch.to(device='cuda:1')\n\n"
            "def train_func(config):\n    return move(torch.zeros(4))\n" + _trainer(2),
            6,
            note="in a helper the loop calls",
        ),
        Invalid(
            "import ray.train\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def train_func(config):\n    shard = ray.train.get_dataset_shard('train')\n"
            "    for batch in shard.iter_torch_batches(device='cuda:0'):\n        pass\n"
            "\nTorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=2, use_gpu=config.gpu)).fit()\n",
            7,
            note="use_gpu unknown",
        ),
        Invalid(
            _PREAMBLE
            + "def train_func(config):\n    x = torch.zeros(4).to('cuda:0' if torch.cuda.is_available() else 'cpu')\n"
            + _trainer(2),
            6,
            note="the usual fallback still pins GPU 0",
        ),
    ]

    def check(self, ctx: Context) -> None:
        facts = ctx.model.analysis(TrainFacts)
        for loop in facts.loops:
            if loop.use_gpu is False or loop.num_workers == 1:
                continue
            for site in facts.calls_in(loop):
                index = _pinned_cuda_index(ctx.model, site)
                if index is not None:
                    ctx.report(
                        site.node,
                        f"`{loop.function.node.name.value}` pins `cuda:{index}`, the same GPU on every worker of a node",
                    )


def _pinned_cuda_index(model: SemanticModel, site: CallSite) -> int | None:
    """The literal CUDA index that `.cuda(0)`, `.to("cuda:0")`, `torch.device("cuda", 0)`,
    `device="cuda:0"` or `torch.cuda.set_device(0)` names, else None (a bare `"cuda"` names none)."""
    call, func = site.node, site.node.func
    positional = [arg.value for arg in call.args if arg.keyword is None]
    first = positional[0] if positional else None
    device = keyword_value(call, "device")
    name = model.call_name(site)
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    if (method == "cuda" and name is None) or name in _SETS_CURRENT_DEVICE:
        return _index(
            first or device
        )  # a tensor's or module's `.cuda(0)`, not `torch.cuda`
    if name == "torch.device":
        kind = first or keyword_value(call, "type")
        if literal_string(kind) == "cuda":
            return _int(
                positional[1] if len(positional) > 1 else keyword_value(call, "index")
            )
        return _string_index(kind)
    return _string_index(first if method == "to" and first is not None else device)


def _index(expr: cst.BaseExpression | None) -> int | None:
    """A device given as an int (`0`) or an indexed string (`"cuda:0"`)."""
    number = _int(expr)
    return number if number is not None else _string_index(expr)


def _string_index(expr: cst.BaseExpression | None) -> int | None:
    """The index of `"cuda:N"`, also as a branch of `"cuda:0" if ... else "cpu"`."""
    if isinstance(expr, cst.IfExp):
        body = _string_index(expr.body)
        return body if body is not None else _string_index(expr.orelse)
    matched = _INDEXED_CUDA.fullmatch(literal_string(expr) or "")
    return int(matched.group(1)) if matched else None


def _int(expr: cst.BaseExpression | None) -> int | None:
    """A non-negative int literal."""
    return int(expr.evaluated_value) if isinstance(expr, cst.Integer) else None
