"""RAY045 memory-heavy-without-memory-resource: a task that loads whole files or models, submitted many
times in a loop, with nothing but the CPU count to limit how many run at once on a node."""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.loaders import FILE_LOADERS, MODEL_LOADER_METHODS
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import CallSite, literal_number
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid
from ray_lint.sizes import format_bytes, size_of

HEAVY_ALLOCATION = 10**9  # bytes: an allocation with a literal shape from this size counts as heavy


def _loads(model: SemanticModel, site: CallSite) -> str | None:
    """What a call inside the task loads whole, for the message; None when it is not a heavy load."""
    call = site.node
    name = model.call_name(site)
    if name in FILE_LOADERS:
        return f"`{name}(...)`"
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in MODEL_LOADER_METHODS:
        return f"`.{func.attr.value}(...)`"
    if isinstance(func, cst.Attribute) and func.attr.value == "read" and not call.args and isinstance(func.value, cst.Call):
        opened = func.value.func
        if isinstance(opened, cst.Name) and opened.value == "open":
            return "`open(...).read()`"
    size = size_of(model, call, site.scope, site.index)
    if size is not None and size.bytes is not None and size.bytes >= HEAVY_ALLOCATION:
        return f"an allocation of {format_bytes(size.bytes)}"
    return None


def _limited(remote: RemoteDef) -> bool:
    """Whether something besides one CPU bounds how many run at once: `memory=`, GPUs, custom resources,
    more than one CPU, or a value the code does not show."""
    if remote.options_unknowable:
        return True
    if any(True for option in ("memory", "num_gpus", "resources", "accelerator_type") for _ in remote.option_values(option)):
        return True
    for value in remote.option_values("num_cpus"):
        number = literal_number(value)
        if number is None or number > 1:
            return True
    return False


class MemoryHeavyWithoutMemoryResource(Rule):
    code = "RAY045"
    name = "memory-heavy-without-memory-resource"
    message = "A task that loads whole files or models is submitted in a loop with no `memory=` request"
    severity = Severity.INFO
    category = "resource"
    preview = True
    tokens = (
        "read_csv", "read_parquet", "read_json", "read_excel", "read_feather", "read_pickle", "read_hdf", "read_table",
        "read_orc", "read_ipc", "load(", "loadtxt", "genfromtxt", "fromfile", "load_model", "from_pretrained", ".read()",
        "zeros(", "ones(", "empty(", "full(", "rand(", "randn(", "random(", "normal(", "uniform(", "randint(",
    )
    also_tokens = REMOTE_MADE
    no_experiment = (
        "its cost is a node running out of memory, which a model cannot cause without putting the machine it "
        "runs on at risk"
    )
    docs = """
## What it does
Finds a remote function whose own body loads something whole into memory:
- a file read in one piece: `pd.read_csv` / `read_parquet` / `read_json` / ..., `pl.read_*`,
  `pyarrow.parquet.read_table`, `np.load` / `loadtxt` / `fromfile`, `torch.load`, `pickle.load`,
  `joblib.load`, `open(...).read()`;
- a model: `.from_pretrained(...)`, `keras.models.load_model(...)`;
- an allocation with a literal shape of 1 GB or more (`np.zeros((50_000, 50_000))`);

when the module submits it in a loop or comprehension and nothing but the default single CPU
limits how many run at once: no `memory=`, `num_gpus`, custom `resources` or `num_cpus` above 1
anywhere in the module.

This rule is in preview and reports at info level: the heuristic knows neither the size of the
files nor the node's memory, and most tasks are fine with the defaults. It is silent when the
options cannot be known (`**kwargs`, or the function handed to other code), and for actors.

## Why is this bad?
Ray schedules tasks by their logical resources only. With the default `num_cpus=1`, a 32-core node
runs 32 copies of the task at once, each holding its own copy of the data or model. If their
peak heap together exceeds the node's memory, Ray's memory monitor kills workers (and retries
the tasks, which can fail again the same way), or the node goes out of memory. Asking for
`memory=` (Ray's docs suggest about 1.25x the observed peak) makes Ray run only as many as fit.
The request is logical: Ray does not enforce it, it only schedules by it.

## Example
```python
@ray.remote
def summarize(path):
    df = pd.read_parquet(path)
    return df.describe()

refs = [summarize.remote(p) for p in paths]
```

## Use instead
```python
@ray.remote(memory=4 * 1024**3)  # about 1.25x the peak of one task
def summarize(path):
    df = pd.read_parquet(path)
    return df.describe()
```
or read in pieces (`pyarrow.parquet.ParquetFile.iter_batches`, Ray Data).

## Fix safety
There is no automatic fix: the right amount depends on the data.

## References
- [Pattern: using resources to limit the number of concurrently running tasks](https://docs.ray.io/en/latest/ray-core/patterns/limit-running-tasks.html)
- [Memory management](https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html)
- [Out-of-memory prevention](https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html)
- [Ray Data: avoiding out-of-memory errors](https://docs.ray.io/en/latest/data/performance-tips.html)
"""

    VALID = [
        Valid(
            "import ray\nimport pandas as pd\n\n@ray.remote(memory=4 * 1024**3)\ndef f(path):\n    return pd.read_csv(path).shape\n\nrefs = [f.remote(p) for p in paths]\n",
            "memory requested",
        ),
        Valid(
            "import ray\nimport pandas as pd\n\n@ray.remote\ndef f(path):\n    return pd.read_csv(path).shape\n\nref = f.remote('one.csv')\n",
            "submitted once",
        ),
        Valid(
            "import ray\nimport pandas as pd\n\n@ray.remote\ndef f(path):\n    return len(path)\n\nrefs = [f.remote(p) for p in paths]\n",
            "loads nothing",
        ),
        Valid(
            "import ray\nimport torch\n\n@ray.remote(num_gpus=1)\ndef f(path):\n    return torch.load(path)\n\nrefs = [f.remote(p) for p in paths]\n",
            "GPUs bound the parallelism",
        ),
        Valid(
            "import ray\nimport numpy as np\n\n@ray.remote\ndef f(i):\n    return np.zeros((100, 100)).sum()\n\nrefs = [f.remote(i) for i in range(1000)]\n",
            "a small allocation",
        ),
        Valid(
            "import ray\nimport pandas as pd\n\n@ray.remote\nclass Reader:\n    def read(self, path):\n        return pd.read_csv(path)\n\nreaders = [Reader.remote() for _ in range(4)]\n",
            "an actor",
        ),
        Valid(
            "import ray\nimport pandas as pd\n\n@ray.remote\ndef f(paths):\n    def load(p):\n        return pd.read_csv(p)\n    return len(paths)\n\nrefs = [f.remote(p) for p in batches]\n",
            "the load is in a nested function that may not run",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nimport pandas as pd\n\n@ray.remote\ndef summarize(path):\n    df = pd.read_parquet(path)\n    return df.describe()\n\nrefs = [summarize.remote(p) for p in paths]\n",
            4,
        ),
        Invalid(
            "import ray\nfrom transformers import AutoModel\n\n@ray.remote(num_cpus=1)\ndef embed(texts):\n    model = AutoModel.from_pretrained('bert-base-uncased')\n    return model(texts)\n\n"
            "refs = []\nfor batch in batches:\n    refs.append(embed.remote(batch))\n",
            4,
        ),
        Invalid(
            "import ray\nimport numpy as np\n\n@ray.remote\ndef simulate(seed):\n    grid = np.zeros((20_000, 20_000))\n    return grid.sum()\n\nrefs = [simulate.remote(s) for s in range(100)]\n",
            4,
            note="3.2 GB allocation",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef checksum(path):\n    return hash(open(path, 'rb').read())\n\nrefs = list(checksum.remote(p) for p in paths)\n",
            3,
        ),
        Invalid(
            "import ray\nimport torch\n\ndef score(path):\n    return torch.load(path)['acc']\n\nremote_score = ray.remote(score)\nrefs = [remote_score.remote(p) for p in ckpts]\n",
            7,
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        tasks = [remote for remote in model.remote_defs if remote.kind == "task" and not _limited(remote)]
        if not tasks:
            return
        loads: dict[int, tuple[str, cst.Call]] = {}
        for site in model.calls:
            owner = model.remote_of_scope(site.scope)
            if owner is None or id(owner[0]) in loads or owner[0] not in tasks:
                continue
            loaded = _loads(model, site)
            if loaded is not None:
                loads[id(owner[0])] = (loaded, site.node)
        for remote in tasks:
            if id(remote) not in loads:
                continue
            loop_call = next((site.node for site, _, task in model.looped_submissions("task") if task is remote), None)
            if loop_call is None:
                continue
            loaded = loads[id(remote)][0]
            ctx.report(
                remote.declared_at,
                f"Task `{remote.name}`, submitted in a loop, loads {loaded} without `memory=`",
            )
