"""Which Ray versions a project runs, from what it declares (`ray_lint.declarations` finds the files).

A rule about an API that changed (a deprecation, an error added in some release) is right only for the
Ray a project runs. Every declaration of Ray in the nearest directory that has one must hold (their
specifiers are intersected): `[project]` dependencies, optional dependencies and `[dependency-groups]`
and Poetry's `ray = "^2.9"` in `pyproject.toml`; `requirements*.txt` and `setup.cfg` lines (and a
comment there that names the Ray image, `# base image: anyscale/ray:2.24.0-py311`); the
requirement strings of `setup.py`; `FROM rayproject/ray:2.9.0` (or `anyscale/ray:...`, `ray-ml` and `ray-llm` images too) and
`RUN pip install "ray==2.9.0"` in a `Dockerfile`; the items of a conda environment's dependencies
(`- ray[air]==2.8.1` under `pip:`, conda's own `- ray-core=2.8.1`); a notebook's
`!pip install "ray[data]==2.2.0"`. `[tool.ray-lint] ray-version = ">=2.40"`
overrides what is read. Where nothing is declared, ray-lint assumes the Ray it checks against and
later. (Code kept for other versions inside a file, under `if RAY_VERSION >= ...:`, is a Python fact:
`PythonModel.version_gated`.)
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ray_lint.declarations import CONDA_RAY_PACKAGES, NOTEBOOK_INSTALL, PIP_INSTALL, Declaration, is_conda_environment

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# The releases a declared range is tested against: every minor release ray-lint knows of.
KNOWN_RELEASES = tuple(Version(f"1.{minor}.0") for minor in range(14)) + tuple(Version(f"2.{minor}.0") for minor in range(61))
_NO_FLOOR = Version("0.0.1")
_NO_CEILING = Version("999")
# One of Ray's images and its version (`rayproject/ray-ml:2.9.0`, `anyscale/ray-llm:2.54.1-py311-cu128`).
_RAY_IMAGE = r"(?:rayproject|anyscale)/ray(?:-ml|-llm)?:(\d+\.\d+(?:\.\d+)?)"
_IMAGE = re.compile(rf"^\s*FROM\s+(?:--\S+\s+)*(?:\S+/)?{_RAY_IMAGE}", re.MULTILINE)
# A requirements file's comment that names the Ray image it installs into (`# base image: anyscale/ray:2.24.0-py311`).
_IMAGE_COMMENT = re.compile(rf"#.*?\b{_RAY_IMAGE}")
_WHEEL = re.compile(r"/ray-(\d+\.\d+\.\d+)[-.]")
_POETRY_CARET = re.compile(r"^\^(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
_POETRY_TILDE = re.compile(r"^~(\d+)\.(\d+)(?:\.(\d+))?$")
# A `pip install ...` command in a Dockerfile's `RUN` (continuation lines joined); the group is what it installs.
_RUN_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b([^&;|]*)")
# A list item of a conda environment: `- ray[air]==2.8.1` (a pip requirement) or conda's `- ray-core=2.8.1`.
_CONDA_ITEM = re.compile(r"^\s*-\s*[\"']?([^\"'#]+?)[\"']?\s*(?:#.*)?$")
_CONDA_RAY = re.compile(rf"^{CONDA_RAY_PACKAGES}\s*=\s*(\d+(?:\.\d+)*)(?:\.\*)?$")


class RayVersionError(ValueError):
    """A `ray-version` setting that is not a PEP 440 specifier."""


@dataclass(frozen=True)
class RayVersions:
    """The Ray versions a project allows: a PEP 440 specifier ("" allows every version) and where it is
    declared ("" when nothing is)."""

    specifier: str = ""
    declared_in: str = ""

    @cached_property
    def _allowed(self) -> tuple[SpecifierSet, list[Version]]:
        specifiers = SpecifierSet(self.specifier)
        named = [Version(spec.version) for spec in specifiers if _is_version(spec.version)]
        candidates = sorted({*KNOWN_RELEASES, *named})
        return specifiers, [version for version in candidates if specifiers.contains(version, prereleases=True)]

    @property
    def oldest(self) -> Version | None:
        """The oldest Ray allowed; None without a floor (the project is taken to run a recent Ray)."""
        specifiers, allowed = self._allowed
        return None if specifiers.contains(_NO_FLOOR) or not allowed else allowed[0]

    @property
    def newest(self) -> Version | None:
        """The newest Ray allowed; None without a ceiling."""
        specifiers, allowed = self._allowed
        return None if specifiers.contains(_NO_CEILING) or not allowed else allowed[-1]

    def may_run(self, release: str) -> bool:
        """Whether the project may run `release` or a later Ray."""
        newest = self.newest
        return newest is None or newest >= Version(release)

    def always_runs(self, release: str) -> bool:
        """Whether every Ray the project allows is `release` or later (a project without a floor counts)."""
        oldest = self.oldest
        return oldest is None or oldest >= Version(release)

    def describe(self) -> str:
        return f"ray{self.specifier}" if self.specifier else "any"


ANY_RAY = RayVersions()


def check_specifier(specifier: str, origin: str) -> None:
    """Raise RayVersionError unless a `ray-version` setting is a PEP 440 specifier such as `>=2.40`."""
    try:
        SpecifierSet(specifier)
    except InvalidSpecifier:
        raise RayVersionError(f"{origin}: `ray-version` must be a version specifier such as \">=2.40\" or \"==2.9.3\", not {specifier!r}") from None


def versions_declared(declaration: Declaration) -> RayVersions | None:
    """The Ray versions a declaration allows, or None when none of its files really requires Ray."""
    found = [specifier for name, text in declaration.files for specifier in _specifiers(name, text)]
    if not found:
        return None
    return RayVersions(str(SpecifierSet(",".join(filter(None, found)))), declaration.describe())


def _specifiers(name: str, text: str) -> list[str]:
    """The specifiers of Ray in one file."""
    if name == NOTEBOOK_INSTALL:
        return _pip_install_specifiers(text)
    if name == "pyproject.toml":
        return _pyproject_specifiers(text)
    if name == "setup.py":
        return _setup_py_specifiers(text)
    if name.lower().startswith(("dockerfile", "containerfile")):
        return [f"=={version}" for version in _IMAGE.findall(text)] + _run_pip_install_specifiers(text)
    if is_conda_environment(name):
        return _conda_specifiers(text)
    found = (_ray_specifier(line.split("#", 1)[0].strip()) for line in text.splitlines())
    return [specifier for specifier in found if specifier is not None] + [f"=={version}" for version in _IMAGE_COMMENT.findall(text)]


def _pip_install_specifiers(text: str) -> list[str]:
    """The Ray requirements of a notebook's `!pip install` lines."""
    return [specifier for line in text.splitlines() if (match := PIP_INSTALL.match(line)) for specifier in _installed(match.group(1))]


def _run_pip_install_specifiers(text: str) -> list[str]:
    """The Ray requirements of a Dockerfile's `pip install` commands."""
    return [specifier for command in _RUN_PIP_INSTALL.findall(text.replace("\\\n", " ")) for specifier in _installed(command)]


def _installed(arguments: str) -> list[str]:
    """The Ray requirements among the arguments of one `pip install`."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        return []
    return [specifier for specifier in map(_ray_specifier, words) if specifier is not None]


def _conda_specifiers(text: str) -> list[str]:
    """The Ray requirements among a conda environment's list items: pip's (`ray[air]==2.8.1`) and conda's
    own match specifications (`ray-core=2.8.1` means 2.8.1 or any release under it)."""
    found: list[str] = []
    for line in text.splitlines():
        item = _CONDA_ITEM.match(line)
        if item is None:
            continue
        conda = _CONDA_RAY.match(item.group(1).strip())
        specifier = f"=={conda.group(1)}.*" if conda else _ray_specifier(item.group(1).strip())
        if specifier is not None:
            found.append(specifier)
    return found


def _pyproject_specifiers(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    strings: list[Any] = list(project.get("dependencies", []) or [])
    for group in (project.get("optional-dependencies") or {}, data.get("dependency-groups") or {}):
        if isinstance(group, dict):
            for items in group.values():
                strings += items if isinstance(items, list) else []
    found = [specifier for specifier in map(_ray_specifier, strings) if specifier is not None]
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
        tables += [group.get("dependencies") for group in (poetry.get("group") or {}).values() if isinstance(group, dict)]
        for table in tables:
            if isinstance(table, dict) and "ray" in table:
                specifier = _poetry_specifier(table["ray"])
                if specifier is not None:
                    found.append(specifier)
    return found


def _setup_py_specifiers(text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    strings = (node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return [specifier for specifier in map(_ray_specifier, strings) if specifier is not None]


def _ray_specifier(text: Any) -> str | None:
    """The specifier of `text` when it is a requirement of Ray (`ray[data]>=2.11`, `ray @ .../ray-2.48.0-...whl`)."""
    if not isinstance(text, str) or not text.lstrip().lower().startswith("ray"):
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if requirement.name.lower() != "ray":
        return None
    if requirement.url:
        wheel = _WHEEL.search(requirement.url)
        return f"=={wheel.group(1)}" if wheel else None
    return str(requirement.specifier)


def _poetry_specifier(value: Any) -> str | None:
    """Poetry's `"^2.9"`, `"~2.9"`, `"2.9.3"`, `"*"` or `{version = ...}` as a PEP 440 specifier."""
    if isinstance(value, dict):
        value = value.get("version")
    if not isinstance(value, str):
        return None
    value = value.strip()
    if value in ("", "*"):
        return ""
    caret = _POETRY_CARET.match(value)
    if caret:
        major = int(caret.group(1))
        floor = ".".join(part for part in caret.groups() if part is not None)
        ceiling = f"{major + 1}.0" if major else f"0.{int(caret.group(2) or 0) + 1}"
        return f">={floor},<{ceiling}"
    tilde = _POETRY_TILDE.match(value)
    if tilde:
        return f">={'.'.join(part for part in tilde.groups() if part is not None)},<{tilde.group(1)}.{int(tilde.group(2)) + 1}"
    if _is_version(value):
        return f"=={value}"
    try:
        return str(SpecifierSet(value))
    except InvalidSpecifier:
        return None


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
