"""Reading source files: bytes to text, with every way that can fail turned into a message."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path, PurePath

from ray_lint.notebook import Notebook, NotebookError

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_NOTEBOOK_BYTES = 100 * 1024 * 1024  # outputs (images) make notebooks large; their code is small
_CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+", re.MULTILINE)


class SourceError(Exception):
    """A file that cannot be linted; the message names the problem (the caller names the file)."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Source:
    """What the engine lints. For a notebook, `text` is its code cells as one Python text."""

    text: str
    encoding: str  # as `tokenize.detect_encoding` names it; "utf-8-sig" keeps a BOM on write
    notebook: Notebook | None = None


def is_notebook(path: PurePath) -> bool:
    return path.suffix == ".ipynb"


def read_bytes(path: Path) -> bytes:
    """A file's bytes, refusing directories and files over the size limit."""
    try:
        if path.is_dir():
            raise SourceError("is a directory, not a Python file")
        size = path.stat().st_size
        limit = MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_FILE_BYTES
        if size > limit:
            raise SourceError(f"is {size / 2**20:.1f} MiB, over the {limit // 2**20} MiB limit; skipped")
        return path.read_bytes()
    except SourceError:
        raise
    except PermissionError:
        raise SourceError("cannot be read: permission denied") from None
    except OSError as error:
        raise SourceError(f"cannot be read: {error.strerror or error}") from None


def decode(data: bytes, path: PurePath | None = None) -> Source:
    """Text for the engine from a file's bytes (a notebook's when `path` names one)."""
    if path is not None and is_notebook(path):
        return _decode_notebook(data)
    nul = data.find(b"\x00")
    if nul != -1:
        line = data.count(b"\n", 0, nul) + 1
        raise SourceError("contains a NUL byte; it looks like a binary file, not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if _CODING_COOKIE.search(b"\n".join(data.splitlines()[:2])):
            raise SourceError(f"has an invalid encoding declaration: {error.msg}") from None
        encoding = "utf-8"  # no declaration: undecodable bytes on line 1 or 2 get the message below
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise SourceError(
            f"is not valid {encoding} (byte {data[error.start]:#04x} at line {line}, column {column}); "
            "save it as UTF-8 or declare its encoding with a `# -*- coding: ... -*-` comment",
            line,
            column,
        ) from None
    return Source(text=text, encoding=encoding)


def _decode_notebook(data: bytes) -> Source:
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SourceError(f"is not a valid notebook: not UTF-8 (byte {data[error.start]:#04x} at offset {error.start})") from None
    try:
        notebook = Notebook.parse(raw)
    except NotebookError as error:
        raise SourceError(str(error)) from None
    return Source(text=notebook.python, encoding="utf-8", notebook=notebook)
