"""ray-lint's own position pass gives every node the range libcst's `PositionProvider` gives it, on
real code (the eval modules, the examples and a sample of the installed Ray package) and on layouts
that move columns: CRLF and lone CR line ends, tabs, wide characters, continuations, no final newline;
also when only some nodes are located (`Positions.locate`, one pass that keeps their spans only)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from ray_lint.model import SemanticModel
from ray_lint.positions import Positions

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS = {
    "crlf": "import ray\r\n\r\n@ray.remote\r\ndef f(x):\r\n    return x\r\n\r\nfor i in range(3):\r\n    ray.get(f.remote(i))\r\n",
    "lone-cr": "x = 1\ry = (1,\r     2)\r",
    "tabs": "if True:\n\tif x:\n\t\ty = [\n\t\t\t1,\n\t\t]\n",
    "wide": "s = '数据🚀'; t = ray.get(f.remote('é'))  # 注释\n",
    "continuation": "x = 1 + \\\n    2\nassert x, \\\n    'msg'\n",
    "no-final-newline": "def f():\n    return ray.get(g.remote())",
    "decorators-and-comments": "# lead\n\n@a.b(c)\n# between\n@d\nclass K(  # why\n    Base,\n):\n    '''doc'''\n\n    async def m(self, *a, **k) -> None: ...\n",
    "empty": "",
}


def real_files() -> list[Path]:
    files = sorted((ROOT / "tests" / "eval").glob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    spec = importlib.util.find_spec("ray")
    if spec is not None and spec.submodule_search_locations:
        ray_files = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.py"))
        files += ray_files[:: max(1, len(ray_files) // 40)]
    return files


def assert_same_positions(text: str) -> int:
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    ours = Positions(module)
    for node, span in expected.items():
        assert ours[node] == span, (type(node).__name__, span)
    assert len(ours) == len(expected)
    some = list(expected)[::7]  # as the engine asks for findings: these nodes' spans only, in one pass
    located = Positions(module)
    located.locate(some)
    for node in some:
        assert located[node] == expected[node], (type(node).__name__, expected[node])
    assert len(located) == len({id(node) for node in some})
    return len(expected)


@pytest.mark.parametrize("name", LAYOUTS)
def test_layouts(name: str) -> None:
    assert_same_positions(LAYOUTS[name])


def test_real_files() -> None:
    files = real_files()
    assert len(files) > 40, "the sample includes the installed Ray package"
    nodes = sum(assert_same_positions(path.read_text(encoding="utf-8")) for path in files)
    assert nodes > 100_000


def test_source_of_keeps_continuation_indentation() -> None:
    text = "def f():\n    if x:\n        g(\n            a,\n            b,\n        )\n"
    model = SemanticModel(cst.parse_module(text))
    call = model.calls[0].node
    assert model.source_of(call) == "g(\n            a,\n            b,\n        )"
    assert model.module.code_for_node(call) != model.source_of(call)  # what libcst loses
    assert model.line_text(4) == "            a,\n"
    assert model.line_text(6) == "        )\n"
