"""RAY061 class-variable-shared-state: class attributes of an actor class used to share state between actors,
which each run in their own process with their own copy of the class."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    CONTAINER_MUTATORS,
    CallSite,
    FunctionInfo,
    Scope,
    Store,
    iter_subtree,
    literal_string,
    scope_within,
)
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Rule, Valid

_CONDITIONS = (cst.If, cst.While, cst.IfExp, cst.Assert)


@dataclass(frozen=True, eq=False)
class _Write:
    """A write to a class attribute: the attribute, the statement, and how it writes."""

    attr: str
    node: cst.CSTNode
    how: str


class _ActorClass:
    """One actor class: how its methods name the class, what they write to it and what they test."""

    def __init__(self, model: SemanticModel, remote: RemoteDef, code: _MethodCode) -> None:
        assert remote.cls is not None
        self.model = model
        self.remote = remote
        self.code = code
        self.methods = model.remote_functions(remote)
        self.tested = {attr for method in self.methods for attr in self._tested_attributes(method)}

    def is_class(self, expr: cst.BaseExpression, method: FunctionInfo, scope: Scope) -> bool:
        """`Actor` (the class's own name), `type(self)`, `self.__class__`, or `cls` in a classmethod."""
        this = _first_param(method)
        if isinstance(expr, cst.Name):
            if this is not None and expr.value == this and _is_classmethod(method):
                return True
            binding = self.model.reaching_binding(expr.value, scope, AFTER_ALL)
            return binding is not None and binding.kind == "class" and binding.node is self.remote.target
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "type" and len(expr.args) == 1:
            arg = expr.args[0].value
            return this is not None and isinstance(arg, cst.Name) and arg.value == this and not _is_classmethod(method)
        if isinstance(expr, cst.Attribute) and expr.attr.value == "__class__":
            return this is not None and isinstance(expr.value, cst.Name) and expr.value.value == this
        return False

    def class_attribute(self, expr: cst.BaseExpression, method: FunctionInfo, scope: Scope) -> str | None:
        """`count` for `Actor.count`, `type(self).registry[k]`, `cls.items.x`: the class attribute an
        attribute/subscript chain starts from."""
        found = None
        while isinstance(expr, (cst.Attribute, cst.Subscript)):
            if isinstance(expr, cst.Attribute) and self.is_class(expr.value, method, scope):
                found = expr.attr.value
            expr = expr.value
        return found

    def writes(self) -> Iterator[_Write]:
        for method in self.methods:
            this = _first_param(method)
            for store in self.code.stores.get(id(method.scope), ()):
                attr = self.class_attribute(store.target, method, store.scope)
                if attr is None or attr in self.tested:
                    continue
                direct = isinstance(store.target, cst.Attribute) and self.is_class(store.target.value, method, store.scope)
                if direct and store.kind == "assign" and isinstance(store.value, cst.Name) and store.value.value == this:
                    continue  # `Actor._instance = self`: a handle to this process's one instance
                if direct and store.kind == "del":
                    continue
                how = "increments" if store.kind == "augassign" else "sets" if direct else "changes"
                yield _Write(attr, store.statement, how)
            for site in self.code.calls.get(id(method.scope), ()):
                func = site.node.func
                if not isinstance(func, cst.Attribute) or func.attr.value not in CONTAINER_MUTATORS:
                    continue
                attr = self.class_attribute(func.value, method, site.scope)
                if attr is not None and attr not in self.tested:
                    yield _Write(attr, site.statement or site.node, f"calls `{func.attr.value}` on")

    def _tested_attributes(self, method: FunctionInfo) -> set[str]:
        """Attributes named in a condition of the method (`if cls._model is None:`, `hasattr(cls, "x")`): a
        class attribute filled lazily is a per-process cache, which is fine in an actor."""
        found: set[str] = set()
        for node in iter_subtree(method.node.body):
            if isinstance(node, _CONDITIONS):
                for inner in iter_subtree(node.test):
                    if isinstance(inner, cst.Attribute):
                        found.add(inner.attr.value)
                    text = literal_string(inner) if isinstance(inner, cst.BaseExpression) else None
                    if text is not None:
                        found.add(text)
        return found

    def reads(self, attr: str) -> bool:
        """Whether a method reads `attr` through `self`, the class name, `cls` or `type(self)`, or the class body binds it."""
        if self.remote.cls is not None and attr in self.remote.cls.scope.bindings:
            return True
        return attr in self._attributes_named

    @cached_property
    def _attributes_named(self) -> set[str]:
        """Every attribute name the methods use, collected once for all the driver's stores."""
        return {
            node.attr.value for method in self.methods for node in iter_subtree(method.node.body) if isinstance(node, cst.Attribute)
        }


class _MethodCode:
    """The stores and calls in the code of each actor method (its nested functions and comprehensions included),
    indexed once for all actors instead of rescanning the module for every method."""

    def __init__(self, model: SemanticModel, methods: set[int]) -> None:
        self.stores: dict[int, list[Store]] = {}
        self.calls: dict[int, list[CallSite]] = {}
        for store in model.stores:
            for key in _enclosing(store.scope, methods):
                self.stores.setdefault(key, []).append(store)
        for site in model.calls:
            for key in _enclosing(site.scope, methods):
                self.calls.setdefault(key, []).append(site)


def _enclosing(scope: Scope, wanted: set[int]) -> Iterator[int]:
    """The ids of `scope` and the scopes around it that are in `wanted`."""
    current: Scope | None = scope
    while current is not None:
        if id(current) in wanted:
            yield id(current)
        current = current.parent


def _first_param(method: FunctionInfo) -> str | None:
    params = [*method.node.params.posonly_params, *method.node.params.params]
    if not params or _is_staticmethod(method):
        return None
    return params[0].name.value


def _decorator_names(method: FunctionInfo) -> set[str]:
    names = set()
    for decorator in method.node.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Name):
            names.add(expr.value)
        elif isinstance(expr, cst.Attribute):
            names.add(expr.attr.value)
    return names


def _is_classmethod(method: FunctionInfo) -> bool:
    return "classmethod" in _decorator_names(method)


def _is_staticmethod(method: FunctionInfo) -> bool:
    return "staticmethod" in _decorator_names(method)


@dataclass(frozen=True)
class ClassFacts:
    """The class attribute a finding is about, and where it is set."""

    attr: str
    on_wrapper: bool  # the driver sets it on the `ActorClass` (else: an actor's method writes it)


COUNTER_MODEL = """
@ray.remote
class Worker:
    processed = 0

    def work(self):
        Worker.processed += 1

    def total(self):
        return Worker.processed

workers = [Worker.remote() for _ in range(2)]
ray.get([w.work.remote() for w in workers for _ in range(3)], timeout=30)
totals = ray.get([w.total.remote() for w in workers], timeout=30)
if totals == [6, 6]:
    __ray_lint_evidence__ = {{"right": "both actors count all 6 calls"}}
else:
    __ray_lint_evidence__ = {{
        "wrong": f"6 calls over 2 actors each added 1 to a class attribute (standing for `{attr}`), yet the actors count {{totals}}"
    }}
"""

COUNTER_FIX = """
@ray.remote
class Counter:
    def __init__(self):
        self.processed = 0

    def add(self, n):
        self.processed += n

    def total(self):
        return self.processed

@ray.remote
class Worker:
    def __init__(self, counter):
        self.counter = counter

    def work(self):
        ray.get(self.counter.add.remote(1))

counter = Counter.remote()
workers = [Worker.remote(counter) for _ in range(2)]
ray.get([w.work.remote() for w in workers for _ in range(3)], timeout=30)
__ray_lint_evidence__ = {"right": f"one counter actor counts {ray.get(counter.total.remote(), timeout=30)} calls"}
"""

WRAPPER_MODEL = """
@ray.remote
class Worker:
    batch_size = 32

    def __init__(self, batch_size=None):
        if batch_size is not None:
            self.batch_size = batch_size

    def size(self):
        return self.batch_size

{setup}
seen = ray.get(worker.size.remote(), timeout=30)
if seen == 64:
    __ray_lint_evidence__ = {{"right": "the actor uses batch size 64"}}
else:
    __ray_lint_evidence__ = {{
        "wrong": f"the driver set a class attribute (standing for `{attr}`) to 64 on the ActorClass, yet a new actor still has {{seen}}"
    }}
"""


class ClassVariableExperiment(ReproductionExperiment[ClassFacts]):
    """Runs the class attribute's failure: two actors that count calls in a class attribute (the fix:
    one counter actor), or a setting assigned on the `ActorClass` wrapper in the driver (the fix: an
    argument of the constructor)."""

    facts_type = ClassFacts
    shares_driver = True

    def model(self, subject: Subject) -> Plan:
        facts = self.facts(subject)
        if facts.on_wrapper:
            on_wrapper = "Worker.batch_size = 64\nworker = Worker.remote()"
            in_constructor = "worker = Worker.remote(batch_size=64)"
            return Plan(
                Variant("set on the ActorClass", script(WRAPPER_MODEL.format(attr=facts.attr, setup=on_wrapper))),
                Variant("passed to the constructor", script(WRAPPER_MODEL.format(attr=facts.attr, setup=in_constructor))),
                "modelled",
                "the driver sets a class attribute on the decorated actor class, then creates an actor",
            )
        return Plan(
            Variant("class attribute", script(COUNTER_MODEL.format(attr=facts.attr))),
            Variant("one counter actor", script(COUNTER_FIX)),
            "modelled",
            "2 actors of one class each count 3 calls in a class attribute",
        )


class ClassVariableSharedState(Rule):
    code = "RAY061"
    name = "class-variable-shared-state"
    message = "A class attribute of an actor class is used to share state between actors"
    severity = Severity.ERROR
    category = "correctness"
    tokens = ("class ",)
    also_tokens = REMOTE_MADE
    experiment = ClassVariableExperiment()
    docs = """
## What it does
Finds state kept in the class of a `@ray.remote` actor instead of its instances:

- a method writes a class attribute: `Actor.count += 1`, `type(self).registry[key] = value`,
  `self.__class__.seen.add(x)`, `cls.total = ...` in a classmethod;
- the driver sets an attribute on the decorated actor class (`Actor.batch_size = 64`) that the
  class declares or its methods read.

## Why is this bad?
Each actor is its own worker process with its own copy of the class. A class attribute that
one actor changes is not seen by any other actor, so counters, registries and "shared" settings
kept on the class silently diverge (Ray's docs: class variables are not supported for sharing
state between actor instances). And `@ray.remote` replaces the class name in the driver with an
`ActorClass` wrapper: an attribute set on it lands on the wrapper, not on the class the actors
run, so no actor ever sees it.

ray-lint is silent for:
- class constants that are only read;
- class attributes filled lazily under a condition that names them
  (`if cls._model is None: cls._model = load()`, `if not hasattr(cls, "x")`): a per-process cache;
- `Actor._instance = self` (the one instance of this process registering itself);
- classes that are not actors, and attributes set on `self`.

## Example
```python
@ray.remote
class Worker:
    processed = 0

    def work(self, item):
        Worker.processed += 1
        return handle(item)

    def total(self):
        return Worker.processed  # counts this actor's calls only
```

## Use instead
Keep shared state in one actor that the others call:
```python
@ray.remote
class Counter:
    def __init__(self):
        self.processed = 0

    def add(self, n):
        self.processed += n

@ray.remote
class Worker:
    def __init__(self, counter):
        self.counter = counter

    def work(self, item):
        self.counter.add.remote(1)
        return handle(item)
```
and pass settings to the actors' constructors (`Worker.remote(batch_size=64)`).

## Fix safety
There is no automatic fix: where shared state should live is a design decision.

## References
- [Anti-pattern: Using global variables to share state between tasks and actors](https://docs.ray.io/en/latest/ray-core/patterns/global-variables.html)
- [Actors](https://docs.ray.io/en/latest/ray-core/actors.html)
"""

    VALID = [
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    BATCH = 32\n    def work(self, items):\n        return items[: Worker.BATCH]\n",
            "a class constant that is only read",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    _model = None\n    @classmethod\n    def model(cls):\n"
            "        if cls._model is None:\n            cls._model = load()\n        return cls._model\n",
            "a lazily loaded per-process model",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    count = 0\n    def work(self):\n        self.count += 1\n        return self.count\n",
            "instance state: `self.count += 1` binds an attribute of the instance",
        ),
        Valid(
            "import ray\nclass Registry:\n    items = []\n    def add(self, x):\n        Registry.items.append(x)\n",
            "not an actor class",
        ),
        Valid(
            "class Worker:\n    count = 0\n    def work(self):\n        Worker.count += 1\n\nWorker = ray.remote(Worker)\n",
            "no `import ray`: not Ray",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Service:\n    _instance = None\n    def __init__(self):\n        Service._instance = self\n",
            "the process's one actor registering itself",
        ),
        Valid(
            "import ray\n@ray.remote\nclass Worker:\n    def work(self):\n        return 1\n\nWorker.label = 'test'\nprint(Worker.label)\n",
            "a driver-side attribute that the actor never reads",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n@ray.remote\nclass Worker:\n    processed = 0\n    def work(self, item):\n        Worker.processed += 1\n"
            "        return item\n    def total(self):\n        return Worker.processed\n",
            6,
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Node:\n    registry = {}\n    def __init__(self, name):\n        type(self).registry[name] = self\n",
            6,
            note="through `type(self)`",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Node:\n    peers = []\n    def join(self, peer):\n        self.__class__.peers.append(peer)\n",
            6,
            note="a container mutated through `self.__class__`",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Trainer:\n    best = 0.0\n    @classmethod\n    def record(cls, score):\n"
            "        cls.best = max(cls.best, score)\n",
            7,
            note="`cls` in a classmethod",
        ),
        Invalid(
            "import ray\nclass Worker:\n    config = {}\n    def set_config(self, cfg):\n        Worker.config = cfg\n\nRemoteWorker = ray.remote(Worker)\n",
            5,
            note="`ray.remote(Cls)`",
        ),
        Invalid(
            "import ray\n@ray.remote\nclass Worker:\n    batch_size = 32\n    def work(self, items):\n        return items[: self.batch_size]\n\n"
            "Worker.batch_size = 64\nworkers = [Worker.remote() for _ in range(4)]\n",
            8,
            note="set on the driver's ActorClass wrapper",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        remotes = [remote for remote in model.remote_defs if remote.kind == "actor" and remote.cls is not None]
        code = _MethodCode(model, {id(method.scope) for remote in remotes for method in model.remote_functions(remote)})
        actors = [_ActorClass(model, remote, code) for remote in remotes]
        for actor in actors:
            reported: set[str] = set()
            for write in actor.writes():
                if write.attr in reported:
                    continue
                reported.add(write.attr)
                ctx.report(
                    write.node,
                    f"This {write.how} the class attribute `{write.attr}` of one `{actor.remote.name}` actor, not of the others",
                    facts=ClassFacts(write.attr, on_wrapper=False),
                )
        self._driver_sets(ctx, actors)

    def _driver_sets(self, ctx: Context, actors: list[_ActorClass]) -> None:
        """`Actor.attr = value` outside the class, on the name that `@ray.remote` rebound to an `ActorClass`."""
        model = ctx.model
        by_target = {id(actor.remote.target): actor for actor in actors if isinstance(actor.remote.declared_at, cst.Decorator)}
        for store in model.stores:
            target = store.target
            if not isinstance(target, cst.Attribute) or not isinstance(target.value, cst.Name) or store.kind == "del":
                continue
            attr = target.attr.value
            if attr.startswith("__") or attr.startswith("_ray") or attr.startswith("_default"):
                continue
            remote = model.remote_def_of(target.value, store.scope, store.index)
            actor = by_target.get(id(remote.target)) if remote is not None else None
            if actor is None or any(scope_within(store.scope, method.scope) for method in actor.methods):
                continue
            if not actor.reads(attr):
                continue
            ctx.report(
                store.statement,
                f"Setting `{attr}` on the `ActorClass` wrapper `{actor.remote.name}` does not reach any of its actors",
                facts=ClassFacts(attr, on_wrapper=True),
            )
