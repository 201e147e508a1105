"""Configuration: `[tool.ray-lint]` in pyproject.toml or a ray-lint.toml, plus command-line overrides.

Rule selection follows ruff: each layer (a config file, then the command line) may replace `select`,
add with `extend-select` and remove with `ignore` (or `extend-ignore`, its synonym, as in ruff); within
a layer the most specific selector wins (a code or name beats `RAY0`, which beats `RAY`), and on a tie
`ignore` wins. A preview rule runs when preview mode is on, or when it is selected by its exact code
or name.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import shlex
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import pathspec

from ray_lint.declarations import Declaration, Declarations
from ray_lint.rule import Rule, all_rules

if TYPE_CHECKING:
    from ray_lint.ray_version import RayVersions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILES = ("ray-lint.toml", "pyproject.toml")
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pytype", ".ruff_cache", ".ray_lint_cache", ".svn", ".tox", ".venv",
    "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
    # vendored copies of other projects: their findings are not the user's to fix
    "third_party", "vendor", "vendored", "_vendor",
)
# Test code, where rules with `in_tests = False` stay silent (see `all-rules-in-tests`).
DEFAULT_TEST_FILES = ("tests/", "test/", "test_*.py", "*_test.py", "conftest.py")
LIST_KEYS = ("select", "ignore", "extend-select", "extend-ignore", "exclude", "extend-exclude", "test-files")
KNOWN_KEYS = (*LIST_KEYS, "per-file-ignores", "preview", "all-rules-in-tests", "rules", "docs-url", "verify", "ray-version")
VERIFY_KEYS = ("tests", "args")


class ConfigError(Exception):
    """A configuration problem; the message names the file, the key and a likely intended spelling."""


def suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


@dataclass(frozen=True)
class Layer:
    """One source of settings: a config file or the command line. None means "not set here"."""

    origin: str
    root: Path  # relative patterns are relative to this directory
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_ignore: tuple[str, ...] = ()  # the same as `ignore`: a layer's ignores are always added to the earlier layers'
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    preview: bool | None = None
    test_files: tuple[str, ...] | None = None
    all_rules_in_tests: bool | None = None
    rule_options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # keyed by rule name or code as written
    docs_url: str | None = None  # the base of the rule pages' URLs (`ray_lint.diagnostics.docs_url`)
    verify_tests: tuple[str, ...] | None = None  # `[tool.ray-lint.verify] tests`: where `verify` looks for tests
    # `[tool.ray-lint.verify] args`: per entry point (a path relative to `root`), the command line it runs with
    verify_arguments: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ray_version: str | None = None  # the Ray versions the code runs on, a PEP 440 specifier (`ray_lint.ray_version`)


def selector_codes(selector: str, origin: str) -> tuple[frozenset[str], int]:
    """The codes a selector names and how specific it is (longer prefixes are more specific)."""
    codes = {rule.code for rule in all_rules()}
    if selector.upper() == "ALL":
        return frozenset(codes), 0
    by_name = {rule.name: rule.code for rule in all_rules()}
    if selector in by_name:
        return frozenset({by_name[selector]}), 6
    upper = selector.upper()
    matched = frozenset(code for code in codes if code.startswith(upper))
    if upper.startswith("RAY") and matched:
        return matched, len(upper)
    raise ConfigError(f"{origin}: unknown rule selector `{selector}`{suggest(selector, sorted(codes) + sorted(by_name))}")


def parse_layer(data: dict[str, Any], origin: str, root: Path) -> Layer:
    """Check the shape of a `[tool.ray-lint]` table (or a ray-lint.toml) and turn it into a Layer.
    What needs the rule registry (codes, option names) is checked by `check_layer`."""
    for key in data:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"{origin}: unknown key `{key}`{suggest(key, list(KNOWN_KEYS))}")
    values: dict[str, Any] = {}
    for key in LIST_KEYS:
        if key in data:
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ConfigError(f"{origin}: `{key}` must be a list of strings")
            values[key] = tuple(value)
    for key in ("preview", "all-rules-in-tests"):
        if data.get(key) is not None and not isinstance(data[key], bool):
            raise ConfigError(f"{origin}: `{key}` must be true or false")
    if data.get("docs-url") is not None and not isinstance(data["docs-url"], str):
        raise ConfigError(f"{origin}: `docs-url` must be a string (the URL the rule pages `<CODE>.md` are under)")
    ray_version = data.get("ray-version")
    if ray_version is not None:
        if not isinstance(ray_version, str):
            raise ConfigError(f"{origin}: `ray-version` must be a string such as \">=2.40\"")
        # `ray_version` parses specifiers with `packaging`: loaded only when a config sets one
        from ray_lint.ray_version import RayVersionError, check_specifier

        try:
            check_specifier(ray_version, origin)
        except RayVersionError as error:
            raise ConfigError(str(error)) from None
    per_file = data.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{origin}: `per-file-ignores` must be a table of pattern = [codes]")
    for pattern, selectors in per_file.items():
        if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
            raise ConfigError(f"{origin}: `per-file-ignores.\"{pattern}\"` must be a list of codes")
    verify = data.get("verify", {})
    if not isinstance(verify, dict):
        raise ConfigError(f"{origin}: `verify` must be a table (`[tool.ray-lint.verify]`)")
    for key in verify:
        if key not in VERIFY_KEYS:
            raise ConfigError(f"{origin}: unknown key `verify.{key}`{suggest(key, list(VERIFY_KEYS))}")
    tests = verify.get("tests")
    if tests is not None and (not isinstance(tests, list) or not all(isinstance(item, str) for item in tests)):
        raise ConfigError(f"{origin}: `verify.tests` must be a list of paths (test files or folders)")
    arguments = verify.get("args", {})
    if not isinstance(arguments, dict) or not all(isinstance(line, str) for line in arguments.values()):
        raise ConfigError(f"{origin}: `verify.args` must be a table of \"path/to/script.py\" = \"--its --arguments\"")
    command_lines = []
    for script, line in arguments.items():
        try:
            command_lines.append((script, tuple(shlex.split(line))))
        except ValueError as error:  # an unclosed quote
            raise ConfigError(f"{origin}: `verify.args.\"{script}\"`: {error}: {line}") from None
    rules = data.get("rules", {})
    if not isinstance(rules, dict):
        raise ConfigError(f"{origin}: `rules` must be a table of per-rule tables")
    options = []
    for rule_key, settings in rules.items():
        if not isinstance(settings, dict):
            raise ConfigError(f"{origin}: `rules.{rule_key}` must be a table of options")
        options.append((rule_key, tuple(settings.items())))
    return Layer(
        origin=origin,
        root=root,
        select=values.get("select"),
        extend_select=values.get("extend-select", ()),
        ignore=values.get("ignore", ()),
        extend_ignore=values.get("extend-ignore", ()),
        per_file_ignores=tuple((p, tuple(s)) for p, s in per_file.items()),
        exclude=values.get("exclude"),
        extend_exclude=values.get("extend-exclude", ()),
        preview=data.get("preview"),
        test_files=values.get("test-files"),
        all_rules_in_tests=data.get("all-rules-in-tests"),
        rule_options=tuple(options),
        docs_url=data.get("docs-url"),
        verify_tests=tuple(tests) if tests is not None else None,
        verify_arguments=tuple(command_lines),
        ray_version=ray_version,
    )


def check_layer(layer: Layer) -> Layer:
    """Check what a layer names against the rule registry: selectors, rules and their options."""
    origin = layer.origin
    selectors = [*(layer.select or ()), *layer.extend_select, *layer.ignore, *layer.extend_ignore]
    selectors += [selector for _, codes in layer.per_file_ignores for selector in codes]
    for selector in selectors:
        selector_codes(selector, origin)
    for rule_key, settings in layer.rule_options:
        rule = _rule_for_options(rule_key, origin)
        known = {option.name: option for option in rule.options}
        for name, value in settings:
            if name not in known:
                hint = suggest(name, list(known)) or (
                    f"; {rule.name} has no options" if not known else f"; its options are {', '.join(sorted(known))}"
                )
                raise ConfigError(f"{origin}: unknown option `{name}` for rule {rule.code} ({rule.name}){hint}")
            problem = known[name].check(value)
            if problem:
                raise ConfigError(f"{origin}: `rules.{rule.name}.{name}`: {problem}")
    return layer


def _rule_for_options(key: str, origin: str) -> type[Rule]:
    for rule in all_rules():
        if key in (rule.name, rule.code):
            return rule
    names = [rule.name for rule in all_rules()]
    raise ConfigError(f"{origin}: unknown rule `{key}` in `rules`{suggest(key, names)}")


def read_config_file(path: Path) -> Layer | None:
    """The layer a config file defines; None for a pyproject.toml without `[tool.ray-lint]`."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read: {error.strerror or error}") from None
    if path.name == "pyproject.toml":
        section = data.get("tool", {}).get("ray-lint")
        if section is None:
            return None
        origin = f"{path} [tool.ray-lint]"
    else:
        section, origin = data, str(path)
    if not isinstance(section, dict):
        raise ConfigError(f"{origin}: must be a table")
    return parse_layer(section, origin, path.parent.resolve())


def config_file_in(directory: Path) -> Path | None:
    """The ray-lint.toml, or a pyproject.toml with a `[tool.ray-lint]` table, in `directory`."""
    for name in CONFIG_FILES:
        candidate = directory / name
        if candidate.is_file() and (name != "pyproject.toml" or _has_ray_lint_table(candidate)):
            return candidate
    return None


def _has_ray_lint_table(pyproject: Path) -> bool:
    try:
        return b"[tool.ray-lint" in pyproject.read_bytes()
    except OSError:
        return False


@dataclass
class Settings:
    """The resolved settings for the files under one config file (or none), and the files that declare
    the Ray their project runs (`ray_lint.declarations`; None when none does)."""

    layers: tuple[Layer, ...]
    declared: Declaration | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Only the layers and the declared Ray travel to worker processes; everything else is derived again there."""
        return {"layers": self.layers, "declared": self.declared}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.layers = state["layers"]
        self.declared = state["declared"]

    @cached_property
    def fingerprint(self) -> str:
        """A digest of every setting, for the cache: equal settings give equal results."""
        return hashlib.blake2b(repr((self.layers, self.declared)).encode(), digest_size=16).hexdigest()

    def validate(self) -> None:
        """Raise ConfigError for anything the layers name that the rule registry does not know."""
        _ = self._checked

    @cached_property
    def _checked(self) -> bool:
        for layer in self.layers:
            check_layer(layer)
        return True

    @cached_property
    def preview(self) -> bool:
        return next((layer.preview for layer in reversed(self.layers) if layer.preview is not None), False)

    @cached_property
    def all_rules_in_tests(self) -> bool:
        return next((layer.all_rules_in_tests for layer in reversed(self.layers) if layer.all_rules_in_tests is not None), False)

    @cached_property
    def docs_url(self) -> str | None:
        return next((layer.docs_url for layer in reversed(self.layers) if layer.docs_url is not None), None)

    @cached_property
    def verify_tests(self) -> tuple[Path, ...] | None:
        """The tests `verify` may run, as the last layer that names them says (relative to its directory)."""
        layer = next((layer for layer in reversed(self.layers) if layer.verify_tests is not None), None)
        return tuple(layer.root / item for item in layer.verify_tests) if layer and layer.verify_tests is not None else None

    def verify_arguments(self, path: Path) -> tuple[str, ...]:
        """The command line `path`'s entry point runs with under `verify`, as the last layer that names the
        file says (its key relative to that layer's directory); none when no layer names it."""
        for layer in reversed(self.layers):
            for script, arguments in reversed(layer.verify_arguments):
                if (layer.root / script).resolve() == path.resolve():
                    return arguments
        return ()

    def missing_scripts(self) -> list[str]:
        """What `verify.args` names that does not exist (a typo would otherwise run the script with no arguments)."""
        return [
            f"{layer.origin}: `verify.args` names {layer.root / script}, which does not exist"
            for layer in self.layers
            for script, _ in layer.verify_arguments
            if not (layer.root / script).exists()
        ]

    def ray_versions(self, declared: Declaration | None = None) -> RayVersions:
        """The Ray versions the code runs on: `ray-version` as the last layer that sets it says, else what
        `declared` (a notebook's own install) or the project declares, else any. Parsing a declaration
        loads `packaging`, so it happens only when rules are made, never on a run the cache answers."""
        from ray_lint.ray_version import ANY_RAY, RayVersions, versions_declared

        layer = next((layer for layer in reversed(self.layers) if layer.ray_version is not None), None)
        if layer is not None:
            return RayVersions(layer.ray_version, layer.origin)
        declaration = declared or self.declared
        return (versions_declared(declaration) if declaration is not None else None) or ANY_RAY

    @cached_property
    def _test_files(self) -> tuple[pathspec.GitIgnoreSpec, str]:
        """The test-file patterns of the last layer that sets them, and the directory they are relative to."""
        layer = next((layer for layer in reversed(self.layers) if layer.test_files is not None), None)
        patterns, root = (layer.test_files, layer.root) if layer is not None else (DEFAULT_TEST_FILES, Path.cwd())
        return pathspec.GitIgnoreSpec.from_lines(patterns), os.path.abspath(root)

    def is_test_file(self, path: Path) -> bool:
        """Whether `path` is test code (the default patterns are relative to the working directory). With
        strings, not pathlib: a warm run asks once per file, and pathlib's parsing was a third of it."""
        if self.all_rules_in_tests:
            return False
        spec, root = self._test_files
        absolute = os.path.abspath(path)
        relative = absolute[len(root) + 1 :] if absolute.startswith(root + os.sep) else os.path.basename(absolute)
        return spec.match_file(relative.replace(os.sep, "/"))

    @cached_property
    def enabled_codes(self) -> frozenset[str]:
        self.validate()
        enabled = self._decide({rule.code: True for rule in all_rules()})  # preview rules are then dropped unless asked for
        return frozenset(code for code, on in enabled.items() if on)

    def _decide(self, state: dict[str, bool]) -> dict[str, bool]:
        explicit: set[str] = set()
        for layer in self.layers:
            selectors: list[tuple[str, bool]] = [(s, True) for s in (layer.select or ())]
            selectors += [(s, True) for s in layer.extend_select] + [(s, False) for s in (*layer.ignore, *layer.extend_ignore)]
            resolved = [(*selector_codes(s, layer.origin), on, s) for s, on in selectors]
            for code in state:
                best: tuple[int, bool] | None = None
                for codes, specificity, on, selector in resolved:
                    if code in codes and (best is None or specificity > best[0] or (specificity == best[0] and not on)):
                        best = (specificity, on)
                        if on and (specificity == 6 or selector.upper() == code):
                            explicit.add(code)
                if best is not None:
                    state[code] = best[1]
                elif layer.select is not None:
                    state[code] = False
        for rule in all_rules():
            if rule.preview and state[rule.code]:
                state[rule.code] = self.preview or rule.code in explicit
        return state

    @cached_property
    def _per_file_ignores(self) -> list[tuple[pathspec.GitIgnoreSpec, Path, tuple[str, ...], str]]:
        return [
            (pathspec.GitIgnoreSpec.from_lines([pattern]), layer.root, selectors, layer.origin)
            for layer in self.layers
            for pattern, selectors in layer.per_file_ignores
        ]

    def ignored_for(self, path: Path) -> tuple[tuple[str, str], ...]:
        """The (selector, origin) pairs of the per-file-ignores that match `path`, as written: the
        cache keys on them without loading the rule registry."""
        return tuple(
            (selector, origin)
            for spec, root, selectors, origin in self._per_file_ignores
            if spec.match_file(_relative(path, root))
            for selector in selectors
        )

    def codes_for(self, path: Path) -> frozenset[str]:
        """Enabled codes for one file, after per-file-ignores."""
        codes = self.enabled_codes
        for selector, origin in self.ignored_for(path):
            codes = codes - selector_codes(selector, origin)[0]
        if self.is_test_file(path):
            codes = codes - _not_in_tests()
        return codes

    @cached_property
    def rule_options(self) -> dict[str, dict[str, Any]]:
        """Options by rule name, whichever way each layer named the rule."""
        self.validate()
        options: dict[str, dict[str, Any]] = {}
        for layer in self.layers:
            for key, settings in layer.rule_options:
                options.setdefault(_rule_for_options(key, layer.origin).name, {}).update(settings)
        return options

    @cached_property
    def _rule_instances(self) -> dict[RayVersions, dict[str, Rule]]:
        return {}

    @cached_property
    def _project_ray_versions(self) -> RayVersions:
        return self.ray_versions()

    def rules_for(self, path: Path, declared: Declaration | None = None) -> list[Rule]:
        """The rules for `path`; `declared` is what a notebook's own `!pip install ray==...` declares,
        which wins over the project's declaration (not over `ray-version`)."""
        codes = self.codes_for(path)
        versions = self._project_ray_versions if declared is None else self.ray_versions(declared)
        instances = self._rule_instances.get(versions)
        if instances is None:
            instances = self._rule_instances[versions] = {
                rule.code: rule(self.rule_options.get(rule.name), versions) for rule in all_rules()
            }
        return [rule for code, rule in instances.items() if code in codes]

    @cached_property
    def _exclude(self) -> list[tuple[pathspec.PathSpec, Path]]:
        """One spec per directory the patterns are relative to."""
        patterns: list[tuple[str, Path]] = [(p, Path.cwd()) for p in DEFAULT_EXCLUDE]
        for layer in self.layers:
            if layer.exclude is not None:
                patterns = [(p, layer.root) for p in layer.exclude]
            patterns += [(p, layer.root) for p in layer.extend_exclude]
        by_root: dict[Path, list[str]] = {}
        for pattern, root in patterns:
            by_root.setdefault(root, []).append(pattern)
        return [(pathspec.GitIgnoreSpec.from_lines(lines), root) for root, lines in by_root.items()]

    def is_excluded(self, path: Path, is_dir: bool = False) -> bool:
        """Gitignore-style matching of an absolute path against `exclude` and `extend-exclude`."""
        suffix = "/" if is_dir else ""
        return any(spec.match_file(_relative(path, root) + suffix) for spec, root in self._exclude)

    def describe(self) -> list[tuple[str, Any, str]]:
        """(key, value, where it came from) for `ray-lint config`."""
        rows: list[tuple[str, Any, str]] = []

        def origin_of(attribute: str) -> str:
            for layer in reversed(self.layers):
                value = getattr(layer, attribute)
                if value not in (None, ()):
                    return layer.origin
            return "default"

        rows.append(("enabled rules", sorted(self.enabled_codes), origin_of("select")))
        for key, attribute in (("select", "select"), ("extend-select", "extend_select"), ("ignore", "ignore"), ("extend-ignore", "extend_ignore")):
            values = [v for layer in self.layers for v in (getattr(layer, attribute) or ())]
            rows.append((key, values, origin_of(attribute)))
        rows.append(("preview", self.preview, origin_of("preview")))
        rows.append(("per-file-ignores", {p: list(s) for layer in self.layers for p, s in layer.per_file_ignores}, origin_of("per_file_ignores")))
        exclude = next((list(l.exclude) for l in reversed(self.layers) if l.exclude is not None), list(DEFAULT_EXCLUDE))
        rows.append(("exclude", exclude, origin_of("exclude")))
        rows.append(("extend-exclude", [p for l in self.layers for p in l.extend_exclude], origin_of("extend_exclude")))
        test_files = next((list(l.test_files) for l in reversed(self.layers) if l.test_files is not None), list(DEFAULT_TEST_FILES))
        rows.append(("test-files", test_files, origin_of("test_files")))
        rows.append(("all-rules-in-tests", self.all_rules_in_tests, origin_of("all_rules_in_tests")))
        rows.append(("docs-url", self.docs_url, origin_of("docs_url")))
        rows.append(("verify.tests", [str(p) for p in self.verify_tests or ()], origin_of("verify_tests")))
        given = {str(layer.root / script): shlex.join(arguments) for layer in self.layers for script, arguments in layer.verify_arguments}
        rows.append(("verify.args", given, origin_of("verify_arguments")))
        versions = self.ray_versions()
        rows.append(("ray-version", versions.describe(), versions.declared_in or "default"))
        for rule in all_rules():
            for option in rule.options:
                value = self.rule_options.get(rule.name, {}).get(option.name, option.default)
                source = next(
                    (l.origin for l in reversed(self.layers) if any(n == rule.name and option.name in dict(s) for n, s in l.rule_options)),
                    "default",
                )
                rows.append((f"rules.{rule.name}.{option.name}", value, source))
        return rows


@functools.cache
def _not_in_tests() -> frozenset[str]:
    """The codes of the rules that do not report test code."""
    return frozenset(rule.code for rule in all_rules() if not rule.reports_tests())


def _relative(path: Path, root: Path) -> str:
    """`path` relative to `root`; for a path outside `root`, its name, which patterns without a `/`
    (the usual kind: `build`, `*_pb2.py`) still match."""
    absolute = path.absolute()
    try:
        return PurePosixPath(absolute.relative_to(root)).as_posix()
    except ValueError:
        return absolute.name


@dataclass
class Resolver:
    """Finds the settings for each file: its nearest config file (or `--config`), then the front-end's own
    options, which win (the command line's flags, the editor's settings, flake8's options)."""

    overrides: Layer
    config_path: Path | None = None
    isolated: bool = False
    validate: bool = True  # False: the caller validates (the cache skips it when the settings are known good)
    _by_path: dict[Path, Settings] = field(default_factory=dict)
    _by_directory: dict[Path, Settings] = field(default_factory=dict)
    _by_file: dict[tuple[Path | None, Declaration | None], Settings] = field(default_factory=dict)
    _config_in: dict[Path, Path | None] = field(default_factory=dict)
    _declarations: Declarations = field(default_factory=Declarations)  # what each directory's project declares of Ray

    def settings_for(self, path: Path) -> Settings:
        """The settings for a file or directory (memoized: a walk asks once per directory and file)."""
        known = self._by_path.get(path)
        if known is None:
            known = self._by_path[path] = self._settings_for_directory((path if path.is_dir() else path.parent).resolve())
        return known

    def _settings_for_directory(self, directory: Path) -> Settings:
        cached = self._by_directory.get(directory)
        if cached is not None:
            return cached
        if self.isolated:
            config_file = None
        elif self.config_path is not None:
            config_file = self.config_path
        else:
            config_file = self._config_file_in(directory)
        declared = self._declarations.for_directory(directory)  # read even when isolated: it is the project's, not config
        settings = self._by_file.get((config_file, declared))
        if settings is None:
            layers = [self.overrides]
            if config_file is not None:
                layer = read_config_file(config_file)
                if layer is not None:
                    layers.insert(0, layer)
            settings = Settings(tuple(layers), declared)
            if self.validate:  # errors surface before linting
                settings.validate()
            self._by_file[config_file, declared] = settings
        self._by_directory[directory] = settings
        return settings

    def _config_file_in(self, directory: Path) -> Path | None:
        """The nearest config file at or above `directory`, remembering each directory's answer."""
        if directory not in self._config_in:
            here = config_file_in(directory)
            if here is None and directory.parent != directory:
                here = self._config_file_in(directory.parent)
            self._config_in[directory] = here
        return self._config_in[directory]

    def all_settings(self) -> list[Settings]:
        """Every Settings this resolver has handed out."""
        return list(self._by_file.values())
