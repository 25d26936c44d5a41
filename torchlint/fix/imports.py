"""Removing names from an import statement's lines, keeping the rest of the statement as it was written."""

from __future__ import annotations

from torchlint._lazy import cst


def remove_bound_names(lines: str, names: set[str]) -> str:
    """`lines` hold whole lines with one import statement; drop the aliases that bind `names`.

    Returns "" when nothing is left (the lines go), and the lines unchanged when they cannot be understood.
    """
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
