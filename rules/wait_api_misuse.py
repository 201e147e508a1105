"""RAY069 wait-api-misuse: `ray.wait` called with arguments that Ray 2.60 rejects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.analyses.ref_arguments import LITERAL_KINDS, item_problem, non_list_collection, non_ref_literal
from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, Scope, iter_subtree, literal_number, literal_string, scope_within
from ray_lint.ray_api import declared_num_returns, first_argument, signature_problem
from ray_lint.rule import Context, Invalid, Rule, Valid

WAIT_KEYWORDS = ("ray_waitables", "num_returns", "timeout", "fetch_local")
# Calls that read a list without changing it: a list only ever passed to these keeps its literal length.
READING_CALLS = ("ray.get", "ray.wait")


def _single_ref(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> cst.Call | None:
    """The `ray.put(...)` or `.remote(...)` call when `expr` provably holds one ObjectRef (or one
    ObjectRefGenerator): a submission whose `num_returns` is left at its default, 1, "streaming" or "dynamic"."""
    origin = model.ref_origin(expr, scope, at)
    if origin is None or origin.kind != "ref" or not isinstance(origin.producer, cst.Call):
        return None
    producer = origin.producer
    site = model.call_site(producer)
    if site is not None and model.call_name(site) == "ray.put":
        return producer
    submission = model.submission(producer)
    if submission is None:
        return None
    declared = declared_num_returns(model, submission)
    if declared is None:
        return None
    for value in declared:
        if literal_number(value) != 1 and literal_string(value) not in ("streaming", "dynamic"):
            return None
    return producer


def _pure_key(expr: cst.BaseExpression) -> str | None:
    """A text that is the same for two expressions that must hold the same value when evaluated side by
    side: names, attribute chains and literal subscripts of them. None for anything that may differ."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = _pure_key(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        base = _pure_key(expr.value)
        if base is None or not isinstance(index, cst.Index):
            return None
        number, text = literal_number(index.value), literal_string(index.value)
        if number is not None:
            return f"{base}[{number!r}]"
        if text is not None:
            return f"{base}[{text!r}]"
    return None


def _fixed_list(model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int) -> cst.List | None:
    """The list display `expr` is, or that a name holds for its whole life: assigned once, in one scope,
    and only ever read by `len(...)`, `ray.get`, `ray.wait` or a `for` loop (so nothing can add or remove items)."""
    if isinstance(expr, cst.List):
        return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else expr
    if not isinstance(expr, cst.Name):
        return None
    binding = model.reaching_binding(expr.value, scope, at)
    if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.List):
        return None
    if any(isinstance(e, cst.StarredElement) for e in binding.value.elements):
        return None
    name = expr.value
    if len(binding.scope.bindings.get(name, ())) != 1:
        return None
    for other in model.scopes:  # rebound through `global`/`nonlocal`, or shadowed, in a nested scope
        if other is not binding.scope and name in other.bindings and scope_within(other, binding.scope):
            return None
    allowed: set[int] = set()
    uses = 0
    for node in iter_subtree(binding.scope.node):
        if isinstance(node, cst.Name) and node.value == name:
            uses += 1
        elif isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.iter, cst.Name) and node.iter.value == name:
            allowed.add(id(node.iter))
        elif isinstance(node, cst.Call) and node.args and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == name:
            site = model.call_site(node)
            is_len = isinstance(node.func, cst.Name) and node.func.value == "len"
            if is_len or (site is not None and model.call_name(site) in READING_CALLS):
                allowed.add(id(node.args[0].value))
    return binding.value if uses == 1 + len(allowed) else None

# How the model builds what the finding passes instead of a list, by the rule's words for it (the first
# whose words begin the finding's; a tuple for the others).
NOT_A_LIST = {
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
    "a string": "'refs'",
    "None": "None",
}
MODEL = """
@ray.remote
def work(i):
    time.sleep(0.1)
    return i

refs = [work.remote(i) for i in range(2)]
ready, pending = {call}
__ray_lint_result__ = (len(ready), len(pending))
__ray_lint_evidence__ = {{"right": f"{{len(ready)}} ready, {{len(pending)}} pending"}}
"""


@dataclass(frozen=True)
class WaitMisuse:
    """What the flagged `ray.wait` call gets wrong; `detail` is the collection, the keyword or the count."""

    kind: Literal["single", "not-list", "timeout", "item", "duplicate", "no-returns", "too-many", "positional", "keyword"]
    detail: str = ""


class WaitApiMisuseExperiment(ReproductionExperiment[WaitMisuse]):
    """The same misuse as the finding (a single ref, a tuple, a negative timeout, a duplicate, a bad
    `num_returns`, a bad argument) passed to `ray.wait` on two small tasks, against the valid call."""

    facts_type = WaitMisuse
    shares_driver = True
    expected = (
        r"wait\(\) expected a list|must be nonnegative|unique ray_waitables|Invalid number of objects to return"
        r"|num_returns cannot be greater|wait\(\) takes 1 positional argument|wait\(\) got an unexpected keyword"
    )

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        flagged, fixed = self._calls(facts)
        return Plan(
            Variant("as flagged", script(MODEL.format(call=flagged))),
            Variant("valid call", script(MODEL.format(call=fixed))),
            "modelled",
            f"`{flagged}` on two small tasks, and `{fixed}`",
        )

    def _calls(self, facts: WaitMisuse) -> tuple[str, str]:
        """The flagged call and the valid one, in the model's names (`refs`, a list of two refs)."""
        if facts.kind == "single":
            return "ray.wait(refs[0])", "ray.wait([refs[0]])"
        if facts.kind == "not-list":
            given = next((expr for words, expr in NOT_A_LIST.items() if facts.detail.startswith(words)), "tuple(refs)")
            return f"ray.wait({given})", "ray.wait(refs)"
        if facts.kind == "timeout":
            return f"ray.wait(refs, timeout={facts.detail or '-1'})", "ray.wait(refs, timeout=None)"
        if facts.kind == "item" and not facts.detail.startswith(LITERAL_KINDS):  # a collection in the list
            return "ray.wait([refs])", "ray.wait(refs)"
        if facts.kind == "item":
            return "ray.wait([refs[0], 0])", "ray.wait([refs[0]])"
        if facts.kind == "duplicate":
            return "ray.wait([refs[0], refs[0]])", "ray.wait([refs[0], refs[1]])"
        if facts.kind == "no-returns":
            return f"ray.wait(refs, num_returns={facts.detail or '0'})", "ray.wait(refs, num_returns=1)"
        if facts.kind == "too-many":
            return "ray.wait(refs, num_returns=3)", "ray.wait(refs, num_returns=len(refs))"
        if facts.kind == "positional":
            return "ray.wait(refs, 1)", "ray.wait(refs, num_returns=1)"
        return f"ray.wait(refs, {facts.detail or 'num_return'}=1)", "ray.wait(refs, num_returns=1)"


class WaitApiMisuse(Rule):
    code = "RAY069"
    name = "wait-api-misuse"
    message = "`ray.wait` is called with arguments Ray rejects: not a list of unique refs, a bad count or timeout"
    severity = Severity.ERROR
    category = "api-misuse"
    tokens = ("ray.wait(", "import ray as", "from ray import")
    also_tokens = ("wait(",)
    experiment = WaitApiMisuseExperiment()
    docs = """
## What it does
Finds calls to `ray.wait` (through any alias) that Ray 2.60 rejects, in the cases the source
shows literally:
- one ObjectRef instead of a list: `ray.wait(f.remote())`, `ray.wait(ray.put(x))`, or a name
  last assigned one of those;
- a tuple, set, generator expression, `tuple(...)`, `d.values()` of a dict, and so on, instead
  of a list;
- a negative literal `timeout`;
- a list display holding a literal (`ray.wait([ref, 0])`) or a collection: the list of refs
  wrapped in another (`ray.wait([refs])`, where `refs` is a list display or comprehension assigned once);
- the same ref twice in a list display (`ray.wait([a, a])`);
- a literal `num_returns` larger than a list display (or a list assigned once and never
  changed), or `num_returns` of 0 or less;
- a second positional argument (`ray.wait(refs, 1)`: `num_returns` and `timeout` are
  keyword-only) or a keyword `ray.wait` does not have (`num_return=`, or `object_refs=`, the
  parameter's name before it became `ray_waitables`).

## Why is this bad?
`ray.wait` (`ray/_private/worker.py` in Ray 2.60) checks its arguments before waiting:
- a single `ObjectRef` or `ObjectRefGenerator` raises `TypeError: wait() expected a list of
  ray.ObjectRef or ray.ObjectRefGenerator, got a single ray.ObjectRef ...`;
- any other non-list raises the same `TypeError`, `got <class 'tuple'>`, and an item that is not
  a ref raises it with `got list containing <class 'int'>` (`<class 'list'>` for a nested list);
- `timeout < 0` raises `ValueError: The 'timeout' argument must be nonnegative` (unlike
  `ray.get`, where `-1` means "no limit");
- duplicates raise `ValueError: Wait requires a list of unique ray_waitables.`;
- `num_returns <= 0` raises `ValueError: Invalid number of objects to return 0.`, and
  `num_returns > len(list)` raises `ValueError: num_returns cannot be greater than the number
  of ray_waitables provided to ray.wait.` (both only for a non-empty list: an empty list returns
  `([], [])` first);
- `num_returns`, `timeout` and `fetch_local` are keyword-only, so `ray.wait(refs, 1)` raises
  `TypeError: wait() takes 1 positional argument but 2 were given`.

ray-lint is silent for:
- arguments whose value it cannot prove: a parameter, an attribute, a name assigned in several
  places or changed after its assignment (`refs.append(...)`), a list with `*items`;
- a `.remote()` whose `num_returns` may be more than 1 (it returns a list of refs), or whose
  function or actor method the module does not define;
- `num_returns=len(refs)` and other non-literal values, and calls with `*args`.

## Example
```python
ref = preprocess.remote(batch)
ready, _ = ray.wait(ref, timeout=5)

refs = [train.remote(cfg) for cfg in configs[:2]]
done, pending = ray.wait([refs[0], refs[1]], num_returns=3)
```

## Use instead
```python
ref = preprocess.remote(batch)
ready, _ = ray.wait([ref], timeout=5)

done, pending = ray.wait([refs[0], refs[1]], num_returns=2)
```

## Fix safety
There is no automatic fix: the intended list or count is not always clear from the call.

## References
- [ray.wait](https://docs.ray.io/en/latest/ray-core/api/doc/ray.wait.html)
- [Pattern: using ray.wait to limit the number of pending tasks](https://docs.ray.io/en/latest/ray-core/patterns/limit-pending-tasks.html)
- [Anti-pattern: processing results in submission order using ray.get](https://docs.ray.io/en/latest/ray-core/patterns/ray-get-submission-order.html)
"""

    VALID = [
        Valid(
            "import ray\nrefs = [f.remote(i) for i in range(8)]\nwhile refs:\n    done, refs = ray.wait(refs, num_returns=1)\n"
            "    print(ray.get(done))\n",
            "the recommended loop: ray.get after ray.wait",
        ),
        Valid("import ray\nref = f.remote()\nready, _ = ray.wait([ref], timeout=0)\n", "a one-item list, timeout 0"),
        Valid(
            "import ray\n@ray.remote(num_returns=2)\ndef split(x):\n    return x, x\n\nrefs = split.remote(1)\nready, _ = ray.wait(refs)\n",
            "num_returns=2 returns a list of refs",
        ),
        Valid("import ray\n\ndef first_ready(refs):\n    return ray.wait(refs, num_returns=2)[0]\n", "a parameter: length unknown"),
        Valid(
            "import ray\nrefs = [a.remote(), b.remote()]\nrefs.append(c.remote())\nready, _ = ray.wait(refs, num_returns=3)\n",
            "the list grows after its display",
        ),
        Valid("import ray\nready, _ = ray.wait([f.remote(), f.remote()])\n", "two calls make two distinct refs"),
        Valid("import ray\nready, _ = ray.wait([], num_returns=0)\n", "an empty list returns ([], []) before any check"),
        Valid("import ray\nready, _ = ray.wait([*refs, extra], num_returns=5)\n", "starred items: length unknown"),
        Valid("import asyncio\ndone, pending = asyncio.wait({task_a, task_b}, timeout=-1)\n", "asyncio.wait, not Ray's"),
        Valid("import threading\nevent = threading.Event()\nevent.wait(5)\n", "another wait"),
        Valid("ref = f.remote()\nray.wait(ref)\n", "no Ray import"),
        Valid("import ray\nref = preprocess.remote(batch)\nready, _ = ray.wait(ref)\n", "a function defined elsewhere may return several refs"),
        Valid(
            "import ray\nref = f.remote()\nref = [ref]\nready, _ = ray.wait(ref)\n",
            "rebound to a list before the wait",
        ),
        Valid(
            "import ray\nrefs = [f.remote(i) for i in range(4)]\nfirst = refs[0]\nready, _ = ray.wait([first, refs[1]])\n",
            "items taken out of a list of refs are refs",
        ),
        Valid(
            "import ray\nbatch = [f.remote(i) for i in range(4)]\nbatch = batch[0]\nready, _ = ray.wait([batch], timeout=0)\n",
            "the name that held a list is rebound to one of its refs",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\ndef preprocess(batch):\n    return batch\n\nref = preprocess.remote(b)\nready, _ = ray.wait(ref, timeout=5)\n",
            7,
            note="a single ref",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Worker:\n    def step(self):\n        return 1\n\nw = Worker.remote()\nready, _ = ray.wait(w.step.remote())\n",
            8,
            note="an actor method call makes one ref",
        ),
        Invalid("import ray\nready, _ = ray.wait(ray.put(data))\n", 2, note="ray.put makes one ref"),
        Invalid("import ray\ndone, rest = ray.wait((a.remote(), b.remote()))\n", 2, note="a tuple"),
        Invalid("import ray\ndone, rest = ray.wait(refs, 2)\n", 2, note="num_returns passed by position"),
        Invalid("import ray\ndone, rest = ray.wait(refs, num_return=2)\n", 2, note="keyword typo"),
        Invalid("import ray\ndone, rest = ray.wait(object_refs=refs, num_returns=1)\n", 2, note="the pre-2.x keyword name"),
        Invalid("import ray\ndone, rest = ray.wait(refs, timeout=-1)\n", 2, note="negative timeout"),
        Invalid("import ray\nref = f.remote()\ndone, rest = ray.wait([ref, ref])\n", 3, note="duplicates"),
        Invalid(
            "import ray\npending = [f.remote(i) for i in range(4)]\nready, _ = ray.wait([pending], num_returns=len(pending), timeout=60)\n",
            3,
            note="the list of refs wrapped in another list",
        ),
        Invalid(
            "import ray\nrefs = [train.remote(c) for c in cs]\ndone, rest = ray.wait([refs[0], refs[0]], num_returns=1)\n",
            3,
            note="duplicate subscripts",
        ),
        Invalid("import ray\ndone, rest = ray.wait([a.remote(), b.remote()], num_returns=3)\n", 2, note="more than the list holds"),
        Invalid(
            "import ray\nrefs = [a.remote(), b.remote()]\ndone, rest = ray.wait(\n    refs,\n    num_returns=3,\n)\nprint(len(refs))\n",
            5,
            note="a list assigned once and never changed",
        ),
        Invalid("from ray import wait\ndone, rest = wait(refs, num_returns=0)\n", 2, note="num_returns <= 0"),
        Invalid("import ray\ndone, rest = ray.wait([ref, None])\n", 2, note="a literal item"),
        Invalid(
            "import ray\nref = f.remote()\nrefs = [ref, ref]\n\nready, _ = ray.wait(refs)\n",
            5,
            note="duplicates in a list assigned once: reported at the wait",
        ),
        Invalid(
            "import ray\n@ray.remote\ndef stream(n):\n    yield from range(n)\n\ngen = stream.remote(3)\nready, _ = ray.wait(gen)\n",
            7,
            note="an ObjectRefGenerator is a single waitable too",
        ),
    ]

    def check(self, ctx: Context) -> None:
        for site in ctx.model.calls_to("ray.wait"):
            found = self._problem(ctx, site)
            if found is not None:
                ctx.report(found[0], found[1], facts=found[2])

    def _problem(self, ctx: Context, site: CallSite) -> tuple[cst.CSTNode, str, WaitMisuse] | None:
        """The first thing Python or Ray would reject in this call, in the order they check."""
        model, call = ctx.model, site.node
        problem = signature_problem(call, "ray.wait", WAIT_KEYWORDS)
        if problem is not None:
            keyword = problem[0].keyword if isinstance(problem[0], cst.Arg) else None
            facts = WaitMisuse("keyword", keyword.value) if keyword is not None else WaitMisuse("positional")
            if keyword is not None and keyword.value == "object_refs":
                return problem[0], "`ray.wait` has no keyword `object_refs`: it was renamed `ray_waitables`", facts
            return problem[0], problem[1], facts
        arg = first_argument(call, "ray_waitables")
        if arg is None:
            return None
        value = arg.value
        keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
        single = _single_ref(model, value, site.scope, site.index)
        if single is not None:
            what = f"`{ctx.snippet(value, 30)}`" + ("" if value is single else f" (from {ctx.line_of(single)})")
            return arg, f"`ray.wait` on a single ref {what} raises `TypeError`: it takes a list", WaitMisuse("single")
        kind = non_list_collection(model, value, site.scope, site.index) or non_ref_literal(value)
        if kind is not None:
            return arg, f"`ray.wait` on {kind} raises `TypeError`: it takes a list", WaitMisuse("not-list", kind)
        timeout = keywords.get("timeout")
        seconds = literal_number(timeout.value) if timeout is not None else None
        if timeout is not None and seconds is not None and seconds < 0:
            return (
                timeout,
                f"`timeout={ctx.snippet(timeout.value, 12)}` makes `ray.wait` raise `ValueError`: it has no -1",
                WaitMisuse("timeout", ctx.code_for(timeout.value)),
            )
        items = _fixed_list(model, value, site.scope, site.index)
        elements = [e.value for e in items.elements] if items is not None else []
        named = ""  # for a list held by a name, where it was assigned: the report is at the wait
        if items is not None and items is not value:
            named = f" `{ctx.snippet(value, 16)}` ({ctx.line_of(items)})"
        found = item_problem(model, elements, site.scope, site.index)
        if found is not None:
            return (
                found[0] if not named else arg,
                f"`ray.wait` on a list{named} holding {found[1]} raises `TypeError`",
                WaitMisuse("item", found[1]),
            )
        duplicate = self._duplicate(elements)
        if duplicate is not None:
            return (
                duplicate if not named else arg,
                f"`{ctx.snippet(duplicate, 20)}` is in the list{named} twice, which `ray.wait` rejects",
                WaitMisuse("duplicate"),
            )
        return self._count_problem(ctx, keywords.get("num_returns"), items, named)

    def _duplicate(self, elements: list[cst.BaseExpression]) -> cst.BaseExpression | None:
        seen: set[str] = set()
        for element in elements:
            key = _pure_key(element)
            if key is None:
                continue
            if key in seen:
                return element
            seen.add(key)
        return None

    def _count_problem(
        self, ctx: Context, num_returns: cst.Arg | None, items: cst.List | None, named: str
    ) -> tuple[cst.CSTNode, str, WaitMisuse] | None:
        if num_returns is None:
            return None
        count = literal_number(num_returns.value)
        if count is None:
            return None
        if items is not None and not items.elements:
            return None  # an empty list returns ([], []) before num_returns is checked
        if count <= 0:
            unless = "" if items is not None else " for any non-empty list"
            return (
                num_returns,
                f"`num_returns={ctx.snippet(num_returns.value, 12)}` makes `ray.wait` raise `ValueError`{unless}",
                WaitMisuse("no-returns", ctx.code_for(num_returns.value)),
            )
        if items is not None and count > len(items.elements):
            message = (
                f"`num_returns={ctx.snippet(num_returns.value, 12)}` exceeds the {len(items.elements)} refs "
                f"in the list{named}, which `ray.wait` rejects"
            )
            return num_returns, message, WaitMisuse("too-many")
        return None
