"""LibCST's parse of a buffer, one top-level statement at a time, each kept by its text.

A keystroke changes one statement of a 1,000-line script, but LibCST parses all of it again (130 ms here,
more than the whole latency budget). Top-level statements tokenize and parse independently (the
indentation stack is empty and no bracket is open between them), so the server splits the text into one
chunk per top-level statement (CPython's parser says where each ends), parses each chunk on its own, keeps
the result by the chunk's text, and assembles the module from the parts: after an edit, only the changed
chunk is parsed.

A chunk runs from the end of the previous one to the end of its statement, plus the comments indented under
its last block (LibCST gives those to the block). The assembled module must be the one `cst.parse_module`
gives: tests compare them node for node (`deep_equals`), on layouts, the fixtures and generated programs.
Whatever could not be assembled exactly (a chunk whose parse ends with lines of its own, a repeated chunk,
which must not share nodes) falls back to parsing the chunk, or the whole text, afresh.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.memo import ByContent
from torchlint.positions import LineIndex
from torchlint.pyast import python_ast

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import Collected

_INDENTED_COMMENT = re.compile(r"[ \t]+#")


class StatementParser:
    def __init__(self, size: int = 20000) -> None:
        self.size = size  # chunks kept (a few per open buffer's statement)
        self._chunks: OrderedDict[str, cst.Module] = OrderedDict()

    def __call__(self, text: str) -> cst.Module:
        chunks = split(text)
        if chunks is None or len(chunks) < 2:
            return cst.parse_module(text)
        modules = []
        seen: set[str] = set()
        for chunk in chunks:
            fresh = chunk in seen  # a repeated chunk: its nodes must not appear twice in one module
            seen.add(chunk)
            modules.append(cst.parse_module(chunk) if fresh else self._parse(chunk))
        return assemble(modules) or cst.parse_module(text)

    def _parse(self, chunk: str) -> cst.Module:
        found = self._chunks.get(chunk)
        if found is None:
            found = self._chunks[chunk] = cst.parse_module(chunk)
            if len(self._chunks) > self.size:
                self._chunks.popitem(last=False)
        else:
            self._chunks.move_to_end(chunk)
        return found


class OtherFiles:
    """LibCST's parse of the project's other files, and the syntax records collected from it, kept by their
    whole text from one check to the next.

    Every check is a run, and parses again the other files its questions reach (the modules a script
    imports, the scripts that import a model file): most of a keystroke's check in a real project. Their
    texts rarely change, so each comes back as the module parsed before, up to `texts` characters of text
    (a tree takes about 27 bytes per character of its text, so the default keeps at most about 200 MB, and
    a check usually reaches a few hundred KB of other files), and so do the records a file's facts collect
    from it (scopes, bindings, calls, functions: a pure function of the module, a sixth of a keystroke's
    check of yolov5's train.py). Never assembled from shared statements: the project index hands one module
    to one file per run (two files with one text get a parse each, and records of their own).
    """

    def __init__(self, texts: int = 8_000_000) -> None:
        self._kept: ByContent[str, list] = ByContent(lambda text: [cst.parse_module(text), None], limit=texts)

    def parse(self, text: str) -> cst.Module:
        return self._kept(text)[0]

    def records(self, text: str, module: cst.Module) -> Collected:
        """The records of `module`, `parse(text)`'s (else collected for it alone)."""
        from torchlint.facts.syntax.collect import Collector

        kept = self._kept(text)
        if kept[0] is not module:  # a second parse of one text: its own nodes, its own records
            return Collector().collect(module)
        if kept[1] is None:
            kept[1] = Collector().collect(module)
        return kept[1]


def split(text: str) -> list[str] | None:
    """The text cut after each top-level statement (and the comments indented under its last block);
    None when CPython cannot parse it."""
    try:
        tree = python_ast(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = LineIndex(text)
    count = len(lines.line_starts)
    ends: list[int] = []  # the 1-based last line of each chunk
    statements = tree.body
    for index, statement in enumerate(statements):
        end = statement.end_lineno or statement.lineno
        following = statements[index + 1].lineno if index + 1 < len(statements) else count + 1
        if end == following:  # `a = 1; b = 2`: one LibCST statement line
            continue
        if isinstance(statement, ast.stmt) and _has_block(statement):
            line = end + 1
            while line < following and _blank_or_indented_comment(lines.line_text(line)):
                if lines.line_text(line).strip():
                    end = line
                line += 1
        ends.append(end)
    if not ends:
        return None
    cuts = [0, *(lines.offset(end + 1, 0) for end in ends[:-1]), len(text)]
    return [text[start:stop] for start, stop in zip(cuts, cuts[1:], strict=False) if stop > start] or None


def _has_block(statement: ast.stmt) -> bool:
    return hasattr(statement, "body") and not isinstance(statement, ast.Expr)


def _blank_or_indented_comment(line: str) -> bool:
    return not line.strip() or bool(_INDENTED_COMMENT.match(line))


_SUITES = ("body", "orelse", "handlers", "finalbody", "cases")


def _has_indented_block(node: cst.CSTNode) -> bool:
    """Whether a top-level statement has an indented block (then its chunk detected an indentation)."""
    for name in _SUITES:
        value = getattr(node, name, None)
        for part in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(part, cst.IndentedBlock):
                return True
            if isinstance(part, cst.CSTNode) and not isinstance(part, cst.SimpleStatementSuite):
                if _has_indented_block(part):
                    return True
    return False


def assemble(modules: list[cst.Module]) -> cst.Module | None:
    """One module from consecutive chunks' modules, as `cst.parse_module` of their joined text would be;
    None when a chunk's parse kept lines of its own at its end (they belong to the next statement)."""
    first, last = modules[0], modules[-1]
    body: list[cst.CSTNode] = []
    for index, module in enumerate(modules):
        if module.footer and module is not last:
            return None
        if not module.body:
            return None
        statements = list(module.body)
        if index and module.header:  # comments above a statement that starts a chunk are its own
            lead = statements[0]
            statements[0] = lead.with_changes(leading_lines=(*module.header, *lead.leading_lines))
        body.extend(statements)
    # Nodes whose indentation or newline is the module's default leave it unset (None), so every chunk
    # must have detected the defaults the whole text has: the first newline, the first indented block's.
    blocks = [m.default_indent for m in modules if any(_has_indented_block(s) for s in m.body)]
    indent = blocks[0] if blocks else first.default_indent
    if any(found != indent for found in blocks) or any(
        m.default_newline != first.default_newline for m in modules
    ):
        return None
    return cst.Module(
        body=body,
        header=first.header,
        footer=last.footer,
        encoding=first.encoding,
        default_indent=indent,
        default_newline=first.default_newline,
        has_trailing_newline=last.has_trailing_newline,
    )
