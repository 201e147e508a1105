"""The shape of the house: rules import only `ray_lint`, and no module imports itself back through others.

Imports are read from the source with `ast`, wherever they stand (a function body, `if TYPE_CHECKING:`):
a cycle held apart only by a lazy or type-only import is still a cycle for a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"ray_lint": ROOT / "ray_lint", "ray_lint.rules": ROOT / "rules"}


def _modules() -> dict[str, Path]:
    """Every module of ray-lint by its dotted name (the rules as `ray_lint.rules.*`, as installed)."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The ray-lint modules `name` imports, resolved to modules (`from ray_lint import engine` is `ray_lint.engine`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target not in ("ray_lint", "ray_lint.rules"):
                out.add(target)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_rules_import_only_ray_lint() -> None:
    leaning = {
        name: sorted(t for t in targets if t.startswith("ray_lint.rules."))
        for name, targets in GRAPH.items()
        if name.startswith("ray_lint.rules.")
    }
    assert {name: targets for name, targets in leaning.items() if targets} == {}


def test_core_does_not_import_rules() -> None:
    core = {name: sorted(t for t in targets if t.startswith("ray_lint.rules")) for name, targets in GRAPH.items()}
    assert {n: t for n, t in core.items() if t and not n.startswith("ray_lint.rules")} == {}


def _cycle() -> list[str] | None:
    """One import cycle, as the modules along it, or None (a depth-first search for a back edge)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in sorted(GRAPH):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def test_no_import_cycles() -> None:
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    ("source", "cycle"),
    [({"a": {"b"}, "b": {"a"}}, True), ({"a": {"b"}, "b": {"c"}, "c": set()}, False)],
)
def test_the_cycle_finder_finds_cycles(source: dict[str, set[str]], cycle: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "GRAPH", source)
    assert (_cycle() is not None) == cycle


def test_findings_hand_their_experiment_its_declared_facts() -> None:
    """The payload a rule gives its experiment is the typed value the experiment declares; a rule without an
    experiment gives none (a dict of facts nobody reads is dead weight in every finding)."""
    from ray_lint.engine import lint_text
    from ray_lint.rule import Invalid, all_rules

    wrong = []
    for rule in all_rules():
        for example in rule.INVALID:
            assert isinstance(example, Invalid)
            for finding in lint_text(example.code, [rule()]):
                expected = rule.experiment.facts_type if rule.experiment is not None else type(None)
                if finding.code == rule.code and not isinstance(finding.facts, expected):
                    wrong.append(f"{rule.code} line {example.line}: {type(finding.facts).__name__}, not {expected.__name__}")
    assert wrong == []


def test_every_rule_has_an_experiment_or_says_why_not() -> None:
    """`ray-lint verify` runs every finding it can; a rule it cannot verify says why, in one place, for the
    verdict and the rule's page (RAY000 reports unreadable files: there is nothing to run)."""
    from ray_lint.diagnostics import FILE_ERROR_CODE
    from ray_lint.rule import all_rules

    silent = [rule.code for rule in all_rules() if rule.code != FILE_ERROR_CODE and (rule.experiment is None) == (not rule.no_experiment)]
    assert silent == [], "neither an experiment nor a reason, or both"
