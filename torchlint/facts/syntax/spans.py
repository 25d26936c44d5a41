"""Where a node's text is, without LibCST's whole-module PositionProvider.

PositionProvider renders the whole module while it records positions: on a 1,000-line script about 2.5x
the parse (330 ms against 130 ms here), paid by every file with a finding, and by every keystroke in the
editor. Positions are only asked for a few nodes (the findings, the statements their fixes rewrite), so
`Spans` finds them per top-level statement instead:

- which top-level statement holds a node: one descent over the tree's nodes (whitespace and punctuation
  fields skipped, as in collect.py), kept as `id(node) -> index`;
- where that statement's own text starts: from CPython's parser (`ast`), which gives each module-level
  statement its first line (of its first decorator), and a module-level statement starts its line. ast's
  statements are paired with LibCST's (several on one line, `a = 1; b = 2`, are one LibCST line);
- the node's position inside the statement: for an expression (a finding's callee or call), the one place
  in the statement's text where the node's own rendering occurs, a multi-line one rendered at the
  indentation of the blocks around it; otherwise, or when it occurs more than once, PositionProvider over
  a module holding the innermost nested statement around it that is found that way (a loop, a `with`),
  else the top-level statement alone (a few ms, but as much as the whole module for a long training
  function), shifted to where the statement is in the text.

Each step checks itself: a statement whose text is not where ast says (a pairing that does not hold), or a
node outside the index, is answered by the whole-module PositionProvider, as before. The answers are the
same offsets either way (the suite runs both paths).
"""

from __future__ import annotations

from functools import cached_property

from torchlint._lazy import cst
from torchlint.facts.syntax.walk import child_nodes
from torchlint.positions import LineIndex
from torchlint.pyast import python_ast


class Spans:
    def __init__(self, text: str, module: cst.Module, lines: LineIndex) -> None:
        self.text = text
        self.module = module
        self.lines = lines
        self._statements: dict[int, tuple[int, LineIndex, object] | None] = {}
        self._ancestries: dict[int, list[tuple[cst.CSTNode, str]]] = {}
        # id of a nested statement -> `_statement_written`
        self._nested: dict[int, tuple[int, str] | None] = {}
        self._nested_positions: dict[int, tuple[int, LineIndex, object]] = {}

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a node's own text (no surrounding whitespace) in the text."""
        found = self.text_span(node)
        if found is not None:
            return found
        index = self.statement_index(node)
        located = self._located_nested(node) if index is not None else None
        if located is None and index is not None:
            located = self._located(index)
        if located is None:
            return self._whole_module_span(node)
        base, lines, positions = located
        code_range = positions[node]  # type: ignore[index]
        return (
            base + lines.offset(code_range.start.line, code_range.start.column),
            base + lines.offset(code_range.end.line, code_range.end.column),
        )

    def text_span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """`span` of an expression without parentheses of its own, found by its text (`written`): the
        positions of the same characters, on one line or several. A finding sits on a callee
        (`torch.cuda.amp.autocast`) or a call (`DataLoader(...)` over a few lines): this costs a string
        search, where rendering the statement with positions costs as much as the whole module when the
        statement is a long training function."""
        if getattr(node, "lpar", ()):
            return None
        return self.written(node)

    def written(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """Where an expression's code (its parentheses included) is in the text, when its rendering occurs
        once in its top-level statement's text (None: that cannot tell where it is). LibCST writes an
        expression's tokens and the whitespace between them as they were, but an indented continuation
        line (`indent` of a ParenthesizedWhitespace or an EmptyLine) from the indentation of the blocks
        around it, which a rendering of the node alone lacks: a multi-line one is rendered at that
        indentation (`indentation`). The node's own text is one place its rendering occurs, so the only one
        is where it is."""
        if not isinstance(node, cst.BaseExpression):
            return None
        index = self.statement_index(node)
        starts = self._starts
        if index is None or starts is None:
            return None
        code = self.code_in_place(node, node)
        if not code:
            return None
        low = starts[index]
        high = starts[index + 1] if index + 1 < len(starts) else len(self.text)
        first = self.text.find(code, low, high)
        if first < 0 or self.text.find(code, first + 1, high) >= 0:
            return None
        return first, first + len(code)

    def code_in_place(self, node: cst.BaseExpression, where: cst.CSTNode) -> str | None:
        """`node`'s code as LibCST writes it in place of `where` (a node of this module): a multi-line one
        indented as the blocks around `where` are; None where that is not known."""
        code = self.module.code_for_node(node)
        if "\n" not in code and "\r" not in code:
            return code  # no line of it is indented
        indent = self.indentation(where)
        if indent is None:
            return None
        return rendered_at(self.module, node, indent) if indent else code

    def indentation(self, node: cst.CSTNode) -> str | None:
        """The indentation of the blocks around `node`: what LibCST writes before each indented line of it
        (None: not a node of this module's statements)."""
        path = self._ancestry(node)
        return path[-1][1] if path is not None else None

    def _ancestry(self, node: cst.CSTNode) -> list[tuple[cst.CSTNode, str]] | None:
        """The nodes from `node`'s top-level statement down to `node`, each with the indentation of the
        blocks around it: one descent of that statement."""
        index = self.statement_index(node)
        if index is None:
            return None
        found = self._ancestries.get(id(node))
        if found is not None:
            return found
        default = self.module.default_indent
        # (node, the indentation around it, its parent's entry): the path is read back from the node's
        todo: list[tuple] = [(self.module.body[index], "", None)]
        while todo:
            entry = todo.pop()
            current, indent, _ = entry
            if current is node:
                path = []
                while entry is not None:
                    path.append((entry[0], entry[1]))
                    entry = entry[2]
                self._ancestries[id(node)] = found = path[::-1]
                return found
            if type(current) is cst.IndentedBlock:
                indent += default if current.indent is None else current.indent
            todo.extend((child, indent, entry) for child in child_nodes(current))
        return None

    def nested_statement(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, int, str, str] | None:
        """The innermost statement below the top-level one that is or holds `node` and whose text is found
        by its rendering alone: (the statement, where its text starts (its comment lines above it
        included), its rendering, its indentation). A training step's `with` or `for` is found this way,
        so a fix or a position inside it renders that statement, not the whole function around it. None
        where no such statement is found (the node's top-level statement is then rendered)."""
        path = self._ancestry(node)
        if path is None:
            return None
        for current, indent in reversed(path[1:]):
            if isinstance(current, cst.BaseStatement) and indent:
                found = self._statement_written(current, indent)
                if found is not None:
                    return current, found[0], found[1], indent
        return None

    def _statement_written(self, statement: cst.BaseStatement, indent: str) -> tuple[int, str] | None:
        """(where, the rendering) of a nested statement, when its rendering at its indentation occurs once in
        its top-level statement's text."""
        if id(statement) in self._nested:
            return self._nested[id(statement)]
        found = None
        index = self.statement_index(statement)
        starts = self._starts
        code = statement_at(self.module, statement, indent)
        if index is not None and starts is not None and code:
            low = starts[index]
            high = starts[index + 1] if index + 1 < len(starts) else len(self.text)
            first = self.text.find(code, low, high)
            if first >= 0 and self.text.find(code, first + 1, high) < 0:
                found = (first, code)
        self._nested[id(statement)] = found
        return found

    def statement_index(self, node: cst.CSTNode) -> int | None:
        """The index in `module.body` of the top-level statement holding `node` (None: not a node of it)."""
        return self._index.get(id(node))

    @cached_property
    def _index(self) -> dict[int, int]:
        found: dict[int, int] = {}
        for index, statement in enumerate(self.module.body):
            todo = [statement]
            while todo:
                node = todo.pop()
                found[id(node)] = index
                todo.extend(child_nodes(node))
        return found

    @cached_property
    def _starts(self) -> list[int] | None:
        """Offset of each top-level statement's own text (its first decorator, else its first token), from
        ast; None when ast's statements do not pair with LibCST's."""
        try:
            tree = python_ast(self.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        first_lines: list[int] = []
        previous_end = None
        for statement in tree.body:
            if statement.lineno == previous_end:  # `a = 1; b = 2`: one LibCST statement line
                previous_end = statement.end_lineno
                continue
            decorators = getattr(statement, "decorator_list", ())
            first_lines.append(min([statement.lineno, *(d.lineno for d in decorators)]))
            previous_end = statement.end_lineno
        if len(first_lines) != len(self.module.body):
            return None
        return [self.lines.offset(line, 0) for line in first_lines]

    def _located_nested(self, node: cst.CSTNode) -> tuple[int, LineIndex, object] | None:
        """`_located` for the innermost nested statement around `node` found by its text
        (`nested_statement`): its positions, from a module holding it alone in a block indented as it is."""
        from libcst.metadata import MetadataWrapper, PositionProvider

        nested = self.nested_statement(node)
        if nested is None:
            return None
        statement, where, code, indent = nested
        found = self._nested_positions.get(id(statement))
        if found is None:
            newline = self.module.default_newline
            block = cst.IndentedBlock(body=[statement], indent=indent)
            alone = cst.Module(
                body=[cst.If(test=cst.Name("_"), body=block)],
                default_indent=self.module.default_indent,
                default_newline=newline,
            )
            head = f"if _:{newline}"
            rendered = alone.code
            if rendered != head + code:
                return None
            positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            self._nested_positions[id(statement)] = found = (
                where - len(head),
                LineIndex(rendered),
                positions,
            )
        return found

    def _located(self, index: int) -> tuple[int, LineIndex, object] | None:
        """(offset of the statement's rendering in the text, a LineIndex of that rendering, its positions)."""
        if index in self._statements:
            return self._statements[index]
        self._statements[index] = located = self._locate(index)
        return located

    def _locate(self, index: int) -> tuple[int, LineIndex, object] | None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        starts = self._starts
        if starts is None:
            return None
        statement = self.module.body[index]
        ends_the_text = index == len(self.module.body) - 1 and not self.module.footer
        alone = self.module.with_changes(
            header=(),
            body=(statement,),
            footer=(),
            has_trailing_newline=self.module.has_trailing_newline if ends_the_text else True,
        )
        code = alone.code
        positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        lines = LineIndex(code)
        decorators = getattr(statement, "decorators", ())
        first = positions[decorators[0] if decorators else statement]
        own = lines.offset(first.start.line, first.start.column)
        base = starts[index] - own
        if base < 0 or self.text[starts[index] : base + len(code)] != code[own:]:
            return None  # not where ast says: ask the whole module
        return base, lines, positions

    @cached_property
    def _whole_module(self):
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    def _whole_module_span(self, node: cst.CSTNode) -> tuple[int, int]:
        code_range = self._whole_module[node]
        return (
            self.lines.offset(code_range.start.line, code_range.start.column),
            self.lines.offset(code_range.end.line, code_range.end.column),
        )


def rendered_at(module: cst.Module, node: cst.BaseExpression, indent: str) -> str | None:
    """`node`'s code as LibCST writes it inside blocks indented by `indent` (see `Spans.written`), through
    the public rendering of a block holding it alone (None: that rendering has not the expected shape)."""
    code = statement_at(module, cst.SimpleStatementLine(body=[cst.Expr(value=node)]), indent)
    newline = module.default_newline
    if code is None or not (code.startswith(indent) and code.endswith(newline)):
        return None
    return code[len(indent) : len(code) - len(newline)]


def statement_at(module: cst.Module, statement: cst.BaseStatement, indent: str) -> str | None:
    """A nested statement's code as LibCST writes it in blocks indented by `indent`, the comment lines above
    it included (None: the rendering has not the expected shape)."""
    code = module.code_for_node(cst.IndentedBlock(body=[statement], indent=indent))
    newline = module.default_newline
    return code[len(newline) :] if code.startswith(newline) and len(code) > len(newline) else None
