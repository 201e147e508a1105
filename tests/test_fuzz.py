"""Property-based fuzzing of the engine: hypothesmith's generated Python, spliced with Ray constructs.

Properties, on every rule (preview ones included):
1. linting never raises and never reports a RAY000 "internal error" (a rule's own crash);
2. every fixed text parses;
3. fixing twice gives the same text as fixing once;
4. `# noqa: CODE` at the end of a reported line removes exactly that finding.

A short derandomized profile ("ci") runs by default; `HYPOTHESIS_PROFILE=fuzz` (`make fuzz`) runs a long, random one.
"""

from __future__ import annotations

import ast
import os
import textwrap
from functools import cache
from typing import Any

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper, PositionProvider

from ray_lint.diagnostics import FILE_ERROR_CODE, line_offsets
from ray_lint.engine import INTERNAL_ERROR, _first_node_deeper_than, fix_text, lint_text
from ray_lint.rule import all_rules, iter_examples

_COMMON: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
}
# CI runs a fixed seed, so that a red build is always reproducible; the long profile explores new seeds.
settings.register_profile("ci", max_examples=150, derandomize=True, **_COMMON)
settings.register_profile("fuzz", max_examples=2500, **_COMMON)
# applied per test (not loaded globally) so that other test files keep hypothesis' defaults
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@cache
def _rules() -> list:
    return [rule() for rule in all_rules()]


def _parses(text: str) -> bool:
    try:
        cst.parse_module(text)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------------------- strategies

_OPTIONS = st.sampled_from(
    [
        "num_cpus=1",
        "num_cpus=0",
        "num_cpus=0.5",
        "num_cpus=-1",
        "num_gpus=1",
        "num_gpus=0.25",
        "num_returns=2",
        "num_returns='dynamic'",
        "max_retries=3",
        "max_retries=-1",
        "retry_exceptions=True",
        "memory=2 * 1024 ** 3",
        "resources={'CPU': 1}",
        "resources={'GPU': 1, 'custom': 2}",
        "resources={'node:10.0.0.1': 0.01}",
        "max_concurrency=4",
        "max_restarts=2",
        "scheduling_strategy='SPREAD'",
        "num_cpu=2",
        "runtime_env={'env_vars': {'A': '1'}}",
    ]
)
_NAME = st.sampled_from(["x", "y", "ref", "refs", "data", "items", "obj", "result", "a", "arr"])
_FUNC = st.sampled_from(["f", "g", "work"])
_CLASS = st.sampled_from(["A", "Counter"])


@st.composite
def _options(draw) -> str:
    return ", ".join(draw(st.lists(_OPTIONS, max_size=3, unique=True)))


@st.composite
def _simple(draw, in_func: bool, in_async: bool) -> str:
    """One single-line statement that mentions Ray (or something the rules look at)."""
    n, m, fn, cls, opts = draw(_NAME), draw(_NAME), draw(_FUNC), draw(_CLASS), draw(_options())
    choices = [
        f"{n} = {fn}.remote({m})",
        f"{fn}.remote({m})",
        f"{n} = [{fn}.remote(i) for i in range(10)]",
        f"{n} = ray.get({m})",
        f"{n} = ray.get({fn}.remote({m}))",
        f"{n} = ray.get([{fn}.remote(i) for i in range(100000)])",
        f"ray.get({m}, timeout=1)",
        f"{n}.append({fn}.remote({m}))",
        f"{n}, {m} = ray.wait({m}, num_returns=1)",
        f"ray.wait({m})",
        f"{n} = ray.put({m})",
        f"{n}[0] = 1",
        f"{n} = {cls}.remote()",
        f"{n} = {cls}.options({opts}).remote()",
        f"{n} = {fn}.options({opts}).remote({m})",
        f"{n}.method.remote({m})",
        f"{n} = {fn}({m})",
        f"ray.init({opts})",
        "ray.init(local_mode=True)",
        "ray.init(address='auto')",
        "ray.shutdown()",
        "ray.is_initialized()",
        "time.sleep(1)",
        f"{n} = np.zeros(10 ** 8)",
        "os.environ['OMP_NUM_THREADS'] = '1'",
        "os.fork()",
        "torch.cuda.set_device(ray.get_gpu_ids()[0])",
        f"{n} = ray.get_runtime_context().get_node_id()",
        f"{n} += 1",
        f"{n} = {m}",
        "pass",
        f"del {n}",
        f"print({n})",
        f"{n} = pickle.dumps({m})",
    ]
    if in_func:
        choices += [f"return {fn}.remote({m})", f"return ray.put({m})", f"return ray.get({m})", f"global {n}"]
    if in_async:
        choices += [f"await {m}", f"{n} = await {fn}.remote({m})", "await asyncio.sleep(0)", f"{n} = await asyncio.gather(*{m})"]
    return draw(st.sampled_from(choices))


@st.composite
def _block(draw, indent: str, depth: int, in_func: bool, in_async: bool) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 3 and draw(st.integers(0, 3)) == 0:
            lines += draw(_compound(indent, depth + 1, in_func, in_async))
        else:
            lines.append(indent + draw(_simple(in_func, in_async)))
    return lines


@st.composite
def _compound(draw, indent: str, depth: int, in_func: bool, in_async: bool) -> list[str]:
    inner = indent + "    "
    kind = draw(st.sampled_from(["for", "while", "if", "with", "try", "def", "async def", "remote def", "remote class", "async for"]))
    if kind == "async for" and not in_async:
        kind = "for"
    fn, cls, opts = draw(_FUNC), draw(_CLASS), draw(_options())
    decorator = draw(st.sampled_from(["@ray.remote", f"@ray.remote({opts})"]))
    if kind == "for":
        header = [f"{indent}for i in {draw(st.sampled_from(['range(10)', 'items', 'refs', 'ray.get(refs)']))}:"]
    elif kind == "async for":
        header = [f"{indent}async for i in {draw(_NAME)}:"]
    elif kind == "while":
        header = [f"{indent}while {draw(st.sampled_from(['refs', 'True', 'not done']))}:"]
    elif kind == "if":
        header = [f"{indent}if {draw(_NAME)}:"]
    elif kind == "with":
        header = [f"{indent}with {draw(st.sampled_from(['lock', 'open(path)', 'ray.init()']))}:"]
    elif kind == "try":
        body = draw(_block(inner, depth, in_func, in_async))
        handler = draw(_block(inner, depth, in_func, in_async))
        return [f"{indent}try:", *body, f"{indent}except Exception:", *handler]
    elif kind in ("def", "async def", "remote def"):
        is_async = kind == "async def" or draw(st.booleans())
        prefix = [f"{indent}{decorator}"] if kind == "remote def" else []
        header = [*prefix, f"{indent}{'async ' if is_async else ''}def {fn}(x, y=None):"]
        return [*header, *draw(_block(inner, depth, True, is_async))]
    else:  # remote class: an actor
        lines = [f"{indent}{decorator}", f"{indent}class {cls}:"]
        if draw(st.booleans()):
            lines.append(f"{inner}shared = []")
        for name in draw(st.lists(st.sampled_from(["__init__", "method", "run", "get"]), min_size=1, max_size=3, unique=True)):
            is_async = draw(st.booleans())
            lines.append(f"{inner}{'async ' if is_async else ''}def {name}(self, x=None):")
            lines += draw(_block(inner + "    ", depth + 1, True, is_async))
        return lines
    return [*header, *draw(_block(inner, depth, in_func, in_async))]


@st.composite
def _ray_chunk(draw) -> str:
    return "\n".join(draw(_block("", 0, False, False))) + "\n"


@cache
def _example_snippets() -> list[str]:
    """Every rule's documented examples that parse: code known to reach deep into the rules."""
    return sorted({textwrap.dedent(example.code) for _, example in iter_examples() if _parses(textwrap.dedent(example.code))})


@cache  # building the grammar takes seconds: once per session
def _hypothesmith_chunk() -> st.SearchStrategy[str]:
    return hypothesmith.from_grammar().map(lambda text: text if text.endswith("\n") else text + "\n")


_HEADER = st.sampled_from(
    [
        "import ray\n",
        "import ray\nimport time\nimport asyncio\nimport os\nimport numpy as np\n",
        "import ray\nfrom ray.util.queue import Queue\nimport threading\nlock = threading.Lock()\n",
        "import ray\nfrom ray import get, put, remote, wait\n",
    ]
)


@st.composite
def ray_modules(draw) -> str:
    """A module of generated Python with Ray constructs spliced in; always parses."""
    chunk = st.one_of(
        _ray_chunk(),
        _ray_chunk(),
        st.sampled_from(_example_snippets()),
        _hypothesmith_chunk(),
    )
    text = draw(_HEADER) + "".join(draw(st.lists(chunk, min_size=1, max_size=5)))
    assume(_parses(text))
    note(text)
    return text


# ---------------------------------------------------------------------------- properties


def _internal_errors(diagnostics) -> list:
    return [d for d in diagnostics if d.code == FILE_ERROR_CODE and d.message.startswith(INTERNAL_ERROR)]


def _key(diagnostic) -> tuple:
    return (diagnostic.code, diagnostic.start, diagnostic.end, diagnostic.message)


@PROFILE
@given(ray_modules())
def test_lint_never_crashes(text: str) -> None:
    diagnostics = lint_text(text, _rules())
    assert not _internal_errors(diagnostics), _internal_errors(diagnostics)


@PROFILE
@given(ray_modules())
def test_fixes_parse_and_are_idempotent(text: str) -> None:
    once = fix_text(text, _rules(), unsafe=True)
    cst.parse_module(once.text)
    assert not _internal_errors(once.diagnostics)
    note(f"applied: {dict(once.applied)}; refused: {[d.code for d in once.refused]}")
    note(once.text)
    twice = fix_text(once.text, _rules(), unsafe=True)
    assert twice.text == once.text


def _single_line_statements(text: str) -> set[int]:
    """Lines holding exactly one whole single-line simple statement and no comment: `# noqa` can go at their end."""
    wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    lines: set[int] = set()
    for node, span in positions.items():
        single = isinstance(node, cst.SimpleStatementLine) and span.start.line == span.end.line
        if single and node.trailing_whitespace.comment is None:  # type: ignore[attr-defined]
            lines.add(span.start.line)
    return lines


@PROFILE
@given(ray_modules(), st.data())
def test_noqa_removes_exactly_that_finding(text: str, data: st.DataObject) -> None:
    rules = _rules()
    before = [d for d in lint_text(text, rules) if d.code != FILE_ERROR_CODE]
    safe = _single_line_statements(text)
    candidates = [d for d in before if d.start.line in safe and d.noqa_line in (None, d.start.line)]
    assume(candidates)
    target = data.draw(st.sampled_from(candidates))
    starts = line_offsets(text)  # Python's line breaks: str.splitlines also breaks at \x1e, \x0c...
    lines = [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)])]
    line = lines[target.start.line - 1]
    body = line.rstrip("\r\n")
    lines[target.start.line - 1] = f"{body}  # noqa: {target.code}{line[len(body):]}"
    annotated = "".join(lines)
    note(annotated)
    after = [d for d in lint_text(annotated, rules) if d.code != FILE_ERROR_CODE]
    expected = [d for d in before if not (d.code == target.code and d.start.line == target.start.line)]
    assert sorted(map(_key, after)) == sorted(map(_key, expected))


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


_NESTED = st.sampled_from(["a", "f(*a)", "a.b[c]", "-~a", "f'{a!r:{b}}'", "lambda: a", "[*a]", "{**a}", "(a for a in b)"])


@st.composite
def _nested_expressions(draw) -> str:
    """Expressions built to be deep for their length, from the constructs with the most `ast` levels per character."""
    text = draw(_NESTED)
    for _ in range(draw(st.integers(0, 12))):
        text = draw(st.sampled_from(["f({})", "f(*{})", "[*{}]", "{}.b", "{}[a]", "-{}", "not {}", "({} + a)", "{{**{}}}", "f'{{{}}}'"])).format(text)
    return f"x = {text}\n"


@PROFILE
@given(st.one_of(ray_modules(), _hypothesmith_chunk(), _nested_expressions()), st.integers(-3, 1))
def test_the_nesting_check_finds_exactly_the_trees_deeper_than_its_limit(text: str, offset: int) -> None:
    """The engine's nesting check skips subtrees whose source is too short to be deep; it must agree with
    a walk of every node, at limits around each tree's true depth."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        assume(False)
    limit = max(0, _depth(tree) + offset)
    assert (_first_node_deeper_than(tree, limit, text) != (0, 0)) == (_depth(tree) > limit)


def test_noqa_on_a_line_after_a_record_separator() -> None:
    """Found by the fuzzer: `\x1e` is a line break for str.splitlines, not for Python; the finding and its
    `# noqa` are on Python's line 3."""
    text = "import ray\n#\x1e\nray.init(local_mode=True)  # noqa: RAY091\n"
    assert [d.code for d in lint_text(text, _rules()) if d.code != FILE_ERROR_CODE] == []


def test_strategy_triggers_rules() -> None:
    """The Ray strategy must reach the rules, not just the pre-filter: a good share of modules give findings.

    Derandomized: over random seeds the share ranges from about 0.35 to 0.9 (examples are correlated), so a
    random run could fail a fixed bar by chance. With a fixed seed it is 0.61; the bar is far below that.
    """
    reported = 0
    total = 0

    @settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(ray_modules())
    def count(text: str) -> None:
        nonlocal reported, total
        total += 1
        reported += bool(lint_text(text, _rules()))

    count()
    assert total == 100 and reported / total >= 0.3, (reported, total)
