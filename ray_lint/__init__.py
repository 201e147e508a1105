"""ray-lint: finds performance and correctness anti-patterns in Python code that uses Ray."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location

__version__ = "0.1.0"


# Where `ray_lint.rules` comes from. The rule modules live in the source tree's top-level `rules/`
# folder; the wheel ships them as `ray_lint/rules/` (pyproject.toml's `package-dir`), and nothing
# below happens there. In a source tree (a plain checkout on PYTHONPATH, the editable install, a
# second git worktree sharing the first one's virtualenv) the finder below serves `ray_lint.rules`
# from the `rules/` beside this very `ray_lint`. It goes first on `sys.meta_path`, so setuptools'
# editable finder, which maps the name to the checkout that was installed, is never asked. It
# answers only for the `ray_lint` it was made by (its `__path__`), so a `ray_lint` imported later from
# elsewhere is not served this tree's rules. (Adding the source root to `__path__` would do the same
# in two lines, but would make `tests`, `benchmarks` and the package itself importable as
# `ray_lint.*`, which `pkgutil.walk_packages(ray_lint.__path__)` then walks into.)
class _RulesBesideThePackage:
    """Finds `ray_lint.rules` in the top-level `rules/` folder of the source tree `ray_lint` came from."""

    def __init__(self, package_dir: str, rules_dir: str) -> None:
        self.package_dir = package_dir
        self.rules_dir = rules_dir

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: object = None) -> ModuleSpec | None:
        if fullname != f"{__name__}.rules" or not any(os.path.realpath(entry) == self.package_dir for entry in path or ()):
            return None
        return spec_from_file_location(
            fullname, os.path.join(self.rules_dir, "__init__.py"), submodule_search_locations=[self.rules_dir]
        )


def _serve_rules_from_the_source_tree() -> None:
    package_dir = os.path.dirname(os.path.realpath(__file__))
    rules_dir = os.path.join(os.path.dirname(package_dir), "rules")
    packaged = os.path.isfile(os.path.join(package_dir, "rules", "__init__.py"))
    if not packaged and os.path.isfile(os.path.join(rules_dir, "__init__.py")):
        sys.meta_path.insert(0, _RulesBesideThePackage(package_dir, rules_dir))


_serve_rules_from_the_source_tree()
