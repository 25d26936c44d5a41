"""Scopes, bindings and references: how a name in the code maps to a qualified name like `torch.cuda.amp`.

LibCST's ScopeProvider and QualifiedNameProvider would answer this too, at 5-10x the cost of a parse; the
collector in `collect.py` builds this smaller model in the one walk it already does. Resolution is lazy
(after the walk), because Python decides a function's local names from the whole body, not from the order
in which they appear.

A name resolves to a qualified name only when every binding of it in the deciding scope agrees (an import of
the same thing, or the `= None` fallback of a guarded import); anything else is unknown, and unknown is never
evidence for a finding.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from torchlint._lazy import cst


class ScopeKind(enum.Enum):
    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"
    COMPREHENSION = "comprehension"


class BindingKind(enum.Enum):
    IMPORT = "import"
    ASSIGN = "assign"
    PARAM = "param"
    DEF = "def"
    CLASS = "class"
    OTHER = "other"  # for/with/except targets, walrus, del, star imports


@dataclass(eq=False, slots=True)
class Binding:
    name: str
    kind: BindingKind
    scope: Scope
    node: cst.CSTNode | None = None  # the import statement / def / class / assignment statement
    qualname: str | None = None  # for imports: what the name stands for
    value: cst.BaseExpression | None = None  # for assignments: the assigned expression
    index: int | None = None  # for `a, b = value`: the position of this name in the target tuple
    alias: cst.ImportAlias | None = None

    @property
    def in_function(self) -> bool:
        """Bound by a function's own code (a local import, a local variable), not at module or class level."""
        return self.scope.kind is ScopeKind.FUNCTION

    @property
    def is_none_fallback(self) -> bool:
        return (
            self.kind is BindingKind.ASSIGN
            and isinstance(self.value, cst.Name)
            and self.value.value == "None"
        )


@dataclass(eq=False, slots=True)
class Scope:
    kind: ScopeKind
    parent: Scope | None
    node: cst.CSTNode | None = None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)

    def bind(self, binding: Binding) -> Binding:
        scope = self.module() if binding.name in self.globals else self
        scope.bindings.setdefault(binding.name, []).append(binding)
        return binding

    def deciding_scope(self, name: str) -> Scope | None:
        """The scope whose bindings decide what `name` means here (Python's LEGB, minus builtins)."""
        scope: Scope | None = self
        first = True
        while scope is not None:
            if name in scope.globals:
                return self.module()
            # A class body's names are visible only in the class body itself, not in nested functions.
            if (first or scope.kind is not ScopeKind.CLASS) and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None

    def module(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def lookup(self, name: str) -> list[Binding]:
        scope = self.deciding_scope(name)
        return scope.bindings.get(name, []) if scope is not None else []

    def resolve(self, name: str) -> str | None:
        """The qualified name `name` stands for in this scope, when every binding agrees."""
        return agreed_qualname(self.lookup(name))


def agreed_qualname(bindings: list[Binding]) -> str | None:
    qualnames = {b.qualname for b in bindings if b.kind is BindingKind.IMPORT}
    if len(qualnames) != 1:
        return None
    if any(b.kind is not BindingKind.IMPORT and not b.is_none_fallback for b in bindings):
        return None
    return qualnames.pop()


@dataclass(eq=False, slots=True)
class Reference:
    """A load of a name, extended to the longest attribute chain above it (`torch.cuda.amp.autocast`).

    `call` is the Call whose callee this chain is; `decorator` the Decorator it is (bare, not called).
    """

    expr: cst.BaseExpression
    root: cst.Name
    attrs: tuple[str, ...]
    scope: Scope
    call: cst.Call | None = None
    decorator: cst.Decorator | None = None
    in_annotation: bool = False
    _qualname: str | None = None
    _resolved: bool = False

    @property
    def name(self) -> str:
        return self.root.value

    @property
    def bindings(self) -> list[Binding]:
        return self.scope.lookup(self.root.value)

    def imported_from(self, modules: tuple[str, ...]) -> bool:
        """The name is bound by exactly one import, of one of `modules` or of something inside them."""
        bindings = self.bindings
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.IMPORT:
            return False
        qualname = bindings[0].qualname or ""
        return any(qualname == m or qualname.startswith(m + ".") for m in modules)

    @property
    def qualname(self) -> str | None:
        if not self._resolved:
            base = agreed_qualname(self.bindings)
            self._qualname = ".".join((base, *self.attrs)) if base is not None else None
            self._resolved = True
        return self._qualname


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while type(expr) is cst.Attribute:  # exact types: see `collect.is_node`
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))
