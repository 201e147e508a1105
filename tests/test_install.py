"""Packaging: the wheel holds the right files, installs into a bare virtualenv and lints there without
Ray; `pip install CLONE` and `pipx install CLONE` give a working `ray-lint` whose rule URLs point at
pages it installed; the editable install maps `ray_lint.rules` onto the checkout's top-level `rules/`
directory; and `ray_lint.rules` always comes from the same tree as `ray_lint` itself: a plain
checkout on PYTHONPATH, a second git worktree sharing this virtualenv, the wheel.

The bare-virtualenv tests install the wheel's dependencies (libcst, pathspec, rich) from the package
index; the clone installs (marked `network`) also fetch the build backend, as a user's would; the
others need no network (the wheel is built without build isolation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

REPO = Path(__file__).resolve().parent.parent

# Variables that would let the subprocesses see something other than what they are meant to test.
_LEAKY_ENV = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH",
    "RAY_LINT_OUTPUT_FORMAT", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
)

RAY001_SOURCE = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"


def _clean_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _LEAKY_ENV}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout
    )


def _explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"command: {proc.args}\nexit: {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def _copy_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree, as a fresh clone has it: a build writes `build/` and `*.egg-info` where
    it runs, never into the checkout."""
    source = tmp_path_factory.mktemp("source") / "ray-lint"
    skipped = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", ".ray_lint_cache")
    shutil.copytree(REPO, source, ignore=skipped)
    return source


# ---------------------------------------------------------------------------- the wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel once, with the test environment's python, from a copy of the source tree."""
    outdir = tmp_path_factory.mktemp("wheel")
    source = _copy_source(tmp_path_factory)
    proc = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", outdir], cwd=source, timeout=300)
    assert proc.returncode == 0, _explain(proc)
    wheels = list(outdir.glob("*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {outdir}, found {wheels}\n{_explain(proc)}"
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_wheel_ships_rules_inside_the_package(wheel_names: list[str]) -> None:
    assert "ray_lint/rules/__init__.py" in wheel_names
    assert "ray_lint/rules/get_in_loop.py" in wheel_names


def test_wheel_has_no_top_level_rules_or_tests(wheel_names: list[str]) -> None:
    assert [n for n in wheel_names if n == "rules" or n.startswith("rules/")] == []
    assert [n for n in wheel_names if n == "tests" or n.startswith("tests/")] == []
    top_level = {name.split("/", 1)[0] for name in wheel_names}
    dist_info = {t for t in top_level if t.endswith(".dist-info")}
    assert len(dist_info) == 1 and top_level - dist_info == {"ray_lint"}, f"top-level entries: {sorted(top_level)}"


def test_wheel_rules_match_the_checkout(wheel: Path, wheel_names: list[str]) -> None:
    """Every rule module in `rules/` is in the wheel, byte for byte, and nothing else is (a stale
    `build/lib` left by an earlier build would otherwise slip old or deleted rules into the wheel)."""
    shipped = {n.removeprefix("ray_lint/rules/") for n in wheel_names if n.startswith("ray_lint/rules/")}
    on_disk = {p.name for p in (REPO / "rules").glob("*.py")}
    assert shipped == on_disk
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(on_disk):
            assert archive.read(f"ray_lint/rules/{name}") == (REPO / "rules" / name).read_bytes(), name


def test_wheel_ships_every_rule_page(wheel_names: list[str]) -> None:
    """The pages the rule URLs of a wheel install point at (`ray_lint.diagnostics.rule_docs_dir`)."""
    shipped = {n.removeprefix("ray_lint/rule_docs/") for n in wheel_names if n.startswith("ray_lint/rule_docs/")}
    assert shipped == {p.name for p in (REPO / "docs" / "rules").glob("*.md")}


def test_wheel_declares_the_console_script(wheel: Path, wheel_names: list[str]) -> None:
    [entry_points] = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "ray-lint = ray_lint.cli:main" in text


# ---------------------------------------------------------------------------- a bare virtualenv


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv (no system site packages) with only the wheel and its dependencies."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    work = venv.parent
    proc = _run([sys.executable, "-m", "venv", venv], cwd=work)
    assert proc.returncode == 0, _explain(proc)
    python = venv / "bin" / "python"
    proc = _run([python, "-m", "pip", "install", "-q", wheel], cwd=work, timeout=180)
    assert proc.returncode == 0, _explain(proc)
    return venv


def test_venv_uses_the_installed_wheel_not_the_checkout(fresh_venv: Path, tmp_path: Path) -> None:
    proc = _run(
        [
            fresh_venv / "bin" / "python",
            "-c",
            "import ray_lint, ray_lint.rules, ray_lint.rules.get_in_loop as m; print(ray_lint.rules.__path__[0]); print(m.__file__)",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, _explain(proc)
    rules_dir, module_file = (Path(line) for line in proc.stdout.splitlines())
    site_packages = next((fresh_venv / "lib").glob("python3*/site-packages"))
    assert rules_dir.resolve() == (site_packages / "ray_lint" / "rules").resolve()
    assert module_file.resolve().is_relative_to(site_packages.resolve())
    assert not module_file.resolve().is_relative_to(REPO)


def test_venv_has_no_ray(fresh_venv: Path, tmp_path: Path) -> None:
    proc = _run([fresh_venv / "bin" / "python", "-c", "import ray"], cwd=tmp_path)
    assert proc.returncode != 0, "Ray is importable in the fresh virtualenv, so it cannot show that linting works without Ray"
    assert "ModuleNotFoundError" in proc.stderr, _explain(proc)


def test_venv_console_script_lints_without_ray(fresh_venv: Path, tmp_path: Path) -> None:
    # Part of this test's claim: Ray really is absent here (checked again so this test stands alone).
    assert _run([fresh_venv / "bin" / "python", "-c", "import ray"], cwd=tmp_path).returncode != 0
    target = tmp_path / "uses_ray.py"
    target.write_text(RAY001_SOURCE)
    proc = _run([fresh_venv / "bin" / "ray-lint", "check", "--output-format", "json", target.name], cwd=tmp_path)
    assert proc.returncode == 1, _explain(proc)  # 1: findings reported
    findings = json.loads(proc.stdout)
    assert [(f["code"], f["location"]["row"]) for f in findings] == [("RAY001", 2)], _explain(proc)
    assert findings[0]["filename"].endswith("uses_ray.py")


def test_venv_console_script_explains_a_rule(fresh_venv: Path, tmp_path: Path) -> None:
    proc = _run([fresh_venv / "bin" / "ray-lint", "rule", "RAY001"], cwd=tmp_path)
    assert proc.returncode == 0, _explain(proc)
    assert "RAY001" in proc.stdout
    assert "get-in-loop" in proc.stdout
    assert "## Why is this bad?" in proc.stdout or "Why is this bad?" in proc.stdout


# ---------------------------------------------------------------------------- `pip install` and `pipx install` of a clone


def _assert_installed_ray_lint_works(ray_lint: Path, installed: Path, cwd: Path) -> None:
    """`ray_lint` (a console script) reports RAY001 with the URL of a rule page under `installed`, its
    own copy, and explains the rule."""
    target = cwd / "uses_ray.py"
    target.write_text(RAY001_SOURCE)
    proc = _run([ray_lint, "check", "--no-cache", "--output-format", "json", target.name], cwd=cwd)
    assert proc.returncode == 1, _explain(proc)
    [finding] = json.loads(proc.stdout)
    assert (finding["code"], finding["location"]["row"]) == ("RAY001", 2)
    url = urlparse(finding["url"])
    page = Path(url2pathname(url.path))
    assert url.scheme == "file" and page.is_file(), finding["url"]
    assert page.resolve().is_relative_to(installed.resolve()), f"{page} is not the installed copy"
    assert page.read_text(encoding="utf-8").startswith("# get-in-loop (RAY001)")
    proc = _run([ray_lint, "rule", "RAY001"], cwd=cwd)
    assert proc.returncode == 0 and "get-in-loop" in proc.stdout, _explain(proc)


@pytest.mark.network
def test_pip_install_of_a_clone(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """`pip install /path/to/ray-lint` (not editable) into a new virtualenv, as the README says."""
    source = _copy_source(tmp_path_factory)
    venv = tmp_path / "env"
    proc = _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    assert proc.returncode == 0, _explain(proc)
    proc = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", source], cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, _explain(proc)
    _assert_installed_ray_lint_works(venv / "bin" / "ray-lint", venv / "lib", tmp_path)


@pytest.mark.network
def test_pipx_install_of_a_clone(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """`pipx install /path/to/ray-lint`, with pipx's home and bin directory in tmp_path."""
    source = _copy_source(tmp_path_factory)
    env = _clean_env() | {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
        "PIPX_DEFAULT_PYTHON": sys.executable,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pipx", "install", str(source)], cwd=tmp_path, check=False, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, _explain(proc)
    _assert_installed_ray_lint_works(tmp_path / "bin" / "ray-lint", tmp_path / "pipx" / "venvs" / "ray-lint", tmp_path)


# ---------------------------------------------------------------------------- the editable install


def test_editable_install_maps_rules_to_the_checkout(tmp_path: Path) -> None:
    """Run from a directory outside the checkout, so only the installed mapping can find the package."""
    code = (
        "import os, sys, ray_lint, ray_lint.rules, ray_lint.rules.get_in_loop as m\n"
        "print(any(os.path.realpath(p or '.') == os.path.realpath(sys.argv[1]) for p in sys.path))\n"
        "print(list(ray_lint.rules.__path__)[0]); print(m.__file__); print(list(ray_lint.__path__)[0])\n"
    )
    proc = _run([sys.executable, "-c", code, REPO], cwd=tmp_path)
    assert proc.returncode == 0, _explain(proc)
    repo_on_path, rules_dir, module_file, package_dir = proc.stdout.splitlines()
    assert repo_on_path == "False", "the repository root is on sys.path, so this would not test the install"
    assert Path(rules_dir).resolve() == (REPO / "rules").resolve()
    assert Path(module_file).resolve() == (REPO / "rules" / "get_in_loop.py").resolve()
    assert Path(package_dir).resolve() == (REPO / "ray_lint").resolve()


# ---------------------------------------------------------------------------- `ray_lint.rules` beside `ray_lint`

# Prints where `ray_lint`, `ray_lint.rules` and every rule's module come from, and which meta path
# finders are installed (setuptools' editable finder is `_EditableFinder`).
WHERE_FROM = (
    "import json, sys, ray_lint, ray_lint.rules\n"
    "from ray_lint.rule import all_rules\n"
    "print(json.dumps({'package': list(ray_lint.__path__), 'rules': list(ray_lint.rules.__path__),\n"
    "    'modules': sorted({sys.modules[r.__module__].__file__ for r in all_rules()}),\n"
    "    'finders': [getattr(f, '__name__', type(f).__name__) for f in sys.meta_path]}))\n"
)


def _where_from(python_args: list[str | Path], cwd: Path, pythonpath: list[Path | str] | None = None) -> dict[str, list[str]]:
    env = _clean_env()
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
    proc = subprocess.run(
        [str(a) for a in [*python_args, "-c", WHERE_FROM]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, _explain(proc)
    return json.loads(proc.stdout)


def _assert_rules_from(found: dict[str, list[str]], package: Path, rules: Path) -> None:
    assert [Path(p).resolve() for p in found["package"]][0] == package.resolve(), found["package"]
    assert [Path(p).resolve() for p in found["rules"]] == [rules.resolve()]
    assert found["modules"], "no rule found"
    outside = [m for m in found["modules"] if not Path(m).resolve().is_relative_to(rules.resolve())]
    assert outside == [], f"rule modules from elsewhere: {outside}"


def _site_packages_without_install() -> str:
    """This virtualenv's site-packages as a plain PYTHONPATH entry: its libraries import, but its `.pth`
    files (the editable install of ray-lint among them) are not run, as under `python -S`."""
    return sysconfig.get_paths()["purelib"]


def test_plain_checkout_on_pythonpath_finds_rules_beside_the_package(tmp_path: Path) -> None:
    """`PYTHONPATH=. python` in a checkout where ray-lint is not installed (`-S`: no editable finder)."""
    found = _where_from([sys.executable, "-S"], tmp_path, [REPO, _site_packages_without_install()])
    assert "_EditableFinder" not in found["finders"], "ray-lint is installed here, so this would not test a plain checkout"
    _assert_rules_from(found, REPO / "ray_lint", REPO / "rules")


@pytest.fixture(scope="module")
def second_worktree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second worktree of a clone of this repository (the repository itself gets no worktree), holding
    this checkout's current `ray_lint/` and `rules/`, committed or not: they are what is under test."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    root = tmp_path_factory.mktemp("worktree")
    clone, worktree = root / "clone", root / "second"
    for command in (
        ["git", "clone", "--quiet", "--no-hardlinks", REPO, clone],
        ["git", "-C", clone, "worktree", "add", "--quiet", "--detach", worktree],
    ):
        proc = _run(command, cwd=root)
        assert proc.returncode == 0, _explain(proc)
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("ray_lint", "rules"):
        shutil.copytree(REPO / name, worktree / name, ignore=ignore, dirs_exist_ok=True)
    return worktree


def test_second_worktree_sharing_the_virtualenv_uses_its_own_rules(second_worktree: Path) -> None:
    """Run from the worktree with this virtualenv's python, whose editable install points at the first
    checkout: `ray_lint` comes from the worktree (the working directory is first on sys.path), and so
    must `ray_lint.rules`."""
    found = _where_from([sys.executable], second_worktree)
    _assert_rules_from(found, second_worktree / "ray_lint", second_worktree / "rules")


def test_wheel_installed_without_the_checkout_uses_its_packaged_rules(wheel: Path, tmp_path: Path) -> None:
    """The wheel, installed into a directory of its own without dependencies or the index, and run with
    no editable finder: `ray_lint.rules` is the packaged `ray_lint/rules/`, and nothing is added to
    the package's search path."""
    target = tmp_path / "site"
    proc = _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", target, wheel], cwd=tmp_path)
    assert proc.returncode == 0, _explain(proc)
    found = _where_from([sys.executable, "-S"], tmp_path, [target, _site_packages_without_install()])
    _assert_rules_from(found, target / "ray_lint", target / "ray_lint" / "rules")
    assert [Path(p).resolve() for p in found["package"]] == [(target / "ray_lint").resolve()]
