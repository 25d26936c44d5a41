"""Building argument lists that look like the code around them (same line, or one argument per line)."""

from __future__ import annotations

from torchlint._lazy import cst


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
