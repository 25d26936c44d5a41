"""Jupyter notebooks (nbformat 4) read as one Python module and written back cell by cell.

The code cells are joined in order, one boundary comment line between two cells (`CELL_BOUNDARY`), so every
rule, `noqa` comment and the cross-file index see the notebook as the module Jupyter runs. The boundary
lines are what splits a fixed module back into cells: a fix that moved or re-indented one (a `with` wrapped
around statements of two cells) cannot be split, and the notebook is then not written.

IPython's own syntax (line magics `%time f()`, shell escapes `!pip install`, help `model?`, cell magics
`%%bash`) is masked on the same line (a `pass` or a comment that keeps the original text), and only in a
cell that does not parse as Python without it: positions do not move, and writing back restores the line.
Only the changed cells' `source` values are rewritten in the file's JSON, in the style they were written
(a list of lines or one string, the same indentation, ASCII escapes or not): outputs, execution counts,
metadata and the rest of the file stay byte for byte.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass
from json.decoder import scanstring

from torchlint.positions import CELL_BOUNDARY

MASK = "# torchlint-magic: "
_MASKED = re.compile(r"^([ \t]*)(?:pass  )?" + re.escape(MASK) + r"(.*)$")
_LINE_MAGIC = re.compile(r"^([ \t]*)([%!]|\?{1,2}[\w.]|[\w.\[\]'\"]+\?{1,2}[ \t]*$)")
_ASSIGNED_MAGIC = re.compile(r"^([ \t]*)[\w.,\s]+=[ \t]*[%!]")
# IPython's automagic: line magics and shell aliases written without `%` (`pip install timm`, `cd data`),
# masked only where the line is not Python (`time = 5` is an assignment).
_AUTOMAGIC = re.compile(
    r"^[ \t]*(pip|conda|mamba|cd|ls|pwd|env|load_ext|reload_ext|matplotlib|autoreload|mkdir|rmdir|cp|mv|rm|"
    r"cat|less|man|more|clear|history|who|whos|reset|run|timeit|time|config|alias|store|bookmark)"
    r"([ \t]+[^\s=(.\[,:+*/%<>!&|^-]|[ \t]*$)"
)
# Cell magics whose body is Python that IPython runs (timed, captured, profiled): only their first line is
# masked. Any other (`%%bash`, `%%writefile`, `%%html`) makes the whole cell something else than Python.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "tensorboard"})


class NotebookError(Exception):
    """Not a notebook torchlint can read: invalid JSON (with its line), or not nbformat 4."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based, counting every cell (markdown too), as Jupyter shows them
    text: str  # the cell's source, joined
    span: tuple[int, int] | None  # where its `source` value lies in the file's text (None: it has none)
    as_string: bool  # `"source": "..."` rather than a list of lines


@dataclass(frozen=True)
class Notebook:
    raw_text: str
    cells: tuple[Cell, ...]  # the code cells

    @classmethod
    def parse(cls, raw_text: str) -> Notebook:
        try:
            document = json.loads(raw_text)
        except json.JSONDecodeError as error:
            raise NotebookError(
                f"not a notebook: invalid JSON (line {error.lineno}, column {error.colno}): {error.msg}",
                error.lineno,
            ) from None
        cells = _validated_cells(document)
        spans = _source_spans(raw_text, len(cells))
        code = []
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            text = source if isinstance(source, str) else "".join(source)
            if CELL_BOUNDARY in text.splitlines():
                raise NotebookError(f"not checked: cell {index + 1} holds torchlint's cell boundary line")
            code.append(Cell(index + 1, text, spans[index], isinstance(source, str)))
        return cls(raw_text, tuple(code))

    @property
    def cell_numbers(self) -> tuple[int, ...]:
        return tuple(cell.number for cell in self.cells)

    def python(self) -> str:
        """The code cells as one module (magics masked, a boundary line between two cells)."""
        return join_cells([cell.text for cell in self.cells])

    def cell_texts(self, python: str) -> list[str] | None:
        """Each code cell's text in `python` (a fixed module); None when it cannot be split."""
        return split_cells(python, [cell.text for cell in self.cells])

    def with_python(self, python: str) -> str | None:
        """The file's JSON with the cells of `python` written into it; None when it cannot be split."""
        texts = self.cell_texts(python)
        if texts is None:
            return None
        pieces, at = [], 0
        for cell, text in zip(self.cells, texts, strict=True):
            if text == cell.text:
                continue
            if cell.span is None:
                return None  # a cell without a `source` key gained text: nowhere to write it
            start, end = cell.span
            pieces += [self.raw_text[at:start], _source_value(self.raw_text, cell, text)]
            at = end
        pieces.append(self.raw_text[at:])
        return "".join(pieces)


def join_cells(texts: list[str]) -> str:
    """Code cells' texts as one module: magics masked, a boundary line between two cells (the notebook's
    and the Language Server's notebook documents' alike)."""
    return "".join(("" if i == 0 else CELL_BOUNDARY + "\n") + _region(text) for i, text in enumerate(texts))


def split_cells(python: str, originals: list[str]) -> list[str] | None:
    """Each cell's text in `python` (the joined `originals`, fixed): magics restored, each cell's last line
    break as it was; None when the boundaries did not survive (the fix is then not written)."""
    regions = split_regions(python)
    if regions is None or len(regions) != len(originals):
        return None
    texts = []
    for original, region in zip(originals, regions, strict=True):
        restored = "".join(_restored(line) for line in region.splitlines(keepends=True))
        if not original.endswith("\n") and restored.endswith("\n"):
            restored = restored[:-1]
        texts.append(restored)
    return texts


def split_regions(python: str) -> list[str] | None:
    """The text of each cell region of a joined module, split at the boundary lines (column 0, whole line)."""
    regions, current = [], []
    for line in python.splitlines(keepends=True):
        if line.rstrip("\r\n") == CELL_BOUNDARY:
            regions.append("".join(current))
            current = []
        elif CELL_BOUNDARY in line:
            return None  # a boundary moved or re-indented by a fix
        else:
            current.append(line)
    regions.append("".join(current))
    return regions


def _validated_cells(document: object) -> list[dict]:
    if not isinstance(document, dict) or "cells" not in document:
        raise NotebookError("not a notebook: no `cells` (is it nbformat 4?)")
    if document.get("nbformat") != 4:
        raise NotebookError(f"not a notebook torchlint reads: nbformat {document.get('nbformat')!r}, not 4")
    cells = document["cells"]
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise NotebookError("not a notebook: `cells` is not a list of cells")
    for number, cell in enumerate(cells, 1):
        source = cell.get("source", "")
        lines = source if isinstance(source, list) else [source]
        if not all(isinstance(line, str) for line in lines):
            raise NotebookError(f"not a notebook: cell {number}'s `source` is not text")
    language = (document.get("metadata") or {}).get("language_info", {})
    name = language.get("name") if isinstance(language, dict) else None
    if isinstance(name, str) and name.lower() not in ("python", "python3", "ipython"):
        raise NotebookError(f"not checked: a notebook in {name}, not Python")
    return cells


@functools.lru_cache(maxsize=4096)  # the editor joins a notebook on each edit: only the edited cell is new
def _region(text: str) -> str:
    """A cell's text as it sits in the joined module: magics masked, ending with a line break."""
    if not _parses(text):
        text = _masked(text)
    return text if text.endswith("\n") or not text else text + "\n"


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _masked(text: str) -> str:
    lines = text.splitlines(keepends=True)
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return "".join(MASK + line for line in lines)  # a whole cell of another language
        return MASK + lines[0] + _masked("".join(lines[1:]))
    out, continued, state = [], False, _Inside()
    for line in lines:
        body = line.rstrip("\r\n")
        if continued:
            out.append(MASK + line)
        elif state.at_statement_start() and _is_magic(body):
            indent = body[: len(body) - len(body.lstrip(" \t"))]
            out.append(indent + "pass  " + MASK + line[len(indent) :])
        else:
            out.append(line)
            state.read(body)
            continue
        continued = body.endswith("\\")
    return "".join(out)


def _is_magic(line: str) -> bool:
    if _LINE_MAGIC.match(line) or _ASSIGNED_MAGIC.match(line):
        return True
    return bool(_AUTOMAGIC.match(line)) and not _parses(line.strip())


class _Inside:
    """Whether the next line starts a statement: not inside brackets, a triple-quoted string or after a
    backslash (where a line starting with `%` is a modulo, or text), read roughly, line by line."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open triple quote
        self.continued = False

    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def read(self, line: str) -> None:
        at, end = 0, len(line)
        while at < end:
            if self.quote is not None:
                close = line.find(self.quote, at)
                if close == -1:
                    break
                at, self.quote = close + 3, None
                continue
            char = line[at]
            if char == "#":
                break
            if char in "\"'":
                triple = line[at : at + 3]
                if triple in ('"""', "'''"):
                    self.quote, at = triple, at + 3
                    continue
                close = line.find(char, at + 1)
                at = end if close == -1 else close + 1
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(self.depth - 1, 0)
            at += 1
        self.continued = self.quote is None and line.endswith("\\")


def _restored(line: str) -> str:
    ending = line[len(line.rstrip("\r\n")) :]
    match = _MASKED.match(line.rstrip("\r\n"))
    return match.group(1) + match.group(2) + ending if match else line


def _source_value(raw_text: str, cell: Cell, text: str) -> str:
    """`text` as a JSON `source` value written the way the cell's old value was."""
    old = raw_text[cell.span[0] : cell.span[1]]
    ascii_only = bool(re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", raw_text))
    if cell.as_string:
        return json.dumps(text, ensure_ascii=ascii_only)
    lines = [json.dumps(line, ensure_ascii=ascii_only) for line in text.splitlines(keepends=True)]
    if not lines:
        return "[]"
    if "\n" not in old:
        return "[" + ", ".join(lines) + "]"
    item_indent, close_indent = _list_indents(raw_text, cell.span)
    newline = "\r\n" if "\r\n" in old else "\n"
    separator = "," + newline + item_indent
    return "[" + newline + item_indent + separator.join(lines) + newline + close_indent + "]"


def _list_indents(raw_text: str, span: tuple[int, int]) -> tuple[str, str]:
    """The indentation of a multi-line list's items and of its closing bracket (for an empty list, the
    key's indentation and one more space, as Jupyter writes)."""
    old = raw_text[span[0] : span[1]]
    line_start = raw_text.rfind("\n", 0, span[0]) + 1
    key_indent = re.match(r"[ \t]*", raw_text[line_start:]).group(0)
    items = re.match(r"\[[ \t]*\r?\n([ \t]*)\S", old)
    close = re.search(r"\n([ \t]*)\]$", old)
    item_indent = items.group(1) if items else key_indent + " "
    return item_indent, close.group(1) if close else key_indent


# -- where each cell's `source` value lies in the file ---------------------------------------------------

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null")


def _source_spans(text: str, count: int) -> list[tuple[int, int] | None]:
    """[(start, end)] of each cell's `source` value, in cell order (a file `json.loads` accepted); None
    for a cell without one."""
    found: dict[int, tuple[int, int]] = {}
    _value(text, _skip(text, 0), (), found)
    return [found.get(i) for i in range(count)]


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()


def _value(text: str, at: int, path: tuple, found: dict[int, tuple[int, int]]) -> int:
    """The end of the JSON value starting at `at`; records the spans of `cells[i].source` on the way."""
    char = text[at]
    if char == '"':
        end = scanstring(text, at + 1)[1]
    elif char == "{":
        end = _object(text, at, path, found)
    elif char == "[":
        end = _array(text, at, path, found)
    else:
        end = _SCALAR.match(text, at).end()
    if len(path) == 3 and path[0] == "cells" and path[2] == "source":
        found[path[1]] = (at, end)
    return end


def _object(text: str, at: int, path: tuple, found: dict[int, tuple[int, int]]) -> int:
    at = _skip(text, at + 1)
    while text[at] != "}":
        key, at = scanstring(text, at + 1)
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        at = _skip(text, _value(text, at, (*path, key) if len(path) < 3 else path + ("",), found))
        if text[at] == ",":
            at = _skip(text, at + 1)
    return at + 1


def _array(text: str, at: int, path: tuple, found: dict[int, tuple[int, int]]) -> int:
    at, index = _skip(text, at + 1), 0
    while text[at] != "]":
        child = (*path, index) if path == ("cells",) else path + ("",)
        at = _skip(text, _value(text, at, child, found))
        index += 1
        if text[at] == ",":
            at = _skip(text, at + 1)
    return at + 1
