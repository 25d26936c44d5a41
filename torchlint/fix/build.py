"""Turning LibCST-level changes into the minimal text edits a `Fix` carries.

Rules think in nodes ("this call becomes that call"); the fixer, `--diff` and the LSP think in text. Keeping
edits minimal (common prefix and suffix trimmed) keeps comments and formatting next to the change intact and
lets independent fixes on one line coexist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.diagnostics import Edit

if TYPE_CHECKING:
    from torchlint.facts import Binding, ModuleFacts


class EditError(Exception):
    """A replacement could not be mapped onto the source text; the rule then offers no fix."""


def replace_node(facts: ModuleFacts, old: cst.CSTNode, new: cst.CSTNode) -> Edit:
    """The text edit that turns `old` into `new`.

    Rendered within the enclosing top-level statement, because a nested node rendered alone loses the
    indentation of its block (multi-line calls would come out flush left).
    """
    statement = facts.top_level_statement(old)
    start = facts.statement_start(statement)
    before = _body_code(facts, statement)
    after = _body_code(facts, statement.deep_replace(old, new))
    if facts.text[start : start + len(before)] != before:
        # The last statement of a file without a final newline: LibCST renders one anyway.
        newline = facts.newline
        if not (
            before.endswith(newline)
            and after.endswith(newline)
            and facts.text[start:] == before[: -len(newline)]
        ):
            raise EditError(f"cannot map {type(old).__name__} onto the source text")
        before, after = before[: -len(newline)], after[: -len(newline)]
    return minimal_edit(start, before, after)


def _body_code(facts: ModuleFacts, statement: cst.CSTNode) -> str:
    """A statement's code without the comment lines above it (they are not part of its position)."""
    code = facts.code(statement)
    leading = getattr(statement, "leading_lines", ())
    skip = sum(len(facts.code(line)) for line in leading)
    return code[skip:]


def minimal_edit(start: int, old: str, new: str) -> Edit:
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return Edit(start + prefix, start + len(old) - suffix, new[prefix : len(new) - suffix])


def add_import(facts: ModuleFacts, module: str) -> Edit:
    """`import <module>` as a line of its own after the file's import block, applied once per file."""
    anchor = facts.import_anchor()
    return Edit(anchor, anchor, f"import {module}{facts.newline}", key=f"import:{module}")


def module_in_scope(facts: ModuleFacts, module: str, scope) -> tuple[str, list[Edit]] | None:
    """How a fix can name `module` where it edits: the file's own alias (`T` after `import torch as T`), or
    the plain name plus the edit that imports it; None when that name is taken by something else."""
    existing = facts.name_for_module(module, scope)
    if existing is not None:
        return existing, []
    if not facts.name_is_free(module, scope):
        return None
    return module, [add_import(facts, module)]


def drop_import(facts: ModuleFacts, binding: Binding) -> Edit | None:
    """Remove the import that bound `binding`, once every one of its uses has been rewritten.

    The edit spans the import's whole lines; the fixer works out the text from the set of names whose uses
    were all rewritten in the same run (several names may leave one statement). None when removing it could
    leave a block empty or the line holds other statements.
    """
    statement = binding.node
    if binding.alias is None or not isinstance(statement, (cst.Import, cst.ImportFrom)):
        return None
    if facts.suite_size(statement) == 1 and not _at_module_level(facts, statement):
        return None  # the only statement of a function or block (`try:`, `if`): it would be left empty
    uses = len(facts.references_of(binding))
    if uses == 0:
        return None  # an import nobody uses was the author's business before this fix run
    start, end = facts.line_span(statement)
    return Edit(start, end, "", key=f"drop:{start}:{binding.name}", quorum=uses)


def _at_module_level(facts: ModuleFacts, statement: cst.CSTNode) -> bool:
    """Whether `statement` is one of the module body's own statements (a module may be left empty)."""
    return any(
        isinstance(line, cst.SimpleStatementLine) and any(small is statement for small in line.body)
        for line in facts.module.body
    )


# -- argument lists that look like the code around them (same line, or one argument per line) ----------


def keyword_argument(name: str, value: cst.BaseExpression) -> cst.Arg:
    no_space = cst.SimpleWhitespace("")
    return cst.Arg(
        value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space),
    )


def insert_argument(call: cst.Call, args: list[cst.Arg], at: int, new_arg: cst.Arg) -> list[cst.Arg]:
    """Insert an argument, laid out like its neighbours (same line, or one per line)."""
    if not args:
        return [new_arg]
    if at < len(args):
        separator = call.whitespace_before_args if at == 0 else args[at - 1].comma
        if isinstance(separator, cst.Comma):
            separator = separator.whitespace_after
        if isinstance(separator, cst.ParenthesizedWhitespace):  # one per line: a new line, no comment
            separator = separator.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
        else:
            separator = cst.SimpleWhitespace(" ")
        comma = cst.Comma(whitespace_after=separator)
        return [*args[:at], new_arg.with_changes(comma=comma), *args[at:]]
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument takes it, and the old last
        # argument gets the separator that its predecessor uses (or the call's opening whitespace).
        if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
            between = args[-2].comma
        else:
            between = cst.Comma(whitespace_after=_fresh_line(call.whitespace_before_args))
        return [*args[:-1], last.with_changes(comma=between), new_arg.with_changes(comma=last.comma)]
    return [
        *args[:-1],
        last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        new_arg,
    ]


def _fresh_line(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return cst.SimpleWhitespace(" ")


def with_argument(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added after its last argument (or replacing an existing `name=`)."""
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    return call.with_changes(args=insert_argument(call, args, len(args), keyword_argument(name, value)))
