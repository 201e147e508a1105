"""End-to-end tests of the language server (`ray-lint server`): the real server process over stdio,
driven by pytest-lsp with the capabilities VS Code and Neovim announce, on real files in a temporary
workspace so that config files are found the way an editor's session finds them.

Positions are checked in the encoding the server negotiated (UTF-16 for VS Code, UTF-8 for Neovim
0.11, which offers UTF-8 first), computed here independently of the server. Nothing is timed: the
tests wait for the publish of a given document version instead.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from ray_lint.docs import render_rule
from ray_lint.lsp_shown import shift_range
from ray_lint.rule import rule_by_code_or_name

# Every async test runs in the module's event loop, where the module-scoped servers live.
in_module_loop = pytest.mark.asyncio(loop_scope="module")

PRESETS = ("visual-studio-code", "neovim")
FIX_ALL = "source.fixAll.ray-lint"
WAIT_S = 20.0  # generous: a loaded CI machine; a passing run waits far less

GET = "ray.get(f.remote(x))"
HEADER = "import ray\n\n\n@ray.remote\ndef f(x):\n    return x\n\n\nxs = range(4)\n"
# Non-ASCII before the finding on its line: 2-byte `é`, and `😀`, one code point but 2 UTF-16 units.
BUGGY_LINE = 'résultats = ["😀", [ray.get(f.remote(x)) for x in xs]]'
FIXED_LINE = 'résultats = ["😀", ray.get([f.remote(x) for x in xs])]'
BUGGY = HEADER + BUGGY_LINE + "\n"
FIXED = HEADER + FIXED_LINE + "\n"
BUG_ROW = HEADER.count("\n")  # 0-based row of BUGGY_LINE


# ---------------------------------------------------------------------------------- positions


def units(text: str, encoding: str) -> int:
    """The length of `text` in the units of a position encoding."""
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def position_of(text: str, index: int, encoding: str) -> types.Position:
    """The LSP position of the character at `index` of `text`."""
    line_start = text.rfind("\n", 0, index) + 1
    return types.Position(line=text.count("\n", 0, index), character=units(text[line_start:index], encoding))


def index_of(text: str, position: types.Position, encoding: str) -> int:
    """The index in `text` of an LSP position; fails on one that splits a character."""
    lines = text.split("\n")
    assert position.line < len(lines), f"{position} is past the end of the text"
    start = sum(len(line) + 1 for line in lines[: position.line])
    count = 0
    for column, char in enumerate(lines[position.line]):
        if count == position.character:
            return start + column
        assert count < position.character, f"{position} splits the character {char!r}"
        count += units(char, encoding)
    assert count == position.character, f"{position} is past the end of its line"
    return start + len(lines[position.line])


def apply_edits(text: str, edits: Sequence[types.TextEdit], encoding: str) -> str:
    """Apply a document's TextEdits the way an editor does: all ranges refer to the original text."""
    spans = sorted(
        ((index_of(text, e.range.start, encoding), index_of(text, e.range.end, encoding), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


def range_of(text: str, needle: str, encoding: str, line: int | None = None) -> types.Range:
    """The range of the first `needle` in `text` (on `line` when given)."""
    offset = 0 if line is None else sum(len(row) + 1 for row in text.split("\n")[:line])
    start = text.index(needle, offset)
    return types.Range(start=position_of(text, start, encoding), end=position_of(text, start + len(needle), encoding))


def diff_change(old: str, new: str, encoding: str) -> types.TextDocumentContentChangePartial:
    """The smallest incremental change from `old` to `new` (common prefix and suffix kept)."""
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    change = types.TextDocumentContentChangePartial(
        range=types.Range(
            start=position_of(old, prefix, encoding), end=position_of(old, len(old) - suffix, encoding)
        ),
        text=new[prefix : len(new) - suffix],
    )
    assert apply_edits(old, [types.TextEdit(range=change.range, new_text=change.text)], encoding) == new
    return change


def test_position_helpers() -> None:
    """The helpers the other tests rely on count an astral character as 2 UTF-16 units, 4 UTF-8 bytes."""
    text = 'a = "😀é"; b\n'
    index = text.index("b")
    assert position_of(text, index, "utf-16") == types.Position(line=0, character=11)
    assert position_of(text, index, "utf-8") == types.Position(line=0, character=14)
    assert position_of(text, index, "utf-32") == types.Position(line=0, character=10)
    for encoding in ("utf-8", "utf-16", "utf-32"):
        assert index_of(text, position_of(text, index, encoding), encoding) == index
    with pytest.raises(AssertionError, match="splits"):
        index_of(text, types.Position(line=0, character=6), "utf-16")  # inside the surrogate pair
    assert diff_change("x😀y\n", "x😀zy\n", "utf-16").range.start.character == 3


def test_shift_range_follows_edits_in_client_units() -> None:
    """How a published range moves with one change, in the client's units: lines inserted or removed
    before it move it down or up, text before it on its line moves its columns (by the UTF-16 length
    of what was typed), a change after it leaves it, and a change inside or across it drops it."""
    line = 'xs = ["😀", ray.get(f.remote(x))]'
    text = f"import ray\n{line}\n"
    found = range_of(text, GET, "utf-16")
    units16 = lambda chars: units(chars, "utf-16")  # noqa: E731

    def change(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
        return types.Range(start=types.Position(line=start[0], character=start[1]), end=types.Position(line=end[0], character=end[1]))

    def moved(replace: types.Range, new_text: str) -> types.Range | None:
        """What the helper says, checked against the range found again in the edited text."""
        shifted = shift_range(found, replace, new_text, units16)
        edited = apply_edits(text, [types.TextEdit(range=replace, new_text=new_text)], "utf-16")
        if shifted is not None:
            assert shifted == range_of(edited, GET, "utf-16"), (replace, new_text)
        return shifted

    assert moved(change((1, 0), (1, 0)), "total = 0\n") is not None  # a line above
    assert moved(change((0, 0), (1, 0)), "") is not None  # `import ray` deleted
    assert moved(change((1, 0), (1, 2)), "les_😀_résultats") is not None  # before it on its line
    assert moved(change((0, 10), (1, 2)), "\nys, zs\n\nys") is not None  # lines joined and split before it
    assert moved(change((1, found.start.character), (1, found.start.character)), "(") is not None  # at its start
    assert moved(change((1, found.end.character), (1, found.end.character)), ".x") == found  # right after it
    assert moved(change((2, 0), (2, 0)), "more\n") == found  # after it
    assert moved(change((1, found.start.character + 3), (1, found.start.character + 4)), "") is None  # inside
    assert moved(change((0, 2), (1, found.start.character + 1)), "") is None  # across its start
    point = types.Range(start=found.start, end=found.start)
    assert shift_range(point, change((1, 0), (1, 0)), "# x\n", units16) == types.Range(
        start=types.Position(line=2, character=found.start.character), end=types.Position(line=2, character=found.start.character)
    )


# ---------------------------------------------------------------------------------- client


class Client(LanguageClient):
    """A pytest-lsp client that keeps every publish (with its version) and answers registrations."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.registrations: list[types.Registration] = []
        self.encoding: str = types.PositionEncodingKind.Utf16
        self.preset = ""
        self.root: Path = Path()
        self.result: types.InitializeResult | None = None


def _publish(client: Client, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)


def _register(client: Client, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)


def make_client() -> Client:
    """pytest-lsp's client with its default handlers, except the two this module records."""
    client = Client(converter_factory=default_converter)
    register_lsp_features(
        client,
        {
            **DEFAULT_CLIENT_FEATURES,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _publish,
            types.CLIENT_REGISTER_CAPABILITY: _register,
        },
    )
    return client


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "ray_lint", "server"], client_factory=make_client)


async def start(client: Client, preset: str, root: Path, options: dict[str, Any] | None = None) -> None:
    """Initialize a session the way the preset's editor would, rooted at `root`."""
    client.root, client.preset = root, preset
    capabilities = pytest_lsp.client_capabilities(preset)
    if preset == "visual-studio-code":
        # The stored snapshot (1.65) predates LSP 3.17; VS Code has announced notebook sync since 1.75.
        capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True)
        )
    client.result = await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    client.encoding = client.result.capabilities.position_encoding or types.PositionEncodingKind.Utf16


@pytest_lsp.fixture(config=SERVER, scope="module", params=PRESETS)
async def client(
    lsp_client: Client, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[None]:
    """One server per editor preset for the whole module: each test works in its own files."""
    await start(lsp_client, request.param, tmp_path_factory.mktemp(request.param))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, loop_scope="module")
async def options_client(lsp_client: Client, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    """A fresh server started with the initialization options in the test's `options_client` parameter."""
    await start(lsp_client, "visual-studio-code", tmp_path, request.param)
    yield
    await lsp_client.shutdown_session()


# ---------------------------------------------------------------------------------- documents


@dataclass
class Doc:
    """A text document open in the server, with the text and version this side believes it has."""

    client: Client
    path: Path
    text: str
    version: int = 1
    uri: str = field(init=False)

    def __post_init__(self) -> None:
        self.uri = self.path.as_uri()

    @classmethod
    def open(cls, client: Client, name: str, text: str, on_disk: str | None = None) -> Doc:
        path = client.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if on_disk is None else on_disk, encoding="utf-8")
        doc = cls(client, path, text)
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=doc.uri, language_id="python", version=1, text=text)
            )
        )
        return doc

    def change(self, new_text: str) -> None:
        """Send `new_text` as one incremental change (only the part that differs)."""
        self._send([diff_change(self.text, new_text, self.client.encoding)])
        self.text = new_text

    def edit(self, edits: Sequence[types.TextEdit]) -> None:
        """Send a code action's edit as the editor does after applying it: an incremental change."""
        assert len(edits) == 1, "a WorkspaceEdit's edits all refer to the original text; send one"
        self._send([types.TextDocumentContentChangePartial(range=edits[0].range, text=edits[0].new_text)])
        self.text = apply_edits(self.text, edits, self.client.encoding)

    def _send(self, changes: list[types.TextDocumentContentChangePartial]) -> None:
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=changes,
            )
        )

    def range(self, needle: str, line: int | None = None) -> types.Range:
        return range_of(self.text, needle, self.client.encoding, line)

    async def diagnostics(self, since: int = 0) -> list[types.Diagnostic]:
        """The diagnostics published for this document's current version (after publish number `since`)."""
        return await published(self.client, self.uri, self.version, since)

    async def code_actions(self, range_: types.Range, only: list[str] | None = None) -> list[types.CodeAction]:
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri),
                range=range_,
                context=types.CodeActionContext(diagnostics=list(self.client.diagnostics.get(self.uri, [])), only=only),
            )
        )
        actions = [a for a in result or [] if isinstance(a, types.CodeAction)]
        assert len(actions) == len(result or []), "the server answers with CodeActions, not Commands"
        return actions

    async def hover(self, position: types.Position) -> types.Hover | None:
        return await self.client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=self.uri), position=position)
        )

    def close(self) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=self.uri))
        )


async def published(client: Client, uri: str, version: int | None = None, since: int = 0) -> list[types.Diagnostic]:
    """Wait for a publish for `uri` (of `version`, when given) among the publishes from number `since`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        for params in client.published[since:]:
            if params.uri == uri and (version is None or params.version == version):
                return list(params.diagnostics)
        if loop.time() > deadline:
            seen = [(p.uri, p.version, [d.code for d in p.diagnostics]) for p in client.published if p.uri == uri]
            raise AssertionError(f"no diagnostics for {uri} version {version} within {WAIT_S} s; got {seen}")
        await asyncio.sleep(0.01)


async def eventually(condition: Callable[[], object], what: str) -> None:
    """Wait for a notification's side effect (a message, a registration)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def codes(diagnostics: Sequence[types.Diagnostic]) -> list[str]:
    return [str(d.code) for d in diagnostics]


def expected_ray001_range(text: str, row: int, encoding: str) -> types.Range:
    """The span of `ray.get(f.remote(x))` on `row`, counted independently in the client's units."""
    line = text.split("\n")[row]
    prefix = line[: line.index(GET)]
    return types.Range(
        start=types.Position(line=row, character=units(prefix, encoding)),
        end=types.Position(line=row, character=units(prefix + GET, encoding)),
    )


# ---------------------------------------------------------------------------------- tests


@in_module_loop
async def test_capabilities(client: Client) -> None:
    """The server advertises what editors key their UI on: incremental sync, the fix-all kind,
    hover, the verify command and jupyter notebooks; and it negotiates the client's encoding."""
    assert client.result is not None
    capabilities = client.result.capabilities
    # VS Code 1.65 announces no encodings (UTF-16 then); Neovim 0.11 offers UTF-8 first.
    assert client.encoding == {"visual-studio-code": "utf-16", "neovim": "utf-8"}[client.preset]
    sync = capabilities.text_document_sync
    assert isinstance(sync, types.TextDocumentSyncOptions)
    assert sync.change == types.TextDocumentSyncKind.Incremental
    assert sync.open_close
    code_action = capabilities.code_action_provider
    assert isinstance(code_action, types.CodeActionOptions)
    assert set(code_action.code_action_kinds or []) == {types.CodeActionKind.QuickFix, FIX_ALL}
    assert capabilities.hover_provider
    assert capabilities.execute_command_provider is not None
    assert "ray-lint.verify" in capabilities.execute_command_provider.commands
    notebook = capabilities.notebook_document_sync
    assert client.capabilities is not None
    if client.capabilities.notebook_document is None:  # Neovim: pygls offers notebook sync only on request
        assert notebook is None
    else:
        assert isinstance(notebook, types.NotebookDocumentSyncOptions)
        assert [getattr(s, "notebook", None) for s in notebook.notebook_selector] == ["jupyter-notebook"]
    assert client.result.server_info is not None and client.result.server_info.name == "ray-lint"


@in_module_loop
async def test_config_watchers_registered_when_the_client_can(client: Client) -> None:
    """VS Code registers file watchers dynamically, so the server asks it to watch the config files;
    Neovim cannot, and gets no registration request."""
    assert client.capabilities is not None and client.capabilities.workspace is not None
    watched = client.capabilities.workspace.did_change_watched_files
    if watched is not None and watched.dynamic_registration:
        await eventually(lambda: client.registrations, "client/registerCapability")
        (registration,) = client.registrations
        assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        options = registration.register_options
        watchers = options["watchers"] if isinstance(options, dict) else options.watchers  # JSON or structured
        globs = {w["globPattern"] if isinstance(w, dict) else w.glob_pattern for w in watchers}
        assert globs == {"**/pyproject.toml", "**/ray-lint.toml"}
    else:
        assert client.registrations == []


@in_module_loop
async def test_open_publishes_a_warning_in_client_units(client: Client) -> None:
    """RAY001 after `é` and `😀` on its line: the columns are in the negotiated units, not code points."""
    doc = Doc.open(client, "open_units.py", BUGGY)
    (diagnostic,) = await doc.diagnostics()
    assert diagnostic.code == "RAY001"
    assert diagnostic.source == "ray-lint"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code_description is not None and diagnostic.code_description.href.endswith("/RAY001.md")
    assert "ray.get" in diagnostic.message
    assert diagnostic.range == expected_ray001_range(BUGGY, BUG_ROW, client.encoding)
    assert diagnostic.range.start.character != BUGGY_LINE.index(GET)  # the code-point column would be wrong
    if client.encoding == "utf-16":
        prefix = BUGGY_LINE[: BUGGY_LINE.index(GET)]
        assert diagnostic.range.start.character == len(prefix.encode("utf-16-le")) // 2 == len(prefix) + 1


WORKER = "import ray\n\n@ray.remote\nclass Worker:\n    def __init__(self):\n        self.model = make_model().cuda()\n"


@in_module_loop
async def test_project_facts_from_other_files(client: Client) -> None:
    """An actor whose `num_gpus` another module of its project sets is not reported; the same buffer in a
    directory of no project is a lone file and is; saving a file reads the project again."""
    project = client.root / "gpu_project"
    (project / "group.py").parent.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (project / "group.py").write_text("from workers import Worker\nWorker.options(num_gpus=1).remote()\n", encoding="utf-8")
    doc = Doc.open(client, "gpu_project/workers.py", WORKER)
    assert "RAY040" not in codes(await doc.diagnostics())
    (project / "group.py").write_text("from workers import Worker\nWorker.remote()\n", encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc.uri)))
    doc.change(WORKER + "\n")
    assert "RAY040" in codes(await doc.diagnostics())
    lone = Doc.open(client, "no_project/workers.py", WORKER)
    assert "RAY040" in codes(await lone.diagnostics())


WRAPPER = (
    "import ray\n\n@ray.remote\nclass Env:\n    def step(self, a):\n        return a\n\n"
    "class Worker:\n    def __init__(self):\n        self.actor = Env.remote()\n\n"
    "    def step(self, a):\n        return ray.get(self.actor.step.remote(a))\n"
)
WRAPPER_LOOP = (
    "import ray\nfrom envs.wrapper import Worker\n\nworkers = [Worker() for _ in range(4)]\nout = [w.step(1) for w in workers]\n"
    "refs = [w.actor.step.remote(0) for w in workers]\n"
)


@in_module_loop
async def test_summaries_of_other_modules(client: Client) -> None:
    """A wait one call away, in a wrapper another module defines, is found in the editor: the server
    summarises the module that defines the wrapper; after the wrapper stops waiting and is saved, it is not."""
    project = client.root / "wrapper_project"
    (project / "envs").mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (project / "envs" / "__init__.py").write_text("", encoding="utf-8")
    (project / "envs" / "wrapper.py").write_text(WRAPPER, encoding="utf-8")
    doc = Doc.open(client, "wrapper_project/envs/loop.py", WRAPPER_LOOP)
    assert "RAY001" in codes(await doc.diagnostics())
    (project / "envs" / "wrapper.py").write_text(WRAPPER.replace("return ray.get(self.actor.step.remote(a))", "return self.actor.step.remote(a)"), encoding="utf-8")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc.uri)))
    doc.change(WRAPPER_LOOP + "\n")
    assert "RAY001" not in codes(await doc.diagnostics())


@in_module_loop
async def test_edits_update_diagnostics_of_the_unsaved_buffer(client: Client) -> None:
    """The buffer is linted, not the file: a clean file on disk opened with buggy text has the finding;
    fixing the text clears it, reintroducing it brings it back; save and close publish too."""
    doc = Doc.open(client, "edit_buffer.py", BUGGY, on_disk=FIXED)
    assert codes(await doc.diagnostics()) == ["RAY001"]

    doc.change(FIXED)
    assert await doc.diagnostics() == []

    doc.change(BUGGY)
    (diagnostic,) = await doc.diagnostics()
    assert diagnostic.range == expected_ray001_range(BUGGY, BUG_ROW, client.encoding)

    since = len(client.published)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc.uri))
    )
    assert codes(await doc.diagnostics(since)) == ["RAY001"]  # still the buffer, though the disk is clean

    since = len(client.published)
    doc.close()
    assert await published(client, doc.uri, None, since) == []


@in_module_loop
async def test_a_burst_of_edits_ends_with_the_last_text(client: Client) -> None:
    """Edits faster than the debounce: whatever is published in between, the last publish is for the
    last version and its findings are where the last text has them."""
    doc = Doc.open(client, "burst.py", FIXED)
    assert await doc.diagnostics() == []
    since = len(client.published)
    moved = HEADER + "\n\n" + "total = 0\n" + BUGGY_LINE + "\n"
    for text in (BUGGY, FIXED, BUGGY + "\n", FIXED + "# comment\n", moved):
        doc.change(text)
    (diagnostic,) = await doc.diagnostics(since)
    row = moved.split("\n").index(BUGGY_LINE)
    assert row != BUG_ROW
    assert diagnostic.range == expected_ray001_range(moved, row, client.encoding)
    later = [p for p in client.published[since:] if p.uri == doc.uri]
    assert later[-1].version == doc.version  # nothing older arrives after the last version's publish
    doc.close()


@in_module_loop
async def test_quick_fixes_and_noqa(client: Client) -> None:
    """At the finding: the unsafe fix (labelled so, not preferred) and "Disable RAY001 for this line".
    Applied here with UTF-16/UTF-8 positions, each edit gives the expected text, and each text is clean."""
    doc = Doc.open(client, "actions.py", BUGGY)
    (diagnostic,) = await doc.diagnostics()
    actions = await doc.code_actions(diagnostic.range)
    by_title = {a.title: a for a in actions}
    assert len(by_title) == len(actions) == 2, list(by_title)
    fix = next(a for a in actions if a.title != "Disable RAY001 for this line")
    noqa = by_title["Disable RAY001 for this line"]
    for action in actions:
        assert action.kind == types.CodeActionKind.QuickFix
        assert action.diagnostics is not None and codes(action.diagnostics) == ["RAY001"]
        assert action.edit is not None and action.edit.changes is not None and set(action.edit.changes) == {doc.uri}
    assert fix.title.startswith("RAY001") and "unsafe" in fix.title.lower()
    assert not fix.is_preferred

    assert fix.edit is not None and fix.edit.changes is not None
    assert apply_edits(doc.text, fix.edit.changes[doc.uri], client.encoding) == FIXED
    assert noqa.edit is not None and noqa.edit.changes is not None
    noqa_edits = noqa.edit.changes[doc.uri]
    with_noqa = apply_edits(doc.text, noqa_edits, client.encoding)
    assert with_noqa == HEADER + BUGGY_LINE + "  # noqa: RAY001\n"

    doc.edit(noqa_edits)  # what the editor sends after applying the action
    assert doc.text == with_noqa
    assert await doc.diagnostics() == []

    doc.change(FIXED)
    assert await doc.diagnostics() == []

    # Nothing to fix elsewhere: a range without findings gets no quick fix.
    assert await doc.code_actions(doc.range("import ray")) == []
    doc.close()


@in_module_loop
async def test_fix_all_offers_only_safe_fixes(client: Client) -> None:
    """`source.fixAll.ray-lint` applies safe fixes only; RAY001's fix is unsafe, so a file whose only
    finding is RAY001 gets no fix-all action (and asking for fix-all brings no quick fixes either)."""
    doc = Doc.open(client, "fix_all.py", BUGGY)
    (diagnostic,) = await doc.diagnostics()
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=BUG_ROW + 1, character=0))
    assert await doc.code_actions(whole, only=[FIX_ALL]) == []
    assert await doc.code_actions(whole, only=[types.CodeActionKind.Source]) == []
    quick = await doc.code_actions(diagnostic.range, only=[types.CodeActionKind.QuickFix])
    assert len(quick) == 2 and all(a.kind != FIX_ALL for a in quick)
    doc.close()


@in_module_loop
async def test_hover_on_a_noqa_code(client: Client) -> None:
    """Hovering `RAY001` in `# noqa: RAY001` shows the rule's page; anywhere else, nothing."""
    line = 'étiquette = "😀"  # noqa: RAY001, RAY999'
    doc = Doc.open(client, "hover.py", f"import ray\n{line}\n")
    await doc.diagnostics()
    code = doc.range("RAY001")
    inside = types.Position(line=1, character=code.start.character + 3)
    hover = await doc.hover(inside)
    assert hover is not None
    assert isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.kind == types.MarkupKind.Markdown
    rule = rule_by_code_or_name("RAY001")
    assert rule is not None
    assert hover.contents.value == render_rule(rule)
    assert "## What it does" in hover.contents.value and hover.contents.value.startswith("# get-in-loop (RAY001)")
    assert hover.range == code
    assert hover.range.start.character == units(line[: line.index("RAY001")], client.encoding)

    assert await doc.hover(types.Position(line=1, character=0)) is None  # the assignment
    assert await doc.hover(types.Position(line=0, character=3)) is None  # `import ray`
    assert await doc.hover(doc.range("RAY999").start) is None  # not a rule
    assert await doc.hover(types.Position(line=40, character=0)) is None  # past the end
    doc.close()


def what_it_does(code: str) -> str:
    """The "What it does" section of a rule's docs, cut out here independently of the server."""
    rule = rule_by_code_or_name(code)
    assert rule is not None
    return rule.docs.split("## What it does", 1)[1].split("\n## ", 1)[0].strip()


@in_module_loop
async def test_hover_on_a_diagnostic(client: Client) -> None:
    """Hovering anywhere on a squiggle describes its finding: code, name, message, what the rule does,
    its fix and whether that is safe, and the link the diagnostic carries; off every finding, nothing."""
    doc = Doc.open(client, "hover_finding.py", BUGGY)
    (diagnostic,) = await doc.diagnostics()
    assert diagnostic.code_description is not None
    (fix,) = [a for a in await doc.code_actions(diagnostic.range) if not a.title.startswith("Disable")]
    fix_message = fix.title.removeprefix("RAY001: ").removesuffix(" (unsafe fix)")
    assert fix_message != fix.title

    start, end = diagnostic.range.start, diagnostic.range.end
    for character in (start.character, start.character + 5, end.character - 1):
        hover = await doc.hover(types.Position(line=start.line, character=character))
        assert hover is not None, character
        assert isinstance(hover.contents, types.MarkupContent)
        assert hover.contents.kind == types.MarkupKind.Markdown
        text = hover.contents.value
        assert "RAY001" in text and "get-in-loop" in text
        assert diagnostic.message in text
        assert what_it_does("RAY001") in text
        assert fix_message in text and "unsafe" in text
        assert f"]({diagnostic.code_description.href})" in text
        assert hover.range == diagnostic.range

    assert await doc.hover(types.Position(line=start.line, character=start.character - 1)) is None  # the `[`
    assert await doc.hover(end) is None  # just after the squiggle
    assert await doc.hover(types.Position(line=0, character=3)) is None  # `import ray`
    assert await doc.hover(types.Position(line=BUG_ROW + 5, character=0)) is None  # past the end
    doc.close()


@in_module_loop
async def test_a_syntax_error_is_reported_and_the_server_recovers(client: Client) -> None:
    """A buffer opened broken gives a RAY000 error (there are no earlier findings to keep); the server
    keeps serving, and the next edit recovers. Broken again later, it keeps the findings it had.
    (ray-lint parses only files that mention what its rules look for, so the text says `.remote(`.)"""
    doc = Doc.open(client, "broken.py", "import ray\nref = f.remote(   # never closed\n")
    (diagnostic,) = await doc.diagnostics()
    assert diagnostic.code == "RAY000"
    assert diagnostic.source == "ray-lint"
    assert diagnostic.severity == types.DiagnosticSeverity.Error

    assert await doc.code_actions(diagnostic.range, only=[FIX_ALL]) == []
    assert await doc.hover(types.Position(line=1, character=2)) is None

    doc.change(BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]
    doc.change(BUGGY + "ref = f.remote(\n")
    assert codes(await doc.diagnostics()) == ["RAY001"]  # kept: see test_findings_kept_while_the_buffer_does_not_parse
    doc.change(FIXED)
    assert await doc.diagnostics() == []
    doc.close()


@in_module_loop
async def test_findings_kept_while_the_buffer_does_not_parse(client: Client) -> None:
    """While a half-written line breaks the parse, the last good findings stay, moved along with the
    edits (a line inserted above, text typed before them on their line), and no RAY000 is published;
    their fixes are not offered (they would edit older text); an edit inside a finding drops it. Once
    the text parses again, the fresh lint is published, with its fixes."""
    doc = Doc.open(client, "kept.py", BUGGY)
    (found,) = await doc.diagnostics()
    since = len(client.published)

    doc.change(BUGGY + "ref = f.remote(\n")  # a half-written line, after the finding
    assert await doc.diagnostics() == [found]

    doc.change(HEADER + "total = 0\n" + BUGGY_LINE + "\nref = f.remote(\n")  # a line above it
    (kept,) = await doc.diagnostics()
    assert (kept.code, kept.message, kept.severity) == (found.code, found.message, found.severity)
    assert kept.range == expected_ray001_range(doc.text, BUG_ROW + 1, client.encoding)

    doc.change(doc.text.replace('["😀", [', '["😀", "😀é", ['))  # typed before it on its line
    (kept,) = await doc.diagnostics()
    assert kept.range == expected_ray001_range(doc.text, BUG_ROW + 1, client.encoding)
    assert kept.range.start.character > found.range.start.character

    assert await doc.code_actions(kept.range) == []
    hover = await doc.hover(kept.range.start)
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert found.message in hover.contents.value and "parses again" in hover.contents.value

    doc.change(doc.text.replace("f.remote(x)) for", "f.remote(x + 1)) for"))  # inside the finding
    assert await doc.diagnostics() == []
    assert all("RAY000" not in codes(p.diagnostics) for p in client.published[since:] if p.uri == doc.uri)

    doc.change(doc.text.replace("ref = f.remote(\n", ""))  # parses again
    (fresh,) = await doc.diagnostics()
    assert fresh.code == "RAY001" and fresh.range.start.line == BUG_ROW + 1
    assert len(await doc.code_actions(fresh.range)) == 2  # the fix and the noqa, back
    doc.close()


@in_module_loop
async def test_pyproject_change_reloads_the_configuration(client: Client) -> None:
    """A `[tool.ray-lint]` written after the file was opened applies once the client reports the change
    (workspace/didChangeWatchedFiles); deleting it brings the finding back."""
    doc = Doc.open(client, "configured/app.py", BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]
    pyproject = doc.path.parent / "pyproject.toml"
    pyproject.write_text('[tool.ray-lint]\nignore = ["RAY001"]\n', encoding="utf-8")

    since = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Created)]
        )
    )
    assert await doc.diagnostics(since) == []

    pyproject.unlink()
    since = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Deleted)]
        )
    )
    assert codes(await doc.diagnostics(since)) == ["RAY001"]
    doc.close()


def open_notebook(client: Client, uri: str, cells: list[tuple[str, str] | tuple[str, None, str]]) -> None:
    """Open a jupyter notebook of version 1: each cell is (uri, python source) or (uri, None, markdown)."""
    kinds = [types.NotebookCellKind.Code if len(cell) == 2 else types.NotebookCellKind.Markup for cell in cells]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind=kind, document=cell[0]) for kind, cell in zip(kinds, cells)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(
                    uri=cell[0],
                    language_id="python" if kind == types.NotebookCellKind.Code else "markdown",
                    version=1,
                    text=cell[-1],  # type: ignore[arg-type]
                )
                for kind, cell in zip(kinds, cells)
            ],
        )
    )


@in_module_loop
async def test_notebook_cells(client: Client) -> None:
    """A jupyter notebook is linted as one program: `f` from cell 1 is the task waited on in cell 3's
    loop, and the finding is published on cell 3 with rows counted within that cell. The markdown
    cell in between counts in the cell numbering only."""
    notebook_uri = (client.root / "analysis.ipynb").as_uri()
    cell_uris = [f"vscode-notebook-cell:{client.root / 'analysis.ipynb'}#W{i}sZmlsZQ%3D%3D" for i in range(3)]
    definition = "import ray\n\n\n@ray.remote\ndef f(x):\n    return x"
    notes = "# Results\nSome *markdown* with `ray.get(f.remote(x))` in it."
    loop = '%matplotlib inline\nout = []\nfor x in range(3):\n    out.append(ray.get(f.remote(x)))  # "😀"'
    open_notebook(client, notebook_uri, [(cell_uris[0], definition), (cell_uris[1], None, notes), (cell_uris[2], loop)])
    (diagnostic,) = await published(client, cell_uris[2], 1)
    assert diagnostic.code == "RAY001"
    assert diagnostic.range == expected_ray001_range(loop, 3, client.encoding)  # the magic line counts
    assert await published(client, cell_uris[0], 1) == []
    assert all(p.uri != cell_uris[1] for p in client.published)  # markdown is never linted

    # Both actions edit the cell's own text, in rows of the cell.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=cell_uris[2]),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    edited = {}
    for action in actions or []:
        assert isinstance(action, types.CodeAction) and action.edit is not None and action.edit.changes is not None
        assert set(action.edit.changes) == {cell_uris[2]}
        edited[action.title] = apply_edits(loop, action.edit.changes[cell_uris[2]], client.encoding)
    assert edited.pop("Disable RAY001 for this line") == loop + "  # noqa: RAY001"
    (fixed_cell,) = edited.values()
    assert fixed_cell == '%matplotlib inline\nout = []\nout.extend(ray.get([f.remote(x) for x in range(3)]))  # "😀"'

    # Editing cell 3 to submit everything first clears its finding.
    fixed = "out = ray.get([f.remote(x) for x in range(3)])"
    since = len(client.published)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=cell_uris[2], version=2),
                            changes=[
                                types.TextDocumentContentChangePartial(
                                    range=types.Range(
                                        start=types.Position(line=0, character=0),
                                        end=position_of(loop, len(loop), client.encoding),
                                    ),
                                    text=fixed,
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )
    assert await published(client, cell_uris[2], 2, since) == []

    since = len(client.published)
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook_uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=uri) for uri in cell_uris],
        )
    )
    assert await published(client, cell_uris[2], None, since) == []


def cell_changes(
    client: Client, notebook_uri: str, version: int, changes: dict[str, tuple[int, types.TextDocumentContentChangePartial]]
) -> None:
    """One notebookDocument/didChange editing the text of cells: {cell uri: (its new version, change)}."""
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=version, uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=uri, version=cell_version), changes=[change]
                        )
                        for uri, (cell_version, change) in changes.items()
                    ]
                )
            ),
        )
    )


@in_module_loop
async def test_notebook_cells_keep_their_findings_while_broken(client: Client) -> None:
    """A half-written line in one cell breaks the whole notebook's parse: every cell keeps its findings,
    moved with the edits to that cell (a line inserted at its top), and no cell gets a RAY000."""
    path = client.root / "kept.ipynb"
    notebook_uri = path.as_uri()
    cell_uris = [f"vscode-notebook-cell:{path}#W{i}sZmlsZQ%3D%3D" for i in range(2)]
    definition = "import ray\n\n\n@ray.remote\ndef f(x):\n    return x"
    loop = "out = []\nfor x in range(3):\n    out.append(ray.get(f.remote(x)))"
    open_notebook(client, notebook_uri, [(cell_uris[0], definition), (cell_uris[1], loop)])
    (found,) = await published(client, cell_uris[1], 1)
    assert found.range == expected_ray001_range(loop, 2, client.encoding)

    broken = definition + "\nref = f.remote("
    moved = "total = 0\n" + loop
    since = len(client.published)
    cell_changes(
        client,
        notebook_uri,
        2,
        {
            cell_uris[0]: (2, diff_change(definition, broken, client.encoding)),
            cell_uris[1]: (2, diff_change(loop, moved, client.encoding)),
        },
    )
    (kept,) = await published(client, cell_uris[1], 2, since)
    assert kept.range == expected_ray001_range(moved, 3, client.encoding)
    assert await published(client, cell_uris[0], 2, since) == []  # no RAY000

    since = len(client.published)
    cell_changes(client, notebook_uri, 3, {cell_uris[0]: (3, diff_change(broken, definition, client.encoding))})
    (fresh,) = await published(client, cell_uris[1], 2, since)
    assert fresh.range == expected_ray001_range(moved, 3, client.encoding)
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook_uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=uri) for uri in cell_uris],
        )
    )


@in_module_loop
async def test_a_path_with_spaces_and_accents(client: Client) -> None:
    """Editors percent-encode file uris (`dossier é/a b.py` -> `dossier%20%C3%A9/a%20b.py`): such a file
    is linted and gets its actions like any other."""
    doc = Doc.open(client, "dossier é/a b.py", BUGGY)
    assert "%20" in doc.uri and "%C3%A9" in doc.uri
    # didOpen lints at once (no debounce) and the server answers in order, so once this request is
    # answered the publish for the open has arrived, if there is one.
    actions = await doc.code_actions(expected_ray001_range(BUGGY, BUG_ROW, client.encoding))
    assert any(p.uri == doc.uri and codes(p.diagnostics) == ["RAY001"] for p in client.published)
    assert len(actions) == 2
    doc.close()


@in_module_loop
async def test_verify_needs_a_file_argument(client: Client) -> None:
    """`ray-lint.verify` runs code, so it only runs on a saved file named by its argument: without one
    (or with an unsaved buffer's uri) it returns [] and says why, without running anything."""
    for arguments in (None, [], ["untitled:Untitled-1"]):
        shown = len(client.messages)
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="ray-lint.verify", arguments=arguments)
        )
        assert result == []
        await eventually(lambda shown=shown: len(client.messages) > shown, "window/showMessage")
        message = client.messages[shown]
        assert message.type == types.MessageType.Error
        assert "ray-lint.verify" in message.message


@in_module_loop
@pytest.mark.parametrize("options_client", [{}], indirect=True, ids=["defaults"])
async def test_verify_runs_the_saved_file_on_a_real_cluster_and_returns_the_verdicts(options_client: Client) -> None:
    """The command runs `ray-lint verify` on the saved file (its own local cluster) and hands back the
    verdicts, with the words that say what ran, and shows them in a message."""
    pytest.importorskip("ray")
    doc = Doc.open(options_client, "gpu.py", "import ray\n\n@ray.remote\ndef f(m):\n    return m.cuda()\n")
    result = await options_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="ray-lint.verify", arguments=[doc.uri])
    )
    assert [(v["line"], v["code"], v["status"], v["ran"]) for v in result] == [(3, "RAY040", "pattern confirmed (model)", "the rule's model")]
    await eventually(lambda: any("gpu.py: line 3 RAY040: pattern confirmed (model)" in m.message for m in options_client.messages), "message")


@in_module_loop
@pytest.mark.parametrize("options_client", [{"ignore": ["RAY001"]}], indirect=True, ids=["ignore-RAY001"])
async def test_initialization_options_configure_from_the_start(options_client: Client) -> None:
    """`[tool.ray-lint]` keys in the initialization options apply to the very first lint."""
    doc = Doc.open(options_client, "silenced.py", BUGGY)
    assert await doc.diagnostics() == []
    assert options_client.messages == []


@in_module_loop
@pytest.mark.parametrize("options_client", [{"debounce-ms": 0}], indirect=True, ids=["no-debounce"])
async def test_debounce_ms_zero_is_accepted(options_client: Client) -> None:
    """`debounce-ms: 0` (lint every change at once) is a valid setting: no complaint, and edits are
    still linted with their own text."""
    doc = Doc.open(options_client, "eager.py", FIXED)
    assert await doc.diagnostics() == []
    doc.change(BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]
    doc.change(FIXED)
    assert await doc.diagnostics() == []
    assert options_client.messages == []
    # Without a debounce nothing is coalesced: a burst gets one publish per version, in order.
    since = len(options_client.published)
    for text in (BUGGY, FIXED, BUGGY):
        doc.change(text)
    assert codes(await doc.diagnostics(since)) == ["RAY001"]
    versions = [p.version for p in options_client.published[since:] if p.uri == doc.uri]
    assert versions == [doc.version - 2, doc.version - 1, doc.version]


@in_module_loop
@pytest.mark.parametrize(
    "options_client",
    [{"debounce-ms": "soon", "ignore": "RAY001", "keep-findings-on-syntax-error": "yes"}],
    indirect=True,
    ids=["bad-options"],
)
async def test_bad_initialization_options_are_reported(options_client: Client) -> None:
    """Bad options are shown to the user, and the server goes on with its defaults."""
    await eventually(lambda: len(options_client.messages) >= 3, "three window/showMessage errors")
    texts = [m.message for m in options_client.messages]
    assert all(m.type == types.MessageType.Error for m in options_client.messages)
    assert any("debounce-ms" in t for t in texts)
    assert any("ignore" in t for t in texts)
    assert any("keep-findings-on-syntax-error" in t for t in texts)
    doc = Doc.open(options_client, "defaults.py", BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]


@in_module_loop
@pytest.mark.parametrize(
    "options_client", [{"keep-findings-on-syntax-error": False}], indirect=True, ids=["report-syntax-errors"]
)
async def test_keep_findings_off_reports_syntax_errors(options_client: Client) -> None:
    """`keep-findings-on-syntax-error: false`: a buffer that stops parsing gets its RAY000, as the
    command line reports it, instead of its earlier findings."""
    doc = Doc.open(options_client, "reported.py", BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]
    doc.change(BUGGY + "ref = f.remote(\n")
    (diagnostic,) = await doc.diagnostics()
    assert diagnostic.code == "RAY000" and "syntax error" in diagnostic.message
    doc.change(BUGGY)
    assert codes(await doc.diagnostics()) == ["RAY001"]
    assert options_client.messages == []
