"""What an expression's value is, as far as a linter can know, and where it comes from.

Rules act only on what the author fixed in the code (a literal, a dict of literals). A value the user
controls — an argparse option, a config object's field, a function parameter, an environment variable — is
reported as such and never "fixed" behind the user's back; anything else is unknown, and unknown is never
evidence for a finding.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from torchlint._lazy import cst
from torchlint.facts.syntax.names import BindingKind, Scope, dotted


class Source(Protocol):
    """What evaluating an expression needs of its module (`SourceModule` provides it)."""

    def code(self, node: cst.CSTNode) -> str: ...
    def qualname(self, expr: cst.BaseExpression, scope: Scope) -> str | None: ...
    def is_self_attribute(self, expr: cst.BaseExpression, scope: Scope) -> bool: ...
    def assignments(self, expr: cst.BaseExpression, scope: Scope) -> list | None: ...
    def argparse_option(self, dest: str) -> str | None: ...


MAX_DEPTH = 8


class Kind(enum.Enum):
    LITERAL = "literal"  # a constant in the code: 0, True, "cuda", None
    USER = "user-controlled"  # argparse, config, parameter, environment
    COMPUTED = "computed"  # derived at run time by the code (os.cpu_count(), a ternary)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Value:
    kind: Kind
    literal: object = None
    origin: str = ""  # for people: `args.workers` (argparse --workers, default 4)
    node: cst.BaseExpression | None = field(default=None, compare=False)

    @property
    def is_literal(self) -> bool:
        return self.kind is Kind.LITERAL

    @property
    def is_user_controlled(self) -> bool:
        return self.kind is Kind.USER

    @property
    def is_run_time(self) -> bool:
        """Decided when the script runs: by the user, or computed (`os.cpu_count()`, a ternary)."""
        return self.kind in (Kind.USER, Kind.COMPUTED)

    def describe(self) -> str:
        if self.kind is Kind.LITERAL:
            return repr(self.literal)
        return f"{self.kind.value}: {self.origin}" if self.origin else self.kind.value


UNKNOWN = Value(Kind.UNKNOWN)
_MACHINE = {"os.cpu_count", "multiprocessing.cpu_count", "os.sched_getaffinity", "psutil.cpu_count"}
_ENV = {"os.getenv", "os.environ.get", "os.environ.__getitem__"}
_PASSTHROUGH = {"int", "float", "bool", "str"}


def literal_of(expr: cst.BaseExpression) -> tuple[bool, object]:
    """(True, value) for a constant expression (numbers, strings, True/False/None, -1)."""
    kind = type(expr)  # exact types: asked of most expressions, and no concrete node class has subclasses
    if kind is cst.Integer:
        return True, int(expr.value.replace("_", ""), 0)  # type: ignore[attr-defined]
    if kind is cst.Float:
        return True, float(expr.value.replace("_", ""))  # type: ignore[attr-defined]
    if kind is cst.SimpleString:
        return True, expr.evaluated_value  # type: ignore[attr-defined]
    if kind is cst.Name and expr.value in ("True", "False", "None"):  # type: ignore[attr-defined]
        return True, {"True": True, "False": False, "None": None}[expr.value]  # type: ignore[attr-defined]
    if kind is cst.UnaryOperation and type(expr.operator) is cst.Minus:  # type: ignore[attr-defined]
        ok, value = literal_of(expr.expression)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, -value
    return False, None


def is_false_constant(expr: cst.BaseExpression) -> bool:
    """`False`, `None` or `0` written out: a switch turned off."""
    ok, value = literal_of(expr)
    return ok and not value and not isinstance(value, str)


def constant_number(expr: cst.BaseExpression) -> float | None:
    """A number written as a constant: `10_000`, `1e10`, `int(1e10)`, `10 ** 10`."""
    ok, value = literal_of(expr)
    if ok:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and isinstance(expr.func, cst.Name):
        return constant_number(expr.args[0].value) if expr.func.value in ("int", "float") else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        base, exponent = constant_number(expr.left), constant_number(expr.right)
        if base is not None and exponent is not None and 0 <= exponent <= 100:
            return base**exponent
    return None


class Evaluator:
    """Evaluates expressions of one module; memoises nothing (expressions are evaluated a few times each)."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def value(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Value:
        ok, literal = literal_of(expr)
        if ok:
            return Value(Kind.LITERAL, literal, node=expr)
        if depth > MAX_DEPTH:
            return UNKNOWN
        code = self.source.code(expr) if not isinstance(expr, cst.Name) else expr.value
        if isinstance(expr, cst.Name):
            return self._name(expr, scope, depth)
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr, scope, depth, code)
        if isinstance(expr, cst.Subscript):
            root = _root_name(expr)
            if root is not None and self.source.qualname(expr.value, scope) == "os.environ":
                return Value(Kind.USER, origin=f"`{code}` (environment)", node=expr)
            if root is not None and not self._is_module(root, scope):
                return Value(Kind.USER, origin=f"`{code}`", node=expr)
            return UNKNOWN
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, depth, code)
        if isinstance(expr, (cst.IfExp, cst.BinaryOperation, cst.BooleanOperation, cst.Comparison)):
            return Value(Kind.COMPUTED, origin=f"`{code}`", node=expr)
        return UNKNOWN

    def _is_module(self, name: cst.Name, scope: Scope) -> bool:
        return any(b.kind is BindingKind.IMPORT for b in scope.lookup(name.value))

    def _name(self, expr: cst.Name, scope: Scope, depth: int) -> Value:
        bindings = scope.lookup(expr.value)
        if not bindings:
            return UNKNOWN
        if any(b.kind is BindingKind.PARAM for b in bindings):
            return Value(Kind.USER, origin=f"parameter `{expr.value}`", node=expr)
        if all(b.kind is BindingKind.ASSIGN and b.value is not None for b in bindings):
            values = {
                self.value(b.value, b.scope, depth + 1) if b.index is None else UNKNOWN  # type: ignore[arg-type]
                for b in bindings
            }
            if len(values) == 1:
                return values.pop()
            kinds = {v.kind for v in values}
            if Kind.USER in kinds:
                return Value(Kind.USER, origin=f"`{expr.value}`", node=expr)
            return Value(Kind.COMPUTED, origin=f"`{expr.value}` (assigned several values)", node=expr)
        return UNKNOWN

    def _attribute(self, expr: cst.Attribute, scope: Scope, depth: int, code: str) -> Value:
        root = _root_name(expr)
        if root is None or self._is_module(root, scope):
            return UNKNOWN  # a module attribute (torch.float16, os.sep): not configuration
        if isinstance(expr.value, cst.Name):
            if self.source.is_self_attribute(expr, scope):
                assigned = self.source.assignments(expr, scope) or []
                values = {self.value(a.value, a.scope, depth + 1) for a in assigned}
                if len(values) == 1:
                    return values.pop()
                if any(v.is_user_controlled for v in values) or not values:
                    return Value(Kind.USER, origin=f"`{code}`", node=expr)
                return Value(Kind.COMPUTED, origin=f"`{code}`", node=expr)
            option = self.source.argparse_option(expr.attr.value)
            if option is not None and self._from_parse_args(expr.value, scope):
                return Value(Kind.USER, origin=f"`{code}` ({option})", node=expr)
        option = self.source.argparse_option(expr.attr.value) if isinstance(expr.value, cst.Name) else None
        suffix = f" ({option})" if option else ""
        return Value(Kind.USER, origin=f"`{code}`{suffix}", node=expr)

    def _from_parse_args(self, name: cst.Name, scope: Scope) -> bool:
        for binding in scope.lookup(name.value):
            if binding.kind is BindingKind.PARAM:
                return True  # `def train(args, ...)`: the usual argparse namespace
            value = binding.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                if value.func.attr.value in ("parse_args", "parse_known_args"):
                    return True
        return False

    def _call(self, expr: cst.Call, scope: Scope, depth: int, code: str) -> Value:
        callee = self.source.qualname(expr.func, scope) or dotted(expr.func) or ""
        if callee in _ENV or callee.startswith("os.environ"):
            return Value(Kind.USER, origin=f"`{code}` (environment)", node=expr)
        if callee in _PASSTHROUGH and len(expr.args) == 1:
            inner = self.value(expr.args[0].value, scope, depth + 1)
            return inner if inner.kind is not Kind.LITERAL else Value(Kind.COMPUTED, origin=f"`{code}`")
        if callee in _MACHINE or callee in ("min", "max", "len"):
            parts = [self.value(a.value, scope, depth + 1) for a in expr.args]
            if any(p.is_user_controlled for p in parts):
                return Value(Kind.USER, origin=f"`{code}`", node=expr)
            return Value(Kind.COMPUTED, origin=f"`{code}`", node=expr)
        return Value(Kind.UNKNOWN, origin=f"`{code}`", node=expr)


def surely_positive(expr: cst.BaseExpression | None, depth: int = 0) -> bool:
    """An integer expression that is at least 1 on every run: a positive constant, `os.cpu_count()` (a count
    of CPUs, or None where it cannot tell), `X or 1`, `max(1, X)`, `min(8, os.cpu_count() or 1)`."""
    if expr is None or depth > 6:
        return False
    ok, literal = literal_of(expr)
    if ok:
        return isinstance(literal, int) and not isinstance(literal, bool) and literal > 0
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return surely_positive(expr.right, depth + 1) and (
            _is_count(expr.left) or surely_positive(expr.left, depth + 1)
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)):
        callee = dotted(expr.func) or ""
        parts = [arg.value for arg in expr.args if not arg.star and arg.keyword is None]
        if callee == "min":
            return bool(parts) and all(surely_positive(part, depth + 1) for part in parts)
        if callee == "max":
            return any(surely_positive(part, depth + 1) for part in parts)
        return callee.endswith(("cpu_count", "process_cpu_count"))
    return False


def _is_count(expr: cst.BaseExpression) -> bool:
    """A call that counts something (never negative): `os.cpu_count()`, `len(...)`."""
    if not isinstance(expr, cst.Call):
        return False
    callee = dotted(expr.func) or ""
    return callee == "len" or callee.endswith("cpu_count")


def _root_name(expr: cst.BaseExpression) -> cst.Name | None:
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.value if not isinstance(expr, cst.Call) else expr.func
    return expr if isinstance(expr, cst.Name) else None
