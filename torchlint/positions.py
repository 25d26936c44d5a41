"""Offsets in a decoded text <-> 1-based lines and columns: computed at the edges (reporters, positions of
findings), only for files that have findings. A leaf module: facts, diagnostics and reporters all use it.

Lines end where Python's tokenizer (and LibCST, whose positions are turned into offsets here) ends them: at
`\r\n`, `\n` or a lone `\r`. Counting only `\n` would put every position after a lone `\r` on the wrong line,
and a fix in the wrong place (once inside a string literal).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of `text` as Python counts them (unlike `str.splitlines`, not at form feeds and the like)."""
    lines = LINE_BREAK.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


@dataclass(frozen=True)
class Position:
    """1-based line, 1-based column (in characters), the way terminals and ruff's JSON count."""

    line: int
    column: int


class LineIndex:
    """Offsets <-> (line, column) for one decoded text; built only for files that have findings."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        if "\r" in text:
            starts.extend(match.end() for match in LINE_BREAK.finditer(text))
        else:
            find = text.find
            i = find("\n")
            while i != -1:
                starts.append(i + 1)
                i = find("\n", i + 1)
        self.line_starts = starts

    def offset(self, line: int, column0: int) -> int:
        """Offset of a 1-based line and a 0-based column (LibCST's convention)."""
        if line - 1 >= len(self.line_starts):
            return len(self.text)
        return min(self.line_starts[line - 1] + column0, len(self.text))

    def position(self, offset: int) -> Position:
        line = bisect.bisect_right(self.line_starts, offset)
        return Position(line, offset - self.line_starts[line - 1] + 1)

    def line_text(self, line: int) -> str:
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def locate(self, diagnostic):
        """Fill a Diagnostic's `location` and `end_location` from its offsets; returns it."""
        diagnostic.location = self.position(diagnostic.start)
        diagnostic.end_location = self.position(diagnostic.end)
        return diagnostic
