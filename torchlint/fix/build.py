"""Building fixes: what rules ask for ("set `pin_memory=True` on this loader", "this call becomes that
API"), turned into the minimal text edits and import intents a `Fix` carries.

Rules decide and never touch the syntax tree; the builders here do, through LibCST, so that comments and
formatting survive: each replacement is rendered within its top-level statement and trimmed to the
smallest text edit (common prefix and suffix), which also lets independent fixes on one line coexist.
A builder returns None when the change cannot be expressed safely (the rule then reports the finding without
a fix, and may say why). The call rewriters raise EditError when the rewritten statement cannot be mapped
back onto the text, so that a rule does not give the wrong reason for the missing fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.fix.model import AddImport, DropImportIfUnused, Edit

if TYPE_CHECKING:
    from torchlint.facts.syntax.calls import CallArguments
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Binding, Scope


class EditError(Exception):
    """A replacement could not be mapped onto the source text; the rule then offers no fix."""


# -- what rules ask for -------------------------------------------------------------------------------------


def set_keyword(source: SourceModule, arguments: CallArguments, name: str, value: str) -> Edit | None:
    """`name=value` for a call: in the keyword or `**` dict entry that sets it now, else as a new keyword
    after the call's last argument (only when the call surely lacks it). None when neither is possible (set
    positionally, or somewhere the reading could not follow)."""
    new_value = cst.parse_expression(value)
    argument = arguments.get(name)
    try:
        if argument is not None and argument.is_keyword:
            return replace_node(source, argument.node.value, new_value)  # type: ignore[union-attr]
        if argument is not None and isinstance(argument.node, cst.DictElement):
            return replace_node(source, argument.node.value, new_value)
        if argument is None and arguments.complete:
            return replace_node(source, arguments.call, _with_argument(arguments.call, name, new_value))
    except EditError:
        return None
    return None


def set_beside(
    source: SourceModule, holder: cst.CSTNode, entry: cst.CSTNode, name: str, value: str
) -> Edit | None:
    """`name: value` added next to `entry` in the dict literal `holder` (`{"num_workers": 1}` gains
    `"persistent_workers": True`), or `name=value` in the `dict(...)` / `.update(...)` call `holder`. None
    when the holder is neither."""
    try:
        if isinstance(holder, cst.Call):
            return replace_node(source, holder, _with_argument(holder, name, cst.parse_expression(value)))
        if not isinstance(holder, cst.Dict):
            return None
        elements = list(holder.elements)
        at = next((i for i, element in enumerate(elements) if element is entry), None)
        if (
            at is None
            or not isinstance(entry, cst.DictElement)
            or not isinstance(entry.key, cst.SimpleString)
        ):
            return None
        quote = entry.key.prefix + entry.key.quote
        key = cst.SimpleString(f"{quote}{name}{entry.key.quote}")
        added = entry.with_changes(key=key, value=cst.parse_expression(value))
        if isinstance(entry.comma, cst.Comma):  # the new entry takes the comma; `entry` gets a plain one
            between = cst.Comma(whitespace_after=_fresh_line(entry.comma.whitespace_after))
            elements[at : at + 1] = [entry.with_changes(comma=between), added]
        else:
            between = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            elements[at : at + 1] = [entry.with_changes(comma=between), added]
        return replace_node(source, holder, holder.with_changes(elements=elements))
    except EditError:
        return None


def add_keyword(source: SourceModule, call: cst.Call, name: str, value: str) -> Edit | None:
    """`name=value` added to (or replacing an existing `name=` of) a call written in the code."""
    try:
        return replace_node(source, call, _with_argument(call, name, cst.parse_expression(value)))
    except EditError:
        return None


def call_replacing(
    source: SourceModule, old: cst.CSTNode, call: cst.Call, name: str, value: str
) -> Edit | None:
    """`old` (an expression around `call`, like `torch.zeros(n).to(device)`) becomes `call` with `name=value`
    (`torch.zeros(n, device=device)`)."""
    try:
        return replace_node(source, old, _with_argument(call, name, cst.parse_expression(value)))
    except EditError:
        return None


def replace_expression(source: SourceModule, node: cst.CSTNode, code: str) -> Edit:
    """`node` becomes the expression `code` (an annotation, a decorator, a callee); EditError as above."""
    return replace_node(source, node, cst.parse_expression(code))


def call_with_first_argument(
    source: SourceModule, call: cst.Call, callee: str, first: str, positional: Sequence[str] | None
) -> Edit | None:
    """`old(a, b=1)` becomes `callee(first, ...)`, every argument keeping its meaning: with `positional`
    (the old signature's positional parameters, when the new one orders them differently) positional
    arguments become keywords. None when that cannot be known (`*args`, more positional arguments than
    the old signature has); EditError when the result cannot be mapped onto the text."""
    args = list(call.args)
    if positional is not None:
        converted = []
        for index, arg in enumerate(args):
            if arg.star == "*":
                return None
            if arg.keyword is None and not arg.star:
                if index >= len(positional):
                    return None
                arg = _keyword_argument(positional[index], arg.value).with_changes(comma=arg.comma)
            converted.append(arg)
        args = converted
    new_args = _insert_argument(call, args, 0, cst.Arg(cst.parse_expression(first)))
    return _replace_call(source, call, callee, new_args)


def call_with_keyword_after_positional(
    source: SourceModule, call: cst.Call, callee: str, name: str, value: str
) -> Edit | None:
    """`old(a, x=1)` becomes `callee(a, name=value, x=1)`; None with `*args` (where it goes is unknown)."""
    args = list(call.args)
    if any(arg.star == "*" for arg in args):
        return None
    at = len([arg for arg in args if arg.keyword is None and not arg.star])
    new_args = _insert_argument(call, args, at, _keyword_argument(name, cst.parse_expression(value)))
    return _replace_call(source, call, callee, new_args)


def call_of(source: SourceModule, node: cst.CSTNode, callee: str, name: str, value: str) -> Edit:
    """A bare reference (`@old_decorator`) becomes a call `callee(name=value)`; EditError as above."""
    new = cst.Call(cst.parse_expression(callee), args=[_keyword_argument(name, cst.parse_expression(value))])
    return replace_node(source, node, new)


def _replace_call(source: SourceModule, call: cst.Call, callee: str, args: list[cst.Arg]) -> Edit:
    return replace_node(source, call, call.with_changes(func=cst.parse_expression(callee), args=args))


# -- statements ---------------------------------------------------------------------------------------------


def statement_after(source: SourceModule, statement: cst.CSTNode, code: str) -> Edit | None:
    """A new statement `code` on the line after `statement`, indented like it.

    None unless `statement` stands on lines of its own (nothing before it on its first line, at most a
    comment after it on its last): after `if x: model = Net()` or `a = 1; b = 2` a new line would land in
    another block or between statements the author wrote as one."""
    text = source.text
    start, end = source.span(statement)
    line_start, line_end = source.line_span(statement)
    indent = text[line_start:start]
    rest = text[end:line_end].strip()
    if indent.strip() or (rest and not rest.startswith("#")):
        return None
    newline = source.newline
    if line_end == len(text) and not text.endswith(("\n", "\r")):
        return Edit(line_end, line_end, f"{newline}{indent}{code}")
    return Edit(line_end, line_end, f"{indent}{code}{newline}")


def replace_statement(source: SourceModule, statement: cst.CSTNode, code: str) -> Edit:
    """A small statement (an assignment, an expression) becomes the one statement `code`; EditError as
    above."""
    parsed = cst.parse_statement(code)
    assert isinstance(parsed, cst.SimpleStatementLine) and len(parsed.body) == 1
    return replace_node(source, statement, parsed.body[0])


def wrap_in_with(
    source: SourceModule, block: cst.BaseSuite, statements: Sequence[cst.CSTNode], header: str
) -> Edit | None:
    """The consecutive `statements` of `block` become the body of a new `with header:` statement in their
    place (comments above the first stay above the `with`). None unless they are consecutive statements of
    an indented block; EditError when the result cannot be mapped onto the text."""
    if not isinstance(block, cst.IndentedBlock) or not statements:
        return None
    body = list(block.body)
    ids = [id(statement) for statement in body]
    if id(statements[0]) not in ids:
        return None
    start = ids.index(id(statements[0]))
    end = start + len(statements)
    if [id(s) for s in body[start:end]] != [id(s) for s in statements]:
        return None
    first = body[start]
    inner = [first.with_changes(leading_lines=()), *body[start + 1 : end]]
    wrapped = cst.With(
        items=[cst.WithItem(cst.parse_expression(header))],
        body=cst.IndentedBlock(body=inner),
        leading_lines=getattr(first, "leading_lines", ()),
    )
    edit = replace_node(source, block, block.with_changes(body=[*body[:start], wrapped, *body[end:]]))
    # Re-indenting is a change of every wrapped line, however little text the minimal edit touches: the
    # edit spans them all, so that another fix wrapping or re-indenting any of them conflicts with this one
    # (the fixer then applies one, and the other on its next pass) instead of merging into broken code.
    covered_start, _ = source.line_span(statements[0])
    _, covered_end = source.span(statements[-1])
    return widened(source, edit, covered_start, covered_end)


def widened(source: SourceModule, edit: Edit, start: int, end: int) -> Edit:
    """`edit`, made to replace at least `text[start:end]` (the same result, a wider claim on the text)."""
    new_start, new_end = min(edit.start, start), max(edit.end, end)
    text = source.text
    return Edit(new_start, new_end, text[new_start : edit.start] + edit.content + text[edit.end : new_end])


def move_out_of_with(source: SourceModule, block: cst.BaseSuite, region: cst.With, start: int) -> Edit | None:
    """The statements of `region`'s body from index `start` on leave the `with` block, dedented to stand
    right after it in `block` (the block that holds the `with`). None unless that is what the tree holds."""
    inner = region.body
    if not isinstance(block, cst.IndentedBlock) or not isinstance(inner, cst.IndentedBlock) or start < 1:
        return None
    body = list(block.body)
    at = next((i for i, statement in enumerate(body) if statement is region), None)
    if at is None or start >= len(inner.body):
        return None
    kept = region.with_changes(body=inner.with_changes(body=inner.body[:start]))
    return replace_node(
        source, block, block.with_changes(body=[*body[:at], kept, *inner.body[start:], *body[at + 1 :]])
    )


def statement_before(source: SourceModule, statement: cst.CSTNode, code: str) -> Edit | None:
    """A new statement `code` on the line before `statement`, indented like it; None unless `statement`
    starts its line (after `if x: clip()` a new line would land outside the block)."""
    text = source.text
    start, _ = source.span(statement)
    line_start, _ = source.line_span(statement)
    indent = text[line_start:start]
    if indent.strip():
        return None
    return Edit(line_start, line_start, f"{indent}{code}{source.newline}")


def guard_statement(source: SourceModule, statement: cst.CSTNode, condition: str, code: str) -> Edit | None:
    """A statement alone on its line becomes `if condition: code` with the original statement, comments
    and all, as the `else:` branch. None unless it is a statement line of an indented block; EditError
    when the result cannot be mapped onto the text."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    guarded = cst.parse_statement(code)
    new = cst.If(
        test=cst.parse_expression(condition),
        body=cst.IndentedBlock(body=[guarded]),
        orelse=cst.Else(body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())])),
        leading_lines=statement.leading_lines,
    )
    return replace_node(source, statement, new)


# -- imports ------------------------------------------------------------------------------------------------


def name_from_module(
    source: SourceModule, module: str, name: str, scope: Scope
) -> tuple[str, tuple[AddImport, ...]] | None:
    """How a fix can name `module.name` where it edits: a name the file already binds to it (`checkpoint`,
    `cp.checkpoint` after `import torch.utils.checkpoint as cp`), or `name` plus the intent to add `from
    module import name`; None when `name` is taken by something else (or may be: a star import)."""
    qualname = f"{module}.{name}"
    for bindings in source.module_scope.bindings.values():
        for binding in bindings:
            if binding.kind.value != "import" or binding.qualname is None:
                continue
            if binding.qualname not in (qualname, module) or scope.resolve(binding.name) != binding.qualname:
                continue
            if source.name_changes.existing_binding_clash(binding):
                continue  # a star import after it may bind the name to something else
            return (binding.name if binding.qualname == qualname else f"{binding.name}.{name}"), ()
    if not source.name_is_free(name, scope, meaning=qualname):
        return None
    at, line = source.import_placement(f"from {module} import {name}")
    return name, (AddImport(qualname, at, line),)


def name_module(
    source: SourceModule, module: str, scope: Scope, beside: Binding | None = None
) -> tuple[str, tuple[AddImport, ...]] | None:
    """How a fix can name `module` where it edits: the file's own alias (`T` after `import torch as T`), or
    the plain name plus the intent to import it; None when that name is taken by something else.

    `beside` is the import binding the rewritten name came from: when it is a function's own (a lazy
    import, so that the module can be imported without torch), the new import goes on the line before it
    rather than to the top of the file, which would change what importing the module needs."""
    existing = source.name_for_module(module, scope)
    if existing is not None:
        return existing, ()
    if not source.name_is_free(module, scope, meaning=module):
        return None
    if beside is not None and beside.node is not None and beside.in_function:
        start, _ = source.span(beside.node)
        line_start, _ = source.line_span(beside.node)
        indent = source.text[line_start:start]
        if indent.strip():
            return None  # `x = 1; from ... import ...`: no line of its own to go before
        if source.name_changes.insertion_clash(module, beside.scope, module, local=True):
            return None  # the function's reads of `module` (from a star import) would become its local's
        return module, (AddImport(module, line_start, f"{indent}import {module}{source.newline}"),)
    at, line = source.import_placement(f"import {module}")
    return module, (AddImport(module, at, line),)


def drop_import_if_unused(source: SourceModule, binding: Binding) -> DropImportIfUnused | None:
    """The intent to remove the import that bound `binding` once every one of its uses has been rewritten.

    None when removing it could leave a block empty, or when nobody uses it (an unused import was the
    author's business before this fix run)."""
    statement = binding.node
    if binding.alias is None or not isinstance(statement, (cst.Import, cst.ImportFrom)):
        return None
    at_module_level = _at_module_level(source, statement)
    if source.suite_size(statement) == 1 and not at_module_level:
        return None  # the only statement of a function or block (`try:`, `if`): it would be left empty
    if at_module_level and binding.name in source.exported_names:
        return None  # re-exported through `__all__`: importers of this module use the name
    uses = len(source.references_of(binding))
    if uses == 0:
        return None
    start, end = source.line_span(statement)
    return DropImportIfUnused(start, end, binding.name, uses)


def _at_module_level(source: SourceModule, statement: cst.CSTNode) -> bool:
    """Whether `statement` is one of the module body's own statements (a module may be left empty)."""
    return any(
        isinstance(line, cst.SimpleStatementLine) and any(small is statement for small in line.body)
        for line in source.module.body
    )


# -- nodes to text ------------------------------------------------------------------------------------------


def replace_node(source: SourceModule, old: cst.CSTNode, new: cst.CSTNode) -> Edit:
    """The text edit that turns `old` into `new` (EditError when it cannot be mapped onto the text).

    Rendered within the enclosing top-level statement, because a nested node rendered alone loses the
    indentation of its block (multi-line calls would come out flush left).
    """
    statement = source.top_level_statement(old)
    quotes = _fstring_quotes_around(statement, old)
    if quotes:
        new = _requoted(new, quotes)
    in_text = _replace_in_text(source, old, new)
    if in_text is not None:
        return in_text
    in_statement = _replace_in_statement(source, old, new)
    if in_statement is not None:
        return in_statement
    start = source.statement_start(statement)
    before = _body_code(source, statement)
    after = _body_code(source, statement.deep_replace(old, new))
    if source.text[start : start + len(before)] != before:
        # The last statement of a file without a final newline: LibCST renders one anyway.
        newline = source.newline
        if not (
            before.endswith(newline)
            and after.endswith(newline)
            and source.text[start:] == before[: -len(newline)]
        ):
            raise EditError(f"cannot map {type(old).__name__} onto the source text")
        before, after = before[: -len(newline)], after[: -len(newline)]
    return minimal_edit(start, before, after)


def _replace_in_text(source: SourceModule, old: cst.CSTNode, new: cst.CSTNode) -> Edit | None:
    """The edit of an expression replaced by another, made on the lines of text it is written on: the same
    edit as rendering the whole statement before and after (the rest of it renders as it is written, and
    the new expression is written at the indentation of the blocks around the old one; `_edit_within`),
    without rendering a training function of hundreds of lines twice. None where the text cannot tell
    where `old` is."""
    if not isinstance(new, cst.BaseExpression):
        return None
    span = source.written(old)
    if span is None:
        return None
    code = source.code_at(new, old)
    if code is None:
        return None
    start, end = span
    text = source.text
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if code == text[start:end]:
        return None  # nothing changes: where the empty edit sits is the statement's business
    before = text[line_start:line_end]
    return _edit_within(line_start, before, text[line_start:start] + code + text[end:line_end])


def _replace_in_statement(source: SourceModule, old: cst.CSTNode, new: cst.CSTNode) -> Edit | None:
    """The edit made by rendering the innermost nested statement around `old` before and after (a loop's
    body wrapped in `with autocast`), where the text tells where that statement is: the same edit as
    rendering the top-level statement (the rest of it renders as it is written)."""
    nested = source.nested_statement(old)
    if nested is None:
        return None
    statement, where, before, indent = nested
    replaced = statement.deep_replace(old, new)
    if not isinstance(replaced, cst.BaseStatement):
        return None
    after = source.statement_code(replaced, indent)
    if after is None:
        return None
    return _edit_within(where, before, after)


def _edit_within(start: int, before: str, after: str) -> Edit | None:
    """`minimal_edit` of part of a statement's text (whole lines of it), which is the whole statement's
    edit unless the common beginning covers all of the shorter side (code added at the end of a block):
    the whole statement's could then run on past the part (None: ask it). Otherwise both stop at the same
    first difference, and the common end, which may not reach back past it, at the same place too."""
    edit = minimal_edit(start, before, after)
    if edit.start - start == min(len(before), len(after)):
        return None
    return edit


def _fstring_quotes_around(statement: cst.CSTNode, node: cst.CSTNode) -> set[str]:
    """The quote characters of the f-strings whose replacement fields hold `node` (empty when none).

    Before Python 3.12 an expression inside an f-string may not use its quote or a backslash; a fix must
    write code valid on every Python the file supports, so it writes its strings within those limits.
    """
    path = _path_to(statement, node)
    if path is not None:
        return {current.quote[0] for current in path if isinstance(current, cst.FormattedString)}
    quotes: set[str] = set()  # `node` sits in a field that walk skips (whitespace): ask every child

    def holds(current: cst.CSTNode) -> bool:
        if current is node:
            return True
        for child in current.children:
            if holds(child):
                if isinstance(current, cst.FormattedString):
                    quotes.add(current.quote[0])
                return True
        return False

    holds(statement)
    return quotes


def _path_to(statement: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from `statement` down to `node`, `node` excluded (None: not found), by the fields that hold
    nodes (LibCST's `children` builds a list of every child of every node it passes: most of a fix's time
    in a long training function)."""
    from torchlint.facts.syntax.walk import child_nodes

    parents: dict[int, cst.CSTNode] = {}
    todo = [statement]
    while todo:
        current = todo.pop()
        if current is node:
            path = []
            while id(current) in parents:
                current = parents[id(current)]
                path.append(current)
            return path[::-1]
        for child in child_nodes(current):
            parents[id(child)] = current
            todo.append(child)
    return None


def _requoted(new: cst.CSTNode, forbidden: set[str]) -> cst.CSTNode:
    """`new` with its string literals that use a quote in `forbidden` rewritten with the other quote;
    EditError when one cannot be (it holds both quotes, or a backslash, which 3.11 forbids there too)."""

    class Requote(cst.CSTTransformer):  # defined here: a LibCST base class would import LibCST at start-up
        def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
            quote = updated.quote
            body = updated.value[len(updated.prefix) + len(quote) : -len(quote)]
            if quote[0] not in forbidden and "\\" not in body:
                return updated
            other = "'" if quote[0] == '"' else '"'
            if other in forbidden or "\\" in body or other in body or quote[0] in body:
                raise EditError("a string inside an f-string cannot be written with an allowed quote")
            new_quote = quote.replace(quote[0], other)
            return updated.with_changes(value=f"{updated.prefix}{new_quote}{body}{new_quote}")

    return new.visit(Requote())  # type: ignore[return-value]


def _body_code(source: SourceModule, statement: cst.CSTNode) -> str:
    """A statement's code without the comment lines above it (they are not part of its position)."""
    code = source.code(statement)
    leading = getattr(statement, "leading_lines", ())
    skip = sum(len(source.code(line)) for line in leading)
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


# -- argument lists that look like the code around them (same line, or one argument per line) ----------


def _keyword_argument(name: str, value: cst.BaseExpression) -> cst.Arg:
    no_space = cst.SimpleWhitespace("")
    return cst.Arg(
        value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space),
    )


def _insert_argument(call: cst.Call, args: list[cst.Arg], at: int, new_arg: cst.Arg) -> list[cst.Arg]:
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
    # No trailing comma: the new argument goes where the last one ends (before the whitespace that closes
    # the call, which it takes over), after the separator the other arguments use.
    if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
        between = args[-2].comma
    else:
        between = cst.Comma(whitespace_after=_fresh_line(call.whitespace_before_args))
    return [
        *args[:-1],
        last.with_changes(comma=between, whitespace_after_arg=cst.SimpleWhitespace("")),
        new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg),
    ]


def _fresh_line(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return cst.SimpleWhitespace(" ")


def _with_argument(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added after its last argument (or replacing an existing `name=`)."""
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    return call.with_changes(args=_insert_argument(call, args, len(args), _keyword_argument(name, value)))
