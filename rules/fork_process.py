"""RAY064 fork-process: a process forked from a Ray worker, or from a driver connected to Ray."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.forks import CONTEXT_METHODS, DEFAULT_CONTEXT, EXECUTORS, MP_MODULES, forks_in_helpers, how_it_forks, start_method_set
from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import CallSite
from ray_lint.ray_api import keyword_arg
from ray_lint.rule import INIT_CALLED, MAX_MESSAGE, REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

IN_DRIVER_WORDS = "in a driver connected to Ray"  # where the fork is, in the message, when not in a worker

SOCKETS = """
import multiprocessing

def socket_fds():
    '''This process's sockets: {"/proc/self/fd/N": "socket:[inode]"}.'''
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            found[f"/proc/self/fd/{fd}"] = link
    return found

def inherited(context):
    '''How many of this process's sockets a pool child started by `context` holds too, and of how many.'''
    mine = socket_fds()
    with context.Pool(1) as pool:
        theirs = pool.map_async(os.path.realpath, list(mine)).get(timeout=20)  # the child reads its own fds
    return sum(os.path.basename(path) == link for path, link in zip(theirs, mine.values())), len(mine)
"""
IN_TASK = """
@ray.remote
def featurize():
    return inherited(CONTEXT)

same, total = ray.get(featurize.remote(), timeout=60)
"""
IN_DRIVER = """
same, total = inherited(CONTEXT)
"""
VERDICT = """
if same:
    __ray_lint_evidence__ = {"wrong": f"a child STARTED WHERE holds {same} of its {total} sockets, Ray's connections among them"}
else:
    __ray_lint_evidence__ = {"right": f"a child STARTED WHERE holds none of its {total} sockets"}
"""


@dataclass(frozen=True)
class ForkSite:
    """Where the process forks: in a Ray worker (a task or an actor method) or in a connected driver."""

    in_worker: bool


class ForkProcessExperiment(ReproductionExperiment[ForkSite]):
    """A one-process `multiprocessing.Pool` started where the finding starts one (a Ray task, or a
    driver connected to Ray): which of the parent's sockets the child holds too, by fork (the default
    on Linux) against a spawn context. The corruption itself is intermittent; the shared sockets are
    what make it possible."""

    facts_type = ForkSite
    beside_others = True  # a forked child holds its parent's sockets, however busy the cluster

    model_only = "the code as written usually runs fine (the corruption it risks is rare), which would read as not reproduced"

    def plan(self, subject: Subject) -> Plan:
        """Always the model: the script as written usually runs fine (the corruption is rare), which
        would read as "not reproduced"."""
        return self.model(subject)

    def model(self, subject: Subject) -> Plan:
        in_worker = self.facts(subject).in_worker
        where = "in a Ray task" if in_worker else "by a driver connected to Ray"
        body = SOCKETS + (IN_TASK if in_worker else IN_DRIVER) + VERDICT.replace("WHERE", where)
        forked = body.replace("CONTEXT", "multiprocessing").replace("STARTED", "forked")
        spawned = body.replace("CONTEXT", 'multiprocessing.get_context("spawn")').replace("STARTED", "spawned")
        return Plan(
            Variant("fork (the default)", script(forked)),
            Variant("spawn context", script(spawned)),
            "modelled",
            f"`multiprocessing.Pool(1)` started {where}, and `multiprocessing.get_context(\"spawn\").Pool(1)`",
        )


class ForkProcess(Rule):
    code = "RAY064"
    name = "fork-process"
    message = "A process is forked from a Ray worker or a connected driver; the child shares Ray's sockets"
    severity = Severity.WARNING
    category = "correctness"
    fixable = True
    # Code that runs connected to Ray: a worker's (which may fork in a helper of another module) or a driver's.
    tokens = (*REMOTE_MADE, *INIT_CALLED)
    experiment = ForkProcessExperiment()
    docs = """
## What it does
Finds a new process forked from code that is connected to Ray:
- inside a remote function or an actor method (a Ray worker is always connected);
- in driver code after `ray.init()` in the same function (or at module level), with no
  `ray.shutdown()` in between.

The calls it knows are `os.fork()` and `os.forkpty()`, and `multiprocessing.Pool`, `Process`,
`Manager` (also `torch.multiprocessing`'s and those of `multiprocess`, its dill-based fork) and `concurrent.futures.ProcessPoolExecutor` when they
use the fork start method: the default on Linux, or a `get_context("fork")` context.

## Why is this bad?
Ray's "Anti-pattern: Forking new processes in application code" explains that the objects, tasks
and actors of a process manage sockets to the raylet and the GCS. A forked child copies the
parent's memory, sockets included, and may use them without any synchronization with the parent,
which can corrupt messages and cause unexpected behaviour or hangs. The fault is not deterministic,
so it tends to surface as rare, unexplained failures. A Ray worker also runs several threads, and
forking a multi-threaded process can deadlock the child on a lock held by another thread (Python
3.12 warns about it with a `DeprecationWarning`).

ray-lint is silent when:
- the module calls `multiprocessing.set_start_method(...)` with anything but `"fork"` (for the
  default-context calls; `os.fork()` and an explicit `"fork"` context are still reported);
- a spawn or forkserver context is used: `get_context("spawn").Pool(...)`,
  `ProcessPoolExecutor(mp_context=...)`, `Pool(context=...)` with anything but a fork context;
- the driver forks before `ray.init()` (no sockets yet), or after `ray.shutdown()`;
- `ray.util.multiprocessing.Pool` is used: it runs on Ray actors, it does not fork;
- the pool is made of threads (`multiprocessing.dummy`, `ThreadPool`) or the child is a new
  program (`subprocess`: fork followed by exec);
- `torch.utils.data.DataLoader(num_workers=...)` forks too, but is common and usually harmless:
  not reported.

A task or actor method that calls a helper which forks, or whose own helpers do (the module's
functions and the methods of the same class, three calls deep, and functions imported from another
module of the project, which that module's summary says fork), is reported at the call, naming the
helper; a helper forks under any condition there (a pool made only when `workers > 1`). A driver's
helpers are not followed, nor a function nested in the task. A `set_start_method` call anywhere in
the module silences the default-context calls, even one under `if __name__ == "__main__":`, which Ray workers never run.
It cannot see a `set_start_method` made in another module, or know the interpreter: from
Python 3.14 the default start method on Linux is forkserver, and only `os.fork()` and explicit
fork contexts fork. On macOS and Windows the default is spawn.

ray-lint reports it as a warning rather than an error (the catalogue's letter is E): most forked
pools in tasks run fine most of the time, and the corruption, when it comes, is intermittent.

## Example
```python
@ray.remote
def featurize(paths):
    with multiprocessing.Pool(4) as pool:
        return pool.map(load_and_parse, paths)
```

## Use instead
A spawn context:
```python
@ray.remote(num_cpus=4)
def featurize(paths):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        return pool.map(load_and_parse, paths)
```
or let Ray parallelize: `ray.get([load_and_parse_task.remote(p) for p in paths])`, or
`ray.util.multiprocessing.Pool`. Instead of `os.fork()`, start a new program with `subprocess`,
or use Ray tasks.

## Fix safety
The fix is unsafe. It replaces `mp.Pool(...)`, `mp.Process(...)` or `mp.Manager()` with
`mp.get_context("spawn").Pool(...)` (and so on), and adds
`mp_context=mp.get_context("spawn")` to a `ProcessPoolExecutor(...)` when the module imports
`multiprocessing`. A spawned child is a fresh interpreter: it does not inherit the parent's
globals and starts more slowly, and what it runs (a `Process` target, a pool's `initializer`, and
their arguments) must be picklable by reference, from a module the child can import; under fork
these were inherited without pickling. A function defined in the driver script (which Ray ships to
workers by value) or inside another function cannot be pickled that way: checked on Ray 2.60, a
spawn pool in a task runs `math.sqrt` but fails on a function of the driver script with
`PicklingError: Can't pickle <function square>: attribute lookup square on __main__ failed` (so
does a fork pool's `map`, which pickles its function too). Such code must move to an importable
module. It is not offered for `os.fork()`, for names imported from `multiprocessing`
(`from multiprocessing import Pool`), or for an explicit fork context.

## References
- [Anti-pattern: Forking new processes in application code](https://docs.ray.io/en/latest/ray-core/patterns/fork-new-processes.html)
- [Lifetimes of a user-spawned process](https://docs.ray.io/en/latest/ray-core/user-spawn-processes.html)
- [Python: contexts and start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
- [Distributed multiprocessing.Pool](https://docs.ray.io/en/latest/ray-more-libs/multiprocessing.html)
"""

    VALID = [
        Valid(
            "import multiprocessing\nimport ray\n\nmultiprocessing.set_start_method('spawn', force=True)\n\n"
            "@ray.remote\ndef work(xs):\n    with multiprocessing.Pool(4) as pool:\n        return pool.map(abs, xs)\n",
            "the module sets the spawn start method",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\n@ray.remote\ndef work(xs):\n"
            "    with multiprocessing.get_context('spawn').Pool(4) as pool:\n        return pool.map(abs, xs)\n",
            "a spawn context",
        ),
        Valid(
            "import multiprocessing as mp\nfrom concurrent.futures import ProcessPoolExecutor\nimport ray\n\n@ray.remote\nclass Worker:\n"
            "    def run(self, xs):\n        ctx = mp.get_context('forkserver')\n"
            "        with ProcessPoolExecutor(4, mp_context=ctx) as pool:\n            return list(pool.map(abs, xs))\n",
            "ProcessPoolExecutor with a forkserver context",
        ),
        Valid(
            "import ray\nfrom ray.util.multiprocessing import Pool\n\nray.init()\npool = Pool()\nprint(pool.map(abs, range(10)))\n",
            "Ray's own Pool runs on actors",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\ndef main():\n    with multiprocessing.Pool(4) as pool:\n"
            "        data = pool.map(load, paths)\n    ray.init()\n    ray.get([train.remote(d) for d in data])\n",
            "the driver forks before ray.init",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\ndef preprocess(paths):\n    with multiprocessing.Pool(4) as pool:\n"
            "        return pool.map(load, paths)\n\n@ray.remote\ndef train(x):\n    return x\n",
            "a plain function: not known to run connected to Ray",
        ),
        Valid(
            "import ray\nfrom multiprocessing.pool import ThreadPool\nfrom multiprocessing.dummy import Pool\n\n@ray.remote\ndef work(xs):\n"
            "    with ThreadPool(4) as threads, Pool(4) as more:\n        return threads.map(abs, xs) + more.map(abs, xs)\n",
            "thread pools do not fork",
        ),
        Valid(
            "import subprocess\nimport ray\n\n@ray.remote\ndef convert(path):\n    subprocess.run(['ffmpeg', '-i', path, 'out.mp4'], check=True)\n",
            "a new program: fork then exec",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\nray.init()\nray.get(warmup.remote())\nray.shutdown()\n"
            "with multiprocessing.Pool(4) as pool:\n    pool.map(abs, range(4))\n",
            "after ray.shutdown",
        ),
        Valid(
            "import os\n\n@ray.remote\ndef work():\n    os.fork()\n",
            "no `import ray`: `ray` is not Ray here",
        ),
        Valid(
            "import ray\n\nclass Pool:\n    def __init__(self, n):\n        self.n = n\n\n@ray.remote\ndef work():\n    return Pool(4).n\n",
            "a local class named Pool",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\ndef load_all(paths):\n"
            "    with multiprocessing.get_context('spawn').Pool(4) as pool:\n        return pool.map(load, paths)\n\n"
            "@ray.remote\ndef featurize(paths):\n    return load_all(paths)\n",
            "a helper with a spawn context",
        ),
        Valid(
            "import ray\nfrom loaders import load_all\n\n@ray.remote\ndef featurize(paths):\n    return load_all(paths)\n",
            "an imported helper that no module of the project says forks",
        ),
        Valid(
            "import multiprocessing\nimport ray\n\ndef load_all(paths):\n    with multiprocessing.Pool(4) as pool:\n"
            "        return pool.map(load, paths)\n\ndef main():\n    ray.init()\n    ray.get(train.remote(load_all(paths)))\n",
            "a driver's helper is not followed",
        ),
    ]
    INVALID = [
        Invalid(
            "import multiprocessing\nimport ray\n\n@ray.remote\ndef work(xs):\n    with multiprocessing.Pool(4) as pool:\n"
            "        return pool.map(abs, xs)\n",
            6,
            fixed="import multiprocessing\nimport ray\n\n@ray.remote\ndef work(xs):\n"
            "    with multiprocessing.get_context(\"spawn\").Pool(4) as pool:\n        return pool.map(abs, xs)\n",
        ),
        Invalid(
            "import os\nimport ray\n\n@ray.remote\nclass Server:\n    def start(self):\n        pid = os.fork()\n"
            "        if pid == 0:\n            serve()\n        return pid\n",
            7,
            note="os.fork in an actor method: no fix",
        ),
        Invalid(
            "import multiprocessing\nfrom concurrent.futures import ProcessPoolExecutor\nimport ray\n\n@ray.remote\ndef work(xs):\n"
            "    with ProcessPoolExecutor(max_workers=4) as pool:\n        return list(pool.map(abs, xs))\n",
            7,
            fixed="import multiprocessing\nfrom concurrent.futures import ProcessPoolExecutor\nimport ray\n\n@ray.remote\ndef work(xs):\n"
            "    with ProcessPoolExecutor(max_workers=4, mp_context=multiprocessing.get_context(\"spawn\")) as pool:\n"
            "        return list(pool.map(abs, xs))\n",
        ),
        Invalid(
            "import concurrent.futures\nimport ray\n\n@ray.remote\ndef work(xs):\n"
            "    with concurrent.futures.ProcessPoolExecutor() as pool:\n        return list(pool.map(abs, xs))\n",
            6,
            note="no `multiprocessing` import to build the context from: no fix",
        ),
        Invalid(
            "from multiprocessing import Pool\nimport ray\n\ndef main():\n    ray.init()\n    data = ray.get([load.remote(p) for p in paths])\n"
            "    with Pool(4) as pool:\n        pool.map(save, data)\n",
            7,
            note="the driver forks after ray.init; an imported name: no fix",
        ),
        Invalid(
            "import multiprocessing as mp\nimport ray\n\n@ray.remote\nclass Sim:\n    def run(self):\n"
            "        p = mp.Process(target=loop, args=(1,))\n        p.start()\n",
            7,
            fixed="import multiprocessing as mp\nimport ray\n\n@ray.remote\nclass Sim:\n    def run(self):\n"
            "        p = mp.get_context(\"spawn\").Process(target=loop, args=(1,))\n        p.start()\n",
        ),
        Invalid(
            "import multiprocessing\nimport ray\n\nmultiprocessing.set_start_method('spawn')\n\n@ray.remote\ndef work(xs):\n"
            "    ctx = multiprocessing.get_context('fork')\n    with ctx.Pool(2) as pool:\n        return pool.map(abs, xs)\n",
            9,
            note="an explicit fork context, whatever the default",
        ),
        Invalid(
            "import torch.multiprocessing as tmp\nimport ray\n\n@ray.remote(num_gpus=1)\ndef train():\n"
            "    workers = [tmp.Process(target=run, args=(i,)) for i in range(2)]\n",
            6,
            fixed="import torch.multiprocessing as tmp\nimport ray\n\n@ray.remote(num_gpus=1)\ndef train():\n"
            "    workers = [tmp.get_context(\"spawn\").Process(target=run, args=(i,)) for i in range(2)]\n",
        ),
        Invalid(
            "import multiprocessing\nimport ray\n\ndef load_all(paths, workers):\n    if workers > 1:\n"
            "        return _parallel(paths, workers)\n    return [load(p) for p in paths]\n\n"
            "def _parallel(paths, workers):\n    with multiprocessing.Pool(workers) as pool:\n        return pool.map(load, paths)\n\n"
            "@ray.remote\ndef featurize(paths):\n    return load_all(paths, 4)\n",
            15,
            note="a helper of the module forks, two calls away and under a condition: reported at the call",
        ),
        Invalid(
            "import multiprocessing as mp\nimport ray\n\ndef start_server(port):\n    proc = mp.Process(target=serve, args=(port,))\n"
            "    proc.start()\n    return proc\n\n@ray.remote\nclass Sim:\n    def _start(self):\n"
            "        self.proc = start_server(8000)\n\n    def run(self):\n        self._start()\n",
            12,
            note="an actor method calls a helper that forks; `run` reaches it through `_start`, reported once",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        method_set = start_method_set(model)
        for site in model.calls:
            how = how_it_forks(model, site, method_set)
            if how is None:
                continue
            where = self._connected(model, site)
            if where is None:
                continue
            ctx.report(
                site.node,
                f"`{ctx.snippet(site.node.func, 30)}` {how} {where}",
                self._fix(ctx, site),
                facts=ForkSite(where != IN_DRIVER_WORDS),
            )
        for remote in model.remote_defs:
            where = _in_worker(remote)
            functions = model.remote_functions(remote)
            for function in functions:
                for effect in forks_in_helpers(model, function):
                    if effect.callee in functions:
                        continue  # another method of the actor: its own calls are reported where they are
                    at = f" ({ctx.line_of(effect.marker)})" if not effect.requires else ""
                    assert isinstance(effect.call, cst.Call) and effect.helper is not None
                    message = f"`{ctx.snippet(effect.call.func, 30)}` forks a process {where}: in `{effect.helper}`{at}"
                    if len(message) > MAX_MESSAGE:  # a long qualified name: the helper's own name says enough
                        message = f"`{ctx.snippet(effect.call.func, 30)}` forks a process {where}"
                    ctx.report(effect.call, message, facts=ForkSite(True), requires=effect.requires)

    def _connected(self, model: SemanticModel, site: CallSite) -> str | None:
        """Where the call runs connected to Ray: "in a Ray task", "in an actor method", "after `ray.init()`"."""
        found = model.remote_of_scope(site.scope)
        if found is not None:
            remote, _ = found
            return _in_worker(remote)
        scope = site.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        inits = [s.index for s in model.calls_to("ray.init") if _runs_in(s, scope) and s.index < site.index]
        if not inits:
            return None
        last_init = max(inits)
        if any(_runs_in(s, scope) and last_init < s.index < site.index for s in model.calls_to("ray.shutdown")):
            return None
        return IN_DRIVER_WORDS

    def _fix(self, ctx: Context, site: CallSite) -> FixPlan | None:
        model = ctx.model
        call = site.node
        name = model.call_name(site)
        func = call.func
        if name in DEFAULT_CONTEXT and isinstance(func, cst.Attribute) and func.attr.value in CONTEXT_METHODS:
            module = model.qualified_name(func.value, site.scope, site.index)
            if module in MP_MODULES and keyword_arg(call, "context") is None:
                prefix = ctx.code_for(func.value)
                return _plan(func, f'{prefix}.get_context("spawn").{func.attr.value}')
        if name in EXECUTORS and not any(a.star for a in call.args):
            module_name = _module_name(model, site, "multiprocessing")
            if module_name is None:
                return None
            context = cst.parse_expression(f'{module_name}.get_context("spawn")')
            new_arg = cst.Arg(value=context, keyword=cst.Name("mp_context"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            args = list(call.args)
            if args and isinstance(args[-1].comma, cst.Comma):
                new_arg = new_arg.with_changes(comma=args[-1].comma)
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return _plan(call, ctx.code_for(call.with_changes(args=[*args, new_arg])))
        return None


def _in_worker(remote: RemoteDef) -> str:
    return "in an actor method" if remote.kind == "actor" else "in a Ray task"


def _plan(node: cst.CSTNode, text: str) -> FixPlan:
    return FixPlan("Use a spawn context", ((node, text),), Applicability.UNSAFE)


def _runs_in(site: CallSite, scope: object) -> bool:
    """Whether the call runs in `scope` itself (comprehensions count as their enclosing scope)."""
    inner = site.scope
    while inner.kind == "comprehension" and inner.parent is not None:
        inner = inner.parent
    return inner is scope


def _module_name(model: SemanticModel, site: CallSite, module: str) -> str | None:
    """A name under which `module` itself is imported and visible at the call (`multiprocessing`, `mp`)."""
    for scope in model.scopes:
        for name, bindings in scope.bindings.items():
            if any(b.kind == "import" and b.imported == module for b in bindings):
                binding = model.reaching_binding(name, site.scope, site.index)
                if binding is not None and binding.kind == "import" and binding.imported == module:
                    return name
    return None
