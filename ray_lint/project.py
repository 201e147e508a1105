"""Project-wide facts: what the other files of a project say about the names one file uses.

A rule that sees `Worker` without `num_gpus` in one file cannot know that a worker-group builder in
another module starts it with `Worker.options(num_gpus=1)`, that `skyrl` is the project's own
package, or that the imported `Fetcher` is an async actor. Each file gives plain strings, which the
engine reads from its semantic model while it lints (`SemanticModel.call_shapes`, `actor_facts`)
and which front-ends that see one file at a time read with CPython's parser (`facts_of`):

- `gives:<option>:<Name>`: a resource option (`num_gpus`, `num_cpus`, ...) is given to `Name`
  somewhere: `Name.options(num_gpus=...)`, `ray.remote(num_gpus=...)(Name)`, or a builder call that
  takes `Name` with a GPU or CPU keyword (`WorkerGroup(Worker, num_gpus_per_worker=1)`); an option
  spread from a dict (`Name.options(**opts)`) gives `*`, any option;
- `actor:async:<Name>`, `actor:threaded:<Name>`: the actor class `Name` runs calls concurrently;
  `actor:sync:<Name>`: it runs them one at a time;
- `package:<name>`: a top-level package or module of the project's own code;
- function summaries (`ray_lint.analyses.waits`, `gpu_use`, `forks`): `waits:<key>`, the
  function or method `key` (`fetch`, `Client.fetch`) submits a call and waits for it; `blocks:<key>`,
  it blocks on `ray.get`/`ray.wait`; `gpu:<name>`, the function uses a GPU; `forks:<name>`, it forks
  a process. Only ray-lint's own model
  gives them, so a module no rule read is summarised on demand, when a finding elsewhere needs one of
  its functions (`summaries_needed`, `defines`); `summarised` says a module's summaries are among its
  facts already (it was parsed), so it is not read again for them.

A finding that depends on other files names the facts that would make it wrong (`unless`) or that
it needs (`requires`); whoever has the project's facts keeps it or drops it (`ProjectFacts.keeps`).
Facts are keyed by bare names: two classes of one name share their facts, and rules ask so that a
clash only makes them quieter (an actor is concurrent only if no class of its name is synchronous).
A lone file (standard input, an editor buffer outside a project) has no project facts: nothing is
given elsewhere.
"""
from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

RESOURCE_OPTIONS = frozenset({"num_gpus", "num_cpus", "resources", "accelerator_type", "memory"})
# A file without one of these gives no resource option to anything...
OPTION_TOKENS = ("num_gpus", "num_cpus", "resources=", "accelerator_type", "options(**")
# ...unless it uses Ray and calls a builder with a GPU keyword (`use_gpu=True`, `gpus_per_worker=1`).
BUILDER_TOKENS = ("gpu", "GPU")
# What marks a project's root directory: where its cache lives and whose files give it facts.
PROJECT_MARKERS = ("pyproject.toml", "ray-lint.toml", "setup.py", "setup.cfg", ".git")


@dataclass(frozen=True)
class ProjectFacts:
    """The facts of every file of a project."""

    facts: frozenset[str] = frozenset()

    def __or__(self, other: ProjectFacts) -> ProjectFacts:
        return ProjectFacts(self.facts | other.facts)

    def holds_any(self, facts: Iterable[str]) -> bool:
        return any(fact in self.facts for fact in facts)

    def keeps(self, unless: Iterable[str], requires: Iterable[str]) -> bool:
        """Whether a finding stands: none of `unless` holds, and one of `requires` does (when it names any)."""
        requires = tuple(requires)
        return not self.holds_any(unless) and (not requires or self.holds_any(requires))


LONE_FILE = ProjectFacts()  # a file seen without its project: no other file says anything
SUMMARY_KINDS = ("waits:", "blocks:", "gpu:", "forks:")
SUMMARISED = "summarised"


def undecided(unless: Iterable[str], requires: Iterable[str], known: ProjectFacts) -> bool:
    """Whether reading more of the project with CPython's parser (`facts_of`) may decide a finding: none
    of `unless` holds yet, or some plain fact it `requires` is not known. (That parse gives no function
    summaries: those are looked for separately, `summaries_needed`.)"""
    unless = tuple(unless)
    if unless and not known.holds_any(unless):
        return True
    plain = [fact for fact in requires if not fact.startswith(SUMMARY_KINDS)]
    return bool(plain) and not known.holds_any(plain)


def summaries_needed(requires: Iterable[str], known: ProjectFacts) -> set[str]:
    """The function summaries among `requires` that `known` does not hold."""
    return {fact for fact in requires if fact.startswith(SUMMARY_KINDS) and fact not in known.facts}


def from_own_code(text: str, facts: Iterable[str], known: ProjectFacts) -> set[str]:
    """The summary facts among `facts` whose function (or class) the module `text` imports from the
    project's own code: relatively, or from a top-level package `known` names (`package:`). A function
    imported from an installed library has no summary to look for."""
    own_tops = [fact.split(":", 1)[1] for fact in known.facts if fact.startswith("package:")]
    if "from ." not in text and not any(f"from {top}" in text or f"import {top}" in text for top in own_tops):
        return set()  # imports nothing of the project's own: nothing to parse
    tree = _parsed(text)
    if tree is None:
        return set()
    sources: dict[str, str] = {}  # imported name -> its top-level module ("" for a relative import)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            top = "" if node.level else (node.module or "").split(".", 1)[0]
            sources.update((alias.asname or alias.name, top) for alias in node.names)
        elif isinstance(node, ast.Import):
            sources.update((alias.asname or alias.name.split(".", 1)[0], alias.name.split(".", 1)[0]) for alias in node.names)
    own = set()
    for fact in facts:
        name = fact.split(":", 1)[1].split(".", 1)[0]  # the function, or the class of a method
        top = sources.get(name)
        if top == "" or (top is not None and known.holds_any(own_module(top))):
            own.add(fact)
    return own


def defines(text: str, fact: str) -> bool:
    """Whether a module's text may define the function a summary fact names (`def fetch(`, or
    `class Client` and `def fetch(` for `Client.fetch`): the cheap test before it is summarised."""
    owner, _, function = fact.split(":", 1)[1].rpartition(".")
    return f"def {function}(" in text and (not owner or f"class {owner}" in text)


def given(option: str, name: str) -> tuple[str, ...]:
    """The facts that say some file gives `option` (or options it cannot see) to the class or function `name`."""
    return (f"gives:{option}:{name}", f"gives:*:{name}")


def concurrent_actor(name: str) -> tuple[str, ...]:
    """The facts that say the actor class `name` runs calls concurrently: async methods, or `max_concurrency`."""
    return (f"actor:async:{name}", f"actor:threaded:{name}")


def sequential_actor(name: str) -> tuple[str, ...]:
    """The fact that says an actor class named `name` runs calls one at a time."""
    return (f"actor:sync:{name}",)


def own_module(module: str) -> tuple[str, ...]:
    """The fact that says the top-level module of `module` (`pkg` of `pkg.sub`) is the project's own code."""
    return (f"package:{module.split('.', 1)[0]}",)


@dataclass(frozen=True)
class CallShape:
    """What a call says about resource options, whichever parser read it: `Name.options(...)` (`options_of`),
    `ray.remote(...)(Name)` (`remote_of`), or any other call (a builder) with the bare names it is given.
    `keywords` are the keyword names (None for `**spread`): of `ray.remote(...)` for the second form."""

    keywords: tuple[str | None, ...]
    options_of: str | None = None
    remote_of: str | None = None
    names: tuple[str, ...] = ()


def facts_of_calls(calls: Iterable[CallShape]) -> frozenset[str]:
    found: set[str] = set()
    for call in calls:
        target = call.options_of or call.remote_of
        if target is not None:
            found.update(f"gives:{option}:{target}" for option in _options(call.keywords))
            continue
        options = {_builder_option(keyword) for keyword in call.keywords if keyword is not None} - {None}
        for name in call.names if options else ():
            if name[:1].isupper():  # a class handed to a builder
                found.update(f"gives:{option}:{name}" for option in options)
    return frozenset(found)


def facts_of(text: str) -> frozenset[str]:
    """The facts one file's text gives the project, read with CPython's parser (nothing for text it cannot
    parse). The engine gets the same facts from its semantic model instead (`SemanticModel.call_shapes`)."""
    if not may_give(text) and ".remote" not in text:
        return frozenset()
    tree = _parsed(text)
    if tree is None:
        return frozenset()
    nodes = list(ast.walk(tree))
    actors = frozenset(fact for node in nodes if isinstance(node, ast.ClassDef) for fact in _actor_facts(node))
    if not may_give(text):
        return actors
    return actors | facts_of_calls(_shape(node) for node in nodes if isinstance(node, ast.Call) and _may_matter(node))


def _parsed(text: str) -> ast.Module | None:
    """CPython's parse of a module, or None for text it cannot parse (its warnings silenced)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def may_give(text: str) -> bool:
    """The pre-filter of the calls: most files give no resource option, and their calls are not read."""
    return any(token in text for token in OPTION_TOKENS) or ("ray" in text and any(token in text for token in BUILDER_TOKENS))


def _actor_facts(node: ast.ClassDef) -> Iterable[str]:
    """`actor:async:Name`, `actor:threaded:Name` or `actor:sync:Name` for a class decorated with `@ray.remote`
    (the semantic model knows more shapes: `SemanticModel.actor_facts`)."""
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        if _bare_name(call.func if call is not None else decorator) != "remote":
            continue
        is_async = any(isinstance(item, ast.AsyncFunctionDef) for item in node.body)
        threaded = call is not None and any(keyword.arg == "max_concurrency" for keyword in call.keywords)
        if is_async:
            yield f"actor:async:{node.name}"
        if threaded:
            yield f"actor:threaded:{node.name}"
        if not is_async and not threaded:
            yield f"actor:sync:{node.name}"


def _may_matter(call: ast.Call) -> bool:
    return bool(call.keywords) or isinstance(call.func, ast.Call)


def _shape(call: ast.Call) -> CallShape:
    func = call.func
    keywords = tuple(keyword.arg for keyword in call.keywords)
    if isinstance(func, ast.Attribute) and func.attr == "options":
        return CallShape(keywords, options_of=_bare_name(func.value))
    if isinstance(func, ast.Call) and _bare_name(func.func) == "remote" and call.args:
        return CallShape(tuple(keyword.arg for keyword in func.keywords), remote_of=_bare_name(call.args[0]))
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return CallShape(keywords, names=tuple(name for name in map(_bare_name, values) if name is not None))


def _options(keywords: Iterable[str | None]) -> Iterable[str]:
    for keyword in keywords:
        if keyword is None:
            yield "*"  # `**opts`: whatever the dict holds
        elif keyword in RESOURCE_OPTIONS:
            yield keyword


def _builder_option(keyword: str) -> str | None:
    """The resource a builder's keyword sets: `num_gpus_per_worker`, `gpus_per_actor`, `use_gpu` give GPUs."""
    lowered = keyword.lower()
    if "gpu" in lowered:
        return "num_gpus"
    if "cpu" in lowered:
        return "num_cpus"
    return None


def _bare_name(expr: ast.expr) -> str | None:
    """`Worker` for `Worker`, `mod.Worker` and `self.Worker`."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


@dataclass
class PackageFinder:
    """The top-level packages and modules the project's own files belong to, remembering each directory."""

    _top: dict[Path, str | None] = field(default_factory=dict)

    def facts_of(self, path: Path) -> frozenset[str]:
        """`package:<top>` for the file's outermost enclosing package, or for the file itself when it is a
        top-level module (beside a pyproject.toml, a setup.py or a .git, or in `src/`)."""
        top = self._package_of(path.parent)
        if top is not None:
            return frozenset({f"package:{top}"})
        if path.suffix == ".py" and (path.parent.name == "src" or any((path.parent / m).exists() for m in PROJECT_MARKERS)):
            return frozenset({f"package:{path.stem}"})
        return frozenset()

    def _package_of(self, directory: Path) -> str | None:
        if directory not in self._top:
            if (directory / "__init__.py").is_file() and directory.parent != directory:
                self._top[directory] = self._package_of(directory.parent) or directory.name
            else:
                self._top[directory] = None
        return self._top[directory]


def project_root(path: Path, known: dict[Path, Path | None] | None = None) -> Path | None:
    """The nearest directory at or above `path` that marks a project (a pyproject.toml, a .git, ...).
    `known` remembers each directory's answer across calls: a tree of thousands of files asks about
    a few hundred directories."""
    folder = path if path.is_dir() else path.parent
    seen: list[Path] = []
    root: Path | None = None
    while True:
        if known is not None and folder in known:
            root = known[folder]
            break
        seen.append(folder)
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            root = folder
            break
        if folder.parent == folder:
            break
        folder = folder.parent
    if known is not None:
        known.update((each, root) for each in seen)
    return root
