"""The Ray a project runs (`ray_lint.ray_version`): what each kind of file declares, how declarations
combine, how `ray-version` overrides them, and that the rules about changed APIs (RAY115, RAY103)
follow them, through the command line as a user drives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ray_lint.declarations import Declarations, declaration_in, notebook_declaration
from ray_lint.ray_version import ANY_RAY, RayVersions, versions_declared

CONCURRENCY = "import ray\n\nds = ray.data.range(10).map_batches(f, concurrency=4)\n"  # deprecated since 2.51
GPU_WITHOUT_BATCH = "import ray\n\nds = ray.data.range(10).map_batches(f, num_gpus=1)\n"  # refused since 2.5


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text", "specifier"),
    [
        ("pyproject.toml", '[project]\ndependencies = ["numpy", "ray[data]>=2.11,<2.58"]\n', "<2.58,>=2.11"),
        ("pyproject.toml", '[project.optional-dependencies]\nray = ["ray[default]==2.49.2"]\n', "==2.49.2"),
        ("pyproject.toml", '[dependency-groups]\ndev = ["ray==2.57.0", {include-group = "x"}]\n', "==2.57.0"),
        ("pyproject.toml", '[tool.poetry.dependencies]\nray = {version = "^2.9", extras = ["data"]}\n', "<3.0,>=2.9"),
        ("pyproject.toml", '[tool.poetry.group.dev.dependencies]\nray = "~2.9.1"\n', "<2.10,>=2.9.1"),
        ("requirements.txt", "# pinned\nray[tune]==2.9.3  # for Tune\nraydium>=1\n-r base.txt\n", "==2.9.3"),
        ("requirements.txt", "# base image: anyscale/ray:2.24.0-py311\nvllm==0.5.0.post1\ntorch==2.3.0\n", "==2.24.0"),
        ("requirements-gpu.txt", "ray @ https://example.com/wheels/ray-2.48.0-cp312-manylinux2014_x86_64.whl\n", "==2.48.0"),
        ("setup.py", 'from setuptools import setup\nsetup(install_requires=["ray[serve]>=2.40", "numpy"])\n', ">=2.40"),
        ("setup.cfg", "[options]\ninstall_requires =\n    ray>=2.20\n", ">=2.20"),
        ("Dockerfile", "FROM rayproject/ray:2.9.0-py310-gpu\nRUN pip install x\n", "==2.9.0"),
        ("containerfile", "FROM anyscale/ray:2.57.0-slim-py312-cu128\n", "==2.57.0"),
        ("Dockerfile", "FROM anyscale/ray-llm:2.54.1-py311-cu128\nRUN sudo apt-get install -y ffmpeg\n", "==2.54.1"),
        ("Dockerfile", "FROM rayproject/ray-ml:2.9.0-gpu\n", "==2.9.0"),
        ("dockerfile", "FROM python:3.10\nRUN pip install --no-cache-dir torch \\\n    'ray[air]==2.9.0' && ray --version\n", "==2.9.0"),
        ("conda_env.yml", "dependencies:\n  - python=3.10\n  - pip:\n      - ray[air]==2.8.1  # Train\n      - ray-lint\n", "==2.8.1"),
        ("environment.yaml", "dependencies:\n  - ray-core=2.9\n  - array-api=1\n", "==2.9.*"),
    ],
)
def test_each_kind_of_file_declares_ray(tmp_path: Path, name: str, text: str, specifier: str) -> None:
    write(tmp_path / name, text)
    declaration = declaration_in(tmp_path)
    assert declaration is not None
    declared = versions_declared(declaration)
    assert declared is not None
    assert declared.specifier == specifier
    assert declared.declared_in.endswith(name)


def test_files_that_do_not_name_ray_declare_nothing(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\ndependencies = ["raydium>=1", "array-api"]\n[tool.ray-lint]\n')
    write(tmp_path / "requirements.txt", "torch\n")
    assert declaration_in(tmp_path) is None  # not even read further: no word `ray`
    write(tmp_path / "setup.py", "this is not python (ray\n")
    declaration = declaration_in(tmp_path)
    assert declaration is not None and versions_declared(declaration) is None


def test_every_declaration_in_one_directory_holds_and_the_nearest_directory_wins(tmp_path: Path) -> None:
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(tmp_path / "pyproject.toml", '[project.optional-dependencies]\nray = ["ray>=2.11,<2.58"]\n[dependency-groups]\ndev = ["ray==2.57.0"]\n')
    write(tmp_path / "bench" / "pyproject.toml", '[project]\ndependencies = ["ray==2.49.2"]\n')
    write(tmp_path / "pkg" / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')  # names no Ray: look further up
    declarations = Declarations()
    top = declarations.for_directory(tmp_path / "pkg" / "sub")
    assert top is not None and top.where == tmp_path.name
    versions = versions_declared(top)
    assert versions is not None and str(versions.oldest) == str(versions.newest) == "2.57.0"
    bench = declarations.for_directory(tmp_path / "bench")
    assert bench is not None and versions_declared(bench) == RayVersions("==2.49.2", "bench/pyproject.toml")


def test_the_walk_stops_at_the_repository_top(tmp_path: Path) -> None:
    write(tmp_path / "requirements.txt", "ray==2.0.0\n")
    write(tmp_path / "repo" / ".git" / "HEAD", "ref: refs/heads/main\n")
    assert Declarations().for_directory(tmp_path / "repo") is None


@pytest.mark.parametrize(
    ("specifier", "may_run_2_51", "always_runs_2_51"),
    [
        ("", True, True),  # nothing declared: a recent Ray
        (">=2.11", True, False),
        (">=2.51", True, True),
        ("==2.49.2", False, False),
        ("<2.50", False, True),  # no floor: taken to be recent, but it never reaches 2.51
        ("==2.57.0,>=2.11,<2.58", True, True),
        ("==2.9,==2.10", True, True),  # contradictory: nothing is allowed, so nothing is known
    ],
)
def test_what_a_range_allows(specifier: str, may_run_2_51: bool, always_runs_2_51: bool) -> None:
    versions = RayVersions(specifier, "test")
    assert versions.may_run("2.51") is may_run_2_51
    assert versions.always_runs("2.51") is always_runs_2_51


def test_a_notebooks_own_install_declares_its_ray() -> None:
    lines = ["!pip install -q numpy", '! pip install "ray[data]==2.2.0"', "%pip install -U 'pandas<2'", "!echo ray"]
    declaration = notebook_declaration(lines)
    assert declaration is not None
    assert versions_declared(declaration) == RayVersions("==2.2.0", "notebook")
    assert notebook_declaration(["!ls"]) is None
    assert ANY_RAY.describe() == "any"


def findings(run, cwd: Path, *args: str) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    result = run(["check", "--no-cache", "--output-format", "json", "--select", "RAY103,RAY115", *args, "."], cwd)
    assert result.returncode in (0, 1), result.stderr
    return sorted((finding["code"], finding["location"]["row"]) for finding in json.loads(result.stdout))


def test_the_rules_follow_the_declared_ray(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(tmp_path / "current" / "pipeline.py", CONCURRENCY + GPU_WITHOUT_BATCH.replace("import ray\n\n", ""))
    write(tmp_path / "old" / "requirements.txt", "ray[data]==2.2.0\n")
    write(tmp_path / "old" / "pipeline.py", CONCURRENCY + GPU_WITHOUT_BATCH.replace("import ray\n\n", ""))
    write(tmp_path / "floor" / "pyproject.toml", '[project]\ndependencies = ["ray[data]>=2.11"]\n')
    write(tmp_path / "floor" / "pipeline.py", CONCURRENCY)
    found = findings(run, tmp_path)
    assert found == [("RAY103", 4), ("RAY115", 3)], found  # only current/: 2.2 predates both; >=2.11 may lack `compute=`
    write(tmp_path / "ray-lint.toml", 'ray-version = ">=2.60"\n')  # the user's word wins over what is declared
    assert len(findings(run, tmp_path)) == 5  # both in current/ and old/, RAY115 in floor/


def test_local_mode_is_reported_only_where_a_ray_that_refuses_it_may_run(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    for project, declared in (("pinned", "ray[default]==2.54.0"), ("newer", "ray[default]==2.55.0"), ("floor", "ray>=2.7")):
        write(tmp_path / project / "pyproject.toml", f'[project]\ndependencies = ["{declared}"]\n')
        write(tmp_path / project / "conftest.py", "import ray\n\nray.init(local_mode=True)\n")
    result = run(["check", "--no-cache", "--output-format", "json", "--select", "RAY091", "."], tmp_path)
    assert sorted(finding["filename"].split("/")[-2] for finding in json.loads(result.stdout)) == ["floor", "newer"]


def test_a_notebook_pinned_to_old_ray_is_not_reported(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cells = ['! pip install "ray[data]==2.2.0"\n', GPU_WITHOUT_BATCH]
    document = {
        "nbformat": 4, "nbformat_minor": 5, "metadata": {"language_info": {"name": "python"}},
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": text} for text in cells],
    }
    write(tmp_path / "pinned.ipynb", json.dumps(document))
    document["cells"][0]["source"] = "! pip install -U ray[data]\n"
    write(tmp_path / "latest.ipynb", json.dumps(document))
    result = run(["check", "--no-cache", "--isolated", "--output-format", "json", "--select", "RAY103", "."], tmp_path)
    assert [finding["filename"] for finding in json.loads(result.stdout)] == ["latest.ipynb"]


def test_config_shows_the_declared_ray_and_refuses_a_bad_setting(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(tmp_path / "requirements.txt", "ray==2.9.3\n")
    shown = run(["config", "x.py"], tmp_path)
    assert 'ray-version = "ray==2.9.3"' in shown.stdout and "requirements.txt" in shown.stdout, shown.stdout
    write(tmp_path / "ray-lint.toml", 'ray-version = "two point nine"\n')
    refused = run(["check", "."], tmp_path)
    assert refused.returncode == 2
    assert "`ray-version` must be a version specifier" in refused.stderr and "Traceback" not in refused.stderr
