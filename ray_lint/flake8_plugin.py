"""The flake8 front-end: ray-lint's rules as flake8 checks with `RAY` codes.

flake8 owns everything around the checks: `# noqa`, `--select`/`--ignore`, `--per-file-ignores`,
`--jobs`, statistics. The plugin runs the engine on the lines flake8 already read (it asks for
`tree` because flake8 requires a tree, logical-line or physical-line parameter, and a tree means
CPython's parse, which the engine's nesting check then need not redo) and turns each
finding into `(line, column, "RAYxxx message", type)` with flake8's 0-based columns.

Rule options come from `[tool.ray-lint]` (nearest config file, as on the command line), overridden
by `--ray-lint-<rule>-<option>` flake8 options (command line or the `[flake8]` section). Preview
rules sit in flake8's default ignore list, so they report only when selected by their code.

What the engine finds is kept in ray-lint's cache, as on the command line (`.ray_lint_cache` in the
project root of the working directory, or `$RAY_LINT_CACHE_DIR`): a file that flake8 checks again
unchanged is not parsed again. `--ray-lint-no-cache` turns it off, `--ray-lint-cache-dir` moves it.
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from ray_lint import __version__
from ray_lint.api import lint_in_project
from ray_lint.cache import CACHE_DIR_ENV, CACHE_DIR_NAME, ResultCache, default_directory
from ray_lint.config import ConfigError, Resolver, check_layer, parse_layer
from ray_lint.diagnostics import file_error
from ray_lint.rule import Option, Rule, all_rules

Result = tuple[int, int, str, type]


def _flag(rule: type[Rule], option: Option) -> str:
    return f"--ray-lint-{rule.name}-{option.name}"


def _dest(rule: type[Rule], option: Option) -> str:
    return _flag(rule, option).lstrip("-").replace("-", "_")


class RayLintPlugin:
    name = "ray-lint"
    version = __version__

    # Set once per process by `parse_options` (flake8 calls it in every worker, forked or spawned).
    resolver: ClassVar[Resolver | None] = None
    cache: ClassVar[ResultCache | None] = None
    setup_error: ClassVar[str | None] = None
    flake8_skips: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, tree: ast.AST, lines: list[str], filename: str) -> None:
        self.tree = tree if isinstance(tree, ast.Module) else None
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager: Any) -> None:
        for rule in all_rules():
            for option in rule.options:
                kwargs: dict[str, Any] = {"parse_from_config": True, "help": f"{rule.code} ({rule.name}): {option.description}"}
                if isinstance(option.default, list):
                    kwargs.update(comma_separated_list=True, default=None)
                elif isinstance(option.default, bool):
                    kwargs.update(action="store_true", default=None)
                else:
                    kwargs.update(type=type(option.default), default=None)
                manager.add_option(_flag(rule, option), **kwargs)
        manager.extend_default_ignore([rule.code for rule in all_rules() if rule.preview])
        manager.add_option("--ray-lint-no-cache", action="store_true", parse_from_config=True, help="ray-lint: do not read or write its cache")
        manager.add_option(
            "--ray-lint-cache-dir", parse_from_config=True,
            help=f"ray-lint's cache directory (default: ${CACHE_DIR_ENV}, or {CACHE_DIR_NAME} in the project root)",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """Translate flake8's options into a ray-lint command-line layer (it wins over config files)."""
        rule_options: dict[str, dict[str, Any]] = {}
        for rule in all_rules():
            for option in rule.options:
                value = getattr(options, _dest(rule, option), None)
                if value is not None:
                    rule_options.setdefault(rule.name, {})[option.name] = value
        # A rule selected by its exact code in flake8 runs even when the config file leaves it off
        # (preview rules, for instance); flake8 then filters what it reports.
        codes = {rule.code for rule in all_rules()}
        named = [*(options.select or ()), *(options.extend_select or ())]
        data: dict[str, Any] = {"extend-select": sorted(codes.intersection(named))}
        if rule_options:
            data["rules"] = rule_options
        cls.flake8_skips = frozenset(code for code in codes if not _flake8_reports(options, code))
        if getattr(options, "ray_lint_no_cache", False):
            cls.cache = None
        else:  # the CLI's cache: a file flake8 checks again unchanged is not parsed again
            directory = getattr(options, "ray_lint_cache_dir", None)
            cls.cache = ResultCache(Path(directory) if directory else default_directory(Path.cwd()))
        try:
            cls.resolver = Resolver(check_layer(parse_layer(data, "flake8 options", Path.cwd())))
            cls.setup_error = None
        except ConfigError as error:
            cls.resolver, cls.setup_error = None, str(error)

    def run(self) -> Iterator[Result]:
        """Never raises: an exception here would abort the whole flake8 run."""
        try:
            diagnostics = self._lint()
        except Exception as error:  # a ray-lint bug must not take flake8 down with it
            diagnostics = [file_error(f"internal error: {type(error).__name__}: {error}")]
        for diagnostic in diagnostics:
            yield diagnostic.start.line, diagnostic.start.column - 1, f"{diagnostic.code} {diagnostic.message}", type(self)

    def _lint(self) -> list[Any]:
        if self.resolver is None:
            return [file_error(f"ray-lint is not configured: {self.setup_error or 'flake8 did not call parse_options'}")]
        path = Path(self.filename)
        try:
            settings = self.resolver.settings_for(path.absolute())
        except ConfigError as error:
            _warn_once(str(error))  # also on stderr: a `--select` without RAY000 would hide it
            return [file_error(str(error))]
        rules = [rule for rule in settings.rules_for(path) if rule.code not in self.flake8_skips]
        return lint_in_project(
            "".join(self.lines), path, rules, self.resolver, self.cache, noqa_comments="caller", python_tree=self.tree,
        )


@functools.cache
def _warn_once(message: str) -> None:
    sys.stderr.write(f"ray-lint: error: {message}; ray-lint's rules did not run\n")


def _flake8_reports(options: argparse.Namespace, code: str) -> bool:
    """Whether flake8 would report `code` anywhere, by flake8's own decision rules; saves running rules
    whose findings flake8 would drop (`flake8 --select E`, say). Per-file ignores stay flake8's job."""
    try:
        from flake8.style_guide import Decision, DecisionEngine

        return DecisionEngine(options).decision_for(code) is Decision.Selected
    except Exception:  # flake8's internals moved: run the rule and let flake8 filter
        return True
