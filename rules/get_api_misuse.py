"""RAY070 get-api-misuse: `ray.get` called with arguments that Ray 2.60 rejects, or that do not do what they say."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.analyses.ref_arguments import literal_item_problem, non_list_collection, non_ref_literal
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel, Submission
from ray_lint.python_model import CallSite, Scope, iter_subtree, literal_number, literal_string
from ray_lint.ray_api import declared_num_returns, first_argument, signature_problem
from ray_lint.rule import Context, Invalid, Rule, Valid

GET_KEYWORDS = ("object_refs", "timeout", "_use_object_store")


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


def is_generator(function: cst.FunctionDef) -> bool:
    """Whether the function's own body yields (nested functions and lambdas do not count)."""
    return any(isinstance(node, (cst.Yield,)) for node in iter_subtree(function.body, into_functions=False))


def submitted_call(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> cst.Call | None:
    """`f.remote(...)` itself, or the `.remote(...)` call a name was last assigned."""
    if isinstance(expr, cst.Name):
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.Call):
            return None
        expr = binding.value
    return expr if isinstance(expr, cst.Call) else None

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

    kind: Literal["positional", "keyword", "generator", "not-ref", "item", "timeout"]
    detail: str = ""


class GetApiMisuseExperiment(ReproductionExperiment[GetMisuse]):
    """The same misuse as the finding (a tuple or a literal, a list holding a literal, a positional
    timeout or an unknown keyword, an ObjectRefGenerator) passed to `ray.get` on small tasks, against the
    valid call. A negative timeout runs in a driver of its own, since Ray aborts the process."""

    facts_type = GetMisuse
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
        if facts.kind == "item":
            return "ray.get([refs[0], 0])", "ray.get([refs[0]])"
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
  list display holding one (`ray.get([ref, 0])`);
- a second positional argument (`ray.get(ref, 10)`: `timeout` is keyword-only), or a keyword
  `ray.get` does not have (`timeout_s=`, `num_returns=`);
- a negative literal `timeout` other than `-1`;
- the `ObjectRefGenerator` of a generator task or actor method (`ray.get(gen.remote())`, or a
  name assigned one), when the module shows it is a streaming generator.

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
    ]
    INVALID = [
        Invalid("import ray\nrefs = (load.remote('a'), load.remote('b'))\na, b = ray.get(refs)\n", 3, note="a tuple through a name"),
        Invalid("import ray\nvalues = ray.get({f.remote(), g.remote()})\n", 2, note="a set"),
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
            found = literal_item_problem([e.value for e in value.elements])
            if found is not None:
                return found[0], f"`ray.get` on a list holding {found[1]} raises `TypeError`", GetMisuse("item")
        if timeout is not None:
            seconds = literal_number(timeout.value)
            if seconds is not None and seconds != -1 and int(seconds * 1000) < -1:
                message = f"`timeout={ctx.snippet(timeout.value, 12)}` makes Ray abort the process if the object is not ready yet"
                return timeout, message, GetMisuse("timeout", ctx.code_for(timeout.value))
        return None

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
