"""RAY083 mutate-after-put: an object is changed in place after `ray.put`, then its stale ref is handed to a task."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ray_lint.analyses.actor_state import MUTATING_METHODS, changed_parameters
from ray_lint.analyses.arrays import NUMPY_MAKERS
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import Binding, CallSite, FunctionInfo, Scope, is_name, iter_subtree, path_to, root_name
from ray_lint.rule import MAX_MESSAGE, Context, Invalid, Rule, Valid

# Of the model's mutating methods, those that change a value's data (not a file, a connection or a
# counter's side effects), plus numpy's in-place methods. `clear` is left out: emptying a container
# after `ray.put` frees driver memory, and the tasks are meant to get the snapshot.
DATA_MUTATORS = (
    MUTATING_METHODS
    & frozenset(
        {
            "append", "appendleft", "extend", "extendleft", "insert", "add", "update", "pop", "popleft", "popitem",
            "remove", "discard", "setdefault", "sort", "reverse", "fit", "partial_fit", "load_state_dict", "set_weights",
            "copy_", "add_", "mul_", "zero_", "fill_",
        }
    )
) | frozenset({"fill", "resize", "itemset"})
# Constructors of mutable containers: `x += ...` on one of these changes it in place.
CONTAINER_MAKERS = frozenset({"list", "dict", "set", "bytearray"})
# Functions that change their first argument in place.
CHANGING_FUNCTIONS = (
    "random.shuffle", "numpy.random.shuffle", "numpy.copyto", "numpy.put", "numpy.place", "numpy.putmask", "numpy.fill_diagonal",
)
TENSOR_MAKERS = frozenset(f"torch.{name}" for name in ("zeros", "ones", "empty", "full", "rand", "randn", "tensor", "arange"))
_EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


@dataclass(frozen=True)
class _Put:
    site: CallSite
    value: Binding  # the binding of the name put
    ref: Binding  # the name that holds the ref


@dataclass(frozen=True)
class _Change:
    node: cst.CSTNode  # reported
    statement: cst.CSTNode
    index: int
    by: str | None = None  # the module's function that changes it, when one does

@dataclass(frozen=True)
class PutFacts:
    """The names of the object put and of its ref, for the verdict's words."""

    name: str
    ref: str


PUT_MODEL = """
@ray.remote
def learning_rate(config):
    return config["lr"]

config = {{"lr": 0.1}}
{steps}
seen = ray.get(learning_rate.remote(config_ref), timeout=30)
if seen == 0.01:
    __ray_lint_evidence__ = {{"right": "the task read lr=0.01, the driver's current value"}}
else:
    __ray_lint_evidence__ = {{
        "wrong": f"the driver set lr=0.01 after ray.put (as `{name}` is changed), yet the task given the ref (`{ref}`) read lr={{seen}}"
    }}
"""


class MutateAfterPutExperiment(ReproductionExperiment[PutFacts]):
    """Runs a dict put in the object store, changed in the driver, then handed to a task by its ref;
    the fix changes it before the `ray.put`."""

    facts_type = PutFacts
    shares_driver = True

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        after = 'config_ref = ray.put(config)\nconfig["lr"] = 0.01'
        before = 'config["lr"] = 0.01\nconfig_ref = ray.put(config)'
        return Plan(
            Variant("changed after put", script(PUT_MODEL.format(steps=after, name=facts.name, ref=facts.ref))),
            Variant("changed before put", script(PUT_MODEL.format(steps=before, name=facts.name, ref=facts.ref))),
            "modelled",
            "a config dict is put, changed in the driver, then passed to a task by its ref",
        )


class MutateAfterPut(Rule):
    code = "RAY083"
    name = "mutate-after-put"
    message = "An object is changed after `ray.put`, and tasks later get the ref, which still holds the old value"
    severity = Severity.WARNING
    category = "correctness"
    tokens = ("put(",)
    also_tokens = (".remote(",)
    experiment = MutateAfterPutExperiment()
    docs = """
## What it does
Finds `ref = ray.put(x)` followed, in the same function, by an in-place change of `x` and then
by a `.remote(...)` call (a task or an actor method) that is given `ref`. In-place changes are:
- item and attribute assignments: `x[k] = v`, `x.a = v`, `x[k] += v` (also deeper: `x.a[k] = v`);
- functions that change their first argument: `random.shuffle(x)`, `np.random.shuffle(x)`,
  `np.copyto(x, ...)`, `np.put`, `np.place`, `np.putmask`, `np.fill_diagonal`;
- data-changing methods: `append`, `extend`, `insert`, `add`, `update`, `pop`, `remove`,
  `setdefault`, `sort`, `reverse`, numpy's `fill` / `resize`, torch's trailing-underscore methods
  (`add_`, `zero_`...), `fit`, `load_state_dict`, and any method called with `inplace=True`;
- `x += ...` when `x` was bound to a list, dict, set, numpy array or tensor;
- a call of a function of the module that changes the parameter `x` is passed to, one call away
  (`update_policy(policy, xp)` where `update_policy` does `policy.table[s] = v`, or calls a
  data-changing method on it), unless the function rebinds that parameter.

## Why is this bad?
`ray.put` serializes `x` into the object store at the time of the call: the ref names an
immutable snapshot, not the driver's object. A change made afterwards stays in the driver, and
every task that gets the ref reads the old value. Nothing fails: the results are silently
computed from stale data (an old config, an unfitted model, a list without its last items).

ray-lint is silent when:
- the change comes before the `ray.put` of the same iteration (filling a buffer, then putting it);
- the ref is used before the change and not after it (put, submit, then reuse the buffer);
- `x` is put again between the change and the use (versioned snapshots), or is rebound first
  (`x = x.copy()`);
- the ref is only fetched with `ray.get` (a snapshot kept to restore or compare later);
- the change is `x.clear()` or `del x[...]` (freeing driver memory once the data is in the store);
- the change and the use are in different branches of an `if` or `try`, or the change's branch
  returns, raises, breaks or continues before reaching the use;
- `x` is an attribute (`ray.put(self.data)`), or changed through another name.

## Example
```python
config = {"lr": 0.1, "epochs": 10}
config_ref = ray.put(config)
config["lr"] = 0.01  # too late: the store holds lr=0.1
results = ray.get([train.remote(config_ref, seed) for seed in range(4)])
```

## Use instead
```python
config = {"lr": 0.1, "epochs": 10}
config["lr"] = 0.01
config_ref = ray.put(config)
results = ray.get([train.remote(config_ref, seed) for seed in range(4)])
```
or call `ray.put` again after the change and pass the new ref.

## Fix safety
There is no automatic fix: whether the tasks should see the change (put after it) or the
snapshot (copy before changing) is the author's call.

## References
- [Objects: `ray.put` stores an immutable copy](https://docs.ray.io/en/latest/ray-core/objects.html)
- [ray.put](https://docs.ray.io/en/latest/ray-core/api/doc/ray.put.html)
"""

    VALID = [
        Valid(
            "import ray\n\ndef scaled(policy, k):\n    policy = dict(policy)\n    policy['k'] = k\n    return policy\n\n"
            "def run(policy, sims):\n    ref = ray.put(policy)\n    policy2 = scaled(policy, 2)\n"
            "    return ray.get([s.go.remote(ref) for s in sims])\n",
            "a helper that copies its parameter before changing it",
        ),
        Valid(
            "import ray\nconfig = {'lr': 0.1}\nconfig['lr'] = 0.01\nref = ray.put(config)\nrefs = [train.remote(ref, s) for s in range(4)]\n",
            "changed before the put",
        ),
        Valid(
            "import ray\nbuf = []\nrefs = []\nfor line in lines:\n    buf.append(line)\n    if len(buf) == 100:\n"
            "        ref = ray.put(buf)\n        refs.append(process.remote(ref))\n        buf = []\n",
            "filled, put, submitted, then a new buffer",
        ),
        Valid(
            "import ray\nimport numpy as np\nbuf = np.zeros(1000)\nrefs = []\nfor chunk in chunks:\n    ref = ray.put(buf)\n"
            "    refs.append(score.remote(ref))\n    buf[:] = load(chunk)\n",
            "the ref is used before the buffer is reused",
        ),
        Valid(
            "import ray\nweights = {'w': 1.0}\nv1 = ray.put(weights)\nweights['w'] = 2.0\nv2 = ray.put(weights)\n"
            "refs = [evaluate.remote(v1), evaluate.remote(v2)]\n",
            "versioned snapshots: put again after the change",
        ),
        Valid(
            "import ray\nstate = {'step': 0}\nbackup = ray.put(state)\nstate['step'] = 1\nstate = ray.get(backup)\n",
            "a snapshot restored with ray.get",
        ),
        Valid(
            "import ray\nrows = load_rows()\nref = ray.put(rows)\nrows.clear()\nresults = ray.get([count.remote(ref, i) for i in range(8)])\n",
            "cleared to free driver memory",
        ),
        Valid(
            "import ray\ncfg = {'lr': 0.1}\nref = ray.put(cfg)\ncfg = dict(cfg)\ncfg['lr'] = 0.01\nout = train.remote(ref)\n",
            "rebound to a copy before the change",
        ),
        Valid(
            "import ray\n\ndef run(cfg, dry_run):\n    ref = ray.put(cfg)\n    if dry_run:\n        cfg['steps'] = 1\n"
            "        return cfg\n    return ray.get(train.remote(ref))\n",
            "the changing branch returns",
        ),
        Valid(
            "import ray\n\ndef run(cfg, fast):\n    ref = ray.put(cfg)\n    if fast:\n        cfg['steps'] = 1\n    else:\n"
            "        out = train.remote(ref)\n",
            "change and use in different branches",
        ),
        Valid(
            "import ray\ncount = 0\nref = ray.put(count)\ncount += 1\nout = show.remote(ref)\n",
            "an int is rebound, not changed in place",
        ),
        Valid(
            "import ray\n\ndef submit(data):\n    ref = ray.put(data)\n    def later():\n        data.append(1)\n"
            "    return work.remote(ref)\n",
            "changed in a nested function, which may never run",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\ndef update_policy(policy, xp):\n    for state, value in xp:\n        policy.table[state] = value\n\n"
            "def train(policy, sims, episodes):\n    policy_ref = ray.put(policy)\n    for _ in range(episodes):\n"
            "        for xp in ray.get([s.rollout.remote(policy_ref) for s in sims]):\n            update_policy(policy, xp)\n"
            "    return policy\n",
            11,
            note="the object put is changed one call away, by a function of the module",
        ),
        Invalid(
            "import ray\nconfig = {'lr': 0.1}\nconfig_ref = ray.put(config)\nconfig['lr'] = 0.01\n"
            "results = ray.get([train.remote(config_ref, s) for s in range(4)])\n",
            4,
        ),
        Invalid(
            "import ray\n\ndef main(items):\n    items_ref = ray.put(items)\n    items.append(extra)\n    return count.remote(items_ref)\n",
            5,
        ),
        Invalid(
            "from ray import put\nimport ray\nmodel = Model()\nmodel_ref = put(model)\nmodel.fit(X, y)\n"
            "preds = ray.get([predict.remote(model_ref, batch) for batch in batches])\n",
            5,
            note="an unfitted model in the store",
        ),
        Invalid(
            "import ray\nimport numpy as np\nweights = np.zeros(10)\nref = ray.put(weights)\nweights += 1.0\n"
            "actor = Learner.remote()\nactor.train.remote(ref)\n",
            5,
            note="`+=` on a numpy array is in place",
        ),
        Invalid(
            "import ray\n\ndef run(settings, workers):\n    ref = ray.put(settings)\n    settings.db.timeout = 30\n"
            "    for w in workers:\n        w.configure.options(name='c').remote(settings=ref)\n",
            5,
            note="an attribute of an attribute, and the ref given by keyword to an actor method",
        ),
        Invalid(
            "import ray\nimport pandas as pd\ndf = pd.read_csv(path)\ndf_ref = ray.put(df)\ndf.dropna(inplace=True)\n"
            "out = summarize.remote(df_ref)\n",
            5,
            note="inplace=True",
        ),
        Invalid(
            "import random\nimport ray\n\ndef epoch(samples, model_ref):\n    samples_ref = ray.put(samples)\n    random.shuffle(samples)\n"
            "    return [train_step.remote(model_ref, samples_ref, i) for i in range(0, len(samples), 64)]\n",
            6,
            note="shuffled in place after the put",
        ),
        Invalid(
            "import ray\n\ndef run(cfg, verbose):\n    ref = ray.put(cfg)\n    if verbose:\n        cfg['log_level'] = 'debug'\n"
            "    return ray.get(train.remote(ref))\n",
            6,
            note="a change under a condition that falls through to the use",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        submissions = [site for site in model.calls_by_tail.get("remote", ()) if isinstance(site.node.func, cst.Attribute)]
        if not submissions:
            return
        puts = model.calls_to("ray.put")
        reported: set[int] = set()
        for put in _puts(model, puts):
            change = _first_change(model, put)
            if change is None or id(change.node) in reported:
                continue
            use = _later_use(model, put, change, submissions)
            if use is None or _put_again(model, put, change.index, use.index, puts):
                continue
            if not _reaches(_body_scope(put.site.scope).node, change.statement, use.node):
                continue
            reported.add(id(change.node))
            name, ref = put.value.name, put.ref.name
            put_at = ctx.line_of(put.site.node)
            if change.by is not None:
                message = f"`{name}` is changed by `{change.by}()` after `ray.put` on {put_at}, so `{ref}` is stale"
                if len(message) > MAX_MESSAGE:
                    message = f"`{name}` is changed by `{change.by}()` after its `ray.put`, so `{ref}` is stale"
            else:
                message = f"`{name}` is changed after `ray.put` on {put_at}, so `{ref}` still holds the old value"
            ctx.report(change.node, message, facts=PutFacts(name, ref))


def _puts(model: SemanticModel, puts: tuple[CallSite, ...]) -> Iterator[_Put]:
    """`ref = ray.put(name)`: the put of a plain name whose ref is bound to a plain name."""
    for site in puts:
        args = site.node.args
        if not args or args[0].keyword is not None or args[0].star or not isinstance(args[0].value, cst.Name):
            continue
        statement = site.statement
        if not isinstance(statement, (cst.Assign, cst.AnnAssign)) or statement.value is not site.node:
            continue
        value = model.reaching_binding(args[0].value.value, site.scope, site.index)
        if value is None or value.scope is not _body_scope(site.scope):
            continue  # a global or enclosing name: other code may change or rebind it
        ref = next(
            (b for bindings in site.scope.bindings.values() for b in bindings if b.value is site.node and b.kind == "assign"),
            None,
        )
        if ref is not None:
            yield _Put(site, value, ref)


def _first_change(model: SemanticModel, put: _Put) -> _Change | None:
    """The first in-place change of the object put, in the same function after the put, while its name still holds it."""
    name, body = put.value.name, _body_scope(put.site.scope)
    changes: list[_Change] = []

    def holds_object(scope: Scope, at: int) -> bool:
        return at > put.site.index and _body_scope(scope) is body and model.reaching_binding(name, scope, at) is put.value

    for store in model.stores:
        if store.kind != "del" and root_name(store.target) == name and holds_object(store.scope, store.index):
            changes.append(_Change(store.statement, store.statement, store.index))
    for site in model.calls:
        func = site.node.func
        if not isinstance(func, cst.Attribute) or root_name(func.value) != name or site.statement is None:
            continue
        method = func.attr.value
        changing = method in DATA_MUTATORS or (method.endswith("_") and not method.startswith("_")) or _in_place(site.node)
        if changing and holds_object(site.scope, site.index):
            changes.append(_Change(site.node, site.statement, site.index))
    for function in CHANGING_FUNCTIONS:
        for site in model.calls_to(function):
            args = site.node.args
            first = args[0].value if args and args[0].keyword is None else None
            if isinstance(first, cst.Name) and first.value == name and site.statement is not None and holds_object(site.scope, site.index):
                changes.append(_Change(site.node, site.statement, site.index))
    for site in model.calls:  # a function of the module that changes the object it is handed
        callee = _function_called(model, site)
        positions = changed_parameters(model, callee) if callee is not None else frozenset()
        passed = {i for i, arg in enumerate(site.node.args) if not arg.keyword and not arg.star and is_name(arg.value, name)}
        if callee is not None and positions & passed and site.statement is not None and holds_object(site.scope, site.index):
            changes.append(_Change(site.node, site.statement, site.index, callee.node.name.value))
    if _mutable_container(model, put.value):
        for binding in body.bindings.get(name, ()):
            if binding.kind == "augassign" and binding.statement is not None and holds_object(body, binding.index):
                changes.append(_Change(binding.statement, binding.statement, binding.index))
    return min(changes, key=lambda change: change.index, default=None)


def _function_called(model: SemanticModel, site: CallSite) -> FunctionInfo | None:
    """The module-level function of this module that `site` calls by name (`update_policy(policy, xp)`)."""
    func = site.node.func
    if not isinstance(func, cst.Name):
        return None
    binding = model.reaching_binding(func.value, site.scope, site.index)
    if binding is None or binding.kind != "def" or not isinstance(binding.node, cst.FunctionDef):
        return None
    info = model.function_info(binding.node)
    return info if info is not None and info.parent_scope is model.module_scope else None


def _in_place(call: cst.Call) -> bool:
    """`df.dropna(inplace=True)`."""
    return any(
        arg.keyword is not None and arg.keyword.value == "inplace" and isinstance(arg.value, cst.Name) and arg.value.value == "True"
        for arg in call.args
    )


def _mutable_container(model: SemanticModel, binding: Binding) -> bool:
    """Whether the name was bound to a list, dict or set, a numpy array or a tensor, on which `+=` works in place."""
    value = binding.value
    if binding.kind != "assign" or value is None:
        return False
    if isinstance(value, (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)):
        return True
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Name) and value.func.value in CONTAINER_MAKERS:
        return True
    qualified = model.qualified_name(value.func, binding.scope, binding.index)
    return qualified in NUMPY_MAKERS or qualified in TENSOR_MAKERS


def _later_use(model: SemanticModel, put: _Put, change: _Change, submissions: list[CallSite]) -> CallSite | None:
    """The first `.remote(...)` call after the change, in the same function, that is given the ref; or,
    when a loop that the put is outside of holds both, one earlier in that loop (the next iteration's)."""
    body = _body_scope(put.site.scope)
    uses = [
        site
        for site in submissions
        if _body_scope(site.scope) is body
        and any(_names(arg.value, put.ref.name) for arg in site.node.args)
        and model.reaching_binding(put.ref.name, site.scope, site.index) is put.ref
    ]
    later = next((site for site in uses if site.index > change.index), None)
    if later is not None:
        return later
    loops = [loop for loop in model.loops if loop.contains_index(change.index) and not loop.contains_index(put.site.index)]
    return next((site for site in uses if put.site.index < site.index and any(loop.contains_index(site.index) for loop in loops)), None)



def _names(expr: cst.CSTNode, name: str) -> bool:
    return any(isinstance(node, cst.Name) and node.value == name for node in iter_subtree(expr, into_functions=False))


def _put_again(model: SemanticModel, put: _Put, after: int, before: int, puts: tuple[CallSite, ...]) -> bool:
    """Whether the same name is put again between the change and the use: versioned snapshots."""
    name = put.value.name
    for site in puts:
        args = site.node.args
        if after < site.index < before and args and isinstance(args[0].value, cst.Name) and args[0].value.value == name:
            return True
    return False


def _body_scope(scope: Scope) -> Scope:
    """The scope whose statements run in order around `scope`: comprehensions run inside their function."""
    while scope.kind == "comprehension" and scope.parent is not None:
        scope = scope.parent
    return scope


def _reaches(root: cst.CSTNode, change: cst.CSTNode, use: cst.CSTNode) -> bool:
    """Whether the statement `change` can be followed by `use` in one run: they are not in different branches
    of an `if`, `try` or `match`, and no block between the change and the branch point leaves after it."""
    change_path, use_path = path_to(root, change, into_functions=False), path_to(root, use, into_functions=False)
    if change_path is None or use_path is None:
        return False
    common = 0
    while common < min(len(change_path), len(use_path)) and change_path[common] is use_path[common]:
        common += 1
    if common == 0:
        return False
    branch_point = change_path[common - 1]
    if isinstance(branch_point, (cst.If, cst.Try, cst.TryStar, cst.Match)):
        return False  # the change and the use sit in different parts of it
    for depth in range(common, len(change_path) - 1):
        block, inside = change_path[depth], change_path[depth + 1]
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            statements = list(block.body)
            position = next((i for i, s in enumerate(statements) if s is inside), len(statements))
            if any(_leaves(s) for s in statements[position + 1 :]):
                return False
    return True


def _leaves(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return any(isinstance(small, _EXITS) for small in statement.body)
    return isinstance(statement, _EXITS)
