"""The open buffers, and a file system that answers them for their paths.

An editor's buffer is the truth for its file while it is open, saved or not: the buffer's own diagnostics
come from its text, and so do other files' cross-file facts about it (a loader factory edited in `data.py`
changes what `train.py` is told before `data.py` is saved). Every read of a check goes through the
injected `FileSystem` (tests/test_filesystem.py keeps it so), so an overlay of it is the one place where
buffers meet the project: `BufferFileSystem` answers an open Python buffer's path with the buffer's text,
and everything else from disk. A buffer not yet saved is a file for `kind`; folder listings still come from
disk, so a never-saved file is not found by "who imports this file?" scans until it is saved.

An open notebook is one buffer too: its Python code cells joined into one module
(`torchlint.workspace.notebook.join_cells`), checked as the file of the notebook's path, as the command line
checks the `.ipynb`. It is not in the overlay: the file at its path is JSON, which a reader of that path
expects, and nothing imports a notebook.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types

from torchlint.workspace.fs import FileSystem

# PEP 263: a coding declaration in the first two lines (the overlay encodes a buffer as its file would be).
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)


@dataclass(frozen=True)
class Cell:
    """A Python code cell of an open notebook: a text document of its own, where diagnostics go."""

    uri: str
    version: int | None
    text: str


@dataclass
class Buffer:
    """One open document: its URI, the client's version, its text, and the file path it stands for."""

    uri: str
    version: int | None
    text: str
    path: Path | None  # None for a URI that is not a file (`untitled:`): checked on its own
    # A notebook's code cells; then `text` is them joined, and `version` the notebook's.
    cells: tuple[Cell, ...] | None = None

    @property
    def display(self) -> str:
        """The name diagnostics carry (the path, or the URI of a buffer that has none)."""
        return self.path.as_posix() if self.path is not None else self.uri


def code_cells(notebook: types.NotebookDocument, text_document: Callable[[str], Any]) -> Iterator[Cell]:
    """The notebook's Python code cells, in order, with their text (`text_document(uri)`: pygls's copy of
    a cell's document). Markdown cells are left out, and so is a code cell in another language (VS Code
    shows a raw cell as a code cell in the language `raw`; the command line skips raw cells too)."""
    for cell in notebook.cells:
        if cell.kind == types.NotebookCellKind.Code:
            document = text_document(cell.document)
            if document.language_id in (None, "python"):
                yield Cell(cell.document, document.version, document.source)


def path_of_uri(uri: str) -> Path | None:
    """The local path of a `file:` URI (percent-decoded), None for any other scheme. ValueError for a
    `file:` URI that no file can have (`%00` decodes to a NUL byte, which every file system call refuses)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if "\0" in path:
        raise ValueError(f"{uri} is not a file path that can exist")
    if os.name == "nt" and re.match(r"^/[A-Za-z]:", path):  # pragma: no cover - file:///C:/x
        path = path[1:]
    return Path(os.path.abspath(path))


def encoded(text: str) -> bytes:
    """The bytes a file with this text would hold: its PEP 263 encoding, else UTF-8."""
    for line in text.splitlines()[:2]:
        match = _CODING.match(line)
        if match:
            try:
                return text.encode(match.group(1), errors="replace")
            except LookupError:
                break  # an unknown codec: decoding reports it as it would for the file
    return text.encode("utf-8")


class BufferFileSystem(FileSystem):
    """The real file system, except that an open Python buffer's path reads as the buffer's text."""

    def __init__(self) -> None:
        self.buffers: dict[str, Buffer] = {}  # by absolute path, and by real path where it differs

    def open(self, buffer: Buffer) -> None:
        if buffer.path is not None:
            for key in _keys(buffer.path):
                self.buffers[key] = buffer

    def close(self, path: Path) -> None:
        for key in _keys(path):
            self.buffers.pop(key, None)

    def buffer(self, path: Path | str) -> Buffer | None:
        return self.buffers.get(os.path.abspath(os.fspath(path)))

    def kind(self, path: Path | str) -> str | None:
        return "file" if self.buffer(path) is not None else super().kind(path)

    def link_kind(self, path: Path | str) -> str | None:
        found = super().link_kind(path)
        if found != "link" and self.buffer(path) is not None:
            return "file"
        return found

    def identity(self, path: Path | str) -> tuple[int, int] | None:
        found = super().identity(path)
        buffer = self.buffer(path)
        if found is None and buffer is not None:  # not saved yet: one identity per buffer
            return (-1, hash(buffer.uri))
        return found

    def read_bytes(self, path: Path | str) -> bytes:
        buffer = self.buffer(path)
        return encoded(buffer.text) if buffer is not None else super().read_bytes(path)


def _keys(path: Path) -> set[str]:
    absolute = os.path.abspath(path)
    return {absolute, os.path.realpath(absolute)}
