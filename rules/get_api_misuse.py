"""RAY070 get-api-misuse: `ray.get` called with arguments that Ray 2.60 rejects, or that do not do what they say."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.analyses.ref_arguments import LITERAL_KINDS, item_problem, non_list_collection, non_ref_literal
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import (
    AFTER_ALL,
    Binding,
    CallSite,
    FunctionInfo,
    Scope,
    block_statements,
    child_nodes,
    is_generator,
    is_name,
    iter_subtree,
    literal_number,
    literal_string,
)
from ray_lint.ray_api import declared_num_returns, first_argument, signature_problem
from ray_lint.rule import Context, Invalid, Rule, Valid

GET_KEYWORDS = ("object_refs", "timeout", "_use_object_store")
MAX_FOLLOW = 8  # how many names, lists, loops and helpers a fetched value is followed through
KEEPS_ELEMENTS = ("sorted", "list")  # builtins whose result holds the elements of their argument
# Builtins that read a list without changing or keeping it, and list methods that add nothing but what
# `.append` adds (whose values are checked).
READS_LIST = ("len", "sorted", "list", "enumerate", "zip", "reversed", "print", "sum", "any", "all", "min", "max")
KEEPS_LIST_METHODS = ("append", "sort", "copy", "index", "count", "reverse")


def target_function(model: SemanticModel, submission: Submission) -> cst.FunctionDef | None:
    """The function a task or actor-method submission runs, when the module defines it."""
    remote = submission.remote
    if remote is None:
        return None
    if submission.kind == "task" and isinstance(remote.target, cst.FunctionDef):
        return remote.target
    if submission.kind == "actor-method" and remote.cls is not None and submission.method is not None:
        method = model.method(remote.cls, submission.method)
        return method.node if method is not None else None
    return None


def submitted_call(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> cst.Call | None:
    """`f.remote(...)` itself, or the `.remote(...)` call a name was last assigned."""
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.Call):
            return None
        expr = binding.value
    return expr if isinstance(expr, cst.Call) else None


class FetchedValues:
    """Which values `ray.get` already fetched, as far as the module shows: a `ray.get(...)` result, a name
    or a loop variable that holds one, and lists that hold only such values (a list display, a
    comprehension, `sorted(...)`, or a list filled by `.append`, also through a helper of the module it is
    handed to). With a `position`, the elements are tuples whose item at that position is such a value
    (`results.append((rank, value))` read back as `for _, value in results`). One per model: it
    remembers which functions return fetched values."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.returns: dict[int, bool] = {}

    def returned_by(self, caller: FunctionInfo, call: cst.Call) -> FunctionInfo | None:
        """The helper of this module (or method of the caller's class) that `call` runs, when every
        `return` of it gives values `ray.get` fetched: it waited itself, and hands back no ref."""
        callee = self.model.local_callee(caller, call)
        if callee is None or callee.is_async or is_generator(callee.node):
            return None
        key = id(callee.node)
        if key not in self.returns:
            self.returns[key] = False  # while it is asked: a recursive helper proves nothing
            returns = [n for n in iter_subtree(callee.node.body, into_functions=False) if isinstance(n, cst.Return)]
            body = block_statements(callee.node.body)
            self.returns[key] = bool(returns) and all(
                r.value is not None and self._returned(r.value, callee, body if r is body[-1] else None) for r in returns
            )
        return callee if self.returns[key] else None

    def _returned(self, value: cst.BaseExpression, callee: FunctionInfo, body: list[cst.CSTNode] | None) -> bool:
        """What a `return` gives holds fetched values. A returned name (a `return` has no event of its own
        to find the binding that reaches it) counts when every binding of it that may reach the `return`
        does: for the body's last statement (`body` holds the body's statements), from its last assignment
        in the body itself (not under a branch or a loop) on; for any other `return`, all of them."""
        if not isinstance(value, cst.Name):
            return self.holds(value, callee.scope, AFTER_ALL, None, 0)
        bindings = callee.scope.bindings.get(value.value, [])
        if body is not None:  # the body's last statement: `body` is the body's statements
            base = max((i for i, b in enumerate(bindings) if b.kind == "assign" and any(b.statement is s for s in body)), default=0)
            bindings = bindings[base:]
        return bool(bindings) and all(self._bound(b, None, 0) for b in bindings)

    def holds(self, expr: cst.BaseExpression, scope: Scope, at: int, position: int | None, depth: int) -> bool:
        """Whether `expr` holds fetched values (`position` None), or is a list of tuples whose item at
        `position` is one."""
        model = self.model
        if depth > MAX_FOLLOW:
            return False
        if isinstance(expr, cst.Call):
            site = model.call_site(expr)
            if site is None:
                return False
            if model.call_name(site) == "ray.get":
                return position is None
            func = expr.func
            keeps = isinstance(func, cst.Name) and func.value in KEEPS_ELEMENTS and model.reaching_binding(func.value, scope, at) is None
            return keeps and len(expr.args) >= 1 and expr.args[0].keyword is None and not expr.args[0].star and self.holds(
                expr.args[0].value, site.scope, site.index, position, depth + 1
            )
        if isinstance(expr, cst.List):
            items = [e for e in expr.elements if isinstance(e, cst.Element)]
            return bool(items) and len(items) == len(expr.elements) and all(self._item(e.value, scope, at, position, depth + 1) for e in items)
        if isinstance(expr, cst.ListComp):
            inner = model.comprehension_scope(expr)
            return inner is not None and self._item(expr.elt, inner, AFTER_ALL, position, depth + 1)
        if isinstance(expr, cst.Name):
            binding = model.reaching_binding(expr.value, scope, at)
            return binding is not None and self._bound(binding, position, depth + 1)
        return False

    def _item(self, expr: cst.BaseExpression, scope: Scope, at: int, position: int | None, depth: int) -> bool:
        """An element of such a list: a fetched value, or a tuple with one at `position`."""
        if position is None:
            return self.holds(expr, scope, at, None, depth)
        if not isinstance(expr, cst.Tuple) or position >= len(expr.elements):
            return False
        if any(not isinstance(e, cst.Element) for e in expr.elements):
            return False
        return self.holds(expr.elements[position].value, scope, at, None, depth)

    def _bound(self, binding: Binding, position: int | None, depth: int) -> bool:
        if binding.kind == "loop-target":
            return position is None and self._drawn(binding, depth)
        if binding.kind != "assign" or binding.value is None:
            return False
        value = binding.value
        empty = isinstance(value, cst.List) and not value.elements
        if not empty and not self.holds(value, binding.scope, binding.index, position, depth):
            return False
        if not isinstance(value, (cst.List, cst.ListComp)):
            return True
        fills = self._fills(binding, position, depth)  # a list the code builds may get refs added later
        return fills is not None and (fills > 0 or not empty)  # `ray.get([])` returns `[]`: no finding

    def _drawn(self, binding: Binding, depth: int) -> bool:
        """A loop variable drawn from a list of fetched values (`for v in values`), or from one of tuples
        at the variable's place in the target (`for _, v in sorted(results)`)."""
        loop = binding.loop.node if binding.loop is not None else None
        if isinstance(loop, cst.For):
            clauses: list[tuple[cst.BaseExpression, cst.BaseExpression, Scope]] = [(loop.target, loop.iter, binding.scope)]
        elif isinstance(loop, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            clauses, clause = [], loop.for_in
            while clause is not None:
                where = binding.scope.parent if clause is loop.for_in and binding.scope.parent is not None else binding.scope
                clauses.append((clause.target, clause.iter, where))
                clause = clause.inner_for_in
        else:
            return False
        for target, iterable, scope in clauses:
            if target is binding.node:
                return self.holds(iterable, scope, binding.index, None, depth + 1)
            if isinstance(target, cst.Tuple) and all(isinstance(e, cst.Element) for e in target.elements):
                place = next((i for i, e in enumerate(target.elements) if e.value is binding.node), None)
                if place is not None:
                    return self.holds(iterable, scope, binding.index, place, depth + 1)
        return False

    def _fills(self, binding: Binding, position: int | None, depth: int) -> int | None:
        """How many places add values to what a name holds (a list, or the parameter of a helper it is
        handed to), when each adds a fetched one; None when a ref may get in. Every use of the name in
        the function, nested functions included, must append a fetched value, read the value without
        changing it, or hand it to a helper of the module that does the same."""
        model = self.model
        function = binding.scope.function
        info = model.function_info(function.node) if function is not None and function.kind == "function" else None  # type: ignore[arg-type]
        if info is None or depth > MAX_FOLLOW:
            return None
        appends = model.appends_to(binding)
        if not all(self._item(value, site.scope, site.index, position, depth + 1) for site, value in appends):
            return None
        fills = len(appends)
        for parent, grandparent in _uses(info.node.body, binding.name):
            site = model.call_site(grandparent) if isinstance(grandparent, cst.Call) else None
            if _reads_only(parent, grandparent) or (site is not None and model.reaching_binding(binding.name, site.scope, site.index) is not binding):
                continue  # a read, or a call on what another binding of the name holds
            handed = self._handed(info, grandparent, parent, position, depth + 1) if isinstance(parent, cst.Arg) and isinstance(grandparent, cst.Call) else None
            if handed is None:
                return None
            fills += handed
        return fills

    def _handed(self, caller: FunctionInfo, call: cst.Call, arg: cst.Arg, position: int | None, depth: int) -> int | None:
        """The fills of the value handed to a helper of the module, through its parameter (see `_fills`)."""
        callee = self.model.local_callee(caller, call)
        if callee is None or any(a.star for a in call.args):
            return None
        params = callee.node.params
        positional = [*params.posonly_params, *params.params]
        if arg.keyword is not None:
            param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == arg.keyword.value), None)
        else:
            bound_self = isinstance(call.func, cst.Attribute) and not any(is_name(d.decorator, "staticmethod") for d in callee.node.decorators)
            place = next(i for i, a in enumerate(call.args) if a is arg) + (1 if bound_self else 0)
            param = positional[place] if place < len(positional) else None
        bindings = callee.scope.bindings.get(param.name.value, []) if param is not None else []
        if len(bindings) != 1 or bindings[0].kind != "param":
            return None
        return self._fills(bindings[0], position, depth)


def _uses(body: cst.CSTNode, name: str) -> Iterator[tuple[cst.CSTNode, cst.CSTNode | None]]:
    """Each occurrence of the name under `body`, nested functions included, as (its parent, the parent's
    parent)."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(body, None)]
    while stack:
        node, parent = stack.pop()
        for child in child_nodes(node):
            if isinstance(child, cst.Name) and child.value == name:
                if not (isinstance(node, cst.Attribute) and child is node.attr or isinstance(node, cst.Arg) and child is node.keyword):
                    yield node, parent
            else:
                stack.append((child, node))


def _reads_only(parent: cst.CSTNode, grandparent: cst.CSTNode | None) -> bool:
    """An occurrence of a list's name that binds it, or reads the list without changing it or letting
    it reach code that could: a test, a loop's iterable, a `return`, `len(...)`, or `.append(...)`
    (whose values the caller checks)."""
    if isinstance(parent, (cst.AssignTarget, cst.Param, cst.Return, cst.For, cst.CompFor, cst.If, cst.While)):
        return True
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.UnaryOperation, cst.BooleanOperation)):
        return True
    if isinstance(parent, cst.Attribute):
        return parent.attr.value in KEEPS_LIST_METHODS and isinstance(grandparent, cst.Call) and grandparent.func is parent
    return (
        isinstance(parent, cst.Arg)
        and isinstance(grandparent, cst.Call)
        and isinstance(grandparent.func, cst.Name)
        and grandparent.func.value in READS_LIST
    )


# How the model builds what the finding passes instead of a ref or a list, by the rule's words for it
# (the first whose words begin the finding's; a tuple for the others).
NOT_A_REF = {
    "a tuple": "tuple(refs)",
    "a set": "set(refs)",
    "a frozenset": "frozenset(refs)",
    "a dict view": "dict(enumerate(refs)).values()",
    "a dict": "dict(enumerate(refs))",
    "a generator expression": "(r for r in refs)",
    "a `map` iterator": "map(lambda r: r, refs)",
    "a `zip` iterator": "zip(refs)",
    "an iterator": "iter(refs)",
    "a number": "5",
    "a string": "'model-weights'",
    "bytes": "b'model-weights'",
    "a bool": "True",
    "None": "None",
}
MODEL = """
@ray.remote
def load(i):
    time.sleep(0.1)
    return i

@ray.remote
def stream(n):
    for i in range(n):
        yield i

refs = [load.remote(i) for i in range(2)]
values = {call}
if isinstance(values, ray.ObjectRefGenerator):
    __ray_lint_evidence__ = {{"wrong": f"`{call}` returned the generator itself, {{values!r}}, not its values"}}
else:
    __ray_lint_result__ = values
    __ray_lint_evidence__ = {{"right": f"it returned {{values!r}}"}}
"""
# A driver of its own (Ray aborts it), connected to the cluster, that gets a task still running.
ABORT = """
import subprocess
import sys

DRIVER = '''
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)

@ray.remote
def train():
    time.sleep(2)
    return "trained"

print(ray.get(train.remote(), timeout={timeout}), flush=True)
'''
address = ray.get_runtime_context().gcs_address
done = subprocess.run([sys.executable, "-c", DRIVER, address], capture_output=True, text=True, timeout=60)
said = [line[line.index("Check failed"):].strip() for line in done.stderr.splitlines() if "Check failed" in line]
if done.returncode != 0 and said:
    __ray_lint_evidence__ = {{
        "wrong": f"a driver calling `ray.get(ref, timeout={timeout})` on a running task died (exit status "
        f"{{done.returncode}}, no Python exception) on Ray's failed check: {{said[0]}}"
    }}
elif done.returncode != 0:
    raise RuntimeError(done.stderr.strip().splitlines()[-1])
else:
    __ray_lint_evidence__ = {{"right": f"`ray.get(ref, timeout={timeout})` returned {{done.stdout.strip()!r}}"}}
"""


@dataclass(frozen=True)
class GetMisuse:
    """What the flagged `ray.get` call gets wrong; `detail` is what it was given, the keyword or the timeout."""

    kind: Literal["positional", "keyword", "generator", "not-ref", "item", "timeout", "fetched"]
    detail: str = ""


class GetApiMisuseExperiment(ReproductionExperiment[GetMisuse]):
    """The same misuse as the finding (a tuple or a literal, a list holding a literal or a list, a positional
    timeout or an unknown keyword, an ObjectRefGenerator) passed to `ray.get` on small tasks, against the
    valid call. A negative timeout runs in a driver of its own, since Ray aborts the process."""

    facts_type = GetMisuse
    shares_driver = True
    expected = (
        r"Invalid type of object refs|Attempting to call `get` on the value"
        r"|get\(\) takes 1 positional argument|get\(\) got an unexpected keyword"
    )

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        if facts.kind == "timeout":
            return Plan(
                Variant("as flagged", script(ABORT.format(timeout=facts.detail))),
                Variant("timeout=5", script(ABORT.format(timeout=5))),
                "modelled",
                f"a driver of its own calling `ray.get(ref, timeout={facts.detail})` on a 2 s task, and `timeout=5`",
            )
        flagged, fixed = self._calls(facts)
        return Plan(
            Variant("as flagged", script(MODEL.format(call=flagged))),
            Variant("valid call", script(MODEL.format(call=fixed))),
            "modelled",
            f"`{flagged}` on small tasks, and `{fixed}`",
        )

    def _calls(self, facts: GetMisuse) -> tuple[str, str]:
        """The flagged call and the valid one, in the model's names (`refs`, a list of two refs)."""
        if facts.kind == "positional":
            return "ray.get(refs, 10)", "ray.get(refs, timeout=10)"
        if facts.kind == "keyword":
            return f"ray.get(refs, {facts.detail or 'timeout_s'}=10)", "ray.get(refs, timeout=10)"
        if facts.kind == "generator":
            return "ray.get(stream.remote(3))", "ray.get(list(stream.remote(3)))"
        if facts.kind == "item" and not facts.detail.startswith(LITERAL_KINDS):  # a collection in the list
            return "ray.get([refs])", "ray.get(refs)"
        if facts.kind == "item":
            return "ray.get([refs[0], 0])", "ray.get([refs[0]])"
        if facts.kind == "fetched":
            return "ray.get(ray.get(refs))", "ray.get(refs)"
        given = next((expr for words, expr in NOT_A_REF.items() if facts.detail.startswith(words)), "tuple(refs)")
        return f"ray.get({given})", "ray.get(refs)"


class GetApiMisuse(Rule):
    code = "RAY070"
    name = "get-api-misuse"
    message = "`ray.get` is called with an argument Ray rejects: it takes one ObjectRef or a list of them"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("ray.get(", "import ray as", "from ray import")
    also_tokens = ("get(",)
    experiment = GetApiMisuseExperiment()
    docs = """
## What it does
Finds calls to `ray.get` (through any alias) whose arguments Ray 2.60 rejects or mishandles, in
the cases the source shows literally:
- a tuple, set, dict, generator expression, `tuple(...)`, `set(...)`, `map(...)`, `zip(...)`,
  `d.values()` of a dict (or a name assigned one of these once) instead of a list;
- a literal that cannot be an ObjectRef (`ray.get(5)`, `ray.get("key")`, `ray.get(None)`), or a
  list display holding one (`ray.get([ref, 0])`) or holding a collection: the list of refs wrapped
  in another (`ray.get([refs])`, where `refs` is a list display or comprehension assigned once);
- a second positional argument (`ray.get(ref, 10)`: `timeout` is keyword-only), or a keyword
  `ray.get` does not have (`timeout_s=`, `num_returns=`);
- a negative literal `timeout` other than `-1`;
- the `ObjectRefGenerator` of a generator task or actor method (`ray.get(gen.remote())`, or a
  name assigned one), when the module shows it is a streaming generator;
- what a helper of the module (or a method of the same class) returns, when every `return` of it
  gives values it already fetched with `ray.get` (`return ray.get(refs)`, `[ray.get(r) for r in
  refs]`, or a list filled with `.append(ray.get(ref))`, also by a helper the list is handed to and
  read back as `[v for _, v in sorted(results)]`): `ray.get(self._run_remote(fn))`.

## Why is this bad?
`ray.get` (`ray/_private/worker.py` in Ray 2.60) accepts exactly one `ObjectRef` or a `list` of
them, with `timeout` as a keyword-only argument:
- any other container raises `ValueError: Invalid type of object refs, <class 'tuple'>, is given.
  'object_refs' must either be an ObjectRef or a list of ObjectRefs.`;
- a list holding a non-ref raises `TypeError: Attempting to call `get` on the value 0, which is
  not an ray.ObjectRef.`;
- `ray.get(ref, 10)` raises `TypeError: get() takes 1 positional argument but 2 were given`
  (the timeout was keyword-only in every Ray 2 release), and an unknown keyword raises
  `TypeError: get() got an unexpected keyword argument`;
- a list of values that were already fetched raises the same `TypeError` as soon as it holds one
  value (a helper that waited itself and returned the results, called as if it returned refs);
- a negative `timeout` is passed to the core worker as that many milliseconds; only `-1` means
  "wait forever". With Ray 2.60 on a 2 vCPU machine, `ray.get(ref, timeout=-5)` on a task that is
  still running aborted the whole driver process with a failed C++ check
  (`Check failed: timeout_ms >= 0 || timeout_ms == -1`), not an exception that can be caught;
- an `ObjectRefGenerator` (what a task or actor method that `yield`s returns by default, as
  `num_returns="streaming"`) is returned unchanged, without waiting and without values. Ray's
  generator guide says getting an `ObjectRefGenerator` is not allowed: iterate it and `ray.get`
  each ref, or use `ray.get(list(gen))`.

ray-lint is silent for:
- names whose value it cannot prove (a parameter, an attribute, a name assigned in several
  places, a name assigned `None` first and a ref later);
- `ray.get(list(gen))`, `ray.get(gen.completed())`, and refs taken from a generator;
- a generator task with `num_returns="dynamic"`, where `ray.get(ref)` returns the
  `DynamicObjectRefGenerator` as documented, or with a numeric `num_returns`;
- `d.values()` unless `d` is provably a dict, and calls with `*args`;
- a helper that returns refs on some path (`return refs` next to `return ray.get(refs)`), returns a
  name that holds values only under a condition, or builds a list that also gets refs, or that it
  hands to code the module does not show (which may add refs); a helper nothing fills returns `[]`,
  which `ray.get` accepts;
- `timeout=-1`, which Ray accepts as "no timeout".

## Example
```python
refs = (load.remote(path_a), load.remote(path_b))
a, b = ray.get(refs)
result = ray.get(train.remote(config), 600)
```

## Use instead
```python
refs = [load.remote(path_a), load.remote(path_b)]
a, b = ray.get(refs)
result = ray.get(train.remote(config), timeout=600)
```

## Fix safety
There is no automatic fix: whether a tuple should become a list, or a generator should be drained
with `list(...)` or iterated, depends on what the caller does with the result.

## References
- [ray.get](https://docs.ray.io/en/latest/ray-core/api/doc/ray.get.html)
- [Ray generators: `ray.get` on an `ObjectRefGenerator`](https://docs.ray.io/en/latest/ray-core/ray-generator.html)
- [Objects: fetching results](https://docs.ray.io/en/latest/ray-core/objects.html)
"""

    VALID = [
        Valid("import ray\nrefs = [f.remote(i) for i in range(4)]\nvalues = ray.get(refs)\n", "a list of refs"),
        Valid(
            "import ray\nparts = [f.remote(i) for i in range(4)]\nparts = merge_all.remote(parts)\nvalues = ray.get([parts])\n",
            "the name that held a list is rebound to a ref",
        ),
        Valid("import ray\nvalue = ray.get(f.remote(), timeout=10)\n", "timeout by keyword"),
        Valid("import ray\nvalue = ray.get(ref, timeout=-1)\n", "-1 is Ray's 'no timeout'"),
        Valid("import ray\n\ndef fetch(refs):\n    return ray.get(refs)\n", "a parameter: unknown"),
        Valid(
            "import ray\n@ray.remote\ndef gen(n):\n    for i in range(n):\n        yield i\n\n"
            "g = gen.remote(3)\nvalues = ray.get(list(g))\nfirst = [ray.get(ref) for ref in gen.remote(2)]\n",
            "refs taken from the generator",
        ),
        Valid(
            "import ray\n@ray.remote(num_returns='dynamic')\ndef gen(n):\n    for i in range(n):\n        yield i\n\n"
            "refs = ray.get(gen.remote(3))\n",
            "num_returns='dynamic': ray.get returns the DynamicObjectRefGenerator",
        ),
        Valid(
            "import ray\n@ray.remote(num_returns=2)\ndef pair():\n    yield 1\n    yield 2\n\na, b = ray.get(pair.remote())\n",
            "a numeric num_returns on a generator returns a list of refs",
        ),
        Valid("import ray\nresults = ray.get(self.pending.values())\n", "not provably a dict"),
        Valid("import ray\nrefs = (a.remote(), b.remote())\nrefs = list(refs)\nray.get(refs)\n", "rebound to a list"),
        Valid("import ray\nx = ray.get([])\n", "an empty list is accepted"),
        Valid("import cache\ncache.get((1, 2), 5)\n", "another library's get"),
        Valid("import ray\nfrom requests import get\nget('https://example.com', 10)\n", "requests.get, not Ray's"),
        Valid("def get(x, y):\n    return x\nget((1, 2), 3)\n", "no Ray import"),
        Valid("import ray\nray.get(*refs)\nray.get(ref, **kwargs)\n", "unpacked arguments: unknown"),
        Valid(
            "import ray\n\ndef fetch(refs, wait):\n    if wait:\n        return ray.get(refs)\n    return refs\n\n"
            "def run(refs):\n    return ray.get(fetch(refs, False))\n",
            "a helper that returns refs on one path and values on another",
        ),
        Valid(
            "import ray\n\nclass Pool:\n    def results(self, refs, ready):\n        out = refs\n        if ready:\n"
            "            out = ray.get(refs)\n        return out\n\n    def run(self, refs):\n"
            "        return ray.get(self.results(refs, False))\n",
            "a name that holds values only under a condition",
        ),
        Valid(
            "import ray\n\ndef _submit(out, xs):\n    for x in xs:\n        out.append(f.remote(x))\n\n"
            "def launch(xs):\n    refs = []\n    _submit(refs, xs)\n    return refs\n\ndef run(xs):\n    return ray.get(launch(xs))\n",
            "a list a helper fills with refs",
        ),
        Valid(
            "import ray\n\ndef gather(refs, pool):\n    done = [ray.get(refs[0])]\n    pool.add_pending(done, refs[1:])\n"
            "    return done\n\ndef run(refs, pool):\n    return ray.get(gather(refs, pool))\n",
            "a list of values handed to code that may add refs to it",
        ),
    ]
    INVALID = [
        Invalid("import ray\nrefs = (load.remote('a'), load.remote('b'))\na, b = ray.get(refs)\n", 3, note="a tuple through a name"),
        Invalid("import ray\nvalues = ray.get({f.remote(), g.remote()})\n", 2, note="a set"),
        Invalid("import ray\nrefs = [f.remote(i) for i in range(4)]\nvalues = ray.get([refs])\n", 3, note="the list of refs wrapped in another list"),
        Invalid("import ray\nvalues = ray.get(f.remote(x) for x in xs)\n", 2, note="a generator expression"),
        Invalid(
            "import ray\nfutures = {}\nfor name in names:\n    futures[name] = load.remote(name)\nvalues = ray.get(futures.values())\n",
            5,
            note="a dict view",
        ),
        Invalid("import ray as r\nvalues = r.get(tuple(refs))\n", 2, note="tuple(...) through an alias"),
        Invalid("from ray import get\nout = get(map(f.remote, xs))\n", 2, note="a map iterator"),
        Invalid("import ray\nresult = ray.get(train.remote(config), 600)\n", 2, note="positional timeout"),
        Invalid("import ray\nresult = ray.get(ref, timeout_s=60)\n", 2, note="unknown keyword"),
        Invalid("import ray\nresult = ray.get(ref, timeout=-5)\n", 2, note="negative timeout aborts the driver"),
        Invalid("import ray\nresult = ray.get([ref, 0])\n", 2, note="a literal item"),
        Invalid("import ray\nresult = ray.get('model-weights')\n", 2, note="a string"),
        Invalid(
            "import ray\n@ray.remote\ndef stream(n):\n    for i in range(n):\n        yield i\n\n"
            "gen = stream.remote(10)\nvalues = ray.get(gen)\n",
            8,
            note="an ObjectRefGenerator",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Reader:\n    def rows(self):\n        yield from range(3)\n\n"
            "reader = Reader.remote()\nrows = ray.get(reader.rows.remote())\n",
            8,
            note="an actor generator method",
        ),
        Invalid(
            "import ray\n\nclass Pool:\n    def _run(self, xs):\n        return [ray.get(f.remote(x)) for x in xs]\n\n"
            "    def execute(self, xs):\n        return ray.get(self._run(xs))\n",
            8,
            note="a method of the same class that already fetched the values",
        ),
        Invalid(
            "import ray\n\ndef _collect(out, refs):\n    for rank, ref in enumerate(refs):\n        out.append((rank, ray.get(ref)))\n\n"
            "def gather(refs):\n    results = []\n    _collect(results, refs)\n    results = [value for _, value in sorted(results)]\n"
            "    return results\n\ndef main(refs):\n    values = gather(refs)\n    return ray.get(values)\n",
            15,
            note="values a helper appended to the list it was handed, read back from (rank, value) pairs",
        ),
    ]

    def check(self, ctx: Context) -> None:
        for site in ctx.model.calls_to("ray.get"):
            found = self._problem(ctx, site)
            if found is not None:
                ctx.report(found[0], found[1], facts=found[2])

    def _problem(self, ctx: Context, site: CallSite) -> tuple[cst.CSTNode, str, GetMisuse] | None:
        """The first thing Ray would reject in this call, in the order Python and Ray check them."""
        model, call = ctx.model, site.node
        problem = signature_problem(call, "ray.get", GET_KEYWORDS)
        if problem is not None:
            keyword = problem[0].keyword if isinstance(problem[0], cst.Arg) else None
            return problem[0], problem[1], GetMisuse("keyword", keyword.value) if keyword is not None else GetMisuse("positional")
        timeout = next((a for a in call.args if a.keyword is not None and a.keyword.value == "timeout"), None)
        arg = first_argument(call, "object_refs")
        if arg is None:
            return None
        value = arg.value
        generator = self._streaming_generator(model, value, site)
        if generator is not None:
            return arg, f"`ray.get` on the ObjectRefGenerator of {generator} returns it unchanged", GetMisuse("generator")
        kind = non_list_collection(model, value, site.scope, site.index)
        if kind is not None:
            return arg, f"`ray.get` on {kind} raises `ValueError`: it takes a ref or a list of refs", GetMisuse("not-ref", kind)
        kind = non_ref_literal(value)
        if kind is not None:
            return arg, f"`ray.get` on {kind}, which is not an ObjectRef, raises `ValueError`", GetMisuse("not-ref", kind)
        if isinstance(value, cst.List) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
            found = item_problem(model, [e.value for e in value.elements], site.scope, site.index)
            if found is not None:
                return found[0], f"`ray.get` on a list holding {found[1]} raises `TypeError`", GetMisuse("item", found[1])
        helper = self._fetching_helper(model, value, site)
        if helper is not None:
            called = ctx.snippet(helper.func, 30)
            return arg, f"`ray.get` on `{called}()`, which returns values it already fetched, not refs", GetMisuse("fetched")
        if timeout is not None:
            seconds = literal_number(timeout.value)
            if seconds is not None and seconds != -1 and int(seconds * 1000) < -1:
                message = f"`timeout={ctx.snippet(timeout.value, 12)}` makes Ray abort the process if the object is not ready yet"
                return timeout, message, GetMisuse("timeout", ctx.code_for(timeout.value))
        return None

    def _fetching_helper(self, model: SemanticModel, value: cst.BaseExpression, site: CallSite) -> cst.Call | None:
        """The call of a helper of this module (or a method of the same class), made here or assigned to
        the name given, that returns only values it fetched with `ray.get` itself."""
        call = submitted_call(model, value, site.scope, site.index)
        function = site.scope.function
        caller = model.function_info(function.node) if function is not None and function.kind == "function" else None  # type: ignore[arg-type]
        if call is None or caller is None:
            return None
        return call if model.analysis(FetchedValues).returned_by(caller, call) is not None else None

    def _streaming_generator(self, model: SemanticModel, value: cst.BaseExpression, site: CallSite) -> str | None:
        """`the streaming generator task f` when `value` is the ObjectRefGenerator of a generator submission
        in this module whose `num_returns` is left at its default or set to "streaming"."""
        call = submitted_call(model, value, site.scope, site.index)
        if call is None:
            return None
        submission = model.submission(call)
        if submission is None or submission.kind not in ("task", "actor-method"):
            return None
        function = target_function(model, submission)
        if function is None or not is_generator(function):
            return None
        declared = declared_num_returns(model, submission)
        if declared is None or any(literal_string(v) != "streaming" for v in declared):
            return None
        where = "task" if submission.kind == "task" else "actor method"
        return f"the generator {where} `{function.name.value}`"
