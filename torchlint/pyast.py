"""CPython's parse of a text (`ast.parse`), kept for the last few texts.

Three readers ask it of the same text in one check: the linter's syntax check (TL001), the statement
positions of facts (`facts/syntax/spans.py`) and the Language Server's statement splitter; each parse of a
1,000-line script costs about 20 ms. Callers only read the tree. A leaf module: nothing of torchlint here.
"""

from __future__ import annotations

import ast
import functools
import warnings


@functools.lru_cache(maxsize=4)
def python_ast(text: str) -> ast.Module:
    """The module's tree; SyntaxError, ValueError (NUL bytes), RecursionError or MemoryError as ast.parse
    raises them (SyntaxWarnings, such as invalid escapes, are not ours to report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)
