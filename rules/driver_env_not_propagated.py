"""RAY062 driver-env-not-propagated: environment variables or `sys.path` entries the driver sets, which remote
code expects but Ray's workers never get."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.project import own_module
from ray_lint.python_model import AFTER_ALL, CallSite, Scope, dotted_name, iter_subtree, literal_string, scope_within
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

ENV_GETTERS = ("os.environ.get", "os.getenv")
# The thread-count variables RAY042 driver-env-thread-override reports when the driver raises them.
THREAD_VARIABLES = frozenset(
    {
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
        "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS",
    }
)
ENV_SETTERS = ("os.environ.setdefault", "os.putenv")
SYS_PATH_CHANGES = frozenset({"append", "insert", "extend"})
# Packages a driver imports from site-packages, whatever it added to `sys.path` before: an import of one of
# these after a `sys.path` change says nothing about the change.
INSTALLED_PACKAGES = frozenset(
    {
        "ray", "numpy", "pandas", "scipy", "sklearn", "torch", "torchvision", "torchaudio", "tensorflow", "keras",
        "jax", "jaxlib", "flax", "optax", "transformers", "datasets", "tokenizers", "accelerate", "pyarrow", "requests",
        "yaml", "tqdm", "matplotlib", "seaborn", "PIL", "cv2", "gym", "gymnasium", "boto3", "botocore", "pydantic",
        "fastapi", "starlette", "aiohttp", "httpx", "psutil", "redis", "click", "typer", "rich", "lightgbm", "xgboost",
        "catboost", "h5py", "zarr", "dask", "numba", "cupy", "pytest", "wandb", "mlflow", "omegaconf", "hydra", "einops",
        "timm", "lightning", "pytorch_lightning", "sentencepiece", "tiktoken", "openai", "google", "grpc", "msgpack",
        "cloudpickle", "attr", "attrs", "tensorboard", "tensorboardX", "skimage", "networkx", "sympy", "statsmodels",
        "polars", "duckdb", "sqlalchemy", "s3fs", "fsspec", "gcsfs", "smart_open", "filelock", "joblib", "pytz",
        "dateutil", "six", "setuptools", "pkg_resources", "packaging", "typing_extensions", "absl", "tree", "lz4",
    }
)


@dataclass(frozen=True, eq=False)
class _EnvWrite:
    key: str
    node: cst.CSTNode
    scope: Scope
    index: int


@dataclass(frozen=True, eq=False)
class _PathChange:
    node: cst.CSTNode
    added: tuple[cst.BaseExpression, ...]
    index: int


class _Remotes:
    """Which scopes run in a Ray worker, and which remote each belongs to."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.owner: dict[int, RemoteDef] = {}
        self.functions = [(remote, function) for remote in model.remote_defs for function in model.remote_functions(remote)]
        for scope in model.scopes:
            for remote, function in self.functions:
                if scope_within(scope, function.scope):
                    self.owner[id(scope)] = remote
                    break

    def of(self, scope: Scope) -> RemoteDef | None:
        return self.owner.get(id(scope))

@dataclass(frozen=True)
class DriverSetupFacts:
    """What only the driver has: an environment variable's name, or the module a `sys.path` change is for."""

    name: str
    sys_path: bool


ENV_MODEL = """
KEY, VALUE = {key!r}, "set-by-the-driver"
os.environ[KEY] = VALUE  # after the driver connected, as the flagged code does

@ray.remote
def read():
    return os.environ.get(KEY)

seen = ray.get(read{options}.remote(), timeout=30)
if seen == VALUE:
    __ray_lint_evidence__ = {{"right": f"the task read {{KEY}}={{seen!r}}"}}
else:
    __ray_lint_evidence__ = {{"wrong": f"the driver set {{KEY}}={{VALUE!r}}, yet the task read {{seen!r}}"}}
"""

# A module in a folder of its own, outside the script's directory.
HELPER_MODULE = r"""
import atexit
import shutil
import sys
import tempfile

folder = tempfile.mkdtemp(prefix="ray-lint-")
atexit.register(shutil.rmtree, folder, ignore_errors=True)
module_path = os.path.join(folder, "ray_lint_helpers.py")
with open(module_path, "w") as handle:
    handle.write("def score(x):\n    return x * 2\n")
"""

SYS_PATH_MODEL = HELPER_MODULE + """
sys.path.append(folder)
from ray_lint_helpers import score

@ray.remote
def use(x):
    return score(x)

__ray_lint_evidence__ = {"right": f"the task imported the module and returned {ray.get(use.remote(2), timeout=30)}"}
"""

# `py_modules` with a local path is accepted only for a whole job (`ray.init`), so the fixed form runs
# as a second driver connected to the same cluster.
SYS_PATH_FIX = HELPER_MODULE + """
import subprocess

address = ray.get_runtime_context().gcs_address
driver = "import sys\\nimport ray\\n" + f'''
sys.path.append({folder!r})
from ray_lint_helpers import score
ray.init(address={address!r}, runtime_env={{"py_modules": [{module_path!r}]}})

@ray.remote
def use(x):
    return score(x)

print(ray.get(use.remote(2), timeout=30))
'''
done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=60)
if done.returncode != 0:
    raise RuntimeError(done.stderr[-1500:])
__ray_lint_evidence__ = {"right": f"with runtime_env py_modules the task imported the module and returned {done.stdout.strip()}"}
"""


class DriverEnvExperiment(ReproductionExperiment[DriverSetupFacts]):
    """Runs what the workers miss on the verifier's cluster, which was started before the variant's driver:
    a task reads a variable the driver set (the fix passes it in `runtime_env` `env_vars`), or calls a
    function of a module the driver imported through a `sys.path` entry (the fix: `py_modules`)."""

    facts_type = DriverSetupFacts
    expected = r"(?m)^ModuleNotFoundError: No module named 'ray_lint_helpers'"
    beside_others = True  # workers never see the driver's environment, however busy the cluster

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        if facts.sys_path:
            return Plan(
                Variant("sys.path in the driver", script(SYS_PATH_MODEL)),
                Variant("runtime_env py_modules", script(SYS_PATH_FIX)),
                "modelled",
                f"a task calls a function of a module (standing for `{facts.name}`) that the driver imports "
                "from a folder it added to sys.path",
            )
        return Plan(
            Variant("set in the driver", script(ENV_MODEL.format(key=facts.name, options=""))),
            Variant(
                "runtime_env env_vars",
                script(ENV_MODEL.format(key=facts.name, options=".options(runtime_env={'env_vars': {KEY: VALUE}})")),
            ),
            "modelled",
            f"the driver sets {facts.name} after connecting to a running cluster; a task reads it",
        )


class DriverEnvNotPropagated(Rule):
    code = "RAY062"
    name = "driver-env-not-propagated"
    message = "Remote code relies on an environment variable or `sys.path` entry that only the driver has"
    severity = Severity.WARNING
    category = "correctness"
    tokens = ("environ", "putenv", "sys.path", "import path", "import sys as")
    also_tokens = REMOTE_MADE
    experiment = DriverEnvExperiment()
    docs = """
## What it does
Finds two things the driver sets up for itself that remote code in the same module depends on:

- an environment variable that a remote function or actor method reads (`os.environ[K]`,
  `os.environ.get(K)`, `os.getenv(K)`, `K in os.environ`) and that the driver sets
  (`os.environ[K] = ...`, `setdefault`, `update`, `os.putenv`) **after** `ray.init()` in the same
  function, or anywhere when `ray.init` is given the address of an existing cluster
  (`"auto"`, `"ray://..."`, `"host:port"`), with no `runtime_env={"env_vars": ...}` in the module
  that sets it;
- a `sys.path` entry that a driver script (a module that calls `ray.init` at top level or has an
  `if __name__ == "__main__":` block) adds outside its own directory and working directory, when
  a module imported after it is used by a remote function or actor, and the module gives no
  `runtime_env` (`py_modules`, `working_dir`).

## Why is this bad?
Ray's workers are started by the raylet of each node, not by the driver: they get the
environment the raylet was started with, plus a task's `runtime_env`. On a cluster started with
`ray start`, nothing the driver sets reaches them; on a local cluster, `ray.init()` starts the
raylet with the driver's environment as it is at that moment, so variables set afterwards are
missing too ("Environment variables are not passed from the driver to workers", Ray's gotchas).
The remote code then silently reads a default, or fails with `KeyError`.

Likewise, workers import the modules that a remote function or actor refers to by name, with
their own `sys.path`: Ray adds the driver script's directory and the current directory, not the
entries the script appended, so `ModuleNotFoundError` is raised in the worker.

ray-lint is silent for:
- variables set before a local `ray.init()` (the local raylet and its workers inherit them);
- variables in any `runtime_env` `env_vars` of the module, or when a `runtime_env` is built in a
  way it cannot read;
- thread-count variables (`OMP_NUM_THREADS`, ...): RAY042 `driver-env-thread-override` reports those;
- variables set only in the shell or by the deployment (Kubernetes, `ray start` environment);
- `sys.path` entries for the script's own directory or the working directory (Ray propagates
  both), library modules (a worker that imports the module runs its `sys.path` change too),
  and imports of the standard library, of common installed packages (`numpy`, `torch`, ...) or of
  the project's own packages (a directory of the project with an `__init__.py`, installed on the
  nodes with the project).

## Example
```python
ray.init()
os.environ["MODEL_DIR"] = "/mnt/models"

@ray.remote
def predict(x):
    return load(os.environ["MODEL_DIR"])(x)
```

## Use instead
```python
ray.init(runtime_env={"env_vars": {"MODEL_DIR": "/mnt/models"}})
```
and for code outside the script's directory, `runtime_env={"py_modules": [...]}` or
`{"working_dir": ...}`, or install the package on every node.

## Fix safety
There is no automatic fix: the value may belong in `ray.init`, in one task's options, or in the
cluster's configuration.

## References
- [Ray gotchas: environment variables are not passed from the driver to workers](https://docs.ray.io/en/latest/ray-core/gotchas.html)
- [Runtime environments: env_vars, py_modules, working_dir](https://docs.ray.io/en/latest/ray-core/handling-dependencies.html)
"""

    VALID = [
        Valid(
            'import os\nimport ray\nos.environ["MODEL_DIR"] = "/mnt/models"\nray.init()\n\n@ray.remote\ndef f():\n'
            '    return os.environ["MODEL_DIR"]\n',
            "set before a local ray.init: the workers inherit it",
        ),
        Valid(
            'import os\nimport ray\nray.init(runtime_env={"env_vars": {"MODEL_DIR": "/mnt/models"}})\nos.environ["MODEL_DIR"] = "/mnt/models"\n\n'
            '@ray.remote\ndef f():\n    return os.environ["MODEL_DIR"]\n',
            "also passed through runtime_env",
        ),
        Valid(
            'import os\nimport ray\nray.init()\nos.environ["MODEL_DIR"] = "/mnt/models"\n\n@ray.remote\ndef f():\n    return 1\n\n'
            'print(os.environ["MODEL_DIR"])\n',
            "only the driver reads it",
        ),
        Valid(
            'import os\nimport ray\nray.init(address="auto")\nos.environ["OMP_NUM_THREADS"] = "4"\n\n@ray.remote\ndef f():\n'
            '    return os.environ.get("OMP_NUM_THREADS")\n',
            "a thread-count variable: RAY042's business",
        ),
        Valid(
            'import os\nimport ray\nray.init(address="auto", runtime_env=env)\nos.environ["MODEL_DIR"] = "/m"\n\n@ray.remote\ndef f():\n'
            '    return os.getenv("MODEL_DIR")\n',
            "a runtime_env it cannot read may carry it",
        ),
        Valid(
            "import os\nimport sys\nimport ray\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nfrom helpers import score\n\n"
            "@ray.remote\ndef f(x):\n    return score(x)\n\nray.init()\n",
            "the script's own directory: Ray adds it for workers",
        ),
        Valid(
            "import sys\nimport ray\nsys.path.append('../lib')\nimport numpy as np\n\n@ray.remote\ndef f(x):\n    return np.sqrt(x)\n\nray.init()\n",
            "an installed package imported after the change",
        ),
        Valid(
            "import sys\nimport ray\nsys.path.append('../lib')\nfrom helpers import score\n\n@ray.remote\ndef f(x):\n    return score(x)\n",
            "a library module: a worker that imports it runs the change too",
        ),
        Valid(
            'import os\nray.init(address="auto")\nos.environ["MODEL_DIR"] = "/m"\n\n@ray.remote\ndef f():\n    return os.getenv("MODEL_DIR")\n',
            "no `import ray`: not Ray",
        ),
    ]
    INVALID = [
        Invalid(
            'import os\nimport ray\nray.init()\nos.environ["MODEL_DIR"] = "/mnt/models"\n\n@ray.remote\ndef predict(x):\n'
            '    return load(os.environ["MODEL_DIR"])(x)\n',
            4,
            note="set after a local ray.init",
        ),
        Invalid(
            'import os\nimport ray\nos.environ["API_TOKEN"] = read_token()\nray.init(address="auto")\n\n@ray.remote\ndef fetch(url):\n'
            '    return get(url, token=os.getenv("API_TOKEN"))\n',
            3,
            note="an existing cluster: never inherited",
        ),
        Invalid(
            'import os\nimport ray\n\n@ray.remote\nclass Writer:\n    def path(self):\n        return os.environ.get("OUT_DIR", "/tmp")\n\n'
            'def main():\n    ray.init("ray://head:10001")\n    os.environ.setdefault("OUT_DIR", "/data/out")\n    w = Writer.remote()\n',
            11,
            note="an actor method, through Ray Client",
        ),
        Invalid(
            'import os\nimport ray\n\n@ray.remote\ndef f():\n    return "DEBUG" in os.environ\n\nif __name__ == "__main__":\n    ray.init()\n'
            '    os.environ.update({"DEBUG": "1"})\n    ray.get(f.remote())\n',
            10,
        ),
        Invalid(
            "import sys\nimport ray\nsys.path.append('../lib')\nfrom helpers import score\n\n@ray.remote\ndef f(x):\n    return score(x)\n\n"
            "if __name__ == '__main__':\n    ray.init()\n    print(ray.get(f.remote(1)))\n",
            3,
            note="a sys.path entry outside the script's directory",
        ),
        Invalid(
            "import os\nimport sys\nimport ray\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))\nimport mypkg.models as models\n\n"
            "ray.init()\n\n@ray.remote\nclass Trainer:\n    def fit(self):\n        return models.build()\n",
            4,
            note="the parent of the script's directory",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.remote_defs:
            return
        remotes = _Remotes(model)
        known, unknowable = _runtime_env_variables(model)
        if not unknowable:
            self._env(ctx, remotes, known)
            self._sys_path(ctx, remotes)

    # --- environment variables

    def _env(self, ctx: Context, remotes: _Remotes, passed: set[str]) -> None:
        model = ctx.model
        readers = _env_reads(model, remotes)
        if not readers:
            return
        inits = model.calls_to("ray.init")
        existing = next((site for site in inits if _connects_to_existing(site)), None)
        reported: set[str] = set()
        for write in _env_writes(model):
            key = write.key
            if key in reported or key not in readers or key in passed or key in THREAD_VARIABLES:
                continue
            if remotes.of(write.scope) is not None:
                continue
            driver = _owner(write.scope)
            here = [site for site in inits if _owner(site.scope) is driver]
            before = [site for site in here if site.index < write.index]
            later = any(site.index > write.index for site in here)  # set for the cluster a later `ray.init()` starts
            if before and not later and not _connects_to_existing(before[-1]):
                why = f"after `ray.init()` (line {model.position(before[-1].node).start.line})"
            elif existing is not None:
                why = f"of an existing cluster (line {model.position(existing.node).start.line})"
            else:
                continue
            reported.add(key)
            remote = readers[key]
            ctx.report(
                write.node,
                f"`{remote.name}` will not see `{key}`, set in the driver {why}",
                facts=DriverSetupFacts(key, sys_path=False),
            )

    # --- sys.path

    def _sys_path(self, ctx: Context, remotes: _Remotes) -> None:
        model = ctx.model
        if not _is_driver_script(model):
            return
        for change in _sys_path_changes(model):
            if all(_propagated_path(ctx.code_for(_path_value(model, added, change.index))) for added in change.added):
                continue
            used = self._imported_after(model, remotes, change.index)
            if used is None:
                continue
            name, module, remote = used
            ctx.report(
                change.node,
                f"Workers do not get this `sys.path` change, so `{name}` may fail to import in `{remote.name}`",
                facts=DriverSetupFacts(module, sys_path=True),
                unless=own_module(module),
            )
            return

    def _imported_after(self, model: SemanticModel, remotes: _Remotes, index: int) -> tuple[str, str, RemoteDef] | None:
        """A name a module-level import after `index` binds (from a module that is neither the standard library
        nor a common installed package) that a remote body reads."""
        candidates: dict[str, str] = {}
        for name, bindings in model.module_scope.bindings.items():
            for binding in bindings:
                top = (binding.imported or "").split(".", 1)[0]
                if binding.kind == "import" and binding.index > index and top and not _installed(top):
                    candidates[name] = top
        if not candidates:
            return None
        for remote, function in remotes.functions:
            for node in iter_subtree(function.node.body):
                if isinstance(node, cst.Name) and node.value in candidates:
                    resolved = model.reaching_binding(node.value, function.scope, AFTER_ALL)
                    if resolved is not None and resolved.scope is model.module_scope and resolved.kind == "import":
                        return node.value, candidates[node.value], remote
        return None


def _owner(scope: Scope) -> Scope:
    while scope.kind == "comprehension" and scope.parent is not None:
        scope = scope.parent
    return scope


def _env_reads(model: SemanticModel, remotes: _Remotes) -> dict[str, RemoteDef]:
    """Environment variables read in remote bodies, with a remote that reads each."""
    found: dict[str, RemoteDef] = {}
    for name in ENV_GETTERS:
        for site in model.calls_to(name):
            remote = remotes.of(site.scope)
            key = literal_string(site.node.args[0].value) if site.node.args else None
            if remote is not None and key is not None:
                found.setdefault(key, remote)
    stored = {id(store.target) for store in model.stores}
    for remote, function in remotes.functions:
        for node in iter_subtree(function.node.body):
            key = None
            if isinstance(node, cst.Subscript) and id(node) not in stored and len(node.slice) == 1:
                index = node.slice[0].slice
                if isinstance(index, cst.Index) and _is_environ(model, node.value, function.scope):
                    key = literal_string(index.value)
            elif isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
                target = node.comparisons[0]
                if isinstance(target.operator, (cst.In, cst.NotIn)) and _is_environ(model, target.comparator, function.scope):
                    key = literal_string(node.left)
            if key is not None:
                found.setdefault(key, remote)
    return found


def _is_environ(model: SemanticModel, expr: cst.BaseExpression, scope: Scope) -> bool:
    return model.qualified_name(expr, scope, AFTER_ALL) == "os.environ"


def _env_writes(model: SemanticModel) -> Iterator[_EnvWrite]:
    """`os.environ[K] = v`, `os.environ.setdefault(K, v)`, `os.environ.update(...)` and `os.putenv(K, v)`."""
    for store in model.stores:
        target = store.target
        if store.kind != "assign" or not isinstance(target, cst.Subscript) or len(target.slice) != 1:
            continue
        if model.qualified_name(target.value, store.scope, store.index) != "os.environ":
            continue
        index = target.slice[0].slice
        key = literal_string(index.value) if isinstance(index, cst.Index) else None
        if key is not None:
            yield _EnvWrite(key, store.statement, store.scope, store.index)
    for name in ENV_SETTERS:
        for site in model.calls_to(name):
            args = site.node.args
            if args and args[0].keyword is None and (key := literal_string(args[0].value)) is not None:
                yield _EnvWrite(key, site.node, site.scope, site.index)
    for site in model.calls_to("os.environ.update"):
        for arg in site.node.args:
            if arg.keyword is not None:
                yield _EnvWrite(arg.keyword.value, site.node, site.scope, site.index)
            elif isinstance(arg.value, cst.Dict):
                for element in arg.value.elements:
                    if isinstance(element, cst.DictElement) and (key := literal_string(element.key)) is not None:
                        yield _EnvWrite(key, site.node, site.scope, site.index)


def _runtime_env_variables(model: SemanticModel) -> tuple[set[str], bool]:
    """The variables any `runtime_env` (or `env_vars=`) of the module sets, and whether one cannot be read."""
    found: set[str] = set()
    for site in model.calls:
        for arg in site.node.args:
            if arg.star == "**":
                continue
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "runtime_env" and _is_runtime_env_call(arg.value):
                continue  # `RuntimeEnv(env_vars=...)`: its own `env_vars=` keyword is read as a call of its own
            if keyword == "runtime_env":
                runtime_env = _dict_value(model, arg.value, site)
                if runtime_env is None:
                    if not _is_none(arg.value):
                        return found, True
                    continue
                if any(not isinstance(e, cst.DictElement) for e in runtime_env.elements):
                    return found, True
                variables = next(
                    (e.value for e in runtime_env.elements if isinstance(e, cst.DictElement) and literal_string(e.key) == "env_vars"),
                    None,
                )
            elif keyword == "env_vars":
                variables = arg.value
            else:
                continue
            if variables is None:
                continue
            env = _dict_value(model, variables, site)
            if env is None:
                return found, True
            for element in env.elements:
                key = literal_string(element.key) if isinstance(element, cst.DictElement) else None
                if key is None:
                    return found, True
                found.add(key)
    return found, False


def _dict_value(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> cst.Dict | None:
    """A dict literal, or the dict literal a name was last bound to."""
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, site.scope, site.index)
        expr = binding.value if binding is not None and binding.kind == "assign" and binding.value is not None else expr
    return expr if isinstance(expr, cst.Dict) else None


def _is_runtime_env_call(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr.func) if isinstance(expr, cst.Call) else None
    return name is not None and name.rsplit(".", 1)[-1] == "RuntimeEnv"


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _connects_to_existing(site: CallSite) -> bool:
    """`ray.init("auto")`, `ray.init(address="ray://...")`: a literal address of a running cluster."""
    for position, arg in enumerate(site.node.args):
        if (arg.keyword is None and position == 0 and not arg.star) or (arg.keyword is not None and arg.keyword.value == "address"):
            address = literal_string(arg.value)
            return address is not None and address not in ("", "local")
    return False


def _is_driver_script(model: SemanticModel) -> bool:
    """A module run as the driver: it calls `ray.init` outside any function, or has an `if __name__ == "__main__":`."""
    if any(_owner(site.scope) is model.module_scope for site in model.calls_to("ray.init")):
        return True
    for statement in model.module.body:
        if isinstance(statement, cst.If) and "__main__" in {
            literal_string(node) for node in iter_subtree(statement.test) if isinstance(node, cst.BaseExpression)
        }:
            return True
    return False


def _sys_path_changes(model: SemanticModel) -> Iterator[_PathChange]:
    """Module-level `sys.path.append/insert/extend(...)` and `sys.path += [...]` / `sys.path = [...] + sys.path`."""
    for name in SYS_PATH_CHANGES:
        for site in model.calls_to(f"sys.path.{name}"):
            if _owner(site.scope) is not model.module_scope or not site.node.args:
                continue
            args = [arg.value for arg in site.node.args]
            added = args[1:2] if name == "insert" else args[:1]
            if added:
                yield _PathChange(site.statement or site.node, tuple(added), site.index)
    for store in model.stores:
        if store.value is None or _owner(store.scope) is not model.module_scope:
            continue
        if model.qualified_name(store.target, store.scope, store.index) == "sys.path":
            yield _PathChange(store.statement, (store.value,), store.index)


def _propagated_path(text: str) -> bool:
    """Whether a path expression names the working directory or the script's own directory, which Ray puts
    on the workers' `sys.path` itself (not a directory above or below them)."""
    compact = text.replace(" ", "").replace("'", '"')
    if compact in ('"."', '""', '"./"') or compact.endswith(("getcwd()", "cwd()")):
        return True
    for noise in ("os.path.", "pathlib.", "abspath(", "realpath(", "str(", ".resolve()", ".absolute()", ")"):
        compact = compact.replace(noise, "")
    return compact in ("dirname(__file__", "Path(__file__.parent")


def _path_value(model: SemanticModel, expr: cst.BaseExpression, index: int) -> cst.BaseExpression:
    """The expression a module-level name holds (`ROOT = os.path.dirname(__file__)`), followed a few times."""
    for _ in range(4):
        if not isinstance(expr, cst.Name):
            break
        binding = model.reaching_binding(expr.value, model.module_scope, index)
        if binding is None or binding.kind != "assign" or binding.value is None:
            break
        expr, index = binding.value, binding.index
    return expr


def _installed(top: str) -> bool:
    return top in sys.stdlib_module_names or top in INSTALLED_PACKAGES
