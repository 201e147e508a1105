"""RAY022 short-gpu-tasks: short `num_gpus` tasks submitted in a loop, each in a fresh worker process."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.loops import enclosing_iterations, exits_in_first_iteration, sleeps_in
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Run, Subject, Variant, Verdict, script, timed
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    COMPREHENSIONS,
    CallSite,
    FunctionInfo,
    Loop,
    iter_subtree,
    literal_number,
    names_read,
)
from ray_lint.rule import Context, Invalid, Option, Rule, Valid

# Words in a called name that say the call runs for a long time: a training run, a search, a solver.
LONG_WORDS = ("train", "fit", "tune", "sweep", "simulat", "solve", "optimiz", "search", "epoch", "serve", "benchmark")
# Modules whose calls start or wait for other processes.
PROCESS_MODULES = ("subprocess.", "os.system", "os.popen", "multiprocessing.")
SLEEPS = ("time.sleep",)
# Calls that count the cluster's GPUs or nodes. A loop of as many tasks as they count runs one task on
# each GPU (or node) at once: no task waits for a worker that an earlier one could have left behind.
CLUSTER_COUNTS = frozenset({"ray.cluster_resources", "ray.available_resources", "ray.nodes"})


def _one_per_gpu(model: SemanticModel, site: CallSite) -> bool:
    """Whether the innermost loop around the submission counts the cluster's GPUs or nodes:
    `range(int(ray.cluster_resources()["GPU"]))`, `for node in ray.nodes()`, or a name bound to such a count."""
    assert site.loop is not None
    found = model.iterable(site.loop)
    if found is None:
        return False
    iterated, scope = found
    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name) and iterated.func.value == "range" and len(iterated.args) == 1:
        iterated = iterated.args[0].value
    if isinstance(iterated, cst.Name):
        binding = model.reaching_binding(iterated.value, scope, site.loop.start)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return False
        iterated = binding.value
    sites = (model.call_site(call) for call in iter_subtree(iterated) if isinstance(call, cst.Call))
    return any(each is not None and model.call_name(each) in CLUSTER_COUNTS for each in sites)


class _LongBody:
    """Decides whether a task body may run for long: it loops, iterates over a parameter, calls
    something named like a training run or a search, starts a process, sleeps for a second or more,
    or calls a function of the module that does."""

    HELPER_DEPTH = 1

    def __init__(self, model: SemanticModel, max_statements: int) -> None:
        self.model = model
        self.max_statements = max_statements

    def function(self, info: FunctionInfo, depth: int = 0) -> bool:
        node = info.node
        if any(word in node.name.value.lower() for word in LONG_WORDS):
            return True  # `train_trial`, `run_search`: named for a long run
        params = {p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)}
        statements = 0
        for inner in iter_subtree(node.body, into_functions=False):
            if isinstance(inner, (cst.For, cst.While)):
                return True
            if isinstance(inner, COMPREHENSIONS) and names_read(inner.for_in.iter) & params:
                return True  # a loop over a batch the task was given
            if isinstance(inner, cst.BaseSmallStatement):
                statements += 1
            if isinstance(inner, cst.Call) and self._long_call(inner, info, depth):
                return True
        return statements > self.max_statements

    def _long_call(self, call: cst.Call, info: FunctionInfo, depth: int) -> bool:
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if any(word in tail.lower() for word in LONG_WORDS):
            return True
        site = self.model.call_site(call)
        if site is None:
            return False
        name = self.model.call_name(site) or ""
        if name.startswith(PROCESS_MODULES):
            return True
        if name in SLEEPS:
            seconds = literal_number(call.args[0].value) if call.args else None
            return seconds is None or seconds >= 1
        if isinstance(func, cst.Name) and depth < self.HELPER_DEPTH:
            binding = self.model.reaching_binding(func.value, site.scope, site.index)
            if binding is not None and binding.kind == "def" and isinstance(binding.node, cst.FunctionDef):
                helper = self.model.function_info(binding.node)
                return helper is not None and helper is not info and self.function(helper, depth + 1)
        return False


def _gpus(remote: RemoteDef) -> float | None:
    """The `num_gpus` the definition itself requests: Ray forces `max_calls=1` only for that one
    (`RemoteFunction.__init__` reads the decorator's options; `.options(num_gpus=...)` does not)."""
    if remote.options.has_unpacked:
        return None
    return literal_number(remote.options.values.get("num_gpus"))


@dataclass(frozen=True)
class GpuTaskFacts:
    """What the experiment needs of the flagged task."""

    num_gpus: float  # what its definition requests


# Each variant returns (value, worker pid) per call; the values are compared, the pids counted.
_PROCESSES = """
__ray_lint_evidence__ = {"processes": len({pid for _, pid in __ray_lint_result__})}
__ray_lint_result__ = [value for value, _ in __ray_lint_result__]
"""


class ShortGpuTasksExperiment(Experiment[GpuTaskFacts]):
    """A few trivial tasks with the flagged `num_gpus` (so `max_calls=1`: a new worker process each)
    against the same calls on GPU actors started beforehand, the fix the docs recommend. Logical GPUs are
    enough: the cost is the worker start-up, which a real GPU only makes larger (CUDA, the model)."""

    facts_type = GpuTaskFacts
    shares_driver = True
    more_parallelism = False  # the fix saves overhead: fewer tasks or processes, not more at once
    TASKS = 4

    def plan(self, subject: Subject) -> Plan | str:
        gpus = self.facts(subject).num_gpus
        if subject.cluster_gpus < 1:
            return "the cluster has no GPUs, real or logical: run on one that has (--address)"
        if gpus > subject.cluster_gpus:
            return f"the task requests {gpus:g} GPUs and the cluster has {subject.cluster_gpus:g}"
        # An actor that requests GPUs also holds a CPU while it lives (Ray's default once any resource is given).
        actors = max(1, min(self.TASKS, int(subject.cluster_gpus // gpus), int(subject.cluster_cpus)))
        task = f"@ray.remote(num_gpus={gpus:g})\ndef infer(i):\n    return i, os.getpid()\n\n"
        actor = (
            f"@ray.remote(num_gpus={gpus:g})\nclass Model:\n    def infer(self, i):\n        return i, os.getpid()\n\n"
            f"models = [Model.remote() for _ in range({actors})]\n"
            "ray.get([m.infer.remote(-1) for m in models])  # the actors up before the clock starts\n"
        )
        calls = f"range({self.TASKS})"
        return Plan(
            Variant("a GPU task per call", script(task + timed(f"return ray.get([infer.remote(i) for i in {calls}], timeout=30)") + _PROCESSES)),
            Variant(
                f"{actors} GPU actor{'s' if actors > 1 else ''}",
                script(actor + timed(f"return ray.get([models[i % len(models)].infer.remote(i) for i in {calls}], timeout=30)") + _PROCESSES),
            ),
            "modelled",
            f"{self.TASKS} trivial calls with num_gpus={gpus:g}",
        )

    def judge_runs(self, verdict: Verdict, subject: Subject, plan: Plan, a: list[Run], b: list[Run]) -> Verdict:
        """By wall time, with the worker processes each variant used: the actors run the same calls, not
        more at once, so Ray's timeline has no extra parallelism to show in B."""
        verdict = super().judge_runs(verdict, subject, plan, a, b)
        used = [runs[0].evidence.get("processes") if isinstance(runs[0].evidence, dict) else None for runs in (a, b)]
        if None not in used:
            verdict.summary += f"; {used[0]} vs {used[1]} worker processes for the {self.TASKS} calls"
        return verdict



class ShortGpuTasks(Rule):
    code = "RAY022"
    name = "short-gpu-tasks"
    message = "Short GPU tasks are submitted in a loop: Ray starts a new worker process for each (`max_calls=1`)"
    severity = Severity.WARNING
    category = "perf"
    tokens = ("num_gpus",)
    also_tokens = (".remote(",)
    experiment = ShortGpuTasksExperiment()
    options = (
        Option(
            "min-iterations",
            10,
            "Report a loop whose literal iteration count (nested loops multiplied) is at least this; loops of "
            "unknown size are always candidates.",
        ),
        Option("max-statements", 15, "A task body with more simple statements than this is taken to run long."),
    )
    docs = """
## What it does
Finds a `.remote(...)` call, inside a loop or comprehension that runs many times (a literal count
of at least `min-iterations`, 10 by default, or a count the code does not show), of a remote
function of the same file whose `@ray.remote(...)` (or `ray.remote(...)(f)`) requests
`num_gpus` > 0 and does not set `max_calls`, when the function looks short: it is not named like a
training run or a search, and its body has no loop, no loop over a parameter in a comprehension,
no call named like a training run or a search (`fit`, `train`, `tune`, `search`, `solve`, ...),
no subprocess, no sleep of a second or more, and at most `max-statements` simple statements (15 by
default); a plain helper of the same file that it calls is judged the same way.

## Why is this bad?
For a remote function that requests GPUs, Ray sets `max_calls=1` unless told otherwise
(`ray/remote_function.py`, `RemoteFunction.__init__`, issue #29624): the worker process exits
after every task so that leaked GPU memory is freed. Each call then pays for a new Python process,
re-importing the framework, creating a CUDA context and loading its model again, which for a short
task is most of the time it takes. Ray says nothing about it. Measured on a 2-core machine with
Ray 2.60 and logical GPUs (no CUDA): 20 trivial `num_gpus=1` tasks took 5.83 s, the same calls on
one GPU actor 0.037 s (158×); real CUDA initialisation adds seconds per task.

Ray applies `max_calls=1` only from the options given where the function is defined: a function
defined without `num_gpus` and called with `.options(num_gpus=1)` reuses its workers, so it is not
reported.

ray-lint is silent when:
- the decorator sets `max_calls` (any value: the choice was made), or its options come from
  `**kwargs`, or `num_gpus` is not a literal;
- the body may run long (see above), so the start-up is a small part of it: few, long GPU tasks
  are what `max_calls=1` is for;
- the loop is small (a literal count below `min-iterations`), always leaves in its first
  iteration, or sleeps;
- the loop runs one task per GPU or node of the cluster (`range(int(ray.cluster_resources()["GPU"]))`,
  `for node in ray.nodes()`): each task gets a GPU of its own at once, so none could reuse a worker;
- the calls are actor method calls: an actor keeps its process.

## Example
```python
@ray.remote(num_gpus=1)
def embed(text):
    model = load_model().cuda()
    return model.encode(text)

refs = [embed.remote(t) for t in texts]
```

## Use instead
A GPU actor (or a few) that loads the model once and serves every call:
```python
@ray.remote(num_gpus=1)
class Embedder:
    def __init__(self):
        self.model = load_model().cuda()

    def embed(self, text):
        return self.model.encode(text)

embedder = Embedder.remote()
refs = [embedder.embed.remote(t) for t in texts]
```
or batch the inputs into fewer tasks, or, if the task does not leak GPU memory, let Ray reuse its
workers with `@ray.remote(num_gpus=1, max_calls=0)`.

## Fix safety
There is no automatic fix: `max_calls=0` keeps whatever GPU memory a task leaks, and an actor
changes the structure of the code.

## Options
- `min-iterations` (10): the smallest literal loop count reported.
- `max-statements` (15): a longer body is taken to run long.

## References
- [Accelerator support: workers not releasing GPU resources](https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html)
- [Task fault tolerance: `max_calls`](https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html)
- [ray.remote: `max_calls`](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef write_token(token):\n    save(token)\n    return 'ok'\n\n"
            "gpus = int(ray.cluster_resources().get('GPU', 0))\nray.get([write_token.remote(t) for _ in range(gpus)])\n",
            "one task per GPU of the cluster, all at once: no task could reuse another's worker",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1, max_calls=0)\ndef embed(text):\n    return MODEL.encode(text)\n\n"
            "refs = [embed.remote(t) for t in texts]\n",
            "workers reused on purpose",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef train(config):\n    model = build(config)\n"
            "    for epoch in range(config['epochs']):\n        step(model)\n    return model\n\n"
            "refs = [train.remote(c) for c in configs]\n",
            "a long task: a training loop",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef run_trial(config):\n    return Trainer(config).fit()\n\n"
            "refs = [run_trial.remote(c) for c in configs]\n",
            "a call named like a training run",
        ),
        Valid(
            "import ray\n@ray.remote\ndef embed(text):\n    return encode(text)\n\n"
            "refs = [embed.options(num_gpus=1).remote(t) for t in texts]\n",
            "num_gpus only in .options: Ray does not force max_calls=1",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef embed(text):\n    return encode(text)\n\n"
            "refs = [embed.remote(t) for t in ['a', 'b', 'c']]\n",
            "three tasks",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\nclass Embedder:\n    def embed(self, text):\n        return self.model.encode(text)\n\n"
            "e = Embedder.remote()\nrefs = [e.embed.remote(t) for t in texts]\n",
            "a GPU actor keeps its process",
        ),
        Valid(
            "import ray\n@ray.remote(num_gpus=1)\ndef embed_batch(texts):\n    return [encode(t) for t in texts]\n\n"
            "refs = [embed_batch.remote(b) for b in batches]\n",
            "each task loops over a batch",
        ),
        Valid(
            "import ray\n@ray.remote(**gpu_options)\ndef embed(text):\n    return encode(text)\n\n"
            "refs = [embed.remote(t) for t in texts]\n",
            "options unknown",
        ),
        Valid(
            "@ray.remote(num_gpus=1)\ndef embed(text):\n    return encode(text)\n\nrefs = [embed.remote(t) for t in texts]\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\nimport subprocess\n@ray.remote(num_gpus=1)\ndef bench(cmd):\n    return subprocess.run(cmd).returncode\n\n"
            "refs = [bench.remote(c) for c in commands]\n",
            "runs a process",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote(num_gpus=1)\ndef embed(text):\n    model = load_model().cuda()\n    return model.encode(text)\n\n"
            "refs = [embed.remote(t) for t in texts]\n",
            7,
        ),
        Invalid(
            "import ray\n@ray.remote(num_gpus=0.25, num_cpus=1)\ndef infer(x):\n    return MODEL(x.cuda()).cpu()\n\n"
            "results = []\nfor i in range(100):\n    results.append(infer.remote(inputs[i]))\n",
            8,
            note="a fractional GPU still means max_calls=1",
        ),
        Invalid(
            "import ray\n\ndef infer(x):\n    return MODEL(x.cuda())\n\ngpu_infer = ray.remote(num_gpus=1)(infer)\n"
            "refs = [gpu_infer.remote(x) for x in xs]\n",
            7,
            note="ray.remote(...)(f)",
        ),
        Invalid(
            "from ray import remote\n@remote(num_gpus=1)\ndef embed(text):\n    return encode(text)\n\n"
            "pending = []\nwhile queue:\n    pending.append(embed.options(name='embed').remote(queue.pop()))\n",
            8,
            note="a while loop, .options without num_gpus",
        ),
        Invalid(
            "import ray\n\ndef prepare(x):\n    return x / 255.0\n\n@ray.remote(num_gpus=1)\ndef classify(img):\n"
            "    return MODEL(prepare(img).cuda()).argmax()\n\nrefs = [classify.remote(img) for img in images]\n",
            10,
            note="a short helper",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        long_body = _LongBody(model, self.settings["max-statements"])
        verdicts: dict[int, bool] = {}
        for site, _, remote in model.looped_submissions("task"):
            gpus = _gpus(remote)
            if gpus is None or gpus <= 0 or "max_calls" in remote.options.values:
                continue
            info = model.function_info(remote.target) if isinstance(remote.target, cst.FunctionDef) else None
            if info is None:
                continue
            if id(info.node) not in verdicts:
                verdicts[id(info.node)] = long_body.function(info)
            if verdicts[id(info.node)] or not self._repeats(model, site):
                continue
            self._report(ctx, site, remote, gpus)

    def _repeats(self, model: SemanticModel, site: CallSite) -> bool:
        assert site.loop is not None
        iterations = enclosing_iterations(model, site.loop)
        if iterations is not None and iterations < self.settings["min-iterations"]:
            return False
        if _one_per_gpu(model, site):
            return False
        loop: Loop | None = site.loop
        while loop is not None:
            if exits_in_first_iteration(loop) or sleeps_in(model, loop):
                return False
            loop = loop.parent
        return True

    def _report(self, ctx: Context, site: CallSite, remote: RemoteDef, gpus: float) -> None:
        assert site.loop is not None
        iterations = enclosing_iterations(ctx.model, site.loop)
        each = f"each of the {iterations:,} tasks" if iterations is not None else "each task of this loop"
        ctx.report(
            site.node,
            f"Short GPU task `{remote.name}` (`num_gpus={gpus:g}`) starts a new worker process for {each}",
            facts=GpuTaskFacts(gpus),
        )
