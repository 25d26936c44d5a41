"""Reading a Python file the way Python does (PEP 263) and writing it back the way it was.

The decoded text keeps its line endings (CRLF stays CRLF); the BOM and the encoding are remembered so that a
fixed file is re-encoded exactly as it came.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from torchlint.workspace.fs import FileSystem


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

    def encode(self, text: str) -> bytes:
        return (b"\xef\xbb\xbf" if self.bom else b"") + text.encode(self.encoding)
