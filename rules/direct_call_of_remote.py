"""RAY066 direct-call-of-remote: a remote function, actor class or actor method called like a plain one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, SemanticModel
from ray_lint.python_model import Binding, CallSite, Scope, child_nodes, dotted_name
from ray_lint.rule import REMOTE_MADE, Context, FixPlan, Invalid, Rule, Valid

# Attributes of a remote function, actor class or actor method that are meant to be called.
RAY_ATTRIBUTES = frozenset({"remote", "options", "bind"})
# Context managers under which code calls something on purpose to see it raise.
RAISES_CONTEXTS = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})
_BLOCKS = (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite)
_MAX_ALIAS_DEPTH = 8

# The flagged call and its fix in the model, by what was called directly.
CALLS = {
    "task": ("ray.get([square(x) for x in range(4)])", "ray.get([square.remote(x) for x in range(4)])"),
    "actor": ("counter = Counter()", "counter = Counter.remote()"),
    "method": ("ray.get(counter.add(1))", "ray.get(counter.add.remote(1))"),
}
MODEL = """
@ray.remote
def square(x):
    return x * x

@ray.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n

counter = Counter.remote()
__ray_lint_result__ = {call}
__ray_lint_evidence__ = {{"right": f"it gave {{__ray_lint_result__!r}}"}}
"""


@dataclass(frozen=True)
class DirectCall:
    """What the finding calls directly: a remote function, an actor class or an actor method."""

    kind: Literal["task", "actor", "method"]


class DirectCallExperiment(ReproductionExperiment[DirectCall]):
    """The user's script as written and with `.remote` inserted, when it has an entry point; else the
    same kind of call (remote function, actor class or actor method) made directly and through `.remote`."""

    facts_type = DirectCall
    shares_driver = True
    expected = r"cannot be called directly|cannot be instantiated directly"

    def model(self, subject: Subject) -> Plan:
        kind = self.facts(subject).kind
        flagged, fixed = CALLS[kind]
        what = {"task": "a remote function", "actor": "an actor class", "method": "an actor method"}[kind]
        return Plan(
            Variant("called directly", script(MODEL.format(call=flagged))),
            Variant("through .remote", script(MODEL.format(call=fixed))),
            "modelled",
            f"{what} called like a plain one (`{flagged}`), and through `.remote`",
        )


class DirectCallOfRemote(Rule):
    code = "RAY066"
    name = "direct-call-of-remote"
    message = "A remote function, actor class or actor method is called directly instead of through `.remote()`"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = REMOTE_MADE
    experiment = DirectCallExperiment()
    docs = """
## What it does
Finds a call that Ray rejects the moment it runs:
- a remote function called like a plain function, `f(x)` instead of `f.remote(x)`;
- an actor class instantiated like a plain class, `Counter()` instead of `Counter.remote()`;
- a method called on an actor handle like a plain method, `counter.add(1)` instead of
  `counter.add.remote(1)`, when the handle is a name bound to `Counter.remote(...)`.

The callee must be defined in the file: a function or class whose outermost decorator is
`ray.remote` (in any spelling: `@ray.remote`, `@ray.remote(num_cpus=2)`, `from ray import remote`),
or a name bound to `ray.remote(f)` or `ray.remote(**options)(f)`; for methods, a method defined in
the body of such an actor class. Calls inside the remote function's own body count too
(a recursive `f(n - 1)`): the name there refers to the remote function as well.

ray-lint is silent when the name may mean something else at the call: it was rebound in between
(`f = f._function`, a loop variable, a parameter, an import), `ray.remote(f)` was kept under another
name (`f` is still the plain function), the remote binding happens in a branch that the call is
outside of, or the call is in a nested function while the module rebinds the name. It is also
silent on `f.remote(...)`, `f.options(...).remote(...)`, `f.bind(...)`, on `f` passed as a value,
on decorators named `remote` that are not Ray's, and on calls made under `pytest.raises(...)` or
`self.assertRaises(...)`, or in a `try` whose `except TypeError:` catches the error, which show it
on purpose (a broader `except Exception:` does not count: it would hide the error).

## Why is this bad?
`ray.remote` replaces the function or class with a Ray object whose `__call__` always raises.
The code fails on its first run, with Ray 2.60's messages:
- `TypeError: Remote functions cannot be called directly. Instead of running 'f()', try 'f.remote()'.`
  (`ray/remote_function.py`, `RemoteFunction.__call__`);
- `TypeError: Actors cannot be instantiated directly. Instead of 'Counter()', use 'Counter.remote()'.`
  (`ray/actor.py`, `ActorClass.__call__`);
- `TypeError: Actor methods cannot be called directly. Instead of running 'object.add()', try
  'object.add.remote()'.` (`ray/actor.py`, `ActorMethod.__call__`).

## Example
```python
@ray.remote
def square(x):
    return x * x

@ray.remote
class Counter:
    def add(self, n):
        ...

results = [square(x) for x in range(4)]
counter = Counter()
```

## Use instead
```python
results = ray.get([square.remote(x) for x in range(4)])
counter = Counter.remote()
ray.get(counter.add.remote(1))
```

## Fix safety
The fix inserts `.remote` before the call's arguments. It is unsafe: `f.remote(x)` returns an
`ObjectRef` (an actor handle for a class), not the value `f(x)` was expected to return, so code
that uses the result needs a `ray.get(...)` the fix does not add.

## References
- [Remote functions (tasks)](https://docs.ray.io/en/latest/ray-core/tasks.html)
- [Actors](https://docs.ray.io/en/latest/ray-core/actors.html)
- [`ray.remote` API](https://docs.ray.io/en/latest/ray-core/api/doc/ray.remote.html)
"""

    VALID = [
        Valid("import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nref = f.remote(1)\n", "the right way"),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nref = f.options(num_cpus=2).remote(1)\nnode = f.bind(1)\n",
            "`.options(...).remote` and `.bind`",
        ),
        Valid("import ray\n\ndef f(x):\n    return x\n\nremote_f = ray.remote(f)\ny = f(1)\n", "`f` is still the plain function"),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nf = f._function\ny = f(1)\n",
            "the name is rebound to the plain function before the call",
        ),
        Valid("import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nf = other\ny = f(1)\n", "the name is rebound to something else"),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\ndef g(f):\n    return f(1)\n\ndef h():\n    f = make()\n    return f(2)\n",
            "a parameter and a local variable shadow the name",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\nrefs = list(map(f.remote, xs))\nsubmit(f, 1)\n",
            "`f` passed as a value, not called",
        ),
        Valid(
            "from mylib import remote\n\n@remote\ndef f(x):\n    return x\n\n@remote\nclass C:\n    pass\n\ny = f(1)\nc = C()\n",
            "a `remote` decorator that is not Ray's",
        ),
        Valid(
            "import ray\n\ndef f(x):\n    return x\n\nif USE_RAY:\n    f = ray.remote(f)\n\ny = f.remote(1) if USE_RAY else f(1)\n",
            "made remote only in a branch the call is outside of",
        ),
        Valid(
            "import ray\n\n@my_cache\n@ray.remote\ndef f(x):\n    return x\n\ny = f(1)\n",
            "another decorator wraps the remote function: what it returns is unknown",
        ),
        Valid(
            "import pytest\nimport ray\n\n@ray.remote\ndef f(x):\n    return x\n\ndef test_direct_call():\n"
            "    with pytest.raises(TypeError):\n        f(1)\n",
            "a test that expects the TypeError",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\ntry:\n    f(1)\nexcept TypeError as error:\n"
            "    print(error)  # a tutorial shows the error\n",
            "a try that catches the TypeError by name",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def add(self, n):\n        return n\n\nc = Counter.remote()\n"
            "ref = c.add.remote(1)\nc = LocalCounter()\nc.add(2)\n",
            "the handle's name is rebound to a local object",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def add(self, n):\n        return n\n\nc = Counter.remote()\nc.helper(1)\n",
            "a method the class body does not define (maybe inherited or cross-language): not judged",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef f(x):\n    return x\n\ndef run():\n    return f(1)\n\nf = f._function\n",
            "the module rebinds the name: the nested call may see either",
        ),
        Valid("import ray\nfrom tasks import f\n\ny = f(1)\n", "imported: this file does not show what `f` is"),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote\ndef load(path):\n    return path\n\ntry:\n    data = load('a.csv')\nexcept Exception:\n"
            "    data = None\n",
            8,
            fixed="import ray\n\n@ray.remote\ndef load(path):\n    return path\n\ntry:\n    data = load.remote('a.csv')\nexcept Exception:\n"
            "    data = None\n",
            note="a broad except hides the TypeError: the call never runs",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef square(x):\n    return x * x\n\nresults = [square(x) for x in range(4)]\n",
            7,
            fixed="import ray\n\n@ray.remote\ndef square(x):\n    return x * x\n\nresults = [square.remote(x) for x in range(4)]\n",
        ),
        Invalid(
            "import ray\n\n@ray.remote(num_cpus=2)\nclass Counter:\n    def __init__(self, start):\n        self.n = start\n\ncounter = Counter(0)\n",
            8,
            fixed="import ray\n\n@ray.remote(num_cpus=2)\nclass Counter:\n    def __init__(self, start):\n        self.n = start\n\n"
            "counter = Counter.remote(0)\n",
        ),
        Invalid(
            "import ray\n\n@ray.remote\nclass Counter:\n    def add(self, n):\n        return n\n\ncounter = Counter.remote()\n"
            "ray.get(counter.add(1))\n",
            9,
            fixed="import ray\n\n@ray.remote\nclass Counter:\n    def add(self, n):\n        return n\n\ncounter = Counter.remote()\n"
            "ray.get(counter.add.remote(1))\n",
            note="an actor method called on a handle",
        ),
        Invalid(
            "import ray\n\ndef load(path):\n    return path\n\nload = ray.remote(load)\ndata = load('a.csv')\n",
            7,
            fixed="import ray\n\ndef load(path):\n    return path\n\nload = ray.remote(load)\ndata = load.remote('a.csv')\n",
            note="`ray.remote(f)` rebinds the same name",
        ),
        Invalid(
            "from ray import remote\n\n@remote\ndef walk(node):\n    for child in node.children:\n        walk(child)\n",
            6,
            fixed="from ray import remote\n\n@remote\ndef walk(node):\n    for child in node.children:\n        walk.remote(child)\n",
            note="recursion inside the remote body: in the worker the name is the remote function too",
        ),
        Invalid(
            "import ray\n\ndef work(x):\n    return x\n\nremote_work = ray.remote(num_gpus=1)(work)\n\ndef main():\n    return remote_work(3)\n",
            9,
            fixed="import ray\n\ndef work(x):\n    return x\n\nremote_work = ray.remote(num_gpus=1)(work)\n\ndef main():\n"
            "    return remote_work.remote(3)\n",
            note="the remote version called from a function",
        ),
        Invalid(
            "import ray as r\n\n@r.remote\ndef f(x):\n    return x\n\ng = f\nprint(g(1))\n",
            8,
            fixed="import ray as r\n\n@r.remote\ndef f(x):\n    return x\n\ng = f\nprint(g.remote(1))\n",
            note="through an alias",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        if not model.remote_defs:
            return
        checker = _Checker(model)
        for site in model.calls:
            func = site.node.func
            if isinstance(func, cst.Name):
                remote = checker.remote_named(func, site.scope, site.index)
                if remote is None or checker.expects_raise(site.node):
                    continue
                name = func.value
                if remote.kind == "task":
                    message = f"`{name}(...)` calls a remote function directly, which raises `TypeError`"
                else:
                    message = f"`{name}(...)` instantiates an actor class directly, which raises `TypeError`"
                ctx.report(site.node, message, self._fix(ctx, func), facts=DirectCall(remote.kind))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                method = func.attr.value
                if method in RAY_ATTRIBUTES or (method.startswith("__") and method.endswith("__")):
                    continue
                actor = checker.actor_of_handle(func.value, site)
                if actor is None or actor.cls is None or model.method(actor.cls, method) is None:
                    continue
                if checker.expects_raise(site.node):
                    continue
                text = f"{func.value.value}.{method}"
                ctx.report(
                    site.node,
                    f"`{text}(...)` calls an actor method directly, which raises `TypeError`",
                    self._fix(ctx, func),
                    facts=DirectCall("method"),
                )

    def _fix(self, ctx: Context, func: cst.BaseExpression) -> FixPlan:
        return FixPlan("Call it through `.remote(...)`", ((func, ctx.code_for(func) + ".remote"),), Applicability.UNSAFE)


class _Checker:
    """Name resolution for this rule, stricter than `SemanticModel.remote_def_of`, which follows bindings
    made in branches: here a name counts as remote only when the binding that reaches the use certainly
    holds the Ray object (an error rule must not guess). Also keeps a lazily built parent map (the model
    has none) for the branch checks."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._parents: dict[int, cst.CSTNode] | None = None

    # --- names

    def remote_named(self, use: cst.Name, scope: Scope, at: int, _depth: int = 0) -> RemoteDef | None:
        """The remote function or actor class that the name `use` (read at event `at`) holds."""
        if _depth > _MAX_ALIAS_DEPTH:
            return None
        binding = self.model.reaching_binding(use.value, scope, at)
        if binding is None or not self._certain(binding, use, scope):
            return None
        if binding.kind in ("def", "class"):
            remote = self.model.remote_def_of(use, scope, at)
            decorators = getattr(binding.node, "decorators", ())
            # Only when `ray.remote` is the outermost decorator: another one may return anything.
            return remote if remote is not None and decorators and decorators[0] is remote.declared_at else None
        if binding.kind != "assign" or binding.value is None:
            return None
        value = binding.value
        if isinstance(value, cst.Name):  # `g = f`
            return self.remote_named(value, binding.scope, binding.index, _depth + 1)
        if isinstance(value, cst.Call):  # `g = ray.remote(f)`, `g = ray.remote(num_cpus=2)(f)`
            return self._applied(value)
        return None

    def _applied(self, call: cst.Call) -> RemoteDef | None:
        """The RemoteDef when `call` is `ray.remote(f)` or `ray.remote(...)(f)` (not a decorator call)."""
        site = self.model.call_site(call)
        if site is None:
            return None
        remote = self.model.remote_def_of(call, site.scope, site.index)
        if remote is None or isinstance(remote.declared_at, cst.Decorator):
            return None
        inner = call.func if isinstance(call.func, cst.Call) else call
        site = self.model.call_site(inner)
        if site is None or self.model.call_name(site) != "ray.remote":
            return None
        return remote

    def actor_of_handle(self, use: cst.Name, site: CallSite) -> RemoteDef | None:
        """The actor class when `use` holds a handle from `Cls.remote(...)` or `Cls.options(...).remote(...)`."""
        binding = self.model.reaching_binding(use.value, site.scope, site.index)
        if binding is None or binding.kind != "assign" or not isinstance(binding.value, cst.Call):
            return None
        if not self._certain(binding, use, site.scope):
            return None
        func = binding.value.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "remote":
            return None
        receiver = func.value
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "options":
            receiver = receiver.func.value
        if not isinstance(receiver, cst.Name):
            return None
        actor = self.remote_named(receiver, binding.scope, binding.index)
        return actor if actor is not None and actor.kind == "actor" else None

    def _certain(self, binding: Binding, use: cst.CSTNode, scope: Scope) -> bool:
        """Whether the binding surely holds at the use. A name bound once in its scope cannot mean
        anything else. Otherwise the use must be in the binding's own scope, inside the block that holds
        the binding (not after an `if`, `try` or loop that bound it on one path only)."""
        if len(binding.scope.bindings.get(binding.name, ())) <= 1:
            return True
        current: Scope | None = scope
        while current is not None and current.kind == "comprehension":
            current = current.parent
        if current is not binding.scope:
            return False  # a nested function runs later: the name may have been rebound by then
        block = self._block_of(binding.node)
        return block is not None and self._within(use, block)

    # --- tree structure

    @property
    def parents(self) -> dict[int, cst.CSTNode]:
        if self._parents is None:
            parents: dict[int, cst.CSTNode] = {}
            stack: list[cst.CSTNode] = [self.model.module]
            while stack:
                node = stack.pop()
                for child in child_nodes(node):
                    parents[id(child)] = node
                    stack.append(child)
            self._parents = parents
        return self._parents

    def _block_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        current: cst.CSTNode | None = self.parents.get(id(node))
        while current is not None and not isinstance(current, _BLOCKS):
            current = self.parents.get(id(current))
        return current

    def _within(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        current: cst.CSTNode | None = node
        while current is not None:
            if current is ancestor:
                return True
            current = self.parents.get(id(current))
        return False

    def expects_raise(self, call: cst.Call) -> bool:
        """Whether the call runs under `with pytest.raises(...)` or `with self.assertRaises(...)`, or in the
        body of a `try` that catches `TypeError` by name: code that shows the error on purpose."""
        child: cst.CSTNode = call
        current: cst.CSTNode | None = self.parents.get(id(call))
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if isinstance(current, cst.With):
                for item in current.items:
                    expr = item.item.func if isinstance(item.item, cst.Call) else item.item
                    name = dotted_name(expr)
                    if name is not None and name.rsplit(".", 1)[-1] in RAISES_CONTEXTS:
                        return True
            if isinstance(current, cst.Try) and child is current.body and any(_catches_type_error(h) for h in current.handlers):
                return True
            child, current = current, self.parents.get(id(current))
        return False


def _catches_type_error(handler: cst.ExceptHandler) -> bool:
    """`except TypeError:` or `except (TypeError, ...):`; a broader `except Exception:` is no sign that the
    code expects this error (it may hide it)."""
    kind = handler.type
    caught = [element.value for element in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return any(isinstance(name, cst.Name) and name.value == "TypeError" for name in caught)
