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

# The line between two cells of a notebook read as one module (torchlint.workspace.notebook).
CELL_BOUNDARY = "# ---- torchlint: notebook cell boundary ----"


def split_lines(text: str) -> list[str]:
    """The lines of `text` as Python counts them (unlike `str.splitlines`, not at form feeds and the like)."""
    lines = LINE_BREAK.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


@dataclass(frozen=True)
class Position:
    """1-based line, 1-based column (in characters), the way terminals and ruff's JSON count."""

    line: int
    column: int
    cell: int | None = None  # in a notebook: the cell (1-based, as Jupyter counts), `line` inside it

    def row(self) -> str:
        """`LINE`, or `cell N:LINE` in a notebook (ruff's form)."""
        return str(self.line) if self.cell is None else f"cell {self.cell}:{self.line}"

    def shown(self) -> str:
        return f"{self.row()}:{self.column}"


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

    def has_line(self, position: Position) -> bool:
        """Whether `position` (one of this text's, as `position` gives them) names a line of the text."""
        return position.line <= len(self.line_starts)

    def text_at(self, position: Position) -> str:
        """The text of the line `position` is on."""
        return self.line_text(position.line)

    def part_of(self, line: int) -> tuple[int, int]:
        """The first and last line of the part of the text `line` is in, as it is shown (a diff stays in
        it and numbers its lines from its start): the whole text; a notebook's cell."""
        return 1, len(self.line_starts)


class CellLines(LineIndex):
    """A notebook's joined module whose positions are given per cell, as Jupyter and ruff show them: the
    reporters' index of a notebook (the rules and `noqa` work on the joined lines)."""

    def __init__(self, text: str, cells: tuple[int, ...]) -> None:
        super().__init__(text)
        self.cells = cells
        self.region_starts = [1]  # the joined line each code cell's first line is on
        for number, line in enumerate(split_lines(text), 1):
            if line == CELL_BOUNDARY:
                self.region_starts.append(number + 1)

    def position(self, offset: int) -> Position:
        joined = super().position(offset)
        region = max(bisect.bisect_right(self.region_starts, joined.line) - 1, 0)
        number = self.cells[region] if region < len(self.cells) else self.cells[-1] if self.cells else 1
        return Position(joined.line - self.region_starts[region] + 1, joined.column, number)

    def joined_line(self, position: Position) -> int:
        if position.cell is None or position.cell not in self.cells:
            return position.line
        return self.region_starts[self.cells.index(position.cell)] + position.line - 1

    def has_line(self, position: Position) -> bool:
        return self.joined_line(position) <= len(self.line_starts)

    def part_of(self, line: int) -> tuple[int, int]:
        index = max(bisect.bisect_right(self.region_starts, line) - 1, 0)
        following = index + 1
        last = (
            self.region_starts[following] - 2
            if following < len(self.region_starts)
            else len(self.line_starts)
        )
        return self.region_starts[index], last

    def text_at(self, position: Position) -> str:
        return self.line_text(self.joined_line(position))


def lines_of(text: str, cells: tuple[int, ...] | None = None) -> LineIndex:
    """The reporters' index of a file's text: per cell for a notebook (`cells`: its code cells' numbers)."""
    return LineIndex(text) if cells is None else CellLines(text, cells)
