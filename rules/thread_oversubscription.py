"""RAY041 thread-oversubscription: a task or actor starts more threads or processes than the CPUs it requested."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import (
    EvidenceExperiment,
    Plan,
    Outcome,
    Subject,
    Variant,
    script,
)
from ray_lint.model import ALL_CORES, RemoteDef, SemanticModel
from ray_lint.python_model import CallSite, literal_number, literal_string, names_read, path_to
from ray_lint.rule import Context, Invalid, Rule, Valid

Count = float | None  # a number of threads, ALL_CORES, or None when unknown

# Functions that set a thread count: qualified name -> (position, keyword) of the count argument.
THREAD_SETTERS: dict[str, tuple[int, str]] = {
    "torch.set_num_threads": (0, "int"),
    "torch.set_num_interop_threads": (0, "int"),
    "numba.set_num_threads": (0, "n"),
    "cv2.setNumThreads": (0, "nthreads"),
    "threadpoolctl.threadpool_limits": (0, "limits"),
}
# Process pools: no size (or None) means one process per core.
PROCESS_POOLS: dict[str, tuple[int, str]] = {
    "multiprocessing.Pool": (0, "processes"),
    "multiprocessing.pool.Pool": (0, "processes"),
    "concurrent.futures.ProcessPoolExecutor": (0, "max_workers"),
}
# Thread pools are usually for I/O (threads blocked on the network cost no CPU): only a pool sized by
# the core count says the threads compute.
THREAD_POOLS: dict[str, tuple[int, str]] = {
    "concurrent.futures.ThreadPoolExecutor": (0, "max_workers"),
    "multiprocessing.pool.ThreadPool": (0, "processes"),
}


THREAD_PROBE = """
import sys
import threading


def thread_counts(value=None):
    # Thread pools as the libraries themselves report them.
    counts = {{}}
    modules = sys.modules
    if "torch" in modules:
        counts["torch.get_num_threads()"] = modules["torch"].get_num_threads()
        counts["torch.get_num_interop_threads()"] = modules["torch"].get_num_interop_threads()
    if "numba" in modules:
        counts["numba.get_num_threads()"] = modules["numba"].get_num_threads()
    if "cv2" in modules:
        counts["cv2.getNumThreads()"] = modules["cv2"].getNumThreads()
    if "threadpoolctl" in modules:
        counts["threadpoolctl"] = sum(p["num_threads"] for p in modules["threadpoolctl"].threadpool_info())
    for attribute in ("_processes", "_max_workers"):
        if isinstance(getattr(value, attribute, None), int):
            counts["pool size"] = getattr(value, attribute)
    return counts


@ray.remote(num_cpus={num_cpus})
def probe():
{imports}
    value, extra = None, {{}}
{action}
    counts = {{**thread_counts(value), **extra}}
    # A process forked from a Ray worker keeps the worker's SIGTERM handler, which cannot run if the
    # fork caught a lock held: close the pool with a time limit, then kill what is left of it.
    pool, executor = getattr(value, "_pool", None), getattr(value, "_processes", None)
    processes = [*(pool if isinstance(pool, list) else ()), *(executor.values() if isinstance(executor, dict) else ())]
    for close in ("terminate", "shutdown"):
        if callable(getattr(value, close, None)):
            closing = threading.Thread(target=getattr(value, close), daemon=True)
            closing.start()
            closing.join(2)  # a healthy pool closes in milliseconds
    for process in processes:
        if callable(getattr(process, "kill", None)) and process.is_alive():  # a ThreadPool's workers are threads
            process.kill()
    return {{"num_cpus": {num_cpus}, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "counts": counts}}

__ray_lint_evidence__ = ray.get(probe.remote())
"""


@dataclass(frozen=True)
class PoolFacts:
    """The flagged call (its code, and its `n_jobs=` argument's) or OpenCV, and the task's CPUs."""

    num_cpus: float
    call: str | None = None
    n_jobs: str | None = None
    opencv: bool = False


class ThreadOversubscriptionExperiment(EvidenceExperiment[PoolFacts]):
    """Run the flagged call inside a task with the task's `num_cpus`, and read the thread pools the
    libraries report, next to the same task without the call (Ray's defaults)."""

    facts_type = PoolFacts

    def plan(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        needed = {"cv2"} if facts.opencv else names_read(cst.parse_expression(facts.n_jobs or facts.call or ""))
        imports = "\n".join(
            "    " + cst.Module([]).code_for_node(statement).strip()
            for statement in cst.parse_module(subject.text).body
            if isinstance(statement, cst.SimpleStatementLine)
            and all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)
            and _binds(statement) & needed
        ) or "    pass"
        if facts.opencv:
            action = "    import cv2"
        elif facts.n_jobs is not None:
            action = f"    import joblib\n    extra['joblib.effective_n_jobs()'] = joblib.effective_n_jobs({facts.n_jobs})"
        else:
            action = f"    value = {facts.call}"
        flagged = THREAD_PROBE.format(num_cpus=facts.num_cpus, imports=imports, action=action)
        baseline = THREAD_PROBE.format(num_cpus=facts.num_cpus, imports=imports, action="    pass")
        return Plan(
            Variant("with the call", script(flagged)),
            Variant("Ray's defaults", script(baseline)),
            "evidence",
            f"the flagged call run in a task with num_cpus={facts.num_cpus:g}, thread pools read back",
        )

    def read(self, subject: Subject, flagged: Any, compared: Any) -> tuple[Outcome, str]:
        num_cpus, counts = flagged["num_cpus"], flagged["counts"]
        if not counts:
            return "inconclusive", "no library here reports its thread count (torch, numba, cv2, threadpoolctl, joblib)"
        defaults = f"Ray's defaults: {compared['counts'] or 'no pools'}, OMP_NUM_THREADS={compared['OMP_NUM_THREADS']}"
        status: Outcome = "confirmed" if max(counts.values()) > num_cpus else "not reproduced"
        return status, f"{counts} in a task with num_cpus={num_cpus:g} ({defaults})"


class ThreadOversubscription(Rule):
    code = "RAY041"
    name = "thread-oversubscription"
    message = "A task or actor starts more threads than the CPUs it requested"
    severity = Severity.WARNING
    category = "perf"
    tokens = (".remote", "@remote")
    experiment = ThreadOversubscriptionExperiment()
    also_tokens = ("n_jobs", "set_num_threads", "set_num_interop_threads", "setNumThreads", "threadpool_limits", "Pool", "cv2")
    docs = """
## What it does
Finds code inside a remote function or actor that raises a thread or process count past the
CPUs the task requested (`num_cpus`, 1 by default):
- `n_jobs=-1`, or `n_jobs=k` with k > `num_cpus` (scikit-learn, joblib), except inside
  `with joblib.parallel_backend("ray"):`, where the jobs become Ray tasks;
- `torch.set_num_threads(k)`, `torch.set_num_interop_threads(k)`, `numba.set_num_threads(k)`,
  `cv2.setNumThreads(k)`, `threadpoolctl.threadpool_limits(k)` with k > `num_cpus` or
  k = `os.cpu_count()`;
- `multiprocessing.Pool(k)` / `ProcessPoolExecutor(k)` with k > `num_cpus`, k = `os.cpu_count()`,
  or no size (one process per core);
- `ThreadPoolExecutor(os.cpu_count())`: a thread pool sized by the core count;
- OpenCV (`cv2.*`) in a task, when the module never calls `cv2.setNumThreads`: OpenCV ignores
  `OMP_NUM_THREADS` and starts a thread per core.

## Why is this bad?
Ray's CPU resources are logical: a `num_cpus=1` task may start as many threads as it likes,
and Ray runs as many such tasks at once as the node has CPUs. Ray sets `OMP_NUM_THREADS` to
the task's `num_cpus` so that BLAS stays within its share, but explicit counts override it.
With N tasks each starting one thread per core, the node runs N × cores threads on cores
threads, and everything slows down with context switches and cache thrashing. Measured on a
2-core machine with Ray 2.60: 4 tasks of 3 matrix products (1500 × 1500) took 1.87 s with 8
threads each and 1.43 s with Ray's default of 1 (1.3×); the ratio grows with the number of
cores and workers on a node.

ray-lint says nothing in driver code, when the task requests at least as many CPUs as the
threads it starts, when a count is not a literal (it cannot know), and for thread pools of a
fixed size, which usually wait on I/O.

## Example
```python
@ray.remote
def fit(X, y):
    return RandomForestClassifier(n_jobs=-1).fit(X, y)
```

## Use instead
```python
@ray.remote(num_cpus=4)
def fit(X, y):
    return RandomForestClassifier(n_jobs=4).fit(X, y)
```
Either request the CPUs the task uses, or use only the CPUs it requested. For OpenCV, call
`cv2.setNumThreads(1)` (or the task's `num_cpus`) in the task before its first `cv2` call.

## Fix safety
There is no automatic fix: whether to request more CPUs or start fewer threads depends on the
cluster.

## References
- [Resources: CPUs and threads](https://docs.ray.io/en/latest/ray-core/scheduling/resources.html)
- [Optimizing performance: multi-threaded libraries](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/optimize-performance.html)
"""

    VALID = [
        Valid("import ray\nimport torch\n@ray.remote(num_cpus=4)\ndef f():\n    torch.set_num_threads(4)\n", "requests the CPUs it uses"),
        Valid("import ray\nimport torch\n@ray.remote\ndef f():\n    torch.set_num_threads(1)\n", "one thread"),
        Valid("import torch\nimport ray\ntorch.set_num_threads(8)\nray.init()\n", "driver code"),
        Valid("import ray\nfrom sklearn.svm import SVC\n@ray.remote\ndef f(X, y):\n    return SVC().fit(X, y), GridSearch(n_jobs=1), Other(n_jobs=None)\n", "one job"),
        Valid(
            "import joblib\nimport ray\nfrom sklearn.ensemble import RandomForestClassifier\n@ray.remote\ndef f(X, y):\n"
            "    with joblib.parallel_backend('ray'):\n        return RandomForestClassifier(n_jobs=-1).fit(X, y)\n",
            "joblib's Ray backend: the jobs are Ray tasks, not local threads",
        ),
        Valid("import ray\nimport torch\n@ray.remote\ndef f(n):\n    torch.set_num_threads(n)\n", "count from a variable"),
        Valid(
            "import ray\nfrom concurrent.futures import ThreadPoolExecutor\n@ray.remote\ndef f(urls):\n"
            "    with ThreadPoolExecutor(max_workers=16) as pool:\n        return list(pool.map(download, urls))\n",
            "a fixed-size thread pool for I/O",
        ),
        Valid("import ray\nimport cv2\ncv2.setNumThreads(1)\n@ray.remote\ndef f(path):\n    return cv2.imread(path)\n", "OpenCV threads set in the module"),
        Valid("import ray\nimport torch\n@ray.remote(**opts)\ndef f():\n    torch.set_num_threads(8)\n", "options unknown"),
        Valid(
            "import ray\nfrom multiprocessing import Pool\n@ray.remote\ndef f(x):\n    def inner():\n        return Pool()\n    return inner\n",
            "nested function: may run elsewhere",
        ),
        Valid("import ray\nimport torch\n@ray.remote\ndef f():\n    torch.set_num_threads(4)\n\nf.options(num_cpus=4).remote()\n", "CPUs requested at the call site"),
        Valid("import ray\nimport torch\n@ray.remote\ndef f():\n    torch.set_num_threads(4)\n\nlaunch(f, cpus=4)\n", "handed to code that may set its options"),
    ]
    INVALID = [
        Invalid("import ray\nfrom sklearn.ensemble import RandomForestClassifier\n@ray.remote\ndef f(X, y):\n    return RandomForestClassifier(n_jobs=-1).fit(X, y)\n", 5),
        Invalid("import ray\nimport torch\n@ray.remote\ndef f():\n    torch.set_num_threads(8)\n", 5),
        Invalid("import ray\nimport torch\nimport os\n@ray.remote(num_cpus=2)\nclass A:\n    def __init__(self):\n        torch.set_num_interop_threads(os.cpu_count())\n", 7),
        Invalid("import ray\nfrom joblib import Parallel, delayed\n@ray.remote(num_cpus=2)\ndef f(xs):\n    return Parallel(n_jobs=4)(delayed(g)(x) for x in xs)\n", 5),
        Invalid("import ray\nimport multiprocessing as mp\n@ray.remote\ndef f(xs):\n    with mp.Pool() as pool:\n        return pool.map(g, xs)\n", 5),
        Invalid("import ray\nfrom concurrent.futures import ProcessPoolExecutor\n@ray.remote\ndef f(xs):\n    with ProcessPoolExecutor(max_workers=8) as pool:\n        return list(pool.map(g, xs))\n", 5),
        Invalid("import ray\nimport os\nfrom concurrent.futures import ThreadPoolExecutor\n@ray.remote\ndef f(xs):\n    pool = ThreadPoolExecutor(os.cpu_count())\n", 6),
        Invalid("import ray\nimport cv2\n@ray.remote\ndef f(path):\n    img = cv2.imread(path)\n    return cv2.resize(img, (224, 224))\n", 5),
        Invalid("import ray\nfrom threadpoolctl import threadpool_limits\n@ray.remote\nclass A:\n    def run(self):\n        with threadpool_limits(limits=8):\n            pass\n", 6),
        Invalid("import ray\nimport numba\n@ray.remote\ndef f():\n    numba.set_num_threads(16)\n", 5),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        has_cv2_threads = bool(model.calls_to("cv2.setNumThreads"))
        warned_cv2: set[int] = set()
        for site in model.calls:
            owner = model.remote_of_scope(site.scope)
            if owner is None:
                continue
            remote = owner[0]
            share = model.cpu_share(remote)
            if share is None:
                continue
            name = model.call_name(site)
            count = self._count(model, site, name)
            if count is not None and count > share:
                n_jobs = next((a.value for a in site.node.args if a.keyword and a.keyword.value == "n_jobs"), None)
                facts = PoolFacts(share, ctx.code_for(site.node), ctx.code_for(n_jobs) if n_jobs is not None else None)
                ctx.report(site.node, self._message(ctx, site, remote, count, share), facts=facts)
            elif name is not None and name.startswith("cv2.") and not has_cv2_threads and id(remote) not in warned_cv2:
                warned_cv2.add(id(remote))
                ctx.report(
                    site.node,
                    f"OpenCV in {_kind(remote)} `{remote.name}` starts a thread per core, ignoring `OMP_NUM_THREADS`",
                    facts=PoolFacts(share, opencv=True),
                )

    def _count(self, model: SemanticModel, site: CallSite, name: str | None) -> Count:
        """How many threads or processes the call starts, when it says so."""
        for arg in site.node.args:
            if arg.keyword is not None and arg.keyword.value == "n_jobs":
                if _in_ray_joblib_backend(model, site):
                    return None  # joblib sends the jobs to Ray tasks, which Ray schedules: no local threads
                return self._value(model, site, arg.value, negative_means_all=True)
        if name in THREAD_SETTERS:
            value = _argument(site.node, *THREAD_SETTERS[name])
            if value is None:
                return None
            return self._value(model, site, value, negative_means_all=name == "cv2.setNumThreads")
        if name in PROCESS_POOLS:
            value = _argument(site.node, *PROCESS_POOLS[name])
            if value is None or (isinstance(value, cst.Name) and value.value == "None"):
                return ALL_CORES
            return self._value(model, site, value, negative_means_all=False)
        if name in THREAD_POOLS:
            value = _argument(site.node, *THREAD_POOLS[name])
            if value is not None and model.is_cpu_count(value, site.scope, site.index):
                return ALL_CORES
        return None

    def _value(self, model: SemanticModel, site: CallSite, value: cst.BaseExpression, negative_means_all: bool) -> Count:
        if model.is_cpu_count(value, site.scope, site.index):
            return ALL_CORES
        number = literal_number(value)
        if number is not None and number < 0:
            return ALL_CORES if negative_means_all else None
        return number

    def _message(self, ctx: Context, site: CallSite, remote: RemoteDef, count: float, share: float) -> str:
        name = ctx.model.call_name(site) or ctx.snippet(site.node.func)
        callee = name if len(name) <= 24 else name.rsplit(".", 1)[-1][:24]
        if any(arg.keyword is not None and arg.keyword.value == "n_jobs" for arg in site.node.args):
            unit = "jobs"
        else:
            unit = "processes" if name in PROCESS_POOLS else "threads"
        threads = f"{unit} on all cores" if count == ALL_CORES else f"{count:g} {unit}"
        cpus = f"{share:g} CPU{'s' if share != 1 else ''}"
        return f"`{callee}` runs {threads} in {_kind(remote)} `{remote.name}`, which requests {cpus}"


def _binds(statement: cst.SimpleStatementLine) -> set[str]:
    """The names an import line binds."""
    names = set()
    for small in statement.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                text = cst.Module([]).code_for_node(bound)
                names.add(text.split(".")[0])
    return names


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position] if len(positional) > position else None


def _kind(remote: RemoteDef) -> str:
    return "actor" if remote.kind == "actor" else "task"


def _in_ray_joblib_backend(model: SemanticModel, site: CallSite) -> bool:
    """Whether the call runs inside `with joblib.parallel_backend("ray"):` (or `parallel_config(backend="ray")`)."""
    path = path_to(site.scope.node, site.node, into_functions=False) or []
    for node in path:
        if not isinstance(node, cst.With):
            continue
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and _called(call) in ("parallel_backend", "parallel_config"):
                if any(literal_string(arg.value) == "ray" for arg in call.args):
                    return True
    return False


def _called(call: cst.Call) -> str | None:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
