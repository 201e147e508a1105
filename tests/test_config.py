"""Configuration resolution in process (`ray_lint.config`): which file governs which path, how its layer
and the front-end's overrides combine, selection by code, prefix and name, preview, per-file-ignores,
test files, exclusion, rule options and the error messages. The command-line tests go through
subprocesses; these run in milliseconds, so `make check` can run them after every rule edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_lint.config import (
    DEFAULT_TEST_FILES,
    ConfigError,
    Layer,
    Resolver,
    Settings,
    parse_layer,
    read_config_file,
)
from ray_lint.rule import all_rules, rule_by_code_or_name


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def overrides(root: Path, **values: object) -> Layer:
    """The front-end's layer (the command line's flags), as the CLI builds it: keys as in the file."""
    return parse_layer(dict(values), "command line", root)


def resolver(root: Path, config: Path | None = None, isolated: bool = False, **values: object) -> Resolver:
    return Resolver(overrides(root, **values), config_path=config, isolated=isolated)


def default_codes() -> frozenset[str]:
    return frozenset(rule.code for rule in all_rules() if not rule.preview)


def preview_rule() -> str:
    codes = [rule.code for rule in all_rules() if rule.preview]
    assert codes, "no preview rule to test preview selection with"
    return codes[0]


def perf_rule_skipped_in_tests() -> str:
    """A rule that stays silent in test files: RAY001 (get-in-loop), a performance rule."""
    rule = rule_by_code_or_name("RAY001")
    assert rule is not None and not rule.reports_tests()
    return rule.code


# ---------------------------------------------------------------------------- which file governs


def test_nearest_config_file_governs_and_does_not_merge_with_the_parents(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY001"]\n')
    write(tmp_path / "pkg" / "ray-lint.toml", 'ignore = ["RAY010"]\n')
    found = resolver(tmp_path)
    top = found.settings_for(write(tmp_path / "a.py", ""))
    nested = found.settings_for(write(tmp_path / "pkg" / "deep" / "b.py", ""))
    assert top.enabled_codes == {"RAY001"}
    assert nested.enabled_codes == default_codes() - {"RAY010"}  # the parent's `select` does not apply
    assert [layer.origin for layer in nested.layers] == [str(tmp_path / "pkg" / "ray-lint.toml"), "command line"]


def test_pyproject_without_the_table_is_skipped_for_the_next_one_up(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY010"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "pkg"\n[tool.ruff]\nline-length = 100\n')
    settings = resolver(tmp_path).settings_for(write(tmp_path / "pkg" / "m.py", ""))
    assert settings.enabled_codes == {"RAY010"}
    assert settings.layers[0].origin == f"{tmp_path / 'pyproject.toml'} [tool.ray-lint]"


def test_ray_lint_toml_wins_over_pyproject_in_the_same_directory(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY010"]\n')
    write(tmp_path / "ray-lint.toml", 'select = ["RAY001"]\n')
    assert resolver(tmp_path).settings_for(tmp_path).enabled_codes == {"RAY001"}


def test_no_config_file_means_the_defaults(tmp_path: Path) -> None:
    settings = resolver(tmp_path).settings_for(write(tmp_path / "a.py", ""))
    assert settings.enabled_codes == default_codes()
    assert settings.preview is False


def test_explicit_config_path_applies_everywhere_and_isolated_ignores_files(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY010"]\n')
    elsewhere = write(tmp_path / "conf" / "ray-lint.toml", 'select = ["RAY001"]\n')
    target = write(tmp_path / "a.py", "")
    assert resolver(tmp_path, config=elsewhere).settings_for(target).enabled_codes == {"RAY001"}
    assert resolver(tmp_path, isolated=True).settings_for(target).enabled_codes == default_codes()


def test_one_settings_object_per_config_file(tmp_path: Path) -> None:
    """Files under one config file share one Settings (the cache and the rule instances key on it)."""
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY001"]\n')
    found = resolver(tmp_path)
    first = found.settings_for(write(tmp_path / "a" / "x.py", ""))
    second = found.settings_for(write(tmp_path / "b" / "c" / "y.py", ""))
    assert first is second
    assert found.all_settings() == [first]


# ---------------------------------------------------------------------------- selection


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY001", "RAY010"]\n')
    target = write(tmp_path / "a.py", "")
    assert resolver(tmp_path, select=["RAY020"]).settings_for(target).enabled_codes == {"RAY020"}
    assert resolver(tmp_path, **{"extend-select": ["RAY020"]}).settings_for(target).enabled_codes == {"RAY001", "RAY010", "RAY020"}
    assert resolver(tmp_path, ignore=["RAY010"]).settings_for(target).enabled_codes == {"RAY001"}


def test_most_specific_selector_wins_within_a_layer(tmp_path: Path) -> None:
    settings = Settings((overrides(tmp_path, select=["RAY"], ignore=["RAY0"], **{"extend-select": ["RAY001"]}),))
    enabled = settings.enabled_codes
    assert "RAY001" in enabled
    assert not any(code.startswith("RAY0") and code != "RAY001" for code in enabled)
    assert {code for code in default_codes() if not code.startswith("RAY0")} <= enabled


def test_ignore_wins_a_tie_and_names_select_like_codes(tmp_path: Path) -> None:
    assert "RAY001" not in Settings((overrides(tmp_path, select=["RAY001"], ignore=["RAY001"]),)).enabled_codes
    assert Settings((overrides(tmp_path, select=["get-in-loop"]),)).enabled_codes == {"RAY001"}
    assert "RAY001" not in Settings((overrides(tmp_path, ignore=["get-in-loop"]),)).enabled_codes


def test_preview_rule_runs_with_preview_or_its_exact_code_only(tmp_path: Path) -> None:
    code = preview_rule()
    assert code not in Settings((overrides(tmp_path),)).enabled_codes
    assert code not in Settings((overrides(tmp_path, select=[code[:4]]),)).enabled_codes  # a prefix is not enough
    assert code in Settings((overrides(tmp_path, **{"extend-select": [code]}),)).enabled_codes
    assert code in Settings((overrides(tmp_path, preview=True),)).enabled_codes


def test_preview_from_the_file_and_the_override_turning_it_off(tmp_path: Path) -> None:
    code = preview_rule()
    write(tmp_path / "pyproject.toml", "[tool.ray-lint]\npreview = true\n")
    target = write(tmp_path / "a.py", "")
    assert code in resolver(tmp_path).settings_for(target).enabled_codes
    assert code not in resolver(tmp_path, preview=False).settings_for(target).enabled_codes


# ---------------------------------------------------------------------------- per file


def test_per_file_ignores_are_relative_to_their_config_file(tmp_path: Path) -> None:
    write(tmp_path / "proj" / "pyproject.toml", '[tool.ray-lint.per-file-ignores]\n"scripts/*" = ["RAY001", "single-actor-bottleneck"]\n')
    found = resolver(tmp_path)
    script = write(tmp_path / "proj" / "scripts" / "run.py", "")
    library = write(tmp_path / "proj" / "lib" / "run.py", "")
    assert found.settings_for(script).codes_for(script) == default_codes() - {"RAY001", "RAY010"}
    assert found.settings_for(library).codes_for(library) == default_codes()
    assert found.settings_for(script).ignored_for(script)[0][0] == "RAY001"


def test_verify_args_belong_to_the_script_named_relative_to_the_config_file(tmp_path: Path) -> None:
    config = '[tool.ray-lint.verify.args]\n"jobs/train.py" = "--epochs 1 --name \'a b\'"\n'
    write(tmp_path / "proj" / "pyproject.toml", config)
    found = resolver(tmp_path)
    train = write(tmp_path / "proj" / "jobs" / "train.py", "")
    other = write(tmp_path / "proj" / "jobs" / "serve.py", "")
    assert found.settings_for(train).verify_arguments(train) == ("--epochs", "1", "--name", "a b")
    assert found.settings_for(other).verify_arguments(other) == ()
    # A later layer that names the same script wins; the command line's flags are such a layer.
    later = resolver(tmp_path, verify={"args": {"proj/jobs/train.py": "--epochs 2"}})
    assert later.settings_for(train).verify_arguments(train) == ("--epochs", "2")


def test_default_test_files_skip_performance_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default patterns are relative to the working directory
    code = perf_rule_skipped_in_tests()
    settings = Settings((overrides(tmp_path),))
    assert "tests/" in DEFAULT_TEST_FILES
    for test_file in (tmp_path / "tests" / "helpers.py", tmp_path / "pkg" / "test_loop.py", tmp_path / "conftest.py"):
        assert settings.is_test_file(test_file), test_file
        assert code not in settings.codes_for(test_file)
    assert "RAY066" in settings.codes_for(tmp_path / "tests" / "helpers.py")  # a correctness rule still reports
    assert code in settings.codes_for(tmp_path / "pkg" / "loop.py")


def test_configured_test_files_replace_the_defaults_and_all_rules_in_tests(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\ntest-files = ["checks/"]\n')
    code = perf_rule_skipped_in_tests()
    found = resolver(tmp_path)
    check_file, pytest_style = tmp_path / "checks" / "a.py", tmp_path / "test_a.py"
    settings = found.settings_for(tmp_path)
    assert settings.is_test_file(check_file) and code not in settings.codes_for(check_file)
    assert not settings.is_test_file(pytest_style) and code in settings.codes_for(pytest_style)
    everything = resolver(tmp_path, **{"all-rules-in-tests": True}).settings_for(tmp_path)
    assert code in everything.codes_for(check_file)


def test_exclude_and_extend_exclude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nextend-exclude = ["generated/"]\n')
    settings = resolver(tmp_path).settings_for(tmp_path)
    assert settings.is_excluded(tmp_path / "generated", is_dir=True)
    assert settings.is_excluded(tmp_path / "build", is_dir=True)  # a default still applies
    assert not settings.is_excluded(tmp_path / "src" / "a.py")
    replaced = Settings((overrides(tmp_path, exclude=["only/"]),))
    assert not replaced.is_excluded(tmp_path / "build", is_dir=True)
    assert replaced.is_excluded(tmp_path / "only", is_dir=True)


# ---------------------------------------------------------------------------- rule options and reporting


def test_rule_options_by_name_or_code_and_the_override_wins(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ray-lint.rules.RAY001]\nextra-get-functions = ["pkg.fetch"]\n')
    settings = resolver(tmp_path).settings_for(tmp_path)
    assert settings.rule_options["get-in-loop"] == {"extra-get-functions": ["pkg.fetch"]}
    [get_in_loop] = [rule for rule in settings.rules_for(tmp_path / "a.py") if rule.code == "RAY001"]
    assert get_in_loop.settings["extra-get-functions"] == ["pkg.fetch"]
    overridden = resolver(tmp_path, rules={"get-in-loop": {"extra-get-functions": ["other.get"]}}).settings_for(tmp_path)
    assert overridden.rule_options["get-in-loop"]["extra-get-functions"] == ["other.get"]


def test_describe_says_where_each_value_came_from(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", '[tool.ray-lint]\nselect = ["RAY001"]\n')
    rows = {key: (value, origin) for key, value, origin in resolver(tmp_path, preview=True).settings_for(tmp_path).describe()}
    assert rows["select"] == (["RAY001"], f"{config} [tool.ray-lint]")
    assert rows["preview"] == (True, "command line")
    assert rows["test-files"] == (list(DEFAULT_TEST_FILES), "default")


def test_fingerprint_follows_the_settings(tmp_path: Path) -> None:
    one, same, other = (Settings((overrides(tmp_path, select=s),)) for s in (["RAY001"], ["RAY001"], ["RAY010"]))
    assert one.fingerprint == same.fingerprint != other.fingerprint


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, message",
    [
        ('selct = ["RAY001"]\n', "unknown key `selct`; did you mean `select`?"),
        ('select = "RAY001"\n', "`select` must be a list of strings"),
        ('preview = "yes"\n', "`preview` must be true or false"),
        ('select = ["RAY9999"]\n', "unknown rule selector `RAY9999`"),
        ('select = ["get-in-lop"]\n', "did you mean `get-in-loop`?"),
        ("[rules.get-in-loop]\nextra-get-function = []\n", "did you mean `extra-get-functions`?"),
        ('[rules.get-in-loop]\nextra-get-functions = "x"\n', "`rules.get-in-loop.extra-get-functions`: expected a list of strings"),
        ("[rules.no-such-rule]\nx = 1\n", "unknown rule `no-such-rule` in `rules`"),
        ("select = [\n", "not valid TOML"),
        ('[verify]\nargs = ["--count 6"]\n', "`verify.args` must be a table of \"path/to/script.py\" = \"--its --arguments\""),
        ('[verify.args]\n"run.py" = "--name \'a b"\n', "`verify.args.\"run.py\"`: No closing quotation: --name 'a b"),
    ],
    ids=["key", "list", "bool", "selector", "name", "option", "option-type", "rule", "toml", "args-type", "args-quote"],
)
def test_errors_name_the_file_and_the_likely_spelling(tmp_path: Path, text: str, message: str) -> None:
    config = write(tmp_path / "ray-lint.toml", text)
    with pytest.raises(ConfigError) as error:
        resolver(tmp_path).settings_for(tmp_path)
    assert str(error.value).startswith(str(config)), error.value
    assert message in str(error.value)


def test_read_config_file_of_a_pyproject_without_the_table_is_none(tmp_path: Path) -> None:
    assert read_config_file(write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")) is None
    layer = read_config_file(write(tmp_path / "sub" / "pyproject.toml", "[tool.ray-lint]\nignore = ['RAY001']\n"))
    assert layer is not None and layer.ignore == ("RAY001",) and layer.root == (tmp_path / "sub").resolve()
