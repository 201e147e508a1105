"""RAY082 physical-gpu-id-as-device: a physical id from `ray.get_gpu_ids()` used as a CUDA device index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import Binding, CallSite, Scope, literal_number, literal_string
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

# Calls whose first argument (or `device=`) is a CUDA device index, by qualified-name prefix.
DEVICE_INDEX_MODULES = ("torch.cuda.", "cupy.cuda.", "numba.cuda.")
DEVICE_INDEX_CALLS = frozenset({"torch.device"})
# Methods whose first argument (or `device=`) may be a device index (`t.cuda(1)`, `m.to(1)`).
DEVICE_METHODS = frozenset({"cuda", "to"})
# Wrappers whose `device_ids=` / `output_device=` are device indices.
PARALLEL_WRAPPERS = frozenset({"DataParallel", "DistributedDataParallel"})
DEVICE_PREFIX = "cuda:"


@dataclass(frozen=True)
class _GpuId:
    """A value that holds a physical GPU id (or the list of them) from Ray; `position` is the literal
    index into the list (`ids[0]`), when there is one."""

    source: str  # how the code got it, for the message
    position: int | None
    whole_list: bool = False


@dataclass(frozen=True)
class _Finding:
    node: cst.CSTNode  # where the id becomes a device: reported, and replaced by the fix
    gpu_id: _GpuId
    replacement: str | None  # the text for `node` under the fix
    scope: Scope

DEVICE_MODEL = """
@ray.remote(num_gpus=1)
def device():
    time.sleep(0.5)  # hold the GPU, so that the two tasks run at once on different GPUs
    gpu = int(ray.get_gpu_ids()[0])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return gpu, visible, {index}

wrong = []
for gpu, visible, index in ray.get([device.remote() for _ in range(2)], timeout=60):
    count = len(visible.split(",")) if visible else 0
    if index >= count:
        wrong.append(
            f"the task given GPU {{gpu}} sees CUDA_VISIBLE_DEVICES={{visible!r}} ({{count}} device, cuda:0) "
            f"yet asks for cuda:{{index}}, which CUDA rejects (invalid device ordinal)"
        )
if wrong:
    __ray_lint_evidence__ = {{"wrong": wrong[0]}}
else:
    __ray_lint_evidence__ = {{"right": "each task's device index is among its visible devices"}}
"""


class PhysicalGpuIdExperiment(ReproductionExperiment[None]):
    """Runs two `num_gpus=1` tasks at once, so that one gets GPU 1, and compares the device index each
    would use with the `CUDA_VISIBLE_DEVICES` Ray set for it: the physical id, or 0 (the fix). Logical
    GPUs are enough, since no CUDA call is made. Always a model: the user's code needs CUDA."""

    facts_type = type(None)
    beside_others = True  # a task given GPU 1 sees one device whatever else runs; load can only hide it

    def plan(self, subject: Subject) -> Plan | str:
        return self.model(subject)

    def model(self, subject: Subject) -> Plan | str:
        if subject.cluster_gpus < 2:
            what = "no GPUs" if subject.cluster_gpus < 1 else "one GPU, whose id 0 is also its device index"
            return f"the cluster has {what}: it takes 2 GPUs, real or logical, to show the wrong index (--address)"
        return Plan(
            Variant("physical id", script(DEVICE_MODEL.format(index="gpu"))),
            Variant("cuda:0", script(DEVICE_MODEL.format(index="0"))),
            "modelled",
            "two num_gpus=1 tasks at once, each building its CUDA device index",
        )


class PhysicalGpuIdAsDevice(Rule):
    code = "RAY082"
    name = "physical-gpu-id-as-device"
    message = "A physical GPU id from `ray.get_gpu_ids()` is used as a CUDA device index, not `cuda:0`"
    severity = Severity.WARNING
    category = "correctness"
    fixable = True
    experiment = PhysicalGpuIdExperiment()
    tokens = ("get_gpu_ids", "get_accelerator_ids")
    docs = """
## What it does
Finds a GPU id from `ray.get_gpu_ids()` (or
`ray.get_runtime_context().get_accelerator_ids()["GPU"]`) used as a CUDA device index:
- in a device string: `f"cuda:{gpu_id}"`, `"cuda:" + str(gpu_id)`, `"cuda:{}".format(gpu_id)`,
  `"cuda:%d" % gpu_id`, also as a branch of a conditional expression (`... if cuda else "cpu"`);
- as the index given to `torch.device(...)`, `torch.cuda.set_device(...)`, any other
  `torch.cuda.*`, `cupy.cuda.*` or `numba.cuda.*` call, `.cuda(...)` or `.to(...)`;
- in `device_ids=` or `output_device=` of `DataParallel` / `DistributedDataParallel`.

The id may come directly (`ray.get_gpu_ids()[0]`), through names (`ids = ray.get_gpu_ids()`,
`gpu_id = ids[0]`, `int(...)`, `str(...)`), or as the variable of a loop over the ids.

## Why is this bad?
`ray.get_gpu_ids()` returns the *physical* ids of the GPUs Ray assigned to the task or actor
(say `[3]`). Ray also sets `CUDA_VISIBLE_DEVICES` to those ids for the worker (measured with
Ray 2.60 on 2 vCPUs, driver started with `CUDA_VISIBLE_DEVICES=0,1`: a `num_gpus=1` task sees
`'0'`), so CUDA renumbers them from 0: inside the task the assigned GPU is `cuda:0`, and
`cuda:3` does not exist. The code works on a one-GPU machine, or for the task that happened to
get GPU 0, and fails with `invalid device ordinal` (or picks another of the task's devices) on
every other one.

ray-lint is silent for:
- ids mapped through `CUDA_VISIBLE_DEVICES` (`visible.index(str(gpu_id))`) or any other call,
  and code in a function that mentions `CUDA_VISIBLE_DEVICES` (it manages the variable itself,
  e.g. with `RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES`, where physical ids are right);
- physical ids given to tools that expect them: NVML (`pynvml`), `nvidia-smi -i`, logging;
- an index that does not come from Ray's GPU ids (`torch.device(f"cuda:{local_rank}")`).

## Example
```python
@ray.remote(num_gpus=1)
def train(config):
    device = torch.device(f"cuda:{ray.get_gpu_ids()[0]}")
    model = Net().to(device)
```

## Use instead
```python
@ray.remote(num_gpus=1)
def train(config):
    device = torch.device("cuda")  # the first (here: only) GPU Ray assigned
    model = Net().to(device)
```
In a Ray Train worker use `ray.train.torch.get_device()`: Ray Train may make all the node's
GPUs visible to each worker.

## Fix safety
The fix replaces the device index `ids[k]` with `k` (`f"cuda:{ids[0]}"` becomes `"cuda:0"`):
the k-th GPU Ray assigned is visible device k. It is offered only in the body of a task or
actor method of this module that requests GPUs, with a literal position into the id list, and
not in a module that imports `ray.train` (whose workers may see every GPU of the node). It is
unsafe: when `RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES` is set, Ray leaves
`CUDA_VISIBLE_DEVICES` alone, the physical id was the right index, and the fix would put every
task on GPU 0. It is not offered when the id was kept in a variable that nothing else reads: the
variable would be left unused.

## References
- [Accelerator support: using GPUs in tasks and actors](https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html)
- [ray.get_gpu_ids](https://docs.ray.io/en/latest/ray-core/api/doc/ray.get_gpu_ids.html)
- [Ray Train: ray.train.torch.get_device](https://docs.ray.io/en/latest/train/api/doc/ray.train.torch.get_device.html)
"""

    VALID = [
        Valid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n    device = torch.device('cuda')\n"
            "    print('running on GPU', ray.get_gpu_ids())\n    return Net().to(device)\n",
            "the ids are only logged",
        ),
        Valid(
            "import os\nimport ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n    gpu_id = ray.get_gpu_ids()[0]\n"
            "    visible = os.environ['CUDA_VISIBLE_DEVICES'].split(',')\n    index = visible.index(str(gpu_id))\n"
            "    return Net().to(torch.device(f'cuda:{index}'))\n",
            "the physical id is mapped to its position in CUDA_VISIBLE_DEVICES",
        ),
        Valid(
            "import pynvml\nimport ray\n\n@ray.remote(num_gpus=1)\ndef memory():\n    pynvml.nvmlInit()\n"
            "    handle = pynvml.nvmlDeviceGetHandleByIndex(ray.get_gpu_ids()[0])\n    return pynvml.nvmlDeviceGetMemoryInfo(handle).used\n",
            "NVML takes physical indices",
        ),
        Valid(
            "import os\nimport ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n"
            "    os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(str(i) for i in range(8))\n"
            "    return Net().cuda(ray.get_gpu_ids()[0])\n",
            "the function sets CUDA_VISIBLE_DEVICES itself",
        ),
        Valid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config, local_rank):\n"
            "    return Net().to(torch.device(f'cuda:{local_rank}'))\n",
            "an index that does not come from Ray's ids",
        ),
        Valid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n    gpu_id = ray.get_gpu_ids()[0]\n    gpu_id = 0\n"
            "    return Net().cuda(gpu_id)\n",
            "the name is rebound before it is used",
        ),
        Valid(
            "import torch\n\ndef train(cluster):\n    gpu_id = cluster.get_gpu_ids()[0]\n    return Net().cuda(gpu_id)\n",
            "not Ray's get_gpu_ids",
        ),
        Valid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n    ids = ray.get_gpu_ids()\n"
            "    torch.cuda.set_device(0)\n    return {'gpus': ids, 'name': torch.cuda.get_device_name(0)}\n",
            "the ids are reported, the device index is 0",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n"
            "    device = torch.device(f'cuda:{ray.get_gpu_ids()[0]}')\n    return Net().to(device)\n",
            6,
            fixed="import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n"
            "    device = torch.device('cuda:0')\n    return Net().to(device)\n",
        ),
        Invalid(
            "import ray\n\n@ray.remote(num_gpus=1)\nclass Worker:\n    def __init__(self):\n        self.model = Net().cuda(ray.get_gpu_ids()[0])\n",
            6,
            fixed="import ray\n\n@ray.remote(num_gpus=1)\nclass Worker:\n    def __init__(self):\n        self.model = Net().cuda(0)\n",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef train(config):\n    gpu_ids = ray.get_gpu_ids()\n"
            "    torch.cuda.set_device(gpu_ids[0])\n    return Net().cuda()\n",
            7,
            note="no fix: it would leave `gpu_ids` unused",
        ),
        Invalid(
            "import ray\n\n@ray.remote(num_gpus=1)\ndef infer(batch):\n    gpu = int(ray.get_gpu_ids()[0])\n    device = 'cuda:' + str(gpu)\n"
            "    return model.to(device)(batch)\n",
            6,
            note="no fix: it would leave `gpu` unused",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef embed(texts):\n"
            "    device = f'cuda:{ray.get_gpu_ids()[0]}' if torch.cuda.is_available() else 'cpu'\n    return encoder.to(device)(texts)\n",
            6,
            fixed="import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef embed(texts):\n"
            "    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n    return encoder.to(device)(texts)\n",
            note="a conditional device string",
        ),
        Invalid(
            "import ray\n\ndef load_model(path):\n    gpu_id = ray.get_gpu_ids()[0]\n    return torch.load(path).to(f'cuda:{gpu_id}')\n",
            5,
            note="a helper, not a remote body: no fix",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=2)\ndef train(config):\n"
            "    return torch.nn.DataParallel(Net().cuda(), device_ids=ray.get_gpu_ids())\n",
            6,
            note="the whole id list as device_ids: no fix",
        ),
        Invalid(
            "import ray\nimport cupy as cp\n\n@ray.remote(num_gpus=1)\ndef add(x):\n"
            "    gpu_id = ray.get_runtime_context().get_accelerator_ids()['GPU'][0]\n"
            "    with cp.cuda.Device(int(gpu_id)):\n        return cp.asarray(x) + 1\n",
            7,
            note="no fix: it would leave `gpu_id` unused",
        ),
        Invalid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=2)\ndef train(config):\n"
            "    devices = [torch.device(f'cuda:{g}') for g in ray.get_gpu_ids()]\n    return devices\n",
            6,
            note="the loop variable over the ids: no literal position, no fix",
        ),
        Invalid(
            "import ray\nfrom ray import train\n\n@ray.remote(num_gpus=1)\ndef worker(config):\n"
            "    return Net().to('cuda:{}'.format(ray.get_gpu_ids()[0]))\n",
            6,
            note="the module imports ray.train: no fix",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        sources = [*model.calls_to("ray.get_gpu_ids"), *model.calls_by_tail.get("get_accelerator_ids", ())]
        if not sources:
            return
        fixes_allowed = not model.imports_module("ray.train")
        reported: set[int] = set()
        for finding in _findings(model):
            if id(finding.node) in reported or _manages_visible_devices(ctx, finding.scope):
                continue
            reported.add(id(finding.node))
            fix = None
            if fixes_allowed and finding.replacement is not None and _in_gpu_remote_body(model, finding.scope):
                fix = FixPlan(
                    "Use the index among the visible GPUs", ((finding.node, finding.replacement),), Applicability.UNSAFE
                )
            what = "the physical GPU ids" if finding.gpu_id.whole_list else "a physical GPU id"
            index = "CUDA device indices" if finding.gpu_id.whole_list else "a CUDA device index"
            ctx.report(
                finding.node,
                f"`{ctx.snippet(finding.node, 30)}` uses {what} as {index}",
                fix,
            )


def _findings(model: SemanticModel) -> Iterator[_Finding]:
    """Device designations built from a Ray GPU id: in call arguments, and in values bound to names or attributes."""
    for site in model.calls:
        yield from _call_findings(model, site)
    for scope in model.scopes:
        for bindings in scope.bindings.values():
            for binding in bindings:
                if binding.kind == "assign" and binding.value is not None:
                    found = _device_string(model, binding.value, binding.scope, binding.index)
                    if found is not None:
                        yield found
    for store in model.stores:
        if store.value is not None:
            found = _device_string(model, store.value, store.scope, store.index)
            if found is not None:
                yield found


def _call_findings(model: SemanticModel, site: CallSite) -> Iterator[_Finding]:
    call, scope, at = site.node, site.scope, site.index
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    takes_index = tail in DEVICE_METHODS and isinstance(func, cst.Attribute)
    if not takes_index and any(isinstance(a.value, (cst.Name, cst.Subscript, cst.Call)) for a in call.args):
        name = model.call_name(site) or ""
        takes_index = name in DEVICE_INDEX_CALLS or name.startswith(DEVICE_INDEX_MODULES)
    for position, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        found = _device_string(model, arg.value, scope, at)
        if found is None and takes_index and (keyword == "device" or (keyword is None and position == 0)):
            found = _index_argument(model, arg.value, scope, at)
        if found is None and takes_index and tail == "device" and (keyword == "index" or (keyword is None and position == 1)):
            found = _index_argument(model, arg.value, scope, at)  # torch.device("cuda", gpu_id)
        if found is None and tail in PARALLEL_WRAPPERS and keyword in ("device_ids", "output_device"):
            found = _parallel_argument(model, arg.value, scope, at)
        if found is not None:
            yield found


def _index_argument(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> _Finding | None:
    gpu_id = _gpu_id(model, expr, scope, at)
    if gpu_id is None:
        return None
    replacement = str(gpu_id.position) if gpu_id.position is not None else None
    return _Finding(expr, gpu_id, replacement, scope)


def _parallel_argument(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> _Finding | None:
    """`device_ids=ray.get_gpu_ids()`, `device_ids=[gpu_id]`, `output_device=gpu_id`."""
    source = _id_list(model, expr, scope, at)
    if source is not None:
        return _Finding(expr, _GpuId(source, None, whole_list=True), None, scope)
    if isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            found = _index_argument(model, element.value, scope, at)
            if found is not None:
                return found
        return None
    return _index_argument(model, expr, scope, at)


def _device_string(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> _Finding | None:
    """`f"cuda:{gpu_id}"`, `"cuda:" + str(gpu_id)`, `"cuda:{}".format(gpu_id)`, `"cuda:%d" % gpu_id`."""
    if isinstance(expr, cst.IfExp):  # `f"cuda:{gpu_id}" if torch.cuda.is_available() else "cpu"`
        return _device_string(model, expr.body, scope, at) or _device_string(model, expr.orelse, scope, at)
    index: cst.BaseExpression | None = None
    exact = False  # the string is exactly "cuda:<id>", so the fix can write it out
    if isinstance(expr, cst.FormattedString):
        parts = expr.parts
        for number, part in enumerate(parts[:-1]):
            following = parts[number + 1]
            if (
                isinstance(part, cst.FormattedStringText)
                and part.value.endswith(DEVICE_PREFIX)
                and isinstance(following, cst.FormattedStringExpression)
            ):
                index = following.expression
                exact = len(parts) == 2 and number == 0 and part.value == DEVICE_PREFIX and following.format_spec is None
                break
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        prefix = literal_string(expr.left)
        if prefix is not None and prefix.endswith(DEVICE_PREFIX):
            index, exact = expr.right, prefix == DEVICE_PREFIX
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        template = literal_string(expr.left)
        if template is not None and template in ("cuda:%d", "cuda:%s", "cuda:%i"):
            index, exact = expr.right, True
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
        template = literal_string(expr.func.value)
        if template is not None and template in ("cuda:{}", "cuda:{0}") and len(expr.args) == 1 and expr.args[0].keyword is None:
            index, exact = expr.args[0].value, True
    if index is None:
        return None
    gpu_id = _gpu_id(model, index, scope, at)
    if gpu_id is None:
        return None
    replacement = None
    if exact and gpu_id.position is not None:
        replacement = _quoted(expr, f"{DEVICE_PREFIX}{gpu_id.position}")
    return _Finding(expr, gpu_id, replacement, scope)


def _quoted(expr: cst.BaseExpression, text: str) -> str:
    """`text` as a string literal in the quote style of the expression it replaces."""
    quote = '"'
    for node in (expr, getattr(expr, "left", None), getattr(getattr(expr, "func", None), "value", None)):
        if isinstance(node, cst.FormattedString):
            quote = node.start.lstrip("fFrRbB")[:1] or quote
            break
        if isinstance(node, cst.SimpleString):
            quote = node.quote[:1]
            break
    return f"{quote}{text}{quote}"


def _gpu_id(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> _GpuId | None:
    """The Ray GPU id `expr` holds: `ids[k]` of a GPU id list, `int(...)` / `str(...)` of one, a name bound
    to one, or the variable of a loop over the list."""
    if depth > 6:
        return None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        source = _id_list(model, expr.value, scope, at, depth + 1)
        if source is None:
            return None
        number = literal_number(expr.slice[0].slice.value)
        position = int(number) if number is not None and number >= 0 and number == int(number) else None
        return _GpuId(source, position)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("int", "str"):
        if len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
            return _gpu_id(model, expr.args[0].value, scope, at, depth + 1)
        return None
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is None:
            return None
        if binding.kind == "assign" and binding.value is not None:
            return _gpu_id(model, binding.value, binding.scope, binding.index, depth + 1)
        if binding.kind == "loop-target" and binding.source is not None and _is_loop_variable(binding):
            source = _id_list(model, binding.source, binding.scope, binding.index, depth + 1)
            return _GpuId(source, None) if source is not None else None
    return None


def _is_loop_variable(binding: Binding) -> bool:
    """Whether the binding is the whole target of its loop (`for g in ids`, not `for i, g in enumerate(ids)`)."""
    loop = binding.loop
    if loop is None:
        return False
    if isinstance(loop.node, cst.For):
        return loop.node.target is binding.node
    if isinstance(loop.node, cst.While):
        return False
    comp_for: cst.CompFor | None = loop.node.for_in
    while comp_for is not None:
        if comp_for.target is binding.node:
            return True
        comp_for = comp_for.inner_for_in
    return False


def _id_list(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> str | None:
    """How the code got the list of the task's GPU ids, when `expr` holds it: `ray.get_gpu_ids()`,
    `ray.get_runtime_context().get_accelerator_ids()["GPU"]`, or a name bound to either."""
    if depth > 6:
        return None
    if isinstance(expr, cst.Call):
        site = model.call_site(expr)
        if site is not None and model.call_name(site) == "ray.get_gpu_ids":
            return "ray.get_gpu_ids()"
        return None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        accelerators = expr.value
        if (
            literal_string(expr.slice[0].slice.value) == "GPU"
            and isinstance(accelerators, cst.Call)
            and isinstance(accelerators.func, cst.Attribute)
            and accelerators.func.attr.value == "get_accelerator_ids"
        ):
            return 'get_accelerator_ids()["GPU"]'
        return None
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is not None and binding.kind == "assign" and binding.value is not None:
            return _id_list(model, binding.value, binding.scope, binding.index, depth + 1)
    return None


def _manages_visible_devices(ctx: Context, scope: Scope) -> bool:
    """Whether the function holding the code (or the module, at top level) mentions `CUDA_VISIBLE_DEVICES`:
    it reads or sets the variable itself, so physical ids may be what it needs."""
    function = scope.function
    node = function.node if function is not None else ctx.model.module
    return "CUDA_VISIBLE_DEVICES" in ctx.code_for(node)


def _in_gpu_remote_body(model: SemanticModel, scope: Scope) -> bool:
    """Whether the code runs directly in a task or actor method of this module that requests GPUs: there
    Ray sets `CUDA_VISIBLE_DEVICES` to the assigned GPUs, so the k-th of them is device k."""
    owner = model.remote_of_scope(scope)
    return owner is not None and model.gpu_request(owner[0]) == "requested"
