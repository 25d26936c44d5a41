"""CPython's parse of a text (`ast.parse`), kept for the last few texts.

Three readers ask it of the same text in one check: the linter's syntax check (TL001), the statement
positions of facts (`facts/syntax/spans.py`) and the Language Server's statement splitter; each parse of a
1,000-line script costs about 20 ms. The checked file's exports (its statements, its code's scopes) are
read from the same tree where it is still kept (`kept_ast`): at each keystroke in the editor, the export
of the changed buffer was two more parses of it. Callers only read the tree. A leaf module: nothing of
torchlint here.
"""

from __future__ import annotations

import ast
import warnings
from collections import OrderedDict

KEPT = 4  # texts whose trees are kept, the most recently asked last
_trees: OrderedDict[str, ast.Module] = OrderedDict()


def python_ast(text: str) -> ast.Module:
    """The module's tree; SyntaxError, ValueError (NUL bytes), RecursionError or MemoryError as ast.parse
    raises them (SyntaxWarnings, such as invalid escapes, are not ours to report)."""
    tree = _trees.pop(text, None)
    if tree is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    _trees[text] = tree  # the most recently asked last
    if len(_trees) > KEPT:
        _trees.popitem(last=False)
    return tree


def kept_ast(data: bytes) -> ast.Module | None:
    """The tree `python_ast` keeps for the text these UTF-8 bytes hold, where one is kept and the bytes
    parse as that text does (no coding declaration, which bytes obey and a text does not); None otherwise.
    A lookup only: the trees of files read for their exports are not kept."""
    if data.startswith(b"\xef\xbb\xbf") or may_declare_coding(data):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _trees.get(text)


def may_declare_coding(data: bytes) -> bool:
    """Whether the first two lines of these bytes may hold a coding declaration, under which CPython's
    parser reads them otherwise than as UTF-8 (tokenize ends those lines at `\n` only, CPython also at a
    lone `\r`: both are looked at)."""
    second_line_end = data.find(b"\n", data.find(b"\n") + 1)
    return b"coding" in (data if second_line_end < 0 else data[:second_line_end])
