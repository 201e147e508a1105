"""Where a project declares the Ray it runs: the files, found and read, not yet understood.

ray-lint reads the project's own declaration of Ray, nearest first, from a file's directory up to the
repository's top (a directory with `.git`): `pyproject.toml`, `requirements*.txt`, `setup.py`,
`setup.cfg`, a `Dockerfile` or `Containerfile`, a conda environment (`environment.yml`, `conda.yaml`,
`*conda*.yml`), and in a notebook its own `!pip install` lines. This
module only finds those files and keeps their text: the text is part of the settings' fingerprint, so
a changed pin invalidates the cache, while a run whose files all hit the cache never parses a
requirement (`ray_lint.ray_version` does, with `packaging`, when a rule needs the answer).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

NOTEBOOK_INSTALL = "notebook"  # the file name a notebook's own `!pip install` lines go by
# A word `ray` (not `array`, `ray-lint` or `ray_lint`), or the `ray-ml` and `ray-llm` of Ray's images
# (`FROM anyscale/ray-llm:2.54.1`): a file without one declares nothing about Ray.
_RAY_WORD = re.compile(r"(?<![\w-])ray(?:-ml|-llm)?(?![\w-])")
# Ray's packages on conda-forge: a conda environment may name one of these rather than `ray`.
CONDA_RAY_PACKAGES = r"ray(?:-(?:core|default|all|air|data|train|tune|serve|rllib|client))?"
_CONDA_RAY_WORD = re.compile(rf"(?<![\w-]){CONDA_RAY_PACKAGES}(?![\w-])")
# A notebook's `!pip install ...` line; the group is what it installs.
PIP_INSTALL = re.compile(r"^\s*[%!]\s*(?:python\d*\s+-m\s+)?(?:pip3?|uv\s+pip)\s+install\b(.*)$")


@dataclass(frozen=True)
class Declaration:
    """The files of one directory (or a notebook's install lines) that may declare Ray: (file name, text)."""

    where: str  # the directory's name ("" for a notebook's own install lines)
    files: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        return ", ".join(f"{self.where}/{name}" if self.where else name for name, _ in self.files)


def may_declare(name: str) -> bool:
    """Whether a file of this name may declare the Ray a project runs."""
    lowered = name.lower()
    return (
        name in ("pyproject.toml", "setup.py", "setup.cfg")
        or (lowered.startswith("requirements") and lowered.endswith(".txt"))
        or lowered.startswith(("dockerfile", "containerfile"))
        or is_conda_environment(name)
    )


def is_conda_environment(name: str) -> bool:
    """Whether a file of this name is (by the names conda and MLflow give them) a conda environment."""
    lowered = name.lower()
    return lowered.endswith((".yml", ".yaml")) and ("conda" in lowered or lowered.startswith("environment"))


class Declarations:
    """The nearest declaration of Ray for each directory, remembering every directory's answer."""

    def __init__(self) -> None:
        self._by_directory: dict[Path, Declaration | None] = {}

    def for_directory(self, directory: Path) -> Declaration | None:
        if directory not in self._by_directory:
            names = _names_in(directory)  # one listing per directory: a tree has hundreds
            here = _declaration(directory, names)
            if here is None and ".git" not in names and directory.parent != directory:
                here = self.for_directory(directory.parent)
            self._by_directory[directory] = here
        return self._by_directory[directory]


def declaration_in(directory: Path) -> Declaration | None:
    """The files of one directory that name Ray, or None when none does."""
    return _declaration(directory, _names_in(directory))


def _names_in(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _declaration(directory: Path, names: list[str]) -> Declaration | None:
    files = []
    for name in sorted(name for name in names if may_declare(name)):
        try:
            text = (directory / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _RAY_WORD.search(text) or (is_conda_environment(name) and _CONDA_RAY_WORD.search(text)):
            files.append((name, text))
    return Declaration(directory.name, tuple(files)) if files else None


def notebook_declaration(magic_lines: list[str]) -> Declaration | None:
    """A notebook's own `!pip install ...` / `%pip install ...` lines that name Ray."""
    installs = [line for line in magic_lines if PIP_INSTALL.match(line) and _RAY_WORD.search(line)]
    return Declaration("", ((NOTEBOOK_INSTALL, "\n".join(installs)),)) if installs else None
