"""Lines and columns of the nodes a rule reports, from one cheap code-generation pass.

libcst's `PositionProvider` regenerates the module's code and, for every node, builds a `CodeRange`
of two `CodePosition`s, splitting every token on newlines to keep a running line and column. That is
a third of the time of linting a file that has findings. This pass keeps a running character offset
and a pair of ints per node instead, and turns only the nodes asked for into lines and columns. Which
span a node gets follows libcst's rules exactly (the syntactic span where the node records one, else
the span including its whitespace); a test compares every node of real files with `PositionProvider`.

The engine asks for the nodes of all findings at once (`Positions.locate`): one pass then keeps their
spans only, so a file of 140,000 lines holds a span per finding, not one per node (two million, which
cost more memory than the tree). A node asked for without that (a rule that names a line in its
message) gets a pass that keeps every span, once.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from ray_lint.diagnostics import line_offsets


@dataclass
class _OffsetState(CodegenState):
    """A code-generation state that records each node's span as character offsets, keyed by the node's
    id (a CSTNode's own `__hash__` is a Python call; the module keeps every node alive meanwhile).
    With `wanted`, `found` gets the spans of those nodes only, and `spans` (which syntactic spans read
    their first and last child's from) holds one top-level statement's at a time."""

    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    offset: int = 0
    starts: list[int] = field(default_factory=list)
    wanted: set[int] | None = None
    found: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.offset += sum(map(len, self.indent_tokens))

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        """Kept: positions were counted with it (libcst drops it only from the regenerated code)."""

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        key = id(node)
        if key not in self.spans:  # a syntactic span, recorded while the node was generated, wins
            self.spans[key] = (start, self.offset)
        if self.wanted is not None:
            if key in self.wanted:
                self.found[key] = self.spans[key]
            if len(self.starts) == 1:  # a statement of the module is done: no later span refers to its nodes
                self.spans.clear()

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)


class _SyntacticSpan:
    """`with state.record_syntactic_position(node)`: a plain context manager, as libcst calls it for
    most nodes (a generator-based one costs three times as much)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _OffsetState, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc_info: object) -> None:
        spans = self.state.spans
        start = spans[id(self.start_node)][0] if self.start_node is not None else self.start
        end = spans[id(self.end_node)][1] if self.end_node is not None else self.state.offset
        spans[id(self.node)] = (start, end)


class Positions:
    """`positions[node]`: the node's `CodeRange`, as libcst's `PositionProvider` gives it. Nothing is
    generated until a span or a line is asked for."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module  # keeps the nodes, whose ids key the spans, alive
        self._spans: dict[int, tuple[int, int]] = {}
        self._complete = False  # whether `_spans` holds every node's
        self._text: str | None = None
        self._line_starts: list[int] = []

    def locate(self, nodes: Iterable[cst.CSTNode]) -> None:
        """Work out the spans of `nodes` (those of a file's findings and their fixes) in one pass that
        keeps no other."""
        wanted = {id(node) for node in nodes}.difference(self._spans)
        if wanted and not self._complete:
            self._generate(wanted)

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._span(node)
        return CodeRange(self._position(start), self._position(end))

    def source(self, node: cst.CSTNode) -> str:
        """The node's text as it stands in the file, continuation lines' indentation included."""
        start, end = self._span(node)
        return self.text[start:end]

    @property
    def text(self) -> str:
        """The module's source, as the offsets count it."""
        if self._text is None:
            self._generate(set())
        assert self._text is not None
        return self._text

    def line(self, number: int) -> str:
        """Line `number` (1-based) of the file, with its line break."""
        text = self.text
        start = self._line_starts[number - 1]
        end = self._line_starts[number] if number < len(self._line_starts) else len(text)
        return text[start:end]

    def _span(self, node: cst.CSTNode) -> tuple[int, int]:
        span = self._spans.get(id(node))
        if span is None and not self._complete:
            self._generate(None)
        return span or self._spans[id(node)]

    def _generate(self, wanted: set[int] | None) -> None:
        """One code-generation pass that keeps the spans of `wanted`, or of every node (None)."""
        module = self._module
        state = _OffsetState(default_indent=module.default_indent, default_newline=module.default_newline, wanted=wanted)
        module._codegen(state)
        if wanted is None:
            self._spans, self._complete = state.spans, True
        else:
            self._spans.update(state.found)
        if self._text is None:
            self._text = "".join(state.tokens)
            self._line_starts = line_offsets(self._text)

    def __len__(self) -> int:
        return len(self._spans)

    def _position(self, offset: int) -> CodePosition:
        line = bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])
