"""The semantic model of Ray code that every rule queries: the Python model plus what Ray makes of it.

`SemanticModel` extends `ray_lint.python_model.PythonModel` (scopes, bindings, calls, loops, qualified
names) with Ray facts, each resolved lazily from the Python records when a rule first asks: the remote
functions and actor classes with every option the module gives them (`RemoteDef`), what a `.remote(...)`
call submits (`Submission`), the actor behind a handle, where an ObjectRef came from (`RefOrigin`),
the CPUs and GPUs a remote requests, and the shapes of calls that `ray_lint.project` gathers across
files. Judgements that a few rules share (does a loop wait on purpose, does an actor method keep state)
are not here but in `ray_lint.analyses`, as functions of the model.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import libcst as cst

from ray_lint.project import CallShape, ProjectFacts
from ray_lint.python_model import (
    AFTER_ALL,
    Binding,
    CallSite,
    ClassInfo,
    FunctionInfo,
    PythonModel,
    Scope,
    between,
    is_name,
    literal_number,
    literal_string,
)

ALL_CORES = math.inf  # a thread count that means "one per core of the node"
CPU_COUNT_FUNCTIONS = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count", "joblib.cpu_count"})

@dataclass(eq=False, repr=False)
class RemoteOptions:
    """Options given to `ray.remote(...)` or `.options(...)`: literal keyword expressions, and whether
    `**kwargs` made the full set unknowable."""

    node: cst.Call | None
    values: dict[str, cst.BaseExpression] = field(default_factory=dict)
    has_unpacked: bool = False

    @classmethod
    def from_call(cls, call: cst.Call) -> RemoteOptions:
        options = cls(node=call)
        for arg in call.args:
            if arg.keyword is not None:
                options.values[arg.keyword.value] = arg.value
            elif arg.star == "**":
                options.has_unpacked = True
        return options


@dataclass(eq=False, repr=False)
class RemoteDef:
    """A remote function or actor class, with everything the module says about its options."""

    kind: Literal["task", "actor"]
    target: cst.FunctionDef | cst.ClassDef
    declared_at: cst.CSTNode  # the decorator or the `ray.remote(...)` call: where rules report
    options: RemoteOptions
    call_options: list[RemoteOptions] = field(default_factory=list)
    cls: ClassInfo | None = None
    escapes: bool = False  # handed by name to other code, which may set options this module does not show

    @property
    def name(self) -> str:
        return self.target.name.value

    def option_values(self, name: str) -> Iterator[cst.BaseExpression]:
        """Every expression given for option `name`, in the decorator and at `.options(...)` calls."""
        for options in (self.options, *self.call_options):
            if name in options.values:
                yield options.values[name]

    @property
    def options_unknowable(self) -> bool:
        return self.escapes or any(o.has_unpacked for o in (self.options, *self.call_options))

    @property
    def is_async_actor(self) -> bool:
        return self.cls is not None and any(m.is_async for m in self.cls.methods)

    @property
    def is_threaded_actor(self) -> bool:
        """`max_concurrency > 1` or concurrency groups; an unknown value counts as threaded."""
        for value in self.option_values("max_concurrency"):
            number = literal_number(value)
            if number is None or number > 1:
                return True
        return any(True for _ in self.option_values("concurrency_groups"))


@dataclass(frozen=True, repr=False)
class Submission:
    """What a `.remote(...)` call does. `kind` is "unknown" when the receiver cannot be resolved."""

    kind: Literal["task", "actor-create", "actor-method", "unknown"]
    call: cst.Call
    remote: RemoteDef | None = None  # the function, or the actor class
    handle: cst.BaseExpression | None = None  # for actor methods, the handle expression
    method: str | None = None

    @property
    def returns_ref(self) -> bool:
        return self.kind != "actor-create"


@dataclass(frozen=True, repr=False)
class RefOrigin:
    """Where an ObjectRef (or a list of them) held by an expression came from."""

    kind: Literal["ref", "ref-list"]
    producer: cst.BaseExpression  # the `.remote(...)`, `ray.put(...)` or list expression
    index: int  # event number at which the expression got its value
    binding: Binding | None  # the name binding that holds the producer itself, if it came through names


class SemanticModel(PythonModel):
    """Python and Ray facts about one module, for rules to query. Build it with `SemanticModel(module)`,
    with the other files' facts when the caller knows them (`ray_lint.project`)."""

    def __init__(self, module: cst.Module, project: ProjectFacts | None = None) -> None:
        self.project = project
        super().__init__(module)

    # ------------------------------------------------------------------ remote functions and actors

    @property
    def remote_defs(self) -> list[RemoteDef]:
        """Every remote function and actor class, in all the forms `ray.remote` is applied."""
        return self._remotes[0]

    @cached_property
    def _remotes(self) -> tuple[list[RemoteDef], dict[int, RemoteDef]]:
        found: dict[int, RemoteDef] = {}
        definitions: list[FunctionInfo | ClassInfo] = [*self.functions, *self.classes]
        for info in definitions:
            scope = info.parent_scope if isinstance(info, FunctionInfo) else info.scope.parent
            assert scope is not None
            index = self.definition_index(info.node, scope)
            for decorator in info.node.decorators:
                options = self._remote_options(decorator.decorator, scope, index)
                if options is not None:
                    found[id(info.node)] = self._make_remote(info.node, decorator, options)
        applications: list[tuple[cst.Call, int]] = []
        for site in self.calls_to("ray.remote"):
            target, options = self._applied_remote(site)
            if target is not None:
                applications.append((site.node, id(target)))
                if id(target) not in found:
                    found[id(target)] = self._make_remote(target, site.node, options)
        by_node: dict[int, RemoteDef] = {}
        for remote in found.values():
            by_node[id(remote.target)] = remote
            by_node[id(remote.declared_at)] = remote
        for call, target_id in applications:  # `g = ray.remote(f)` names the same definition
            by_node[id(call)] = found[target_id]
            applying = self._applied_call.get(id(call))
            if applying is not None:
                by_node[id(applying)] = found[target_id]
        self._remotes = (list(found.values()), by_node)  # `.options` lookups below need the map
        for site in self.calls_by_tail.get("options", ()):
            func = site.node.func
            if isinstance(func, cst.Attribute):
                named = self.remote_def_of(func.value, site.scope, site.index)
                if named is not None:
                    named.call_options.append(RemoteOptions.from_call(site.node))
        self._mark_escapes({id(call) for call, _ in applications})
        return self._remotes

    def _mark_escapes(self, applying_calls: set[int]) -> None:
        """Flag remote functions and actor classes handed by name to other calls (a worker-group
        factory, `map_batches`, a trainer): that code may set their options, so they are unknowable.
        Only direct hand-overs count (`f(Actor)`, `f(cls=Actor)`, `f([A, B])`): a walk of every
        argument's subtree would cost a second pass over the file."""
        names = {remote.name for remote in self.remote_defs} | {
            name for scope in self.scopes for name, bindings in scope.bindings.items()
            if any(b.kind == "assign" and isinstance(b.value, cst.Call) and id(b.value) in self._remote_by_node for b in bindings)
        }
        if not names:
            return
        for site in self.calls:
            if id(site.node) in applying_calls or id(site.node.func) in applying_calls:
                continue
            for arg in site.node.args:
                value = arg.value  # the name itself, or an item of a literal list, tuple, set or dict
                items = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple, cst.Set, cst.Dict)) else [value]
                for item in items:
                    if isinstance(item, cst.Name) and item.value in names:
                        remote = self.remote_def_of(item, site.scope, site.index)
                        if remote is not None:
                            remote.escapes = True

    def _make_remote(
        self, target: cst.FunctionDef | cst.ClassDef, declared_at: cst.CSTNode, options: RemoteOptions
    ) -> RemoteDef:
        if isinstance(target, cst.ClassDef):
            return RemoteDef("actor", target, declared_at, options, cls=self._class_by_node[id(target)])
        return RemoteDef("task", target, declared_at, options)

    def _remote_options(self, expr: cst.BaseExpression, scope: Scope, at: int) -> RemoteOptions | None:
        """Options if `expr` is `ray.remote` or `ray.remote(...)` used as a decorator."""
        if isinstance(expr, cst.Call):
            if self.qualified_name(expr.func, scope, at) == "ray.remote":
                return RemoteOptions.from_call(expr)
            return None
        if self.qualified_name(expr, scope, at) == "ray.remote":
            return RemoteOptions(node=None)
        return None

    def _applied_remote(
        self, site: CallSite
    ) -> tuple[cst.FunctionDef | cst.ClassDef | None, RemoteOptions]:
        """For `ray.remote(f)` or `ray.remote(**opts)(f)`: the definition of `f` and the options."""
        call = site.node
        applied = self._applied_call.get(id(call))
        if applied is not None:  # `ray.remote(...)(f)`
            options, call = RemoteOptions.from_call(call), applied
        else:
            options = RemoteOptions(node=call)
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) != 1 or not isinstance(positional[0].value, cst.Name):
            return None, options
        binding = self.reaching_binding(positional[0].value.value, site.scope, site.index)
        if binding is not None and binding.kind in ("def", "class"):
            return binding.node, options  # type: ignore[return-value]
        return None, options

    @cached_property
    def _applied_call(self) -> dict[int, cst.Call]:
        """`id(ray.remote(...))` -> the call `ray.remote(...)(f)` that applies it."""
        applied = {}
        for site in self.calls:
            if isinstance(site.node.func, cst.Call):
                applied[id(site.node.func)] = site.node
        return applied

    @property
    def _remote_by_node(self) -> dict[int, RemoteDef]:
        return self._remotes[1]

    def remote_def_of(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> RemoteDef | None:
        """The remote function or actor class that `expr` names, if the module defines it."""
        if _depth > 8:
            return None
        if isinstance(expr, cst.Call):
            return self._remote_by_node.get(id(expr))
        if not isinstance(expr, cst.Name):
            return None
        binding = self.reaching_binding(expr.value, scope, at)
        if binding is None:
            return None
        if binding.kind in ("def", "class"):
            remote = self._remote_by_node.get(id(binding.node))
            # After `g = ray.remote(f)`, `f` is still the plain function: only a decorator makes the name remote.
            return remote if remote is not None and isinstance(remote.declared_at, cst.Decorator) else None
        if binding.kind == "assign" and binding.value is not None:
            return self.remote_def_of(binding.value, binding.scope, binding.index, _depth + 1)
        return None

    # ------------------------------------------------------------------ what remote code runs and requests

    def remote_functions(self, remote: RemoteDef) -> list[FunctionInfo]:
        """The functions whose bodies run in a Ray worker for `remote`: the task, or every method of the actor."""
        if remote.cls is not None:
            return list(remote.cls.methods)
        info = self.function_info(remote.target)  # type: ignore[arg-type]
        return [info] if info is not None else []

    def parameter_defaults(self, remote: RemoteDef) -> Iterator[tuple[FunctionInfo, cst.Param, cst.BaseExpression, int]]:
        """Each parameter default of the remote's functions, as (function, parameter, default, event): defaults
        are evaluated in the function's parent scope, just before the `def` binds its name."""
        for function in self.remote_functions(remote):
            at = self.definition_index(function.node, function.parent_scope)
            params = function.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                if param.default is not None:
                    yield function, param, param.default, at

    @cached_property
    def _remote_by_options(self) -> dict[int, RemoteDef]:
        return {id(remote.options.node): remote for remote in self.remote_defs if remote.options.node is not None}

    def remote_declared_by(self, call: cst.Call) -> RemoteDef | None:
        """The remote function or actor class whose options a `ray.remote(...)` call declares, when the
        module shows what it is applied to."""
        return self._remote_by_options.get(id(call))

    @cached_property
    def _remote_by_scope(self) -> dict[int, tuple[RemoteDef, FunctionInfo]]:
        return {id(info.scope): (remote, info) for remote in self.remote_defs for info in self.remote_functions(remote)}

    def remote_of_scope(self, scope: Scope) -> tuple[RemoteDef, FunctionInfo] | None:
        """The remote function or actor (and its function) whose body runs the code of `scope` directly:
        comprehensions inside the body count, nested functions and lambdas do not (they may run anywhere)."""
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return self._remote_by_scope.get(id(scope))

    def cpu_share(self, remote: RemoteDef) -> float | None:
        """The CPUs a task or actor requests: the largest literal `num_cpus` given anywhere in the module,
        1 by default (Ray also sets OMP_NUM_THREADS to 1 for actors), None when a value is not literal."""
        if remote.options_unknowable:
            return None
        numbers = [literal_number(value) for value in remote.option_values("num_cpus")]
        if any(number is None for number in numbers):
            return None
        return max((n for n in numbers if n is not None), default=1.0)

    def gpu_request(self, remote: RemoteDef) -> Literal["requested", "none", "unknown"]:
        """Whether `remote` asks for a GPU anywhere in the module (`num_gpus` or `resources={"GPU": ...}`)."""
        if remote.options_unknowable:
            return "unknown"
        unknown = False
        for value in remote.option_values("num_gpus"):
            number = literal_number(value)
            if number is None:
                unknown = True
            elif number > 0:
                return "requested"
        for value in remote.option_values("resources"):
            if not isinstance(value, cst.Dict):
                unknown = True
                continue
            for element in value.elements:
                if not isinstance(element, cst.DictElement):
                    unknown = True
                elif literal_string(element.key) == "GPU":
                    return "requested"
        return "unknown" if unknown else "none"

    def is_cpu_count(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """Whether `expr` is the machine's core count: `os.cpu_count()` (also `... or 1`, `str(...)`,
        `multiprocessing.cpu_count()`, `psutil.cpu_count()`, `joblib.cpu_count()`)."""
        if isinstance(expr, cst.BooleanOperation):
            return self.is_cpu_count(expr.left, scope, at)
        if not isinstance(expr, cst.Call):
            return False
        name = self.qualified_name(expr.func, scope, at)
        if name in CPU_COUNT_FUNCTIONS:
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value in ("str", "int") and len(expr.args) == 1:
            return self.is_cpu_count(expr.args[0].value, scope, at)
        return False

    def call_shapes(self) -> Iterator[CallShape]:
        """The module's calls as `ray_lint.project` reads them for project facts (resource options given
        to a class by name), from the calls the model already holds: no second walk of the tree."""
        for site in self.calls:
            call, func = site.node, site.node.func
            keywords = tuple(arg.keyword.value if arg.keyword is not None else None for arg in call.args if arg.keyword or arg.star == "**")
            if isinstance(func, cst.Attribute) and func.attr.value == "options":
                yield CallShape(keywords, options_of=_bare_name(func.value))
            elif isinstance(func, cst.Call) and _bare_name(func.func) == "remote" and call.args:
                inner = tuple(a.keyword.value if a.keyword is not None else None for a in func.args if a.keyword or a.star == "**")
                yield CallShape(inner, remote_of=_bare_name(call.args[0].value))
            elif keywords:
                yield CallShape(keywords, names=tuple(name for arg in call.args if (name := _bare_name(arg.value)) is not None))

    def actor_facts(self) -> Iterator[str]:
        """`actor:async:Name`, `actor:threaded:Name` or `actor:sync:Name` for the module's actor classes."""
        for remote in self.remote_defs:
            if remote.kind == "actor" and remote.cls is not None:
                if remote.is_async_actor:
                    yield f"actor:async:{remote.name}"
                if remote.is_threaded_actor:
                    yield f"actor:threaded:{remote.name}"
                if not remote.is_async_actor and not remote.is_threaded_actor:
                    yield f"actor:sync:{remote.name}"

    # ------------------------------------------------------------------ ObjectRefs

    def submission(self, call: cst.Call) -> Submission | None:
        """What `call` submits, if it is a `.remote(...)` call."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "remote"):
            return None
        site = self.call_site(call)
        if site is None:
            return None
        receiver = func.value
        if (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value == "options"
        ):
            receiver = receiver.func.value
        remote = self.remote_def_of(receiver, site.scope, site.index)
        if remote is not None:
            return Submission("task" if remote.kind == "task" else "actor-create", call, remote)
        if self._made_by_other_remote(receiver, site.scope, site.index):
            return Submission("unknown", call)
        if isinstance(receiver, cst.Attribute):
            actor = self.actor_of_handle(receiver.value, site.scope, site.index)
            if actor is not None or not self._names_module(receiver.value, site.scope, site.index):
                return Submission("actor-method", call, actor, receiver.value, receiver.attr.value)
        return Submission("unknown", call)

    def looped_submissions(
        self, *kinds: Literal["task", "actor-create", "actor-method"]
    ) -> Iterator[tuple[CallSite, Submission, RemoteDef]]:
        """Each `.remote(...)` call inside a loop that submits one of `kinds` defined in this module (a task,
        an actor's creation, an actor method call), with what it submits and that task's function or that
        actor's class."""
        for site in self.calls_by_tail.get("remote", ()):
            if site.loop is None:
                continue
            submission = self.submission(site.node)
            if submission is None or submission.kind not in kinds or submission.remote is None:
                continue
            yield site, submission, submission.remote

    def _made_by_other_remote(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> bool:
        """Whether `expr` (what `.remote()` is called on) comes from a class or function this module decorates
        with another library's `remote`, such as RayFed's `@fed.remote`: through calls and attributes on it
        (`Actor.party("alice")`, a handle's method) and the names they are bound to. Its `.remote()` calls are
        that library's, not Ray's."""
        while isinstance(expr, (cst.Call, cst.Attribute)):
            expr = expr.func if isinstance(expr, cst.Call) else expr.value
        if not isinstance(expr, cst.Name) or _depth > 8:  # a chain of names bound to each other
            return False
        binding = self.reaching_binding(expr.value, scope, at)
        if binding is None:
            return False
        if binding.kind == "assign" and binding.value is not None:
            return self._made_by_other_remote(binding.value, binding.scope, binding.index, _depth + 1)
        if not isinstance(binding.node, (cst.ClassDef, cst.FunctionDef)):
            return False
        for decorator in binding.node.decorators:
            made_by = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            name = self.qualified_name(made_by, binding.scope, binding.index) or ""
            if name.rpartition(".")[2] == "remote" and name.partition(".")[0] != "ray":
                return True
        return False

    def _names_module(self, expr: cst.BaseExpression, scope: Scope, at: int) -> bool:
        """Whether `expr` is an imported module or name (so `mod.f.remote()` is a task, not a method)."""
        return self.qualified_name(expr, scope, at) is not None

    def actor_of_handle(self, expr: cst.BaseExpression, scope: Scope, at: int) -> RemoteDef | None:
        """The actor class of a handle expression such as `h` after `h = Actor.remote()`."""
        if isinstance(expr, cst.Call):
            submission = self.submission(expr)
            return submission.remote if submission and submission.kind == "actor-create" else None
        if isinstance(expr, cst.Name):
            binding = self.reaching_binding(expr.value, scope, at)
            if binding is not None and binding.kind == "assign" and isinstance(binding.value, cst.Call):
                return self.actor_of_handle(binding.value, binding.scope, binding.index)
            if binding is not None and binding.kind == "loop-target" and binding.source is not None:  # `for w in workers`
                return self.actor_of_handles(binding.source, binding.scope, binding.index)
        if isinstance(expr, cst.Subscript):  # `workers[i]`
            return self.actor_of_handles(expr.value, scope, at)
        return None

    def actor_of_handles(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> RemoteDef | None:
        """The actor class of every handle in a list of them, when it is one class: `[A.remote() for ...]`,
        `[a, b]`, `[chief] + workers`, and the names and `self` attributes bound to those (a list is
        iterated, not unpacked, so a loop target over it is one handle)."""
        if _depth > 8:  # names bound to each other
            return None
        if isinstance(expr, cst.ListComp):
            return self.actor_of_handle(expr.elt, scope, at)
        if isinstance(expr, cst.List):
            if not expr.elements or any(isinstance(element, cst.StarredElement) for element in expr.elements):
                return None
            actors = [self.actor_of_handle(element.value, scope, at) for element in expr.elements]
            return actors[0] if actors[0] is not None and all(actor is actors[0] for actor in actors) else None
        parts: list[tuple[cst.BaseExpression, Scope, int]] = []  # what the list is made of, each where it is written
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            parts = [(expr.left, scope, at), (expr.right, scope, at)]
        elif isinstance(expr, cst.Name):
            binding = self.reaching_binding(expr.value, scope, at)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            parts = [(binding.value, binding.scope, binding.index)]
        elif isinstance(expr, cst.Attribute) and is_name(expr.value, "self"):  # written only as `self.workers = ...`
            function = scope.function
            info = self.function_info(function.node) if function is not None else None  # type: ignore[arg-type]
            stores = self.self_assignments(info.owner, expr.attr.value) if info is not None and info.owner is not None else []
            if not stores:
                return None
            parts = [(store.value, store.scope, store.index) for store in stores]  # type: ignore[misc]
        actors = [self.actor_of_handles(part, where, when, _depth + 1) for part, where, when in parts]
        return actors[0] if actors and actors[0] is not None and all(actor is actors[0] for actor in actors) else None

    def ref_origin(self, expr: cst.BaseExpression, scope: Scope, at: int, _depth: int = 0) -> RefOrigin | None:
        """Where the ObjectRef(s) that `expr` holds at event `at` were created, if the module shows it:
        `.remote(...)`, `ray.put(...)`, names bound to those, list literals and comprehensions of refs,
        and lists filled with `.append(ref)`."""
        if _depth > 8:
            return None
        if isinstance(expr, cst.Call):
            site = self.call_site(expr)
            if site is None:
                return None
            submission = self.submission(expr)
            if submission is not None:
                return RefOrigin("ref", expr, site.index, None) if submission.returns_ref else None
            if self.call_name(site) == "ray.put":
                return RefOrigin("ref", expr, site.index, None)
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            elements = [e.value for e in expr.elements]
            if elements and all(self.ref_origin(e, scope, at, _depth + 1) for e in elements):
                return RefOrigin("ref-list", expr, at, None)
            return None
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            inner = self.comprehension_scope(expr)
            if inner is not None and self.ref_origin(expr.elt, inner, AFTER_ALL, _depth + 1):
                return RefOrigin("ref-list", expr, at, None)
            return None
        if isinstance(expr, cst.Name):
            binding = self.reaching_binding(expr.value, scope, at)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            value = binding.value
            if isinstance(value, cst.List) and not value.elements and self._appended_refs(binding):
                return RefOrigin("ref-list", value, binding.index, binding)
            origin = self.ref_origin(value, binding.scope, binding.index, _depth + 1)
            if origin is not None:
                return RefOrigin(origin.kind, origin.producer, binding.index, origin.binding or binding)
        return None

    def _appended_refs(self, binding: Binding) -> bool:
        """Whether a list bound empty is later filled with `name.append(ref)`."""
        return any(self.ref_origin(value, site.scope, site.index) for site, value in self.appends_to(binding))

    def appends_to(self, binding: Binding) -> list[tuple[CallSite, cst.BaseExpression]]:
        """Each later `name.append(value)` (one argument) on the value `binding` bound, with the value."""
        found: list[tuple[CallSite, cst.BaseExpression]] = []
        for site in between(self._appends.get(binding.name, []), binding.index + 1, AFTER_ALL):
            if len(site.node.args) == 1 and self.reaching_binding(binding.name, site.scope, site.index) is binding:
                found.append((site, site.node.args[0].value))
        return found

    def appends_in(self, function: Scope, name: str) -> list[tuple[cst.Name, cst.BaseExpression | None]]:
        """Each `name.append(...)` call in the function's body (its comprehensions included), as
        (receiver, appended value; None unless the call has exactly one argument)."""
        found: list[tuple[cst.Name, cst.BaseExpression | None]] = []
        for site in self._appends.get(name, ()):
            if site.scope.function is function:
                receiver = site.node.func.value  # type: ignore[attr-defined]
                found.append((receiver, site.node.args[0].value if len(site.node.args) == 1 else None))
        return found

    @cached_property
    def _appends(self) -> dict[str, list[CallSite]]:
        """`name.append(...)` calls by the receiver's name, in event order."""
        found: dict[str, list[CallSite]] = defaultdict(list)
        for site in self.calls_by_tail.get("append", ()):
            func = site.node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                found[func.value.value].append(site)
        return found

def _bare_name(expr: cst.BaseExpression) -> str | None:
    """`Worker` for `Worker`, `mod.Worker` and `self.Worker`."""
    if isinstance(expr, cst.Name):
        return expr.value if expr.value not in ("True", "False", "None") else None  # constants, as in `ast`
    return expr.attr.value if isinstance(expr, cst.Attribute) else None
