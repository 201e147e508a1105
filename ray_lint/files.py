"""Finding the files to lint (Python files and Jupyter notebooks): directories are walked, honouring `.gitignore` files and `exclude`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from ray_lint.config import Resolver

LINTED_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def _resolve(path: Path) -> Path:
    """The real path, or the absolute one for a symlink loop (reading it then reports the loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _git_root(directory: Path) -> Path | None:
    for folder in (directory, *directory.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _gitignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    """Later (deeper) .gitignore files override earlier ones, as in git."""
    ignored = False
    for base, spec in specs:
        try:
            relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        except ValueError:
            continue
        result = spec.check_file(relative)
        if result.include is not None:
            ignored = result.include
    return ignored


def discover(paths: list[Path], resolver: Resolver, force_exclude: bool = False) -> Iterator[Path | Skipped]:
    """Yield files to lint, and a `Skipped` for each named path that does not exist or is excluded.

    A file named on the command line is linted even if `exclude` or `.gitignore` would skip it,
    unless `force_exclude` (for pre-commit, which passes file names)."""
    seen: set[Path] = set()
    for path in paths:
        if not path.exists() and not path.is_symlink():
            yield Skipped(path, "no such file or directory")
            continue
        if not path.is_dir():
            if force_exclude and resolver.settings_for(path).is_excluded(path.absolute(), is_dir=False):
                continue
            resolved = _resolve(path)
            if resolved not in seen:
                seen.add(resolved)
                yield path
            continue
        yield from _walk(path, resolver, seen)


def _walk(root: Path, resolver: Resolver, seen: set[Path]) -> Iterator[Path | Skipped]:
    absolute_root = root.absolute()
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    git_root = _git_root(absolute_root)
    if git_root is not None:  # .gitignore files between the repository root and here apply too
        for folder in reversed(absolute_root.parents):
            if folder == git_root or git_root in folder.parents:
                spec = _gitignore(folder)
                if spec is not None:
                    specs.append((folder, spec))
    yield from _walk_directory(root, absolute_root, _resolve(absolute_root), resolver, specs, seen, git_root is not None)


def _walk_directory(
    directory: Path,
    absolute: Path,
    resolved: Path,
    resolver: Resolver,
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]],
    seen: set[Path],
    in_git: bool,
) -> Iterator[Path | Skipped]:
    """`resolved` is the real path of `absolute`: an entry that is not a symlink is then resolved
    by joining its name (resolving every path costs more than the rest of the walk)."""
    if resolved in seen:  # a symlink loop, or a directory reached twice
        return
    seen.add(resolved)
    if in_git:
        spec = _gitignore(absolute)
        if spec is not None:
            specs = [*specs, (absolute, spec)]
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as error:
        yield Skipped(directory, f"cannot be listed: {error.strerror or error}")
        return
    settings = resolver.settings_for(absolute)
    for entry in entries:
        path = directory / entry.name
        absolute_path = absolute / entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir and entry.name.endswith(LINTED_SUFFIXES):
            yield path  # a directory named like a Python file: reported, not walked
            continue
        if not is_dir and not entry.name.endswith(LINTED_SUFFIXES):
            continue
        if settings.is_excluded(absolute_path, is_dir) or _ignored(absolute_path, is_dir, specs):
            continue
        real = _resolve(absolute_path) if entry.is_symlink() else resolved / entry.name
        if is_dir:
            yield from _walk_directory(path, absolute_path, real, resolver, specs, seen, in_git)
        elif real not in seen:
            seen.add(real)
            yield path
