"""RAY053 deprecated-placement-group-options: the legacy `placement_group=`, `placement_group_bundle_index=` and
`placement_group_capture_child_tasks=` options of a remote function or actor class, which Ray 2.60 deprecates
for `scheduling_strategy=PlacementGroupSchedulingStrategy(...)`, and which raise or are ignored beside one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, RemoteOptions, SemanticModel
from ray_lint.python_model import CallSite, dotted_name, literal_number, literal_string
from ray_lint.ray_api import RemoteKind, expected_to_raise, keyword_arg
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

LEGACY = ("placement_group", "placement_group_bundle_index", "placement_group_capture_child_tasks")
STRATEGY = "PlacementGroupSchedulingStrategy"
STRATEGY_MODULE = "ray.util.scheduling_strategies"
# What each legacy option stands for in the experiment's model: the model's placement group, its first bundle.
STAND_IN_VALUE = {"placement_group": "pg", "placement_group_bundle_index": "0", "placement_group_capture_child_tasks": "True"}
Where = Literal["remote", "options"]


def is_default(name: str, value: cst.BaseExpression) -> bool:
    """Whether a legacy option asks for nothing, by Ray 2.60's `_warn_if_using_deprecated_placement_group`: a bundle
    index of -1, a falsy capture flag, `placement_group="default"`. Ray warns about `placement_group=None` too, but
    it is the documented way to keep a task out of its parent's group (Ray's gotchas page), so it counts here."""
    if name == "placement_group_bundle_index":
        return literal_number(value) == -1
    if name == "placement_group_capture_child_tasks":
        return isinstance(value, cst.Name) and value.value in ("False", "None")
    return (isinstance(value, cst.Name) and value.value == "None") or literal_string(value) == "default"


def _is_none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


def _flagged(call: cst.Call) -> list[cst.Arg]:
    """The call's legacy keyword options that ask for a placement group, in source order."""
    return [a for a in call.args if a.keyword is not None and a.keyword.value in LEGACY and not is_default(a.keyword.value, a.value)]


def _made_by_ray_remote(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> bool:
    """Whether `expr` is `ray.remote(X)` or `ray.remote(...)(X)` of a definition the module does not show (an
    imported class), directly or through a name bound to it."""
    scope, at = site.scope, site.index
    for _ in range(8):
        if isinstance(expr, cst.Call):
            inner = expr.func if isinstance(expr.func, cst.Call) else expr
            return model.qualified_name(inner.func, scope, at) == "ray.remote" and bool(expr.args)
        if not isinstance(expr, cst.Name):
            return False
        binding = model.reaching_binding(expr.value, scope, at)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return False
        expr, scope, at = binding.value, binding.scope, binding.index
    return False


def _strategy_is_placement_group(model: SemanticModel, value: cst.BaseExpression, site: CallSite) -> bool | None:
    """Whether a `scheduling_strategy` value is a `PlacementGroupSchedulingStrategy` (Ray then ignores the legacy
    options without a word); None when the code does not show."""
    if literal_string(value) is not None:
        return False
    if not isinstance(value, cst.Call):
        return None
    name = (model.qualified_name(value.func, site.scope, site.index) or dotted_name(value.func) or "").rsplit(".", 1)[-1]
    if name == STRATEGY:
        return True
    return False if name.endswith("SchedulingStrategy") else None


# ------------------------------------------------------------------ the experiment


@dataclass(frozen=True)
class PlacementFacts:
    """The flagged options replayed on a stand-in task `work` or actor `Worker` and the model's placement group
    `pg`: where the code gives them, as given and through a `PlacementGroupSchedulingStrategy`, the stand-in's own
    `ray.remote(...)` options (a decorator's `scheduling_strategy`), and why there is no model, if there is none."""

    kind: RemoteKind
    where: Where
    flagged: str
    fixed: str
    declared: str = ""
    unmodelled: str = ""


PLACEMENT_MODEL = """\
import warnings
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

pg = placement_group([{{"CPU": 1}}])
ray.get(pg.ready(), timeout=60)

{definition}

# Ray gives these deprecations as DeprecationWarnings that Python's default filters hide: raised, the run shows them.
warnings.filterwarnings("error", message=".*placement_group.*deprecated", category=DeprecationWarning)
{submit}
ready, _ = ray.wait([ref], timeout=30)
ray.get(ready)
__ray_lint_evidence__ = {{"right": "it ran in the placement group" if ready else "accepted, still pending"}}
"""
DEFINITIONS = {"task": "def work():\n    return 1", "actor": "class Worker:\n    def ping(self):\n        return 1"}


def _program(facts: PlacementFacts, options: str) -> str:
    """The stand-in given `options` where the code gives them, submitted once in the model's placement group."""
    stand_in = "work" if facts.kind == "task" else "Worker"
    declared = options if facts.where == "remote" else facts.declared
    made = f"ray.remote({declared})({stand_in})" if declared else f"ray.remote({stand_in})"
    submitted = f"Remote.options({options})" if facts.where == "options" else "Remote"
    if facts.kind == "task":
        submit = f"Remote = {made}\nref = {submitted}.remote()"
    else:
        submit = f"Remote = {made}\nhandle = {submitted}.remote()\nref = handle.ping.remote()"
    return script(PLACEMENT_MODEL.format(definition=DEFINITIONS[facts.kind], submit=submit))


class PlacementGroupOptionsExperiment(ReproductionExperiment[PlacementFacts]):
    """The flagged options on a stand-in task or actor in a one-bundle placement group, with Ray's placement-group
    DeprecationWarnings raised as errors; B schedules it with a `PlacementGroupSchedulingStrategy` instead. Always
    the model: in the user's own script the warning is hidden (Ray attributes it to one of its own modules), and a
    run judged by its errors could not see it anyway."""

    facts_type = PlacementFacts
    expected = r"parameter is deprecated\. Use scheduling_strategy=|Placement groups should be specified via the scheduling_strategy"
    beside_others = True  # the warning or error comes at `.options()`, before any scheduling

    def plan(self, subject: Subject) -> Plan | str:
        return self.model(subject)

    def model(self, subject: Subject) -> Plan | str:
        facts = self.facts(subject)
        if facts.unmodelled:
            return facts.unmodelled
        where = "ray.remote({})" if facts.where == "remote" else ".options({})"
        declared = f" (declared with `ray.remote({facts.declared})`)" if facts.declared else ""
        flagged, fixed = where.format(facts.flagged), where.format(facts.fixed)
        return Plan(
            Variant(flagged, _program(facts, facts.flagged)),
            Variant(fixed, _program(facts, facts.fixed)),
            "modelled",
            f"a stand-in {facts.kind}{declared} in a placement group, given `{flagged}`, and `{fixed}`",
        )


# ------------------------------------------------------------------ the rule


class DeprecatedPlacementGroupOptions(Rule):
    code = "RAY053"
    name = "deprecated-placement-group-options"
    message = "Legacy `placement_group` options: use `scheduling_strategy=PlacementGroupSchedulingStrategy(...)`"
    severity = Severity.INFO
    category = "deprecation"
    fixable = True
    # The legacy options as keywords (`placement_group=pg`); not the API's other names (`placement_group(...)`).
    tokens = ("placement_group=", "placement_group =", "placement_group_bundle_index", "placement_group_capture_child_tasks")
    also_tokens = ("ray",)
    experiment = PlacementGroupOptionsExperiment()
    docs = """
## What it does
Finds the legacy placement-group options, `placement_group=`, `placement_group_bundle_index=` and
`placement_group_capture_child_tasks=`, given to `@ray.remote(...)` / `ray.remote(...)(f)` (also
as `from ray import remote`) or to `.options(...)` of a remote function or actor class: one the
file defines, a `ray.remote(SomeClass)` of an imported class, or any `x.options(...).remote(...)`.

It reports the options as Ray 2.60 treats them (`ray/_common/ray_option_utils.py`):
- alone, they are deprecated: each submission gives a `DeprecationWarning`;
- `placement_group=` together with a `scheduling_strategy` (in the same call, or a `.options(...)`
  over the decorator's strategy) makes Ray raise `ValueError` at `ray.remote` / `.options`;
- `placement_group_bundle_index=` or `placement_group_capture_child_tasks=` beside a
  `scheduling_strategy` are ignored: silently when the strategy is a
  `PlacementGroupSchedulingStrategy`, after the warning otherwise.

ray-lint is silent for the values that ask for nothing: `placement_group=None` (the usual way to
keep a task out of its parent's group, although Ray 2.60 warns about it too),
`placement_group="default"`, `placement_group_bundle_index=-1`,
`placement_group_capture_child_tasks=False` or `None`; for options passed through `**kwargs`; for
the arguments of `PlacementGroupSchedulingStrategy(...)` itself; for `.options(...)` of other
objects (a Serve deployment, an actor method); for Ray Data's `map_batches(placement_group=...)`
(RAY115); and for code under `pytest.raises(...)`.

## Why is this bad?
The legacy options have been deprecated since Ray 1.10 added `PlacementGroupSchedulingStrategy`. Ray 2.60
warns with a `DeprecationWarning` at each submission, but attributes it to its own
`ray/_private/auto_init_hook.py`, so Python's default filters hide it even in a script's
`__main__`: the code keeps a deprecated API without anyone seeing a warning. They do not mix with
the new option: with `placement_group=` and any `scheduling_strategy`, Ray raises
`ValueError: Placement groups should be specified via the scheduling_strategy option`; beside a
`scheduling_strategy`, a bundle index or capture flag is dropped, so the task lands in any bundle
or its children leave the group, with no error.

This is an `info` finding: alone, the legacy options still work (ray-lint gives a rule one
severity, so the mixed form that raises is `info` too, its message naming the error). On a project that pins a Ray before 1.10, where
`PlacementGroupSchedulingStrategy` does not exist yet, ignore the rule.

## Example
```python
pg = placement_group([{"CPU": 1}] * 4)
workers = [
    Worker.options(placement_group=pg, placement_group_bundle_index=i).remote()
    for i in range(4)
]
```

## Use instead
```python
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

pg = placement_group([{"CPU": 1}] * 4)
workers = [
    Worker.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)
    ).remote()
    for i in range(4)
]
```

## Fix safety
On `.options(...)` of a remote function or actor class that the file defines, with
`placement_group=` given, the legacy options move into
`scheduling_strategy=PlacementGroupSchedulingStrategy(...)` as they are written, and
`from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy` is added after the
file's first top-level Ray import when the name is not imported yet (one finding per pass adds it;
the next pass fixes the others with it). Ray 2.60 reads the three values from the strategy in the
same code path as from the legacy options (`remote_function.py` and `actor.py`, `_remote`), with
the same defaults (bundle -1, capture `None`), so the fix is safe. It is unsafe on an actor that
may be detached (a `lifetime` that is not `None` or `"non_detached"`): Ray then logs a warning about
restartable detached actors in placement groups, which it skips for the legacy options.

There is no fix when the decorator gives any of these options or a `scheduling_strategy`, or
through `**kwargs` (Ray merges `.options(...)` over them, and the strategy would replace what they
give), on the decorator itself (a `.options(placement_group=...)` elsewhere would then raise),
when the options mix with a `scheduling_strategy` (which one was meant?), or when the import cannot
go after a top-level Ray import.

## References
- [ray.remote (scheduling_strategy)](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
- [Placement groups: schedule tasks and actors](https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html)
- [PlacementGroupSchedulingStrategy](https://docs.ray.io/en/latest/ray-core/api/doc/ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy.html)
"""

    VALID = [
        Valid(
            "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote\nclass A:\n    pass\n\n"
            "a = A.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0,\n"
            "              placement_group_capture_child_tasks=True)).remote()\n",
            "the strategy's own arguments",
        ),
        Valid(
            "import ray\n@ray.remote\ndef inner():\n    pass\n\nref = inner.options(placement_group=None).remote()\n",
            "placement_group=None: the documented opt-out of the parent's group",
        ),
        Valid(
            "import ray\n@ray.remote(placement_group='default', placement_group_bundle_index=-1,\n"
            "            placement_group_capture_child_tasks=False)\ndef f():\n    pass\n",
            "the default values ask for nothing",
        ),
        Valid("import ray\n@ray.remote\ndef f():\n    pass\n\nref = f.options(**opts).remote()\n", "options through **kwargs"),
        Valid(
            "import ray\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    pass\n\n"
            "app = Model.options(placement_group_bundles=[{'CPU': 1}], placement_group_strategy='PACK').bind()\n",
            "a Serve deployment's `.options` (its own placement_group_* keywords)",
        ),
        Valid(
            "import ray\n\nds = ray.data.range(10).map_batches(fn, placement_group=pg)\n",
            "Ray Data's remote args: RAY115",
        ),
        Valid(
            "import ray\nclass Pool:\n    def options(self, **kw):\n        return self\n\npool = Pool().options(placement_group=pg)\n",
            "another class's `.options`",
        ),
        Valid("@ray.remote(placement_group=pg)\ndef f():\n    pass\n", "no `import ray`: not Ray"),
        Valid(
            "import pytest\nimport ray\n\ndef test_mixed():\n    with pytest.raises(ValueError):\n"
            "        f.options(placement_group=pg, scheduling_strategy='SPREAD').remote()\n",
            "a test of Ray's own validation",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\nclass Worker:\n    pass\n\nworkers = [Worker.options(placement_group=pg, placement_group_bundle_index=i).remote() for i in range(4)]\n",
            7,
            fixed=(
                "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote\nclass Worker:\n    pass\n\n"
                "workers = [Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, "
                "placement_group_bundle_index=i)).remote() for i in range(4)]\n"
            ),
            note="an actor per bundle",
        ),
        Invalid(
            "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote\ndef train(x):\n    return x\n\n"
            "ref = train.options(\n    num_cpus=1,\n    placement_group=pg,\n    placement_group_capture_child_tasks=True,\n).remote(1)\n",
            8,
            fixed=(
                "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote\ndef train(x):\n    return x\n\n"
                "ref = train.options(\n    num_cpus=1,\n    scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, "
                "placement_group_capture_child_tasks=True),\n).remote(1)\n"
            ),
            note="multi-line call, strategy already imported",
        ),
        Invalid("from ray import remote\n\n@remote(placement_group=pg)\ndef f():\n    pass\n", 3, note="decorator through an alias: no fix"),
        Invalid(
            "import ray\n\n@ray.remote\ndef f():\n    pass\n\nref = f.options(placement_group=pg, scheduling_strategy='SPREAD').remote()\n",
            7,
            note="mixed: Ray raises ValueError",
        ),
        Invalid(
            "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as PGS\n\n"
            "@ray.remote(scheduling_strategy=PGS(pg))\ndef f():\n    pass\n\nref = f.options(placement_group_bundle_index=1).remote()\n",
            8,
            note="ignored beside the decorator's strategy",
        ),
        Invalid(
            "import ray\nfrom workers import BaseWorker\n\nremote_cls = ray.remote(BaseWorker)\n"
            "w = remote_cls.options(num_cpus=1, placement_group=pg, placement_group_bundle_index=0)\n",
            5,
            note="ray.remote of an imported class: no fix (its options are unknown)",
        ),
        Invalid(
            "import ray\nfrom trainers import train\n\nref = train.options(placement_group=self.pg).remote()\n",
            4,
            note="an imported remote function, submitted at once",
        ),
        Invalid(
            "import ray\n\n@ray.remote(lifetime='detached', max_restarts=-1)\nclass Svc:\n    pass\n\n"
            "s = Svc.options(placement_group=pg)  # one per node\n",
            7,
            fixed=(
                "import ray\nfrom ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy\n\n@ray.remote(lifetime='detached', max_restarts=-1)\nclass Svc:\n    pass\n\n"
                "s = Svc.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg))  # one per node\n"
            ),
            note="detached actor: the fix is unsafe",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.imports_module("ray"):
            return
        expected = expected_to_raise(model)
        for site in model.calls_to("ray.remote"):
            call = site.node
            if id(call) not in expected and not any(a.keyword is None and not a.star for a in call.args):
                remote = model.remote_declared_by(call)
                self._report(ctx, site, "remote", remote.kind if remote is not None else "task", RemoteOptions(None), None)
        submitted = {id(s.node.func.value) for s in model.calls_by_tail.get("remote", ()) if isinstance(s.node.func, cst.Attribute)}
        importing = True  # one fix per pass adds the import; the next pass fixes the others with it
        for site in sorted(model.calls_by_tail.get("options", ()), key=lambda s: s.index):
            func = site.node.func
            if id(site.node) in expected or not isinstance(func, cst.Attribute) or not _flagged(site.node):
                continue
            receiver = func.value
            remote = model.remote_def_of(receiver, site.scope, site.index)
            if remote is None:
                # An actor method's `.options` takes none of these (RAY094); other objects are not Ray's.
                if isinstance(receiver, cst.Attribute) and model.actor_of_handle(receiver.value, site.scope, site.index):
                    continue
                if not (_made_by_ray_remote(model, receiver, site) or id(site.node) in submitted):
                    continue
            declared = remote.options if remote is not None else RemoteOptions(None, has_unpacked=True)
            fix = self._fix(ctx, site, remote, importing)
            if fix is not None and len(fix.replacements) > 1:
                importing = False
            self._report(ctx, site, "options", remote.kind if remote is not None else "task", declared, fix)

    def _report(self, ctx: Context, site: CallSite, where: Where, kind: RemoteKind, declared: RemoteOptions, fix: FixPlan | None) -> None:
        """One finding per call: the options deprecated, refused beside a strategy, or ignored beside one.
        `declared` are the decorator's options, which Ray merges under those of `.options(...)`."""
        call = site.node
        flagged = _flagged(call)
        if not flagged:
            return
        names = tuple(a.keyword.value for a in flagged if a.keyword is not None)
        strategy = keyword_arg(call, "scheduling_strategy")
        value = strategy.value if strategy is not None else declared.values.get("scheduling_strategy")
        if value is not None and _is_none(value):
            value = None
        legacy = ", ".join(f"{name}={STAND_IN_VALUE[name]}" for name in names)
        given = ", ".join(f"{name}={STAND_IN_VALUE[name]}" for name in LEGACY if name in names or name == "placement_group")
        fixed = f"scheduling_strategy=PlacementGroupSchedulingStrategy({given})"
        inherited = strategy is None and value is not None
        is_pg = _strategy_is_placement_group(ctx.model, value, site) if value is not None else None
        replayed = "PlacementGroupSchedulingStrategy(pg)" if is_pg else "'SPREAD'"
        facts = PlacementFacts(kind, where, legacy, fixed, f"scheduling_strategy={replayed}" if inherited else "")
        subject = f"`{names[0]}` is" if len(names) == 1 else "Legacy `placement_group*` options are"
        if value is None:
            ctx.report(call, f"{subject} deprecated: use a `PlacementGroupSchedulingStrategy`", fix, facts=facts)
        elif "placement_group" in names:
            flagged_mix = facts if inherited else PlacementFacts(kind, where, f"{legacy}, scheduling_strategy={replayed}", fixed)
            ctx.report(call, "`placement_group` with a `scheduling_strategy` makes Ray raise `ValueError`", facts=flagged_mix)
        else:
            if not inherited:
                facts = PlacementFacts(kind, where, f"{legacy}, scheduling_strategy={replayed}", fixed)
            if is_pg is not False:
                why = "Ray ignores them without a word" if is_pg else "the strategy's type is not known"
                facts = PlacementFacts(kind, where, facts.flagged, fixed, facts.declared, f"no model: {why}")
            ctx.report(call, f"{subject} ignored beside `scheduling_strategy`", facts=facts)

    def _fix(self, ctx: Context, site: CallSite, remote: RemoteDef | None, importing: bool) -> FixPlan | None:
        """`x.options(placement_group=pg, placement_group_bundle_index=i)` ->
        `x.options(scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i))`,
        when nothing else gives Ray placement-group or strategy options for the call."""
        call = site.node
        if remote is None or remote.options.has_unpacked or any(a.star for a in call.args):
            return None
        if any(name in remote.options.values for name in (*LEGACY, "scheduling_strategy")):
            return None
        placement = keyword_arg(call, "placement_group")
        if keyword_arg(call, "scheduling_strategy") is not None or placement is None or is_default("placement_group", placement.value):
            return None
        named = _strategy_name(ctx, site, importing)
        if named is None:
            return None
        name, import_edit = named
        moved = [a for a in call.args if a.keyword is not None and a.keyword.value in LEGACY]
        inner = ", ".join(f"{a.keyword.value}={ctx.code_for(a.value)}" for a in moved if a.keyword is not None)
        strategy = cst.Arg(
            keyword=cst.Name("scheduling_strategy"), value=cst.parse_expression(f"{name}({inner})"), equal=moved[0].equal
        )
        moved_ids = {id(a) for a in moved}
        kept = [strategy if a is moved[0] else a for a in call.args if a is moved[0] or id(a) not in moved_ids]
        # Commas by position keep a multi-line layout: the last argument takes the original last comma.
        commas = [a.comma for a in call.args]
        args = [arg.with_changes(comma=commas[i] if i < len(kept) - 1 else commas[-1]) for i, arg in enumerate(kept)]
        replacements: list[tuple[cst.CSTNode, str]] = [(call, ctx.code_for(call.with_changes(args=args)))]
        if import_edit is not None:
            replacements.insert(0, import_edit)
        lifetimes = list(remote.option_values("lifetime"))
        lifetime = keyword_arg(call, "lifetime")
        if lifetime is not None:
            lifetimes.append(lifetime.value)
        detached = remote.kind == "actor" and any(not _is_none(v) and literal_string(v) != "non_detached" for v in lifetimes)
        applicability = Applicability.UNSAFE if detached else Applicability.SAFE
        return FixPlan(f"Use `scheduling_strategy={STRATEGY}(...)`", tuple(replacements), applicability)


def _strategy_name(ctx: Context, site: CallSite, importing: bool) -> tuple[str, tuple[cst.CSTNode, str] | None] | None:
    """The name to call `PlacementGroupSchedulingStrategy` by at the call, and the edit that imports it (after the
    first top-level `import ray` / `from ray... import` before the call) when the file does not yet; None when the
    name is bound to something else, a star import may bind it, or there is no such import to follow."""
    model = ctx.model
    if model.qualified_name(cst.Name(STRATEGY), site.scope, site.index) == f"{STRATEGY_MODULE}.{STRATEGY}":
        return STRATEGY, None
    if not importing or model.star_imports or any(STRATEGY in scope.bindings for scope in model.scopes):
        return None
    line = model.position(site.node).start.line
    for statement in model.module.body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        small = statement.body[0]
        if model.position(small).start.line >= line:
            return None
        if _imports_ray(small):
            added = f"from {STRATEGY_MODULE} import {STRATEGY}"
            text = ctx.code_for(small)
            # Before the line when it ends in a comment, which stays with its own import.
            edit = f"{added}\n{text}" if statement.trailing_whitespace.comment is not None else f"{text}\n{added}"
            return STRATEGY, (small, edit)
    return None


def _imports_ray(statement: cst.BaseSmallStatement) -> bool:
    """`import ray` (or `import ray.x`) or an absolute `from ray... import`."""
    if isinstance(statement, cst.Import):
        return any((dotted_name(alias.name) or "").split(".")[0] == "ray" for alias in statement.names)
    if isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None:
        return (dotted_name(statement.module) or "").split(".")[0] == "ray"
    return False
