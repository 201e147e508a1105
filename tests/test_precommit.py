"""The pre-commit hooks: the configs the README and docs show, run as written by the real
`pre-commit run`, and the hooks in `.pre-commit-hooks.yaml`, run by the real `pre-commit try-repo`.

The manifest and documented-config tests, and the README's local hook (ray-lint from this
environment), are fast and offline. The others are marked `network`: pre-commit builds the hook's
virtualenv with pip (ray-lint and its dependencies from the package index); skip them offline with
`pytest -m "not network"`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml  # a dependency of pre-commit
from pre_commit.clientlib import MANIFEST_HOOK_DICT, load_config, load_manifest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
README = ROOT / "README.md"
DOCUMENTED = (README, ROOT / "docs" / "pre-commit.md", ROOT / "docs" / "ruff.md")
# The placeholders docs/pre-commit.md tells the user to replace in its clone form.
CLONE_PLACEHOLDER, COMMIT_PLACEHOLDER = "/path/to/ray-lint", "<commit>"

# RAY001 on line 2, column 12; its only fix is unsafe, so `ray-lint-fix` must not apply it.
BAD = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
CLEAN = "import ray\nrefs = [f.remote(x) for x in xs]\nresults = ray.get(refs)\n"
# The same finding in a notebook's only code cell (pre-commit's `jupyter` type).
NOTEBOOK = json.dumps(
    {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Fan-out"]},
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": BAD.splitlines(keepends=True),
            },
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    },
    indent=1,
)

# pip builds the hook environment on the first run of every `try-repo`: allow for a slow index.
TIMEOUT = 600

# Variables that would change what git, pre-commit or ray-lint do or print (set when the tests
# themselves run inside a git hook, or by the user's shell).
_UNSET_PREFIXES = ("GIT_", "PRE_COMMIT", "RAY_LINT_")
_UNSET = {"SKIP", "VIRTUAL_ENV", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}


def _environment(pre_commit_home: Path | None = None) -> dict[str, str]:
    environment = {
        key: value for key, value in os.environ.items() if key not in _UNSET and not key.startswith(_UNSET_PREFIXES)
    }
    environment["PYTHONIOENCODING"] = "utf-8"
    environment["PRE_COMMIT_COLOR"] = "never"
    if pre_commit_home is not None:
        environment["PRE_COMMIT_HOME"] = str(pre_commit_home)
    return environment


_GIT_IDENTITY = (
    "-c",
    "user.name=ray-lint tests",
    "-c",
    "user.email=tests@ray-lint.invalid",
    "-c",
    "commit.gpgsign=false",
)


def _git(args: Sequence[str], cwd: Path) -> None:
    """Run git with a throw-away identity and no signing, so commits work on any machine."""
    subprocess.run(
        ["git", *_GIT_IDENTITY, *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env=_environment(),
        timeout=60,
    )


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _yaml_blocks(page: Path) -> list[str]:
    """The fenced ```yaml blocks of a Markdown page, as a reader copies them (a block indented under a
    list item loses that indentation)."""
    text = page.read_text(encoding="utf-8")
    return [textwrap.dedent(body) for _, body in re.findall(r"^( *)```yaml\n(.*?)^\1```$", text, re.MULTILINE | re.DOTALL)]


def _readme_config() -> str:
    """The `.pre-commit-config.yaml` of the README's pre-commit item."""
    item = re.search(r"^- \*\*pre-commit\*\*.*?(?=^- \*\*)", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert item is not None, "the README has no pre-commit item"
    [block] = [block for block in _yaml_blocks(README) if block.strip() and textwrap.indent(block, "  ") in item.group()]
    return block


def _pre_commit_run(project: Path, pre_commit_home: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """`pre-commit run --all-files` in `project` after staging its files; `path` is the PATH hooks see."""
    environment = _environment(pre_commit_home)
    if path is not None:
        environment["PATH"] = path
    return _pre_commit(project, environment, "run", "--all-files")


def _pre_commit(project: Path, environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`pre-commit ARGS` in `project`, after staging its files."""
    _git(["add", "-A"], project)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=project,
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=environment,
        timeout=TIMEOUT,
    )


# ---------------------------------------------------------------------------- the manifest (offline)


def test_manifest_is_valid_for_pre_commit():
    """pre-commit's own loader accepts the manifest, and every key is one pre-commit knows (its
    schema ignores unknown keys silently, so a misspelt key would otherwise go unnoticed)."""
    hooks = {hook["id"]: hook for hook in load_manifest(str(MANIFEST))}
    assert list(hooks) == ["ray-lint", "ray-lint-fix", "ray-lint-verify"]

    known = {item.key for item in MANIFEST_HOOK_DICT.items}
    for raw in yaml.safe_load(MANIFEST.read_text(encoding="utf-8")):
        assert set(raw) <= known, f"{raw['id']}: unknown keys {set(raw) - known}"
        assert set(raw) >= {"id", "name", "entry", "language", "description", "require_serial"}

    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["require_serial"] is True

    assert hooks["ray-lint"]["entry"] == "ray-lint check --force-exclude"
    assert hooks["ray-lint-fix"]["entry"] == "ray-lint check --fix --force-exclude"
    assert "--unsafe-fixes" not in hooks["ray-lint-fix"]["entry"]
    for hook_id in ("ray-lint", "ray-lint-fix"):
        assert hooks[hook_id]["types_or"] == ["python", "pyi", "jupyter"]
        assert hooks[hook_id]["stages"] == []  # the default: every stage the user installs
        assert hooks[hook_id]["additional_dependencies"] == []  # the linter never needs Ray

    verify = hooks["ray-lint-verify"]
    assert verify["entry"] == "ray-lint verify"
    assert verify["stages"] == ["manual"]  # it runs the user's code: never on a plain commit
    assert verify["types_or"] == ["python"]
    assert verify["additional_dependencies"] == ["ray>=2.40", "psutil>=5.9"]


def test_documented_configs_are_valid_for_pre_commit(tmp_path):
    """Every `.pre-commit-config.yaml` shown in the README and the docs loads in pre-commit, and none
    points at an address that does not exist: a local hook runs what the manifest's hook of that id
    runs, and the clone form names only hooks the manifest defines."""
    manifest = {hook["id"]: hook for hook in load_manifest(str(MANIFEST))}
    same = ("name", "entry", "types_or", "stages", "require_serial")
    configs, local_hooks, clones = 0, 0, 0
    for page in DOCUMENTED:
        for block in _yaml_blocks(page):
            config = _write(tmp_path / f"config-{configs}.yaml", block)
            configs += 1
            for repo in load_config(str(config))["repos"]:
                if repo["repo"] == "local":
                    for hook in repo["hooks"]:
                        # `system` runs what is on PATH; pre-commit 4.4 and later call it `unsupported`
                        assert hook["language"] in ("system", "unsupported"), f"{page.name}: {hook['id']}"
                        expected = manifest[hook["id"]]
                        assert {key: hook[key] for key in same} == {key: expected[key] for key in same}, f"{page.name}: {hook['id']}"
                        local_hooks += 1
                elif repo["repo"] == CLONE_PLACEHOLDER:
                    assert repo["rev"] == COMMIT_PLACEHOLDER
                    assert {hook["id"] for hook in repo["hooks"]} <= set(manifest)
                    clones += 1
                else:
                    assert "ray-lint" not in repo["repo"], f"{page.name}: {repo['repo']} does not exist"
    assert configs >= 4 and local_hooks >= 4 and clones >= 1


def test_readme_snippet_works_as_written(tmp_path):
    """The README's config, copied as is into a fresh repository whose environment has ray-lint
    installed (this one's), makes `pre-commit run --all-files` fail on a finding. Offline: a
    `repo: local` hook with `language: system` installs nothing."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "ray-lint").exists(), "ray-lint is not installed in the test environment"
    project = tmp_path / "project"
    project.mkdir()
    _git(["init", "-q"], project)
    _write(project / ".pre-commit-config.yaml", _readme_config())
    _write(project / "bad.py", BAD)
    _write(project / "clean.py", CLEAN)

    proc = _pre_commit_run(project, tmp_path / "pre-commit-home", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    assert proc.returncode == 1, output(proc)
    text = output(proc)
    assert re.search(r"^ray-lint\.+Failed$", text, re.MULTILINE), text
    assert "- hook id: ray-lint" in text
    assert "bad.py:2:12: RAY001" in text
    assert "clean.py:" not in text
    assert "Traceback" not in text


# ---------------------------------------------------------------------------- the hooks (network)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One PRE_COMMIT_HOME for the module, so the tests never touch the user's ~/.cache/pre-commit.
    (`try-repo` itself builds its hook environment in a fresh temporary store on every run.)"""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-commit git repository holding this checkout's files as they are on disk.

    `try-repo PATH` installs the hooks from PATH's HEAD plus changes to *tracked* files: a file not
    yet added to git (a new `.pre-commit-hooks.yaml`, say) would be missing. Committing a snapshot
    of every tracked and untracked, not ignored, file makes the test see the working tree both in
    a clean clone and during development."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        env=_environment(),
        timeout=60,
    )
    if listing.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout")
    snapshot = tmp_path_factory.mktemp("hook-repo")
    for name in filter(None, listing.stdout.decode("utf-8", "surrogateescape").split("\0")):
        source = ROOT / name
        if source.is_file():  # skips files deleted but not yet staged
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    assert (snapshot / ".pre-commit-hooks.yaml").is_file()
    _git(["init", "-q"], snapshot)
    _git(["add", "-A"], snapshot)
    _git(["commit", "-q", "-m", "snapshot of the ray-lint checkout"], snapshot)
    return snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty git repository to run the hooks in, as a user's project would be."""
    _git(["init", "-q"], tmp_path)
    return tmp_path


def try_repo(hook_repo: Path, project: Path, pre_commit_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pre-commit try-repo HOOK_REPO ARGS` in `project`, after staging its files."""
    return _pre_commit(project, _environment(pre_commit_home), "try-repo", str(hook_repo), *args)


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


@pytest.mark.network
def test_clone_form_works_with_the_placeholders_filled_in(hook_repo, project, pre_commit_home):
    """docs/pre-commit.md's clone form, with the path and commit the page tells the user to fill in,
    makes `pre-commit run --all-files` fail on a finding; pre-commit installs ray-lint itself."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=hook_repo, check=True, capture_output=True, text=True, env=_environment(), timeout=60
    ).stdout.strip()
    [block] = [block for block in _yaml_blocks(ROOT / "docs" / "pre-commit.md") if CLONE_PLACEHOLDER in block]
    _write(project / ".pre-commit-config.yaml", block.replace(CLONE_PLACEHOLDER, str(hook_repo)).replace(COMMIT_PLACEHOLDER, commit))
    _write(project / "bad.py", BAD)

    proc = _pre_commit_run(project, pre_commit_home)

    assert proc.returncode == 1, output(proc)
    text = output(proc)
    assert "- hook id: ray-lint" in text
    assert "bad.py:2:12: RAY001" in text
    assert "ray-lint verify" not in text.replace("- hook id: ray-lint-verify", ""), "the manual hook ran"


@pytest.mark.network
def test_hook_fails_on_a_finding(hook_repo, project, pre_commit_home):
    _write(project / "bad.py", BAD)
    _write(project / "clean.py", CLEAN)
    _write(project / "fan_out.ipynb", NOTEBOOK)

    proc = try_repo(hook_repo, project, pre_commit_home, "ray-lint", "--files", "bad.py", "clean.py", "fan_out.ipynb")

    assert proc.returncode == 1, output(proc)
    text = output(proc)
    assert "- hook id: ray-lint" in text
    assert "bad.py:2:12: RAY001" in text
    assert any(line.startswith("fan_out.ipynb") and "RAY001" in line for line in text.splitlines()), text
    assert "clean.py:" not in text
    assert "Traceback" not in text


@pytest.mark.network
def test_hook_passes_clean_code_and_honours_exclude(hook_repo, project, pre_commit_home):
    """pre-commit names every changed file; `--force-exclude` lets the project's `exclude`
    settings still apply to them."""
    _write(project / "clean.py", CLEAN)
    _write(project / "generated" / "bad.py", BAD)
    _write(project / "pyproject.toml", '[tool.ray-lint]\nextend-exclude = ["generated/"]\n')

    proc = try_repo(hook_repo, project, pre_commit_home, "ray-lint", "--files", "clean.py", "generated/bad.py")

    assert proc.returncode == 0, output(proc)
    assert "ray-lint" in output(proc) and "Passed" in output(proc)
    assert "RAY001" not in output(proc)


@pytest.mark.network
def test_fix_hook_never_applies_unsafe_fixes(hook_repo, project, pre_commit_home):
    """No rule has a safe fix yet (RAY001's and RAY040's rewrite behaviour, so they are unsafe):
    the fix hook must leave the file alone and fail on the finding, pointing at the opt-in."""
    bad = _write(project / "bad.py", BAD)

    proc = try_repo(hook_repo, project, pre_commit_home, "ray-lint-fix", "--files", "bad.py")

    assert proc.returncode == 1, output(proc)
    assert "- hook id: ray-lint-fix" in output(proc)
    assert "bad.py:2:12: RAY001" in output(proc)
    assert "--unsafe-fixes" in output(proc)
    assert "files were modified by this hook" not in output(proc)
    assert bad.read_text(encoding="utf-8") == BAD


@pytest.mark.network
def test_verify_hook_runs_only_in_the_manual_stage(hook_repo, project, pre_commit_home):
    """A plain commit runs ray-lint and ray-lint-fix but never the verifier, which executes the
    code (and so pre-commit does not install Ray for it either)."""
    _write(project / "clean.py", CLEAN)

    every_hook = try_repo(hook_repo, project, pre_commit_home, "--files", "clean.py")

    assert every_hook.returncode == 0, output(every_hook)
    text = output(every_hook)
    assert "id: ray-lint-verify" in text  # try-repo put it in the config...
    ran = [line for line in text.splitlines() if line.rstrip().endswith(("Passed", "Failed", "Skipped"))]
    # ...and did not run it.
    assert [line.split(".")[0] for line in ran] == ["ray-lint", "ray-lint (fix)"], text

    verify = try_repo(hook_repo, project, pre_commit_home, "ray-lint-verify", "--files", "clean.py")

    assert verify.returncode == 1, output(verify)
    assert "No hook with id `ray-lint-verify` in stage `pre-commit`" in output(verify)
