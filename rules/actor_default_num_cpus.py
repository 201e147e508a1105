"""RAY044 actor-default-num-cpus: an actor class that never says how many CPUs it needs, so each instance
holds none while it runs and any number of them can pile onto one node."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef
from ray_lint.project import given
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

# Options that make Ray hold resources for the actor's lifetime (`actor.py`, `ActorClass._remote`):
# with any of them the default is 1 CPU held; with none, 1 CPU to be placed and 0 held.
RESOURCE_OPTIONS = ("num_cpus", "num_gpus", "resources", "accelerator_type")
KEYWORD = "num_cpus=1"


# {count} actors of a class declared with `{options}` on a node of {cpus} CPUs: how many Ray places (started
# within 8 s of the first {cpus}: Ray starts as many worker processes at a time as the node has CPUs, and
# slowly on a loaded machine), and how many of their CPU-bound calls then run at once.
PLACED_MODEL = """\
@ray.remote{options}
class Worker:
    def work(self):
        start = time.time()
        while time.time() < start + 0.5:  # CPU-bound
            pass
        return start, time.time()

workers = [Worker.remote() for _ in range({count})]
ready = {{worker.__ray_ready__.remote(): worker for worker in workers}}
first, waiting = ray.wait(list(ready), num_returns={cpus}, timeout=60)
more, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=8)
placed = [ready[ref] for ref in first + more]
spans = ray.get([worker.work.remote() for worker in placed])
edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
running = peak = 0
for _, step in edges:
    running += step
    peak = max(peak, running)
for worker in workers:
    ray.kill(worker)
if len(placed) > {cpus}:
    __ray_lint_evidence__ = {{"wrong": (
        f"Ray placed all {{len(placed)}} actors that ask for no CPU on a node of {cpus} CPUs, and their CPU-bound calls "
        f"ran {{peak}} at once"
    )}}
else:
    __ray_lint_evidence__ = {{"right": f"{{len(placed)}} of {count} actors were placed, one per CPU; the other {{len(waiting)}} waited for one"}}
"""


class PlacedBeyondCpusExperiment(ReproductionExperiment[None]):
    """Runs the pile-up: as many actors as the cluster has CPUs, and 2 more, of a class that asks for no
    CPU, each then running a CPU-bound call, against the same class with `num_cpus=1` (the fix). Always
    the model: the user's code shows no error to compare, only how many actors run at once."""

    facts_type = type(None)
    shares_driver = True
    MOST_CPUS = 8  # the model starts one actor per CPU and 2 more

    def plan(self, subject: Subject) -> Plan | str:
        return self.model(subject)

    def model(self, subject: Subject) -> Plan | str:
        cpus = int(subject.cluster_cpus)
        if cpus < 1:
            return "the cluster has no whole CPU: the model needs one per actor it places"
        if cpus > self.MOST_CPUS:
            return f"the model starts an actor per CPU and 2 more: run it on a cluster of at most {self.MOST_CPUS} CPUs (--num-cpus)"
        shared = {"count": cpus + 2, "cpus": cpus}
        return Plan(
            Variant("no num_cpus", script(PLACED_MODEL.format(**shared, options=""))),
            Variant("num_cpus=1", script(PLACED_MODEL.format(**shared, options="(num_cpus=1)"))),
            "modelled",
            f"{cpus + 2} actors of one class on a node of {cpus} CPUs, each running a CPU-bound call",
        )


class ActorDefaultNumCpus(Rule):
    code = "RAY044"
    name = "actor-default-num-cpus"
    message = "Actor class without `num_cpus`: instances hold 0 CPUs while they run, so any number fit on a node"
    severity = Severity.INFO
    category = "resource"
    preview = True
    fixable = True
    tokens = REMOTE_MADE
    also_tokens = ("class ",)
    experiment = PlacedBeyondCpusExperiment()
    docs = """
## What it does
Finds a `@ray.remote` class (or `ray.remote(Cls)`, `ray.remote(...)(Cls)`) that asks for no
resources: no `num_cpus`, `num_gpus`, `resources` or `accelerator_type` in the decorator, nor in
any `.options(...)` call on it in the module. The message says when the module creates
instances in a loop or comprehension, where the effect is largest.

This rule is in preview and reports at info level: a coordinator, a queue, a counter or an actor
that mostly waits on I/O is often meant to take no CPU, which is very common and correct, and
the code does not say which kind an actor is. ray-lint is silent when the options cannot be
known (`**kwargs`, or the class is handed to other code that may set them), and when another
module of the project gives the class a resource option (`Worker.options(num_cpus=...)`).

## Why is this bad?
By default an actor needs 1 CPU to be *placed* but holds **0 CPUs while it runs**. Ray therefore
keeps placing more such actors on a node however many already run there: eight CPU-bound actors
on a 2-CPU node all run at once and fight over the cores, and the node can run out of memory. Ray's
docs recommend always giving actors an explicit `num_cpus`. Each default actor also gets
`OMP_NUM_THREADS=1`, and inside a placement group the default actor needs a bundle with a CPU
it then does not use.

## Example
```python
@ray.remote
class Simulator:
    def step(self, n):
        ...

sims = [Simulator.remote() for _ in range(64)]
```

## Use instead
```python
@ray.remote(num_cpus=1)
class Simulator:
    def step(self, n):
        ...
```
or `num_cpus=0` for an actor that is meant to take no CPU, which says so.

## Fix safety
The fix adds `num_cpus=1` to the decorator (or to `ray.remote(...)`). It is unsafe: the actor then
holds a CPU for its whole life, which limits how many run at once and can leave tasks waiting for
CPUs that idle actors hold; for a lightweight actor `num_cpus=0` may be the right value.

## References
- [Specifying task or actor resource requirements](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Pattern: using resources to limit the number of concurrently running tasks](https://docs.ray.io/en/latest/ray-core/patterns/limit-running-tasks.html)
- [Placement groups](https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html)
"""

    VALID = [
        Valid("import ray\n@ray.remote(num_cpus=1)\nclass A:\n    pass\n", "explicit num_cpus"),
        Valid("import ray\n@ray.remote(num_cpus=0)\nclass Counter:\n    def inc(self):\n        pass\n", "explicitly none"),
        Valid("import ray\n@ray.remote(num_gpus=1)\nclass Model:\n    pass\n", "a GPU actor holds 1 CPU by default"),
        Valid("import ray\n@ray.remote\nclass A:\n    pass\n\nactors = [A.options(num_cpus=2).remote() for _ in range(4)]\n", "num_cpus at creation"),
        Valid("import ray\n@ray.remote\ndef f():\n    pass\n", "a task"),
        Valid("import ray\nOPTS = {'num_cpus': 1}\n\n@ray.remote(**OPTS)\nclass A:\n    pass\n", "options unknown"),
        Valid("@ray.remote\nclass A:\n    pass\n", "no `import ray`"),
        Valid("import ray\n@ray.remote\nclass A:\n    pass\n\npool = ActorPool(A)\n", "handed to other code"),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass Simulator:\n    pass\n\nsims = [Simulator.remote() for _ in range(64)]\n",
            3,
            fixed="import ray\n\n@ray.remote(num_cpus=1)\nclass Simulator:\n    pass\n\nsims = [Simulator.remote() for _ in range(64)]\n",
        ),
        Invalid(
            "import ray\n@ray.remote(max_restarts=2)\nclass A:\n    pass\n",
            2,
            fixed="import ray\n@ray.remote(num_cpus=1, max_restarts=2)\nclass A:\n    pass\n",
        ),
        Invalid(
            "import ray\n\nclass A:\n    pass\n\nRemoteA = ray.remote(A)\n",
            6,
            fixed="import ray\n\nclass A:\n    pass\n\nRemoteA = ray.remote(num_cpus=1)(A)\n",
        ),
        Invalid(
            "import ray\n\nclass A:\n    pass\n\nRemoteA = ray.remote(max_concurrency=4)(A)\n",
            6,
            fixed="import ray\n\nclass A:\n    pass\n\nRemoteA = ray.remote(num_cpus=1, max_concurrency=4)(A)\n",
        ),
        Invalid(
            "from ray import remote\n\n@remote(memory=2 * 1024**3)\nclass Loader:\n    pass\n\nloader = Loader.options(name='loader').remote()\n",
            3,
            fixed="from ray import remote\n\n@remote(num_cpus=1, memory=2 * 1024**3)\nclass Loader:\n    pass\n\nloader = Loader.options(name='loader').remote()\n",
            note="memory alone does not change the default",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote in model.remote_defs:
            if remote.kind != "actor" or remote.options_unknowable:
                continue
            if any(True for option in RESOURCE_OPTIONS for _ in remote.option_values(option)):
                continue
            created = next((site.node for site, _, actor in model.looped_submissions("actor-create") if actor is remote), None)
            if created is not None:
                message = f"Actor `{remote.name}` does not set `num_cpus` and is created in a loop on {ctx.line_of(created)}"
            else:
                message = f"Actor `{remote.name}` does not set `num_cpus`, so its instances hold 0 CPUs while they run"
            ctx.report(
                remote.declared_at,
                message,
                self._fix(ctx, remote),
                unless=tuple(fact for option in RESOURCE_OPTIONS for fact in given(option, remote.name)),
            )

    def _fix(self, ctx: Context, remote: RemoteDef) -> FixPlan | None:
        declared = remote.declared_at
        expr = declared.decorator if isinstance(declared, cst.Decorator) else declared
        if isinstance(expr, cst.Call):
            if any(a.keyword is None and not a.star for a in expr.args):  # `ray.remote(Cls)`
                node: cst.CSTNode = expr.func
                text = f"{ctx.code_for(expr.func)}({KEYWORD})"
            else:
                node, text = expr, ctx.code_for(expr.with_changes(args=[_keyword_arg(bool(expr.args)), *expr.args]))
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            node, text = expr, f"{ctx.code_for(expr)}({KEYWORD})"
        else:
            return None
        return FixPlan(f"Add `{KEYWORD}`", ((node, text),), Applicability.UNSAFE)


def _keyword_arg(followed: bool) -> cst.Arg:
    """`num_cpus=1`, with a comma when other arguments follow it."""
    comma: cst.Comma | cst.MaybeSentinel = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if followed else cst.MaybeSentinel.DEFAULT
    tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return cst.Arg(value=cst.Integer("1"), keyword=cst.Name("num_cpus"), equal=tight, comma=comma)
