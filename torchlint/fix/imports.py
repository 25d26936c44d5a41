"""Removing names from an import statement's lines, keeping the rest of the statement as it was written."""

from __future__ import annotations

import re

from torchlint._lazy import cst

_COMMENT = re.compile(r"#[^\r\n]*")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def remove_bound_names(lines: str, names: set[str]) -> str:
    """`lines` hold whole lines with one import statement; drop the aliases that bind `names`.

    Returns "" when nothing is left (the lines go), and the lines unchanged when they cannot be understood.
    A comment written inside a multi-line import (`from m import (  # why`, one per name) is the
    author's note, which may say more than the import: it stays, on a line of its own above what is left.
    The comment after a one-line import is about that line, and goes with it.
    """
    kept = _without_names(lines, names)
    if kept == lines or not _LINE_BREAK.search(lines.rstrip("\r\n")):
        return kept
    lost = [comment for comment in _comments(lines) if comment not in _comments(kept)]
    if not lost:
        return kept
    stripped = lines.lstrip(" \t")
    indent = lines[: len(lines) - len(stripped)]
    newline = "\r\n" if lines.endswith("\r\n") else "\r" if lines.endswith("\r") else "\n"
    return "".join(f"{indent}{comment}{newline}" for comment in lost) + kept


def _comments(lines: str) -> list[str]:
    """The comments of import lines (an import statement holds no strings, so `#` starts a comment)."""
    return _COMMENT.findall(lines)


def _without_names(lines: str, names: set[str]) -> str:
    stripped = lines.lstrip(" \t")
    indent = lines[: len(lines) - len(stripped)]
    try:
        module = cst.parse_module(stripped)
    except cst.ParserSyntaxError:
        return lines
    if len(module.body) != 1 or not isinstance(module.body[0], cst.SimpleStatementLine):
        return lines
    line = module.body[0]
    kept_statements = []
    for small in line.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            aliases = [a for a in small.names if _bound_name(a) not in names]
            if not aliases:
                continue
            if len(aliases) < len(small.names):
                had_trailing_comma = isinstance(small.names[-1].comma, cst.Comma)
                if not had_trailing_comma:
                    aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                small = small.with_changes(names=aliases)
        kept_statements.append(small)
    if not kept_statements:
        return ""
    kept_statements[-1] = kept_statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return indent + module.with_changes(body=[line.with_changes(body=kept_statements)]).code


def _bound_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    name = alias.name
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value if isinstance(name, cst.Name) else ""
