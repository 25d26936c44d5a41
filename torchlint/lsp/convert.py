"""torchlint's coordinates -> the protocol's.

torchlint speaks in offsets into the decoded text (`Diagnostic.start`, `Edit.start`); LSP speaks in 0-based
lines and columns counted in the negotiated position encoding: UTF-16 code units unless the client asked
for UTF-8 or UTF-32. A character outside the Basic Multilingual Plane (an emoji in a comment) is two UTF-16
units and four UTF-8 ones, so a column counted in characters would put every squiggle after it off.
"""

from __future__ import annotations

import dataclasses

from lsprotocol import types

from torchlint.diagnostics import Diagnostic, Edit, Severity
from torchlint.fix.build import minimal_edit
from torchlint.positions import CellLines, LineIndex

SOURCE = "torchlint"


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


_UNITS = {"utf-16": _utf16, "utf-8": _utf8, "utf-32": len}


class PositionMap:
    """Offsets <-> LSP positions for one text, in one position encoding."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.lines = LineIndex(text)
        self.units = _UNITS.get(str(encoding), _utf16)

    def position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        line = self.lines.position(offset).line
        start = self.lines.line_starts[line - 1]
        return types.Position(line=line - 1, character=self.units(self.text[start:offset]))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def offset(self, position: types.Position) -> int:
        """The offset of a client position; past the end of a line means its end (as the spec says)."""
        starts = self.lines.line_starts
        if position.line >= len(starts):
            return len(self.text)
        start = starts[max(position.line, 0)]
        line = self.lines.line_text(position.line + 1)
        if self.units is len:
            return start + min(position.character, len(line))
        counted = 0
        for index, char in enumerate(line):
            if counted >= position.character:
                return start + index
            counted += self.units(char)
        return start + len(line)


class RegionMap(PositionMap):
    """One region of a bigger text as a document of its own (a notebook's cell in the joined module): it
    takes and gives offsets into the whole text, and positions counted from the region's first line."""

    def __init__(self, whole: str, start: int, end: int, encoding: str = "utf-16") -> None:
        super().__init__(whole[start:end], encoding)
        self.start = start

    def position(self, offset: int) -> types.Position:
        return super().position(offset - self.start)  # clamped to the region, as a range may run past it

    def offset(self, position: types.Position) -> int:
        return self.start + super().offset(position)


def cell_regions(joined: str, cells: int, encoding: str = "utf-16") -> list[RegionMap]:
    """The region of each of `cells` code cells in a notebook's joined module (`CellLines` finds where
    each starts; a region ends where the boundary line after it begins)."""
    lines = CellLines(joined, tuple(range(cells)))
    starts = [lines.line_starts[line - 1] for line in lines.region_starts]
    ends = [lines.line_starts[line - 2] for line in lines.region_starts[1:]] + [len(joined)]
    return [RegionMap(joined, start, end, encoding) for start, end in zip(starts, ends, strict=True)]


def to_lsp(diagnostic: Diagnostic, positions: PositionMap) -> types.Diagnostic:
    """A diagnostic as the editor shows it: code, a link to the rule's doc, and the rule's name in `data`;
    its note (why no quick fix) on a line of its own under the message, where an editor shows it."""
    severity = {
        Severity.ERROR: types.DiagnosticSeverity.Error,
        Severity.INFO: types.DiagnosticSeverity.Information,
    }.get(diagnostic.severity, types.DiagnosticSeverity.Warning)
    fix = diagnostic.fix
    return types.Diagnostic(
        range=positions.range(diagnostic.start, diagnostic.end),
        message=diagnostic.message if not diagnostic.note else f"{diagnostic.message}\n{diagnostic.note}",
        severity=severity,
        code=diagnostic.code,
        code_description=types.CodeDescription(href=diagnostic.url),
        source=SOURCE,
        data={
            "name": diagnostic.name,
            "fix": None if fix is None else {"title": fix.title, "applicability": fix.applicability.value},
        },
    )


def text_edit(edit: Edit, positions: PositionMap) -> types.TextEdit:
    return types.TextEdit(range=positions.range(edit.start, edit.end), new_text=edit.content)


def applied(text: str, edits: list[Edit]) -> str:
    """`text` with non-overlapping edits applied (at one offset, an insertion before a replacement)."""
    for edit in reversed(sorted(edits, key=lambda e: (e.start, e.end))):
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text


def changed_span(old: str, new: str) -> Edit | None:
    """The one edit that turns `old` into `new`: only the span between their common prefix and suffix
    (a fix-all touches a few lines; resending the whole document would move the editor's cursor and
    marks). None when nothing changed."""
    if old == new:
        return None
    return minimal_edit(0, old, new)


def carried(found: list[Diagnostic], old: str, new: str) -> list[Diagnostic]:
    """Findings of `old` that an edit to `new` left in place, their offsets moved with the text after the
    edit: those whose span the changed one (between the texts' common prefix and suffix) does not reach.
    They are shown, never fixed (a quick fix comes from a finished check): their fixes still hold `old`'s
    edits, and their lines and columns are `old`'s."""
    edit = changed_span(old, new) or Edit(len(old), len(old), "")
    shift = len(edit.content) - (edit.end - edit.start)
    kept = []
    for diagnostic in found:
        if diagnostic.end <= edit.start:
            kept.append(diagnostic)
        elif diagnostic.start >= edit.end:
            kept.append(
                dataclasses.replace(diagnostic, start=diagnostic.start + shift, end=diagnostic.end + shift)
            )
    return kept
