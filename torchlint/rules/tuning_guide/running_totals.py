"""Running totals of the loss kept on the host: `total += loss.item()` every step, the sum read later.

TL501's fix keeps the total on the device instead: `total += loss.detach().float()` (float32, so that a half
precision loss does not overflow the sum), and every other read of `total` becomes `float(total)`, a Python
number as before, synchronising only where the total is read (once per log interval, after the loop).

Planned only where that is known to keep the program's meaning: `total` is a plain local name (or a
script's module-level one read by no function), bound only to numeric literals (`total = 0.0`) and by
augmented assignments; every other read is a plain load in the same scope (not `total.item()`, not inside a
nested function or comprehension); and inside the training loop it is read only where the loop does not
run every step (`if step % log_every == 0:`, as TL501 itself decides), since a read every step would sync
as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import BindingKind, ScopeKind
from torchlint.facts.syntax.walk import descendants
from torchlint.rules.tuning_guide.syncs import SyncAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import LoopRecord
    from torchlint.facts.syntax.module import SourceModule


@dataclass(frozen=True)
class RunningTotal:
    """How TL501's fix moves one running total to the device."""

    read: cst.Call  # `loss.item()` / `float(loss)`: becomes `loss.detach().float()`
    operand: str  # `loss` as written, parenthesised where `.detach()` needs it (`(a + b)`)
    total: str
    loads: list[cst.Name]  # the other reads of the total: each becomes `float(total)`


class RunningTotalAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self._sums_by_root: dict[int, tuple[dict[int, cst.AugAssign], set[int], set[int]]] = {}

    def _sums(self, root: cst.CSTNode) -> tuple[dict[int, cst.AugAssign], set[int], set[int]]:
        """In `root` (the loop's function, or a script's module): `x += value` by the id of its value (and of
        the terms of its arithmetic), the ids of every augmented assignment's target, and the ids of names
        already read through `float(name)` (a fixed total: read again, it is not wrapped twice)."""
        if id(root) in self._sums_by_root:
            return self._sums_by_root[id(root)]
        by_value: dict[int, cst.AugAssign] = {}
        targets: set[int] = set()
        floated: set[int] = set()
        for node in descendants(root):
            if isinstance(node, cst.AugAssign):
                targets.add(id(node.target))
                if isinstance(node.operator, cst.AddAssign) and isinstance(node.target, cst.Name):
                    for term in _terms(node.value):
                        by_value[id(term)] = node
            elif (
                isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float"
            ):
                if len(node.args) == 1 and isinstance(node.args[0].value, cst.Name):
                    floated.add(id(node.args[0].value))
        found = self._sums_by_root[id(root)] = (by_value, targets, floated)
        return found

    def of(self, read: cst.CSTNode, loop: LoopRecord) -> RunningTotal | None:
        operand = _operand(read)
        root = loop.function.node if loop.function is not None else self.source.module
        by_value, targets, floated = self._sums(root)
        summed = by_value.get(id(read))
        if operand is None or summed is None:
            return None
        assert isinstance(read, cst.Call) and isinstance(summed.target, cst.Name)
        name, scope = summed.target.value, loop.scope
        if scope.kind not in (ScopeKind.FUNCTION, ScopeKind.MODULE):
            return None
        bindings = scope.lookup(name)
        if not bindings or not all(_sums_or_literal(binding) for binding in bindings):
            return None
        interval = self.source.analysis(SyncAnalysis).occasional(loop)
        in_loop = {id(node) for node in descendants(loop.node)}
        loads: list[cst.Name] = []
        for ref in self.source.references:
            if ref.root.value != name or ref.scope.deciding_scope(name) is not scope:
                continue
            if id(ref.root) in targets or id(ref.root) in floated:
                continue
            if ref.scope is not scope or ref.attrs or ref.call is not None:
                return None  # read in a nested scope, or used as an object (`total.item()`)
            if id(ref.root) in in_loop and id(ref.root) not in interval:
                return None  # read every step: the fix would still sync there
            loads.append(ref.root)
        text = self.source.code(operand)
        if not isinstance(operand, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            text = f"({text})"
        return RunningTotal(read, text, name, loads)


ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def _terms(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`value` and the operands of its arithmetic (`loss.item() * inputs.size(0)`): where a read of the loss
    can become a tensor and the sum stay a sum."""
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, ARITHMETIC):
            stack += [node.left, node.right]
    return found


def _operand(read: cst.CSTNode) -> cst.BaseExpression | None:
    """`loss` of `loss.item()` or `float(loss)`."""
    if not isinstance(read, cst.Call):
        return None
    func = read.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not read.args:
        return func.value
    if isinstance(func, cst.Name) and func.value == "float" and len(read.args) == 1 and not read.args[0].star:
        return read.args[0].value
    return None


def _sums_or_literal(binding) -> bool:
    if binding.kind is BindingKind.ASSIGN:
        value = binding.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        return isinstance(value, (cst.Integer, cst.Float))
    return binding.kind is BindingKind.OTHER and isinstance(binding.node, cst.AugAssign)
