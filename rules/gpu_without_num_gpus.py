"""RAY040 gpu-without-num-gpus: a task or actor that uses a GPU but does not ask Ray for one."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.gpu_use import gpu_uses
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import GpuVisibilityExperiment
from ray_lint.model import RemoteDef
from ray_lint.project import given
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid



GPU_PROBE = """
@ray.remote{options}
def probe():
    return {{"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}}

__ray_lint_evidence__ = ray.get(probe.remote())
"""


class GpuWithoutNumGpusExperiment(GpuVisibilityExperiment):
    """What a task sees of the node's GPUs without `num_gpus` and with it."""

    probe = GPU_PROBE
    request = "(num_gpus=1)"
    shape = "a task's CUDA_VISIBLE_DEVICES and ray.get_gpu_ids(), without and with num_gpus"
    not_shown = "this Ray hides the GPUs from a task that requests none"
    beside_others = True  # what a task is told of GPUs does not depend on load

    def exposure(self, seen: str | None) -> str | None:
        return None if seen in ("", None) else f"the task gets no GPU from Ray yet sees {seen!r}, every GPU of the node"


class GpuWithoutNumGpus(Rule):
    code = "RAY040"
    name = "gpu-without-num-gpus"
    message = "A task or actor uses a GPU but does not request `num_gpus`"
    severity = Severity.WARNING
    category = "resource"
    fixable = True
    tokens = (".remote", "@remote")
    also_tokens = ("cuda", "cupy", "gpu", "GPU")
    experiment = GpuWithoutNumGpusExperiment()
    docs = """
## What it does
Finds a remote function or actor class whose code uses a GPU directly (`.cuda()`,
`.to("cuda")`, `device="cuda"`, `torch.device("cuda")`, `torch.cuda.*`, CuPy, Numba CUDA,
`tf.device("/GPU:0")`, `jax.devices("gpu")`, or an index into `ray.get_gpu_ids()`, which is empty
without a GPU request and raises IndexError) while neither its decorator nor any
`.options(...)` call on it in the module requests `num_gpus` (or `resources={"GPU": ...}`).

The GPU use may be one call away: a function of the module that the task (or an actor method)
calls, a method of the actor called on `self`, a `@cuda.jit` kernel launched as
`kernel[blocks, threads](a)`, or a function imported from another module of the project that
uses the GPU itself (followed up to three calls deep within a module). The message names the
helper. A helper that picks the GPU only when there is one (`"cuda" if torch.cuda.is_available()
else "cpu"`), or a call under a condition about GPUs, does not count. Another module's helper is
known from the project's facts (`gpu:<name>`): ray-lint summarises the module that defines it,
even one that never mentions Ray.

## Why is this bad?
Ray schedules by the resources a task requests, and `num_gpus` is what tells it a task needs
a GPU. Without it:
- the task may land on a node that has no GPU, and fails there;
- on a GPU node, Ray 2.60 does not hide the GPUs from it: a task that requests no GPU sees
  *every* GPU of the node (`CUDA_VISIBLE_DEVICES` is left as it was; measured with Ray 2.60:
  such a task saw `'0,1'` while a `num_gpus=1` task saw `'0'`), so it contends for memory
  and compute with the tasks that did request them, and runs out of GPU memory at random.
  (Ray 2.4x and older set `CUDA_VISIBLE_DEVICES=""` for such tasks, so the same code silently
  ran on the CPU instead.)
- Ray also counts the node's GPUs as free and packs more GPU tasks on it.

ray-lint says nothing when the GPU request cannot be known statically: `num_gpus` given
through a variable or `**options`, at any `.options(num_gpus=...)` call in the module, or
by other code the task or actor class is handed to (`WorkerGroup(cls=Worker)`), or anywhere else in
the project: another module's `Worker.options(num_gpus=...)`, `ray.remote(num_gpus=...)(Worker)`
or a builder that takes the class with a GPU keyword (`make_group(Worker, num_gpus_per_worker=1)`).
It also ignores code that only probes (`torch.cuda.is_available()`), GPU code under a
condition that mentions CUDA or GPUs (there is a CPU path), device strings chosen at run time,
and nested functions, which may be handed to Ray Train or Ray Data with their own GPU settings.

## Example
```python
@ray.remote
def train(config):
    model = Net().cuda()
    ...
```

## Use instead
```python
@ray.remote(num_gpus=1)
def train(config):
    model = Net().cuda()
    ...
```
Use a fraction (`num_gpus=0.5`) to pack several small models on one GPU.

## Fix safety
The fix adds `num_gpus=1` to the decorator (or the `ray.remote(...)` call). It is unsafe:
the task then waits for a free GPU, so it will not start on a cluster without GPUs, and a
task that used several GPUs needs a larger number.

## References
- [Accelerator support](https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html)
- [Resources: GPU isolation](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    if not ray.get_gpu_ids():\n        return x\n    return ray.get_gpu_ids()[0]\n",
            "an early return when no GPU was assigned: the index runs only with one",
        ),
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    ids = ray.get_gpu_ids()\n    return x if not ids else x * 2\n",
            "the ids are only tested: the task has a path without GPUs",
        ),
        Valid(
            "import ray\n@ray.remote\ndef f(x):\n    if ray.get_gpu_ids():\n        return ray.get_gpu_ids()[0]\n    return None\n",
            "indexed only under a test that GPUs were assigned",
        ),
        Valid("import ray\n@ray.remote(num_gpus=1)\ndef f(m):\n    return m.cuda()\n", "requests a GPU"),
        Valid("import ray\n@ray.remote(num_gpus=0.25)\nclass A:\n    def __init__(self):\n        self.m = Net().to('cuda')\n", "fractional GPU"),
        Valid("import ray\n@ray.remote\ndef f(m):\n    return m.cuda()\n\nref = f.options(num_gpus=1).remote(m)\n", "GPU requested at the call site"),
        Valid("import ray\n@ray.remote(num_gpus=n)\ndef f(m):\n    return m.cuda()\n", "GPU count from a variable: unknown"),
        Valid("import ray\n@ray.remote(**opts)\ndef f(m):\n    return m.cuda()\n", "options from a dict: unknown"),
        Valid("import ray\nimport torch\n@ray.remote\ndef f():\n    return torch.cuda.is_available(), torch.cuda.device_count()\n", "only probes"),
        Valid(
            "import ray\nimport torch\n@ray.remote\ndef f(m):\n    if torch.cuda.is_available():\n        m = m.cuda()\n    return m\n",
            "GPU use with a CPU fallback",
        ),
        Valid(
            "import ray\nimport torch\n@ray.remote\ndef f(m):\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n    return m.to(device)\n",
            "device chosen at run time",
        ),
        Valid("import ray\n@ray.remote\ndef f(m, x):\n    return m.to('cpu')(x.to(device='cpu'))\n", "explicit CPU device"),
        Valid(
            "import ray\nfrom ray.train import ScalingConfig\nfrom ray.train.torch import TorchTrainer\n\n"
            "def loop(config):\n    model = Net().cuda()\n\n"
            "@ray.remote\ndef launch():\n    TorchTrainer(loop, scaling_config=ScalingConfig(use_gpu=True)).fit()\n",
            "Ray Train schedules the GPU workers",
        ),
        Valid("import ray\n@ray.remote\ndef f():\n    def on_gpu(m):\n        return m.cuda()\n    return on_gpu\n", "nested function"),
        Valid("import ray\n@ray.remote(resources={'GPU': 1})\ndef f(m):\n    return m.cuda()\n", "GPU in resources: Ray rejects it, and RAY046 reports that instead"),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def run(self):\n        return torch.ones(4, device='cuda')\n\n"
            "group = WorkerGroup(RayClassWithInitArgs(cls=Worker), resource_pool)\n",
            "the class is handed to code that sets its options (a worker-group factory)",
        ),
        Valid(
            "import ray\nimport torch\n\ndef pick_device():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\n\n"
            "@ray.remote\ndef f(x):\n    return x.to(pick_device())\n",
            "a helper that picks the GPU only when there is one",
        ),
        Valid(
            "import ray\n\ndef warm(m):\n    return m.cuda()\n\n@ray.remote\ndef f(m, use_gpu):\n"
            "    if use_gpu:\n        m = warm(m)\n    return m\n",
            "a GPU helper called only under a condition about GPUs",
        ),
        Valid(
            "import ray\nfrom .prep import normalize\n\n@ray.remote\ndef f(x):\n    return normalize(x)\n",
            "an imported helper that no module of the project says uses a GPU",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport torch\n\ndef load_model(path):\n    model = torch.load(path)\n    return model.cuda()\n\n"
            "@ray.remote\ndef predict(path, x):\n    model = load_model(path)\n    return model(x)\n",
            8,
            fixed="import ray\nimport torch\n\ndef load_model(path):\n    model = torch.load(path)\n    return model.cuda()\n\n"
            "@ray.remote(num_gpus=1)\ndef predict(path, x):\n    model = load_model(path)\n    return model(x)\n",
            note="the GPU is used one call away, in a helper of the module",
        ),
        Invalid(
            "import ray\n\ndef build(cfg):\n    return Net(cfg).to('cuda')\n\n@ray.remote\nclass Policy:\n"
            "    def __init__(self, cfg):\n        self.net = build(cfg)\n",
            6,
            fixed="import ray\n\ndef build(cfg):\n    return Net(cfg).to('cuda')\n\n@ray.remote(num_gpus=1)\nclass Policy:\n"
            "    def __init__(self, cfg):\n        self.net = build(cfg)\n",
            note="an actor whose model is moved to the GPU by a helper",
        ),
        Invalid(
            "import ray\nfrom numba import cuda\n\n@cuda.jit\ndef add_one(a):\n    i = cuda.grid(1)\n    if i < a.size:\n"
            "        a[i] += 1\n\n@ray.remote\ndef run(a):\n    add_one[32, 128](a)\n    return a\n",
            10,
            fixed="import ray\nfrom numba import cuda\n\n@cuda.jit\ndef add_one(a):\n    i = cuda.grid(1)\n    if i < a.size:\n"
            "        a[i] += 1\n\n@ray.remote(num_gpus=1)\ndef run(a):\n    add_one[32, 128](a)\n    return a\n",
            note="a Numba CUDA kernel launched from the task",
        ),
        Invalid(
            "import ray\nimport os\n@ray.remote\ndef train(config):\n    gpu = ray.get_gpu_ids()[0]\n"
            "    os.environ['LOCAL_GPU'] = str(gpu)\n    return config\n",
            3,
            fixed="import ray\nimport os\n@ray.remote(num_gpus=1)\ndef train(config):\n    gpu = ray.get_gpu_ids()[0]\n"
            "    os.environ['LOCAL_GPU'] = str(gpu)\n    return config\n",
            note="the first assigned GPU's id, in a task that requests none: IndexError",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef f(m):\n    return m.cuda()\n",
            3,
            fixed="import ray\n\n@ray.remote(num_gpus=1)\ndef f(m):\n    return m.cuda()\n",
        ),
        Invalid(
            "import ray\n@ray.remote(num_cpus=2)\nclass Model:\n    def __init__(self):\n        self.net = Net().to('cuda:0')\n",
            2,
            fixed="import ray\n@ray.remote(num_cpus=2, num_gpus=1)\nclass Model:\n    def __init__(self):\n        self.net = Net().to('cuda:0')\n",
        ),
        Invalid(
            "import ray\nimport torch\n\ndef f(x):\n    return torch.ones(3, device='cuda') + x\n\ng = ray.remote(f)\n",
            7,
            fixed="import ray\nimport torch\n\ndef f(x):\n    return torch.ones(3, device='cuda') + x\n\ng = ray.remote(num_gpus=1)(f)\n",
        ),
        Invalid("import ray\nimport torch\n@ray.remote\ndef f():\n    torch.cuda.synchronize()\n", 3, fixed="import ray\nimport torch\n@ray.remote(num_gpus=1)\ndef f():\n    torch.cuda.synchronize()\n"),
        Invalid("import ray\nimport cupy as cp\n@ray.remote\ndef f(x):\n    return cp.asarray(x).sum()\n", 3, fixed="import ray\nimport cupy as cp\n@ray.remote(num_gpus=1)\ndef f(x):\n    return cp.asarray(x).sum()\n"),
        Invalid(
            "import ray\nimport tensorflow as tf\n@ray.remote(num_gpus=0)\ndef f(x):\n    with tf.device('/GPU:0'):\n        return x * 2\n",
            3,
            fixed="import ray\nimport tensorflow as tf\n@ray.remote(num_gpus=1)\ndef f(x):\n    with tf.device('/GPU:0'):\n        return x * 2\n",
        ),
        Invalid(
            "import ray\nimport jax\n@ray.remote\nclass Sim:\n    def run(self, x):\n        return jax.device_put(x, jax.devices('gpu')[0])\n",
            3,
            fixed="import ray\nimport jax\n@ray.remote(num_gpus=1)\nclass Sim:\n    def run(self, x):\n        return jax.device_put(x, jax.devices('gpu')[0])\n",
        ),
        Invalid(
            "import ray\nimport torch\n@ray.remote\ndef f(x):\n    return torch.device('cuda')\n\nf.options(num_cpus=2).remote(1)\n",
            3,
            fixed="import ray\nimport torch\n@ray.remote(num_gpus=1)\ndef f(x):\n    return torch.device('cuda')\n\nf.options(num_cpus=2).remote(1)\n",
        ),
        Invalid(
            "import ray\nfrom numba import cuda\n@ray.remote\ndef f(x):\n    return cuda.to_device(x)\n\nf.options(num_gpus=0).remote(1)\n",
            3,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote in model.remote_defs:
            if model.gpu_request(remote) != "none":
                continue
            uses = [use for function in model.remote_functions(remote) for use in gpu_uses(model, function)]
            certain = next((use for use in uses if not use.requires), None)
            imported = [use for use in uses if use.requires]  # another module's functions: their names say where
            if certain is not None and certain.helper is None:
                where = f"on {ctx.line_of(certain.marker)} (`{ctx.snippet(certain.marker, 24)}`)"
            elif certain is not None:
                where = f"in `{certain.helper}` ({ctx.line_of(certain.marker)})"
            elif len(imported) == 1:
                where = f"in `{imported[0].helper}`"
            elif imported:  # whichever of them the project says uses a GPU
                where = f"in one of {', '.join(f'`{use.helper}`' for use in imported[:3])}{', ...' if len(imported) > 3 else ''}"
            else:
                continue
            requires = () if certain is not None else tuple(fact for use in imported for fact in use.requires)
            what = "actor" if remote.kind == "actor" else "task"
            message = f"{what} `{remote.name}` uses a GPU {where} without `num_gpus`"
            ctx.report(remote.declared_at, message, self._fix(ctx, remote), unless=given("num_gpus", remote.name), requires=requires)

    def _fix(self, ctx: Context, remote: RemoteDef) -> FixPlan | None:
        """`num_gpus=1` in the decorator or `ray.remote(...)` call, unless some `.options` sets it to 0."""
        if any(True for options in remote.call_options if "num_gpus" in options.values):
            return None
        declared = remote.declared_at
        expr = declared.decorator if isinstance(declared, cst.Decorator) else declared
        if not isinstance(expr, cst.Call):  # `@ray.remote`
            return _plan(expr, f"{ctx.code_for(expr)}(num_gpus=1)")
        if any(arg.keyword is None for arg in expr.args):  # `ray.remote(f)`
            return _plan(expr.func, f"{ctx.code_for(expr.func)}(num_gpus=1)")
        if "num_gpus" in remote.options.values:
            return _plan(remote.options.values["num_gpus"], "1")
        one = cst.Arg(
            value=cst.Integer("1"),
            keyword=cst.Name("num_gpus"),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
        )
        return _plan(expr, ctx.code_for(expr.with_changes(args=[*expr.args, one])))


def _plan(node: cst.CSTNode, text: str) -> FixPlan:
    return FixPlan("Request one GPU: `num_gpus=1`", ((node, text),), Applicability.UNSAFE)
