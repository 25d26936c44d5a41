"""Reading a Python file the way Python does (PEP 263) and writing it back the way it was.

The decoded text keeps its line endings (CRLF stays CRLF); the BOM and the encoding are remembered so that a
fixed file is re-encoded exactly as it came. A notebook (`.ipynb`) is read as its code cells joined into one
module, and written back into the cells it came from (torchlint.workspace.notebook).
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.workspace.fs import FileSystem

if TYPE_CHECKING:
    from torchlint.workspace.notebook import Notebook

NOTEBOOK_SUFFIX = ".ipynb"


class SourceError(Exception):
    """The file cannot be read or decoded: becomes a TL002 finding (on `line` when one is known)."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class SourceFile:
    path: Path
    text: str
    encoding: str
    bom: bool
    raw: bytes
    notebook: Notebook | None = None  # a notebook: `text` is its code cells joined

    @classmethod
    def read(cls, path: Path, fs: FileSystem | None = None) -> SourceFile:
        """The file read through `fs` (the run's FileSystem; the real one by default) and decoded."""
        fs = fs if fs is not None else FileSystem()
        if fs.is_dir(path):
            raise SourceError("is a directory, not a file")
        try:
            raw = fs.read_bytes(path)
        except OSError as error:
            raise SourceError(f"cannot read: {error.strerror or error}") from None
        return cls.decode(path, raw)

    @classmethod
    def decode(cls, path: Path, raw: bytes) -> SourceFile:
        if path.name.endswith(NOTEBOOK_SUFFIX):
            return cls._notebook(path, raw)
        if b"\0" in raw:
            raise SourceError("contains NUL bytes: not a Python source file")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        except SyntaxError as error:
            if "encoding problem" in str(error) or "unknown encoding" in str(error):
                raise SourceError(f"cannot decode: {error}") from None
            encoding = "utf-8"  # no cookie and not UTF-8: the decode below says where
        bom = raw.startswith(b"\xef\xbb\xbf")
        body = raw[3:] if bom else raw
        codec = "utf-8" if encoding == "utf-8-sig" else encoding
        try:
            text = body.decode(codec)
        except UnicodeDecodeError as error:
            line = body[: error.start].count(b"\n") + 1
            raise SourceError(f"cannot decode as {codec} (line {line}): {error.reason}", line) from None
        except LookupError as error:
            raise SourceError(f"cannot decode: {error}") from None
        return cls(path, text, codec, bom, raw)

    @classmethod
    def _notebook(cls, path: Path, raw: bytes) -> SourceFile:
        from torchlint.workspace.notebook import Notebook, NotebookError

        bom = raw.startswith(b"\xef\xbb\xbf")
        try:
            json_text = (raw[3:] if bom else raw).decode("utf-8")
        except UnicodeDecodeError as error:
            line = raw[: error.start].count(b"\n") + 1
            raise SourceError(f"not a notebook: cannot decode as utf-8 (line {line})", line) from None
        try:
            notebook = Notebook.parse(json_text)
        except NotebookError as error:
            raise SourceError(str(error), error.line) from None
        return cls(path, notebook.python(), "utf-8", bom, raw, notebook)

    def encode(self, text: str) -> bytes:
        """The file's bytes holding `text`; SourceError when a notebook's cells cannot be told apart in it."""
        if self.notebook is not None:
            json_text = self.notebook.with_python(text)
            if json_text is None:
                raise SourceError("a fix moved code across notebook cells, which cannot be written back")
            text = json_text
        return (b"\xef\xbb\xbf" if self.bom else b"") + text.encode(self.encoding)

    def diffs(self, display: str, fixed: str) -> list[tuple[str, str, str]]:
        """What `--diff` shows of this file fixed to `fixed`: (name, before, after) once, or once per changed
        cell of a notebook, named `path:cell N` as ruff names them."""
        if self.notebook is None:
            return [(display, self.text, fixed)]
        after = self.notebook.cell_texts(fixed)
        if after is None:  # cannot be split: shown whole (`--fix` refuses to write it)
            return [(display, self.text, fixed)]
        return [
            (f"{display}:cell {cell.number}", cell.text, text)
            for cell, text in zip(self.notebook.cells, after, strict=True)
            if text != cell.text
        ]

    @property
    def cells(self) -> tuple[int, ...] | None:
        """A notebook's code cells (their numbers); None for a Python file."""
        return self.notebook.cell_numbers if self.notebook is not None else None
