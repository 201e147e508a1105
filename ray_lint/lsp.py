"""The language server front-end: `ray-lint server` (stdio, or `--tcp PORT`), on pygls and lsprotocol.

It lints the editor's buffers (never the files on disk) through `ray_lint.api`, publishes the
findings as diagnostics, and offers the engine's fixes and `# noqa` edits as code actions. Edits
are debounced and linted on the event loop, so a burst of edits is linted once, with its last text.
Notebook documents are linted as one program, like `ray-lint check notebook.ipynb`, with findings
published on each cell.

What was published is remembered (`ray_lint.lsp_shown`) and moved along with each edit: hover
describes the diagnostics under the cursor from it, and while a buffer does not parse (a half-written
line) the last good findings are published again, moved, instead of a RAY000 the editor's Python
server reports anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from ray_lint import __version__, noqa
from ray_lint.api import RunOptions, forget_project_facts, lint_document
from ray_lint.config import CONFIG_FILES, ConfigError, Resolver, check_layer, parse_layer
from ray_lint.diagnostics import FILE_ERROR_CODE, Applicability, Diagnostic, Edit, Position, Severity, docs_url, file_error
from ray_lint.docs import render_rule
from ray_lint.lsp_shown import Shown, apply_change, contains, hover_markdown, parse_failed
from ray_lint.notebook import CellsChanged, Notebook
from ray_lint.results import FileResult
from ray_lint.rule import rule_by_code_or_name
from ray_lint.source import Source

DEFAULT_DEBOUNCE_MS = 300
FIX_ALL_KIND = "source.fixAll.ray-lint"
VERIFY_COMMAND = "ray-lint.verify"
VERIFY_TIMEOUT_S = 600
KEEP_FINDINGS_OPTION = "keep-findings-on-syntax-error"
SERVER_OPTIONS = ("debounce-ms", KEEP_FINDINGS_OPTION)  # initialization options that are not `[tool.ray-lint]` keys
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass(frozen=True)
class Linted:
    """One lint of a document (or of a whole notebook): diagnostics in each document's own rows."""

    versions: tuple[int | None, ...]
    by_uri: dict[str, list[Diagnostic]]
    result: FileResult


class RayLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "ray-lint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
        )
        self.debounce = DEFAULT_DEBOUNCE_MS / 1000
        self.options_layer = parse_layer({}, "initialization options", Path.cwd())
        self.resolver = Resolver(self.options_layer)
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.linted: dict[str, Linted] = {}  # by the uri of the text or notebook document
        self.keep_findings_on_syntax_error = True
        # What was last published, moved along with the edits since, by text or cell uri (decoded, as
        # pygls keys documents: editors percent-encode uris, not always alike).
        self.shown: dict[str, list[Shown]] = {}
        self.parsed_owners: set[str] = set()  # documents whose shown findings come from a lint that parsed

    # ------------------------------------------------------------------ linting

    def owner(self, uri: str) -> str:
        """The document a lint covers: a cell's notebook, or the text document itself."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    def schedule(self, uri: str, delay: float) -> None:
        owner = self.owner(uri)
        handle = self.pending.pop(owner, None)
        if handle is not None:
            handle.cancel()
        if delay <= 0:
            self.publish(owner)
        else:
            self.pending[owner] = asyncio.get_running_loop().call_later(delay, self.publish, owner)

    def publish(self, owner: str) -> None:
        """Publish the lint of the current text; while it does not parse, the findings of the last lint
        that did (moved by the edits since) rather than a RAY000, when the option allows and there is one."""
        self.pending.pop(owner, None)
        linted = self.lint(owner)
        if linted is None:
            return
        broken = parse_failed(linted.result.diagnostics)
        keep = broken and self.keep_findings_on_syntax_error and owner in self.parsed_owners
        if broken and not keep:
            self.parsed_owners.discard(owner)
        elif not broken:
            self.parsed_owners.add(owner)
        for uri, diagnostics in linted.by_uri.items():
            document = self.workspace.get_text_document(uri)
            if keep:
                shown = [Shown(s.lsp, s.finding, kept=True) for s in self.shown.get(unquote(uri), [])]
            else:
                shown = [Shown(to_lsp(document, d), d) for d in diagnostics]
            self.shown[unquote(uri)] = shown
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[s.lsp for s in shown], version=document.version)
            )

    def follow_changes(self, uri: str, changes: Iterable[types.TextDocumentContentChangeEvent]) -> None:
        """Move what was published for `uri` along with the editor's changes, in the order sent."""
        shown = self.shown.get(unquote(uri))
        if not shown:
            return
        units = self.workspace.position_codec.client_num_units
        for change in changes:
            shown = apply_change(shown, change, units)
        self.shown[unquote(uri)] = shown

    def forget(self, owner: str, uris: Iterable[str]) -> None:
        self.linted.pop(owner, None)
        self.parsed_owners.discard(owner)
        for uri in uris:
            self.shown.pop(unquote(uri), None)

    def lint(self, owner: str) -> Linted | None:
        """Lint the document's current text, or reuse the lint of the same versions."""
        notebook = self.workspace.get_notebook_document(notebook_uri=owner)
        if notebook is not None:
            cells = [cell for cell in notebook.cells if cell.kind == types.NotebookCellKind.Code]
            documents = [self.workspace.get_text_document(cell.document) for cell in cells]
            versions: tuple[int | None, ...] = (notebook.version, *(d.version for d in documents))
        else:
            if unquote(owner) not in self.workspace.text_documents:  # pygls keys documents by decoded uri
                return None
            documents = [self.workspace.get_text_document(owner)]
            versions = (documents[0].version,)
        cached = self.linted.get(owner)
        if cached is not None and cached.versions == versions:
            return cached
        path = _path(owner)
        uri_of_cell: dict[int, str] = {}
        if notebook is not None:
            indices = {cell.document: index for index, cell in enumerate(notebook.cells, start=1)}
            uri_of_cell = {indices[d.uri]: d.uri for d in documents}
            model = Notebook.from_cells((indices[d.uri], d.source) for d in documents)
            source = Source(model.python, "utf-8", model)
        else:
            source = Source(documents[0].source, "utf-8")
        result = self.lint_source(source, path, skip_excluded=True)
        by_uri: dict[str, list[Diagnostic]] = {d.uri: [] for d in documents}
        first = documents[0].uri if documents else owner
        for diagnostic in result.diagnostics:
            located = result.notebook.in_cell(diagnostic) if result.notebook is not None else None
            if located is None:  # a text document, or a notebook-wide problem: shown on the first cell
                by_uri.setdefault(first, []).append(diagnostic)
            else:
                cell, in_cell = located
                by_uri[uri_of_cell[cell.index]].append(in_cell)
        linted = Linted(versions, by_uri, result)
        self.linted[owner] = linted
        return linted

    def lint_source(
        self, source: Source, path: Path, options: RunOptions | None = None, skip_excluded: bool = False
    ) -> FileResult:
        """`skip_excluded`: files that `exclude` matches get no diagnostics, as ruff's server does."""
        try:
            settings = self.resolver.settings_for(path)
        except ConfigError as error:
            return FileResult(path=str(path), diagnostics=[file_error(f"configuration error: {error}")])
        if skip_excluded and settings.is_excluded(path.absolute()):
            return FileResult(path=str(path), source=source.text, notebook=source.notebook)
        return lint_document(source, path, settings, self.resolver, options or RunOptions(noqa_comments="honour-only"))

    def reload_configuration(self) -> None:
        """Forget every resolved config file and lint the open documents again."""
        self.resolver = Resolver(self.options_layer)
        self.linted.clear()
        owners = {self.owner(document.uri) for document in self.workspace.text_documents.values()}
        for owner in sorted(owners):
            self.publish(owner)


def _path(uri: str) -> Path:
    """The file a document stands for (config files are looked up from it); untitled buffers count
    as files in the working directory."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else Path.cwd() / Path(uri.rsplit("/", 1)[-1] or "untitled.py").name


def _range(document: TextDocument, start: Position, end: Position) -> types.Range:
    """A ray-lint span (1-based, code points) in the client's units (UTF-16 by default), clamped to
    the document."""
    lines = document.lines
    last = max(len(lines) - 1, 0)

    def server(position: Position) -> ServerTextPosition:
        line = min(position.line - 1, last)
        text = lines[line].rstrip("\r\n") if lines else ""
        return ServerTextPosition(line, min(position.column - 1, len(text)))

    return document.range_to_client_units(ServerTextRange(server(start), server(end)))


def _docs_url(document: TextDocument, code: str) -> str:
    """The rule page's URL under the `docs-url` of the document's settings (a broken config is
    reported by the lint itself; the link then uses the default)."""
    try:
        configured = server.resolver.settings_for(_path(document.uri)).docs_url
    except ConfigError:
        configured = None
    return docs_url(code, configured)


def to_lsp(document: TextDocument, diagnostic: Diagnostic) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(document, diagnostic.start, diagnostic.end),
        message=diagnostic.message,
        severity=_SEVERITY[diagnostic.severity],
        code=diagnostic.code,
        code_description=types.CodeDescription(href=_docs_url(document, diagnostic.code)),
        source="ray-lint",
    )


def _text_edits(document: TextDocument, edits: Iterable[Edit]) -> list[types.TextEdit]:
    return [types.TextEdit(range=_range(document, e.start, e.end), new_text=e.content) for e in edits]


def _whole(document: TextDocument, text: str) -> types.TextEdit:
    end = document.client_position_at_offset(len(document.source))
    return types.TextEdit(range=types.Range(start=types.Position(line=0, character=0), end=end), new_text=text)


def _wanted(kind: str, only: list[str] | None) -> bool:
    return only is None or any(kind == o or kind.startswith(f"{o}.") for o in only)


server = RayLintServer()


@server.feature(types.INITIALIZE)
def initialize(ls: RayLintServer, params: types.InitializeParams) -> None:
    """Initialization options: any `[tool.ray-lint]` key (they win over config files, as command-line
    options do), `debounce-ms` and `keep-findings-on-syntax-error`."""
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    settings = {key: value for key, value in options.items() if key not in SERVER_OPTIONS}
    debounce = options.get("debounce-ms", DEFAULT_DEBOUNCE_MS)
    if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and debounce >= 0:
        ls.debounce = debounce / 1000
    else:
        _show(ls, f"ray-lint: `debounce-ms` must be a number of milliseconds, got {debounce!r}", types.MessageType.Error)
    keep = options.get(KEEP_FINDINGS_OPTION, True)
    if isinstance(keep, bool):
        ls.keep_findings_on_syntax_error = keep
    else:
        _show(ls, f"ray-lint: `{KEEP_FINDINGS_OPTION}` must be true or false, got {keep!r}", types.MessageType.Error)
    root = _path(params.root_uri) if params.root_uri else Path(params.root_path or Path.cwd())
    try:  # path patterns in the options are relative to the workspace root
        ls.options_layer = check_layer(parse_layer(settings, "initialization options", root))
    except ConfigError as error:
        _show(ls, f"ray-lint: {error}; using the config files alone", types.MessageType.Error)
    ls.resolver = Resolver(ls.options_layer)


@server.feature(types.INITIALIZED)
async def initialized(ls: RayLintServer, params: types.InitializedParams) -> None:
    """Ask the client to report config file changes (when it can register watchers)."""
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    if watched is None or not watched.dynamic_registration:
        return
    watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]
    registration = types.Registration(
        id="ray-lint-config-files",
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
    )
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
    except Exception as error:  # the client refused: config changes then need a restart
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=f"ray-lint: {error}"))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RayLintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RayLintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.follow_changes(params.text_document.uri, params.content_changes)
    ls.schedule(params.text_document.uri, ls.debounce)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: RayLintServer, params: types.DidSaveTextDocumentParams) -> None:
    forget_project_facts(_path(params.text_document.uri))  # what it gives other files may have changed
    ls.schedule(params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RayLintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    if ls.workspace.get_notebook_document(cell_uri=uri) is None:
        ls.forget(uri, [uri])
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(ls: RayLintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.schedule(params.notebook_document.uri, 0)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(ls: RayLintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    cells = params.change.cells
    if cells is not None:
        for content in cells.text_content or []:
            ls.follow_changes(content.document.uri, content.changes)
        closed = cells.structure.did_close if cells.structure is not None else None
        for cell in closed or []:
            ls.shown.pop(unquote(cell.uri), None)
    ls.schedule(params.notebook_document.uri, ls.debounce)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def notebook_did_save(ls: RayLintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    forget_project_facts(_path(params.notebook_document.uri))
    ls.schedule(params.notebook_document.uri, 0)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(ls: RayLintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    ls.forget(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])
    for cell in params.cell_text_documents:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files_changed(ls: RayLintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(change.uri.rsplit("/", 1)[-1] in CONFIG_FILES for change in params.changes):
        ls.reload_configuration()


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
)
def code_action(ls: RayLintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    owner = ls.owner(uri)
    linted = ls.lint(owner)
    if linted is None:
        return []
    document = ls.workspace.get_text_document(uri)
    only = params.context.only
    actions: list[types.CodeAction] = []
    if _wanted(types.CodeActionKind.QuickFix, only):
        for diagnostic in linted.by_uri.get(uri, []):
            if _overlaps(document, diagnostic, params.range):
                actions.extend(_quick_fixes(document, diagnostic))
    if _wanted(FIX_ALL_KIND, only):
        fix_all = _fix_all(ls, owner, linted)
        if fix_all is not None:
            actions.append(fix_all)
    return actions


def _overlaps(document: TextDocument, diagnostic: Diagnostic, requested: types.Range) -> bool:
    span = _range(document, diagnostic.start, diagnostic.end)
    start, end = (span.start.line, span.start.character), (span.end.line, span.end.character)
    low, high = (requested.start.line, requested.start.character), (requested.end.line, requested.end.character)
    return start <= high and low <= end


def _quick_fixes(document: TextDocument, diagnostic: Diagnostic) -> list[types.CodeAction]:
    lsp_diagnostic = to_lsp(document, diagnostic)
    actions = []
    fix = diagnostic.fix
    if fix is not None:
        unsafe = fix.applicability is Applicability.UNSAFE
        actions.append(
            types.CodeAction(
                title=f"{diagnostic.code}: {fix.message}" + (" (unsafe fix)" if unsafe else ""),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[lsp_diagnostic],
                edit=types.WorkspaceEdit(changes={document.uri: _text_edits(document, fix.edits)}),
                is_preferred=not unsafe,
            )
        )
    if diagnostic.code != FILE_ERROR_CODE:
        edit = noqa.disable_for_line(document.source, diagnostic)
        if edit is not None:
            actions.append(
                types.CodeAction(
                    title=f"Disable {diagnostic.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[lsp_diagnostic],
                    edit=types.WorkspaceEdit(changes={document.uri: _text_edits(document, [edit])}),
                )
            )
    return actions


def _fix_all(ls: RayLintServer, owner: str, linted: Linted) -> types.CodeAction | None:
    """Safe fixes only, for the whole document (or every cell of the notebook)."""
    result = linted.result
    if not any(d.fix is not None and d.fix.applicability is Applicability.SAFE for d in result.diagnostics):
        return None
    source = Source(result.source or "", "utf-8", result.notebook)
    fixed = ls.lint_source(source, _path(owner), RunOptions(fix=True, write=False)).fixed_source
    if fixed is None:
        return None
    changes: dict[str, list[types.TextEdit]] = {}
    if result.notebook is None:
        changes[owner] = [_whole(ls.workspace.get_text_document(owner), fixed)]
    else:
        notebook = ls.workspace.get_notebook_document(notebook_uri=owner)
        assert notebook is not None
        try:
            for cell, text in result.notebook.changed_cells(fixed):
                uri = notebook.cells[cell.index - 1].document
                changes[uri] = [_whole(ls.workspace.get_text_document(uri), text)]
        except CellsChanged:
            return None
    return types.CodeAction(title="ray-lint: apply all safe fixes", kind=FIX_ALL_KIND, edit=types.WorkspaceEdit(changes=changes))


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: RayLintServer, params: types.HoverParams) -> types.Hover | None:
    """A rule's docs over its code in a `# noqa` comment; elsewhere, what the diagnostics published
    under the cursor are (from the last publish: hovering never lints)."""
    document = ls.workspace.get_text_document(params.text_document.uri)
    shown = ls.shown.get(unquote(document.uri), [])
    return _noqa_hover(document, params.position) or _diagnostics_hover(shown, params.position)


def _diagnostics_hover(shown: list[Shown], position: types.Position) -> types.Hover | None:
    here = [entry for entry in shown if contains(entry.lsp.range, position)]
    if not here:
        return None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_markdown(here)), range=here[0].lsp.range
    )


def _noqa_hover(document: TextDocument, position: types.Position) -> types.Hover | None:
    if position.line >= len(document.lines):
        return None
    line = document.lines[position.line]
    column = document.position_from_client_units(position).character
    for match in noqa.NOQA_INLINE.finditer(line):
        codes = match.group("codes")
        if codes is None:
            continue
        offset = match.start("codes")
        for code in _CODE.finditer(codes):
            start, end = offset + code.start(), offset + code.end()
            rule = rule_by_code_or_name(code.group())
            if rule is not None and start <= column <= end:
                row = position.line + 1
                return types.Hover(
                    contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=render_rule(rule)),
                    range=_range(document, Position(row, start + 1), Position(row, end + 1)),
                )
    return None


def _where(verdict: dict[str, Any]) -> str:
    """A verdict's place in the file, for a message: its line, and its cell in a notebook."""
    return f"cell {verdict['cell']}, line {verdict['line']}" if verdict.get("cell") else f"line {verdict['line']}"


@server.command(VERIFY_COMMAND)
async def verify(ls: RayLintServer, *args: Any) -> list[dict[str, Any]]:
    """Run the runtime verifier on a saved file, only when the user asks: it executes the file."""
    uri = args[0] if args and isinstance(args[0], str) else None
    if uri is None or not uri.startswith("file:"):
        _show(ls, "ray-lint.verify needs the URI of a saved Python file as its argument", types.MessageType.Error)
        return []
    path = _path(uri)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ray_lint", "verify", str(path), "--output-format", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=path.parent, start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), VERIFY_TIMEOUT_S)
    except asyncio.TimeoutError:
        # The verifier and the cluster it started share its session: stop them all, gently first.
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), grace)
        _show(ls, f"ray-lint verify: gave up after {VERIFY_TIMEOUT_S} s", types.MessageType.Error)
        return []
    try:
        verdicts: list[dict[str, Any]] = json.loads(out)
    except json.JSONDecodeError:
        _show(ls, f"ray-lint verify failed: {err.decode(errors='replace').strip()[-500:]}", types.MessageType.Error)
        return []
    summary = ", ".join(f"{_where(v)} {v['code']}: {v['status']}" for v in verdicts) or "no findings to verify"
    _show(ls, f"ray-lint verify {path.name}: {summary}", types.MessageType.Info)
    return verdicts


def _show(ls: RayLintServer, message: str, kind: types.MessageType) -> None:
    ls.window_show_message(types.ShowMessageParams(type=kind, message=message))


def main(tcp_port: int | None = None) -> int:
    if tcp_port is not None:
        server.start_tcp("127.0.0.1", tcp_port)
    else:
        server.start_io()
    return 0
