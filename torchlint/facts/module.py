"""`ModuleFacts`: what torchlint knows about one module, asked by rules instead of walking the tree.

Built from a single LibCST parse and a single walk (`collect.py`). Positions are computed lazily, only when a
rule has something to report, because LibCST's PositionProvider costs more than the parse.

What rules ask today:
- `references_to(qualnames)`: every use of an API, however it was imported (`import torch.cuda.amp as amp`,
  `from torch.cuda import amp`, `from torch.cuda.amp import autocast as ac`, imports inside functions), each
  a `Reference` that knows whether it is a callee, a decorator or a `with` item;
- `references_of(binding)`: every use of one imported name (to know when an import becomes unused);
- `name_for_module("torch", scope)`: how the code spells a module in a scope (`T` after `import torch as T`),
  and `import_anchor()`: where a new top-level import goes;
- `span(node)` / `code(node)`: offsets and source text, for findings and fixes.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from functools import cached_property

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.diagnostics import LineIndex
from torchlint.facts.collect import Collected, Collector
from torchlint.facts.names import Binding, BindingKind, Reference, Scope


class ModuleFacts:
    def __init__(self, path: str, text: str, module: cst.Module) -> None:
        self.path = path
        self.text = text
        self.module = module
        self._collected: Collected = Collector().collect(module)

    # -- names ------------------------------------------------------------------------------------------

    @property
    def module_scope(self) -> Scope:
        return self._collected.module_scope

    @property
    def references(self) -> list[Reference]:
        return self._collected.references

    def references_to(self, qualnames: Collection[str]) -> list[Reference]:
        """Uses of any of `qualnames` (exact qualified names of the longest attribute chain)."""
        return [ref for ref in self.references if ref.qualname in qualnames]

    @cached_property
    def _references_by_binding(self) -> dict[int, list[Reference]]:
        table: dict[int, list[Reference]] = {}
        for ref in self.references:
            for binding in ref.bindings:
                table.setdefault(id(binding), []).append(ref)
        return table

    def references_of(self, binding: Binding) -> list[Reference]:
        return self._references_by_binding.get(id(binding), [])

    def name_for_module(self, qualname: str, scope: Scope) -> str | None:
        """A dotted expression that means module `qualname` in `scope`, or None if the code has none."""
        module_scope = self.module_scope
        for binding_list in module_scope.bindings.values():
            for binding in binding_list:
                if binding.kind is not BindingKind.IMPORT or binding.qualname != qualname:
                    continue
                if scope.resolve(binding.name) == qualname:
                    return binding.name
        return None

    def name_is_free(self, name: str, scope: Scope) -> bool:
        """True when binding `name` at module level would not clash with anything visible from `scope`."""
        return not scope.lookup(name) and name not in self.module_scope.bindings

    def suite_size(self, statement: cst.CSTNode) -> int:
        """How many statements share the block of `statement` (0 if unknown)."""
        return self._collected.suite_sizes.get(id(statement), 0)

    # -- positions and text -----------------------------------------------------------------------------

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.text)

    @cached_property
    def _positions(self):
        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a node's own text (no surrounding whitespace) in the decoded source."""
        code_range = self._positions[node]
        lines = self.lines
        return (
            lines.offset(code_range.start.line, code_range.start.column),
            lines.offset(code_range.end.line, code_range.end.column),
        )

    def statement_start(self, statement: cst.CSTNode) -> int:
        """Where a statement's text begins: its first decorator, if it has any (LibCST starts at `def`)."""
        decorators = getattr(statement, "decorators", ())
        return self.span(decorators[0] if decorators else statement)[0]

    @cached_property
    def _statement_starts(self) -> list[int]:
        return [self.statement_start(statement) for statement in self.module.body]

    def top_level_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The module-level statement that contains `node` (found by position, no parent links needed)."""
        index = bisect.bisect_right(self._statement_starts, self.span(node)[0]) - 1
        return self.module.body[max(index, 0)]

    def line_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the whole physical lines a node occupies, newline included."""
        code_range = self._positions[node]
        lines = self.lines
        return lines.offset(code_range.start.line, 0), lines.offset(code_range.end.line + 1, 0)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @property
    def newline(self) -> str:
        return self.module.default_newline

    @cached_property
    def _top_level_imports(self) -> list[cst.SimpleStatementLine]:
        found = []
        for statement in self.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
            ):
                found.append(statement)
            elif found:
                break  # the first block of imports ends here
            elif not _is_docstring(statement):
                break
        return found

    def import_anchor(self) -> int:
        """Where a new top-level import line goes: after the first block of imports, else at the top."""
        imports = self._top_level_imports
        if imports:
            return self.line_span(imports[-1])[1]
        body = self.module.body
        if body and _is_docstring(body[0]):
            return self.line_span(body[0])[1]
        if body:
            return self.line_span(body[0])[0]
        return len(self.text)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
