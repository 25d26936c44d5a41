"""Host-to-device copies of training batches: `batch.to(device)` / `batch.cuda()` inside a training loop,
followed back to what the loop iterates (its target, `next(it)`, unpacking, `.items()`), never `.to("cpu")`
and never a dtype cast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Argument, Signature, read_call
from torchlint.facts.syntax.collect import LoopRecord
from torchlint.facts.syntax.names import BindingKind, Scope
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.vocabulary import Device

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule

TO = Signature(("device",))  # `tensor.to(device, ...)`, `tensor.cuda(device, ...)`
# A target of unknown value named like a device: `.to(device)`, `.to(self.gpu_id)`, `.to(local_rank)` (DDP's
# one GPU per rank).
_DEVICE_WORDS = ("device", "gpu", "cuda", "rank")


@dataclass(frozen=True)
class Move:
    """`batch.to(device)` / `batch.cuda()` inside a training loop."""

    call: cst.Call
    device: Device
    non_blocking: Argument | None  # None: not passed

    @property
    def callee(self) -> cst.BaseExpression:
        return self.call.func

    @property
    def method(self) -> str:
        """`to` or `cuda`."""
        return self.call.func.attr.value  # type: ignore[attr-defined]

    @property
    def blocks(self) -> bool:
        """The copy is synchronous as written: `non_blocking` not passed, or the constant False (a value
        the user controls is their decision)."""
        return self.non_blocking is None or self.non_blocking.constant() == (True, False)


def batch_moves(facts: SourceModule, loop: LoopRecord) -> list[Move]:
    """Host-to-device copies of what the loop iterates (never `.to("cpu")`, never dtype casts)."""
    moves = []
    for call in loop.all_calls():
        func = call.node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            continue
        if not _from_batch(facts, func.value, call.scope, loop, 0):
            continue
        arguments = read_call(facts, call.node, call.scope, TO)
        target = arguments.get("device")
        if func.attr.value == "cuda":
            device = Device.CUDA
        elif target is None or target.expression is None:
            continue
        else:
            device = facts.analysis(DeviceAnalysis).device_of(target.expression, call.scope)
            named = facts.code(target.expression).lower()
            if not device.may_be_cuda and not any(word in named for word in _DEVICE_WORDS):
                continue  # `.to(torch.float16)`, `.to("cpu")`, `.to(memory_format=...)`
            if device is Device.CPU:
                continue
        moves.append(Move(call.node, device, arguments.get("non_blocking")))
    return moves


def _from_batch(
    facts: SourceModule, expr: cst.BaseExpression, scope: Scope, loop: LoopRecord, depth: int
) -> bool:
    """Does `expr` come from what `loop` iterates (its target, `next(it)`, unpacking, `.items()`)?"""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    if not isinstance(expr, cst.Name) or depth > 4:
        return False
    for binding in scope.lookup(expr.value):
        if binding.node is loop.node:
            return True
        value = binding.value
        if value is None:
            continue
        if binding.index is not None and isinstance(value, (cst.Tuple, cst.List)):
            # `images, masks = batch["image"], batch["mask"]`: the element this name takes
            elements = value.elements
            if binding.index >= len(elements) or isinstance(elements[binding.index], cst.StarredElement):
                continue
            value = elements[binding.index].value
        if isinstance(binding.node, cst.For) and any(child.node is binding.node for child in loop.children):
            return _from_batch(facts, value, binding.scope, loop, depth + 1)  # for k, v in batch.items()
        if binding.kind is BindingKind.ASSIGN and isinstance(value, cst.Call):
            if facts.qualname(value.func, binding.scope) == "next":
                return True
        if binding.kind in (BindingKind.ASSIGN, BindingKind.OTHER) and _from_batch(
            facts, value, binding.scope, loop, depth + 1
        ):
            return True
    return False


def device_type_of_moves(source: SourceModule, loop: LoopRecord) -> str | None:
    """`device.type` when the loop's batches go to a `torch.device` held in one variable (`x.to(device)` with
    `device = torch.device("cuda" if ... else "cpu")`): what an autocast region in that loop should name, so
    that it follows the device the script picks. None: no such variable."""
    names = set()
    for move in batch_moves(source, loop):
        target = move.call.args[0].value if move.call.args and move.method == "to" else None
        if not isinstance(target, cst.Name):
            return None
        values = source.assigned_values(target, loop.scope)
        if not values or not all(
            isinstance(v.value, cst.Call) and source.qualname(v.value.func, v.scope) == "torch.device"
            for v in values
        ):
            return None
        names.add(target.value)
    return f"{names.pop()}.type" if len(names) == 1 else None
