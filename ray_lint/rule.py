"""What a rule module declares, and the registry that finds them all in `ray_lint.rules`."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from ray_lint.diagnostics import Applicability, Severity

if TYPE_CHECKING:  # the registry loads without libcst: a full cache hit never parses (rule modules import it)
    import libcst as cst

    from ray_lint.experiment import Experiment
    from ray_lint.model import SemanticModel
    from ray_lint.ray_version import RayVersions

CODE_PATTERN = re.compile(r"RAY\d{3}")
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
MAX_MESSAGE = 100  # characters: a finding's message is one short sentence, the why and how are on its page
# Pre-filter tokens of a file that makes a remote function or actor: `@ray.remote` (at a line's end,
# before a comment, or with options), `ray.remote(f)`, `from ray import remote` (first, later or in brackets).
REMOTE_MADE = (".remote(", ".remote\n", ".remote\r", ".remote ", "import remote", ", remote", "(remote", " remote,")
# Pre-filter tokens of a file that calls `ray.init`: `ray.init(`, an alias of ray, or `from ray import init`
# (as a whole name: `from utils import initialize` must not count).
INIT_CALLED = (
    "ray.init(", "import ray as", "import init\n", "import init\r", "import init ", "import init,", "import init)",
    ", init\n", ", init\r", ", init,", ", init)", ", init ", "(init,", "(init\n",
)
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "References")


@dataclass(frozen=True)
class Valid:
    """Code the rule must not report."""

    code: str
    note: str = ""


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report, on `line` (1-based, counted in `code`); `fixed` is the source after
    applying the fix, when the rule offers one here."""

    code: str
    line: int
    fixed: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Option:
    """A per-rule option, set under `[tool.ray-lint.rules.<rule-name>]`."""

    name: str
    default: Any
    description: str

    def check(self, value: Any) -> str | None:
        """An error message if `value` does not have the default's type."""
        expected = type(self.default)
        if isinstance(self.default, list):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return "expected a list of strings"
            return None
        if expected is bool or isinstance(value, bool):
            return None if type(value) is expected else f"expected {expected.__name__}"
        if not isinstance(value, expected):
            return f"expected {expected.__name__}"
        return None


@dataclass(frozen=True)
class Report:
    """What a rule found, before positions and suppressions are worked out."""

    node: cst.CSTNode
    message: str
    fix: FixPlan | None = None
    facts: Any = None  # for the rule's experiment
    unless: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class FixPlan:
    """A fix in terms of nodes: replace each node's source with new text."""

    message: str
    replacements: tuple[tuple[cst.CSTNode, str], ...]
    applicability: Applicability


@dataclass
class Context:
    """What a rule gets: the model of the file and a way to report."""

    model: SemanticModel
    options: dict[str, Any]
    describe_line: Callable[[int], str]  # "line 12"; a notebook's names the cell too
    reports: list[Report] = field(default_factory=list)

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        fix: FixPlan | None = None,
        facts: Any = None,
        unless: tuple[str, ...] = (),
        requires: tuple[str, ...] = (),
    ) -> None:
        """Report `node`; `facts` are what the rule knows statically, for the rule's experiment (a value of the
        type it declares, `Experiment.facts_type`; rules without an experiment give none); `unless` are
        project facts (`ray_lint.project`) any one of which makes the finding wrong, `requires` facts one of
        which it needs. Where the model has the project's facts they decide now; else the finding carries them."""
        project = self.model.project
        if project is None:
            self.reports.append(Report(node, message, fix, facts, unless, requires))
        elif project.keeps(unless, requires):
            self.reports.append(Report(node, message, fix, facts))

    def line_of(self, node: cst.CSTNode) -> str:
        """Where a node is, for a message: "line 12", or "cell 3, line 4" in a notebook."""
        return self.describe_line(self.model.position(node).start.line)

    def code_for(self, node: cst.CSTNode) -> str:
        return self.model.module.code_for_node(node)

    def snippet(self, node: cst.CSTNode, limit: int = 50) -> str:
        """The node's first line of code, shortened for a message."""
        lines = self.code_for(node).strip().splitlines()
        first = lines[0] if lines else ""
        return first if len(first) <= limit and len(lines) <= 1 else first[: limit - 3].rstrip() + "..."


class Rule:
    """Base class of every rule. A subclass in a module of `ray_lint.rules` is a rule."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]  # the summary shown in listings; reports may give a more specific text
    severity: ClassVar[Severity]
    category: ClassVar[str]
    preview: ClassVar[bool] = False
    fixable: ClassVar[bool] = False
    tokens: ClassVar[tuple[str, ...]] = ()  # a file with none of these is not parsed for this rule
    also_tokens: ClassVar[tuple[str, ...]] = ()  # when set, the file needs one of these as well
    # When set, one of these too: the call the rule's facts start from (a trainer, a Tuner), where the
    # library's import alone would let in every module of the library's own source.
    anchor_tokens: ClassVar[tuple[str, ...]] = ()
    docs: ClassVar[str]
    options: ClassVar[tuple[Option, ...]] = ()
    experiment: ClassVar[Experiment | None] = None  # how `ray-lint verify` confirms a finding at run time
    no_experiment: ClassVar[str] = ""  # without an experiment: why (for `verify` and the rule's page)
    # Whether the rule reports test code (`test-files`). None: only if it is not a performance rule, since a
    # slow shape in a test of three workers costs nothing that matters, while a bug is a bug everywhere.
    in_tests: ClassVar[bool | None] = None
    # Codes of less specific rules whose finding on the same line this rule's finding replaces.
    supersedes: ClassVar[tuple[str, ...]] = ()
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def __init__(self, settings: dict[str, Any] | None = None, ray_versions: RayVersions | None = None) -> None:
        # rules are made only to lint: a run the cache answers never loads `packaging`
        from ray_lint.ray_version import ANY_RAY

        self.settings = {option.name: option.default for option in self.options}
        self.settings.update(settings or {})
        self.ray_versions = ray_versions or ANY_RAY  # the Ray the checked code runs on, for rules about APIs that changed

    def check(self, ctx: Context) -> None:
        raise NotImplementedError

    def needed_tokens(self) -> tuple[str, ...]:
        """Tokens for the pre-filter; a rule whose options add names may widen them."""
        return self.tokens

    def wants(self, text: str) -> bool:
        """The pre-filter: whether a file's text can hold anything for this rule, before parsing it."""
        tokens = self.needed_tokens()
        if not tokens:
            return False
        # The shortest list first: each token the engine has not looked for yet costs a scan of the file.
        groups = sorted((group for group in (tokens, self.also_tokens, self.anchor_tokens) if group), key=len)
        return all(any(token in text for token in group) for group in groups)

    @classmethod
    def reports_tests(cls) -> bool:
        return cls.in_tests if cls.in_tests is not None else cls.category != "perf"

    @classmethod
    def summary(cls) -> dict[str, Any]:
        return {
            "code": cls.code,
            "name": cls.name,
            "message": cls.message,
            "severity": cls.severity.value,
            "category": cls.category,
            "preview": cls.preview,
            "fixable": cls.fixable,
            "in_tests": cls.reports_tests(),
            "options": {o.name: {"default": o.default, "description": o.description} for o in cls.options},
        }


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in `ray_lint.rules`, sorted by code."""
    import ray_lint.rules as package

    found: dict[str, type[Rule]] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module.__name__:
                if value.code in found:
                    raise RuntimeError(f"two rules have code {value.code}")
                found[value.code] = value
    return tuple(sorted(found.values(), key=lambda rule: rule.code))


def rule_by_code_or_name(key: str) -> type[Rule] | None:
    for rule in all_rules():
        if key.upper() == rule.code or key.lower() == rule.name:
            return rule
    return None


def iter_examples() -> Iterator[tuple[type[Rule], Valid | Invalid]]:
    for rule in all_rules():
        examples: list[Valid | Invalid] = [*rule.VALID, *rule.INVALID]
        for example in examples:
            yield rule, example
