"""Where a checked text's offsets land in the client's documents: one text document, or the cells of a
notebook.

A buffer is checked as one text; a notebook's is its Python code cells joined into one module, which the
client never sees. The client knows only the cells, each a text document of its own (LSP 3.17's notebook
documents, as ruff's server handles them): every diagnostic is published on the cell it starts in, its
range counted from that cell's first line (in the client's position encoding, through `RegionMap`), and
every cell gets its publish, an empty one clearing what it had. An edit (a quick fix, "disable for this
line", the fix-all) is made on the joined text, split back into the cells (`split_cells`, which restores
the masked magics) and sent as one minimal edit per changed cell; one that moved a cell boundary cannot be
split back, so it is not offered (the command line does not write it either).

Both views answer the same questions, so the server and the code actions never ask which one they hold.
"""

from __future__ import annotations

import bisect

from lsprotocol import types

from torchlint.diagnostics import Diagnostic, Edit
from torchlint.lsp.convert import PositionMap, applied, cell_regions, changed_span, text_edit, to_lsp
from torchlint.lsp.documents import Buffer
from torchlint.workspace.notebook import split_cells


class TextView:
    """A text document: its offsets are the checked text's."""

    is_notebook = False

    def __init__(self, buffer: Buffer, encoding: str) -> None:
        self.buffer = buffer
        self.text = buffer.text
        self.positions = PositionMap(buffer.text, encoding)

    def offset(self, uri: str, position: types.Position) -> int | None:
        """The checked text's offset of a position in the document `uri` (None: not this view's)."""
        return self.positions.offset(position) if uri == self.buffer.uri else None

    def range(self, start: int, end: int) -> types.Range:
        return self.positions.range(start, end)

    def diagnostic(self, diagnostic: Diagnostic) -> types.Diagnostic:
        return to_lsp(diagnostic, self.positions)

    def publishes(self, found: list[Diagnostic]) -> list[types.PublishDiagnosticsParams]:
        diagnostics = [self.diagnostic(d) for d in found]
        return [
            types.PublishDiagnosticsParams(
                uri=self.buffer.uri, version=self.buffer.version, diagnostics=diagnostics
            )
        ]

    def edit(self, edits: list[Edit]) -> types.WorkspaceEdit | None:
        """Edits of the checked text as the client's edit."""
        return types.WorkspaceEdit(changes={self.buffer.uri: [text_edit(e, self.positions) for e in edits]})

    def rewrite(self, fixed: str) -> types.WorkspaceEdit | None:
        """The checked text replaced by `fixed`, as one minimal edit (None when nothing changes)."""
        edit = changed_span(self.text, fixed)
        return self.edit([edit]) if edit is not None else None


class NotebookView:
    """A notebook's Python code cells: the checked text is them joined, one region per cell."""

    is_notebook = True

    def __init__(self, buffer: Buffer, encoding: str) -> None:
        assert buffer.cells is not None
        self.buffer = buffer
        self.text = buffer.text
        self.cells = buffer.cells
        self.encoding = encoding
        self.regions = cell_regions(buffer.text, len(self.cells), encoding)[: max(len(self.cells), 1)]
        self._starts = [region.start for region in self.regions]

    def offset(self, uri: str, position: types.Position) -> int | None:
        """The joined text's offset of a position in the cell `uri` (None: not one of its code cells)."""
        for index, cell in enumerate(self.cells):
            if cell.uri == uri:
                return self.regions[index].offset(position)
        return None

    def range(self, start: int, end: int) -> types.Range:
        """The range in the cell `start` is in (cut at that cell's end)."""
        return self.regions[self._cell_at(start)].range(start, end)

    def diagnostic(self, diagnostic: Diagnostic) -> types.Diagnostic:
        return to_lsp(diagnostic, self.regions[self._cell_at(diagnostic.start)])

    def publishes(self, found: list[Diagnostic]) -> list[types.PublishDiagnosticsParams]:
        """One publish per code cell, in order: its diagnostics, or none to clear what it showed."""
        per_cell: list[list[types.Diagnostic]] = [[] for _ in self.cells]
        for diagnostic in found:
            if self.cells:
                per_cell[self._cell_at(diagnostic.start)].append(self.diagnostic(diagnostic))
        return [
            types.PublishDiagnosticsParams(uri=cell.uri, version=cell.version, diagnostics=diagnostics)
            for cell, diagnostics in zip(self.cells, per_cell, strict=True)
        ]

    def edit(self, edits: list[Edit]) -> types.WorkspaceEdit | None:
        """Edits of the joined text as edits of the cells they change (None: they cannot be split back)."""
        return self.rewrite(applied(self.text, edits))

    def rewrite(self, fixed: str) -> types.WorkspaceEdit | None:
        """The joined text replaced by `fixed`: one minimal edit per changed cell; None when nothing
        changes or a boundary moved."""
        texts = split_cells(fixed, [cell.text for cell in self.cells])
        if texts is None:
            return None
        changes: dict[str, list[types.TextEdit]] = {}
        for cell, text in zip(self.cells, texts, strict=True):
            edit = changed_span(cell.text, text)
            if edit is not None:
                changes[cell.uri] = [text_edit(edit, PositionMap(cell.text, self.encoding))]
        return types.WorkspaceEdit(changes=changes) if changes else None

    def _cell_at(self, offset: int) -> int:
        """The index of the cell whose region holds `offset` (a boundary line counts to the cell before)."""
        return max(bisect.bisect_right(self._starts, offset) - 1, 0)


View = TextView | NotebookView


def view_of(buffer: Buffer, encoding: str) -> View:
    return TextView(buffer, encoding) if buffer.cells is None else NotebookView(buffer, encoding)
