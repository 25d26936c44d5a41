"""The one reader of a call's arguments: every argument by parameter name, with its value and provenance.

Arguments arrive as keywords, positionally (named through a `Signature`), or through `**kwargs` dicts built
from literals, `dict(...)`, merges (`{**a, **b}`, `a | b`), `.update(...)` calls (also under an `if`: the
argument is then *conditional*, set for some runs only) and `kwargs["key"] = value`. When a `**` dict cannot
be followed (a parameter, `vars(args)`) or a positional argument has no known parameter, the reading is
*incomplete*: an argument that was not found may still be passed, so its absence is not evidence.

Nothing here knows torch: which parameters a DataLoader or a `checkpoint(...)` has is the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import Scope
from torchlint.facts.syntax.values import Kind, Value

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import FunctionRecord
    from torchlint.facts.syntax.module import SourceModule

MAX_DICT_DEPTH = 6


@dataclass(frozen=True)
class Signature:
    """What the reader needs of the called function: its positional parameters, in order, and whether extra
    positional arguments go to a `*args` (then they say nothing about the keyword arguments)."""

    positional: tuple[str, ...] = ()
    star_args: bool = False


KEYWORDS_ONLY = Signature()  # a function of which nothing is known: positional arguments are unaccounted for


@dataclass
class Argument:
    """One argument of a call, by the parameter it binds."""

    name: str
    value: Value
    via: str | None = None  # "`**train_kwargs`" when it came from a dict
    conditional: bool = False  # set only on some paths (`if use_cuda: kwargs.update(...)`)
    node: cst.CSTNode | None = None  # the Arg or DictElement that sets it (where a fix edits)
    # Where a sibling option goes when it came from a dict: the dict literal, or the `dict(...)` /
    # `.update(...)` call, that holds `node` (None: the loader call itself, or unknown).
    holder: cst.CSTNode | None = None

    def constant(self) -> tuple[bool, object]:
        """(True, value) when the code sets it unconditionally to a constant (`0`, `True`, `"cuda"`)."""
        if self.conditional or not self.value.is_literal:
            return False, None
        return True, self.value.literal

    @property
    def is_keyword(self) -> bool:
        """Passed as `name=value` in the call itself (not positionally, not through a dict)."""
        return isinstance(self.node, cst.Arg) and self.node.keyword is not None

    @property
    def expression(self) -> cst.BaseExpression | None:
        """The expression passed in the call itself, positionally or by keyword (None: from a dict)."""
        return self.node.value if isinstance(self.node, cst.Arg) else None

    def describe(self) -> str:
        parts = [self.value.describe()]
        if self.via:
            parts.append(f"via {self.via}")
        if self.conditional:
            parts.append("conditional")
        return ", ".join(parts)


@dataclass
class CallArguments:
    """A call read through a `Signature`: the arguments it binds by name, and whether that list is whole."""

    call: cst.Call
    scope: Scope
    by_name: dict[str, Argument]
    complete: bool  # False when a `**` dict could not be followed or a positional argument is unaccounted for
    spread: list[str] = field(default_factory=list)  # the `**` dicts, as written (for messages)

    def get(self, name: str) -> Argument | None:
        return self.by_name.get(name)

    def lacks(self, name: str) -> bool:
        """Not passed at all, for sure: absent, and every way of passing it could be followed."""
        return name not in self.by_name and self.complete

    def constant(self, name: str) -> tuple[bool, object]:
        """(True, value) when `name` is passed unconditionally as a constant."""
        argument = self.by_name.get(name)
        return argument.constant() if argument is not None else (False, None)

    def is_constant(self, name: str, value: object) -> bool:
        known, found = self.constant(name)
        return known and found == value and type(found) is type(value)


def read_call(
    source: SourceModule, call: cst.Call, scope: Scope, signature: Signature = KEYWORDS_ONLY
) -> CallArguments:
    by_name: dict[str, Argument] = {}
    complete = True
    spread: list[str] = []
    positional = 0
    for arg in call.args:
        if arg.star == "*":
            complete = complete and signature.star_args
            continue
        if arg.star == "**":
            entries = dict_entries(source, arg.value, scope)
            name = source.code(arg.value)
            spread.append(name)
            complete = complete and entries.complete
            for key, argument in entries.by_name.items():
                argument.via = f"`**{name}`"
                by_name.setdefault(key, argument)
            continue
        if arg.keyword is not None:
            key = arg.keyword.value
        elif positional < len(signature.positional):
            key = signature.positional[positional]
            positional += 1
        else:
            complete = complete and signature.star_args
            continue
        by_name[key] = Argument(key, source.value(arg.value, scope), node=arg)
    return CallArguments(call, scope, by_name, complete, spread)


@dataclass
class DictEntries:
    """The keys a dict holds where it is spread with `**`, as arguments."""

    by_name: dict[str, Argument] = field(default_factory=dict)
    complete: bool = True

    def merge(self, other: DictEntries, conditional: bool = False) -> None:
        for name, argument in other.by_name.items():
            if conditional:
                argument = Argument(
                    argument.name, argument.value, argument.via, True, argument.node, argument.holder
                )
            existing = self.by_name.get(name)
            if existing is not None and conditional and not existing.conditional:
                # Unconditional first, then overridden on some paths: the value varies.
                varies = Value(Kind.COMPUTED, origin="set differently on some paths")
                argument = Argument(name, varies, argument.via, True, argument.node, argument.holder)
            self.by_name[name] = argument
        self.complete = self.complete and other.complete


def dict_entries(source: SourceModule, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> DictEntries:
    """The keys a dict expression holds at the `**` site, following names, merges and updates."""
    result = DictEntries()
    if depth > MAX_DICT_DEPTH:
        return DictEntries(complete=False)
    value = source.value
    if isinstance(expr, cst.Dict):
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):
                result.merge(dict_entries(source, element.value, scope, depth + 1))
            elif isinstance(element.key, cst.SimpleString):
                key = str(element.key.evaluated_value)
                result.by_name[key] = Argument(key, value(element.value, scope), node=element, holder=expr)
            else:
                result.complete = False
        return result
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        if source.qualname(expr.func, scope) not in ("dict", None):
            return DictEntries(complete=False)  # a `dict` of the code's own
        for arg in expr.args:
            if arg.keyword is not None:
                key = arg.keyword.value
                result.by_name[key] = Argument(key, value(arg.value, scope), node=arg, holder=expr)
            elif arg.star == "**" or not arg.star:
                result.merge(dict_entries(source, arg.value, scope, depth + 1))
            else:
                result.complete = False
        return result
    if isinstance(expr, cst.IfExp):  # `{"num_workers": 1, "pin_memory": True} if args.cuda else {}`
        result.merge(dict_entries(source, expr.body, scope, depth + 1), conditional=True)
        result.merge(dict_entries(source, expr.orelse, scope, depth + 1), conditional=True)
        return result
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        result.merge(dict_entries(source, expr.left, scope, depth + 1))
        result.merge(dict_entries(source, expr.right, scope, depth + 1))
        return result
    if isinstance(expr, cst.Name):
        assigned = source.assignments(expr, scope)
        if assigned is None:
            return DictEntries(complete=False)  # a parameter, a loop variable, ...
        for assignment in assigned:
            if assignment.index is not None:
                return DictEntries(complete=False)
            result.merge(dict_entries(source, assignment.value, assignment.scope, depth + 1))
        home = assigned[0].scope
        for update in source.method_calls_on(expr.value, home, "update"):
            for arg in update.node.args:
                if arg.keyword is not None:
                    key = arg.keyword.value
                    entry = Argument(key, value(arg.value, update.scope), node=arg, holder=update.node)
                    result.merge(DictEntries({key: entry}), conditional=update.conditional)
                else:
                    result.merge(dict_entries(source, arg.value, update.scope, depth + 1), update.conditional)
        for key, stored, conditional in source.item_assignments(home, expr.value):
            result.merge(DictEntries({key: Argument(key, value(stored, home))}), conditional)
        return result
    return DictEntries(complete=False)


def passed_for(
    source: SourceModule, function: FunctionRecord, name: str
) -> list[tuple[cst.BaseExpression | None, Scope]]:
    """What each call of `function` in `source` (for an `__init__`, each construction of its class) passes
    for its parameter `name`, with the caller's scope; None where a call does not pass it."""
    return [(argument_for(call.node, function, name), call.scope) for call in source.callers_of(function)]


def argument_for(call: cst.Call, function: FunctionRecord, name: str) -> cst.BaseExpression | None:
    """The expression a call passes for parameter `name` of `function` (None: not passed, or unknown)."""
    params = function.params
    bound = function.owner is not None and bool(params) and params[0] in ("self", "cls")
    offset = 1 if bound else 0  # `self.method(x)`, `scaler(loss)` through `__call__`
    for position, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
        if arg.keyword is None and not arg.star and position + offset < len(params):
            if params[position + offset] == name:
                return arg.value
    return None


def positional_and_keywords(call: cst.Call) -> tuple[list[cst.BaseExpression], dict[str, cst.BaseExpression]]:
    """The call's plain positional arguments and its `name=value` keywords, as written (no `*`, `**`)."""
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    return positional, keywords
