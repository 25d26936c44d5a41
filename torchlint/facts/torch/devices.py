"""Which device a module trains on, from what the code says: `.cuda()`, `.to(device)`, `torch.device(...)`.

- CUDA: an unconditional `.cuda()`, `"cuda"`/`"cuda:0"`/`f"cuda:{rank}"`, `torch.device("cuda", rank)`,
  a `--device` option defaulting to cuda, `init_process_group("nccl")`;
- CUDA when available: `"cuda" if torch.cuda.is_available() else "cpu"` (any ternary with a cuda branch),
  `accelerator.device` (accelerate), `torch.accelerator.current_accelerator()`, a conditional `.cuda()`;
- CPU: only `"cpu"` is ever named;
- unknown otherwise — then the `device` setting decides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import BindingKind, Scope
from torchlint.facts.syntax.values import literal_of

if TYPE_CHECKING:
    from torchlint.facts.module import ModuleFacts


class Device(enum.IntEnum):
    """Ordered by strength of evidence for CUDA."""

    UNKNOWN = 0
    CPU = 1
    CUDA_WHEN_AVAILABLE = 2
    CUDA = 3

    @property
    def may_be_cuda(self) -> bool:
        return self in (Device.CUDA, Device.CUDA_WHEN_AVAILABLE)

    @property
    def label(self) -> str:
        return {
            Device.UNKNOWN: "unknown",
            Device.CPU: "cpu",
            Device.CUDA_WHEN_AVAILABLE: "cuda when available",
            Device.CUDA: "cuda",
        }[self]


@dataclass(frozen=True)
class DeviceEvidence:
    device: Device
    node: cst.CSTNode | None = None  # the strongest evidence
    reason: str = ""


_CWA_CALLS = {"torch.accelerator.current_accelerator", "torch.accelerator.is_available"}


class DeviceAnalysis:
    def __init__(self, facts: ModuleFacts) -> None:
        self.facts = facts

    def device_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Device:
        if depth > 6:
            return Device.UNKNOWN
        ok, literal = literal_of(expr)
        if ok:
            if isinstance(literal, str):
                if literal.startswith("cuda"):
                    return Device.CUDA
                if literal == "cpu":
                    return Device.CPU
            if isinstance(literal, int) and not isinstance(literal, bool):
                return Device.CUDA  # `.to(0)`, `.cuda(0)`: a GPU index
            return Device.UNKNOWN
        if isinstance(expr, cst.FormattedString):
            head = expr.parts[0] if expr.parts else None
            if isinstance(head, cst.FormattedStringText) and head.value.startswith("cuda"):
                return Device.CUDA
            return Device.UNKNOWN
        if isinstance(expr, cst.IfExp):
            branches = {
                self.device_of(expr.body, scope, depth + 1),
                self.device_of(expr.orelse, scope, depth + 1),
            }
            if Device.CUDA in branches or Device.CUDA_WHEN_AVAILABLE in branches:
                return Device.CUDA_WHEN_AVAILABLE
            return max(branches)
        if isinstance(expr, cst.Call):
            callee = self.facts.qualname(expr.func, scope) or ""
            if callee in _CWA_CALLS:
                return Device.CUDA_WHEN_AVAILABLE
            if callee == "torch.device" and expr.args:
                return self.device_of(expr.args[0].value, scope, depth + 1)
            if callee.startswith("torch.cuda.") and callee.endswith("current_device"):
                return Device.CUDA
            return Device.UNKNOWN
        if isinstance(expr, cst.Name):
            devices = set()
            for binding in scope.lookup(expr.value):
                if binding.kind is BindingKind.ASSIGN and binding.value is not None and binding.index is None:
                    devices.add(self.device_of(binding.value, binding.scope, depth + 1))
                elif binding.kind is BindingKind.PARAM:  # what the callers pass
                    devices |= self._passed_to(binding.scope, expr.value, depth)
            if Device.CPU in devices and Device.CUDA in devices:
                return Device.CUDA_WHEN_AVAILABLE  # `device = "cuda"`, then "cpu" when there is none
            return max(devices, default=Device.UNKNOWN)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "device" and "accelerator" in self.facts.code(expr.value).lower():
                return Device.CUDA_WHEN_AVAILABLE  # accelerate picks the GPU when there is one
            if isinstance(expr.value, cst.Name):
                owner = self.facts.class_of_method_scope(scope)
                if owner is not None and expr.value.value == owner[1]:  # self.device set in __init__
                    values = owner[0].attributes.get(expr.attr.value, [])
                    return max((self.device_of(v, s, depth + 1) for v, s in values), default=Device.UNKNOWN)
                default = self.facts.argparse_default(expr.attr.value)
                if default is not None:  # `--device` defaulting to cuda: the user may say cpu
                    found = self.device_of(default, self.facts.module_scope, depth + 1)
                    return Device.CUDA_WHEN_AVAILABLE if found is Device.CUDA else found
        return Device.UNKNOWN

    def _passed_to(self, scope: Scope, name: str, depth: int) -> set[Device]:
        from torchlint.facts.torch.training import argument_for

        function = self.facts.function_of_scope(scope)
        if function is None:
            return set()
        found = set()
        for call in self.facts.calls_of(function):
            argument = argument_for(call.node, function, name)
            if argument is not None:
                found.add(self.device_of(argument, call.scope, depth + 1))
        return found

    def module_evidence(self) -> DeviceEvidence:
        best = DeviceEvidence(Device.UNKNOWN)
        for call in self.facts.calls:
            node = call.node
            func = node.func
            found = Device.UNKNOWN
            reason = ""
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "cuda"
                and not self._is_module(func.value, call.scope)
            ):
                found = Device.CUDA_WHEN_AVAILABLE if call.conditional else Device.CUDA
                reason = "`.cuda()`"
            elif isinstance(func, cst.Attribute) and func.attr.value == "to" and node.args:
                found = self.device_of(node.args[0].value, call.scope)
                reason = f"`.to({self.facts.code(node.args[0].value)})`"
            else:
                callee = self.facts.qualname(func, call.scope) or ""
                if callee == "torch.device" and node.args:
                    found = self.device_of(node.args[0].value, call.scope)
                    reason = f"`{self.facts.code(node)}`"
                elif callee.endswith("init_process_group") and "nccl" in self.facts.code(node):
                    found, reason = Device.CUDA, "the nccl backend"
                elif callee.startswith("accelerate.") and callee.endswith("Accelerator"):
                    cpu = any(a.keyword is not None and a.keyword.value == "cpu" for a in node.args)
                    found = Device.UNKNOWN if cpu else Device.CUDA_WHEN_AVAILABLE
                    reason = "`Accelerator()` (the GPU when there is one)"
                elif callee.split(".")[0] in ("lightning", "pytorch_lightning"):
                    if callee.endswith("LightningCLI"):
                        found, reason = Device.CUDA_WHEN_AVAILABLE, "`LightningCLI` (accelerator auto)"
                    elif callee.endswith("Trainer"):
                        found = self._lightning_trainer(node, call.scope)
                        reason = "Lightning `Trainer(...)`"
            for arg in node.args:
                if (
                    arg.keyword is not None
                    and arg.keyword.value in ("device", "map_location")
                    and found is Device.UNKNOWN
                ):
                    found = self.device_of(arg.value, call.scope)
                    reason = f"`device={self.facts.code(arg.value)}`"
            if found > best.device:
                best = DeviceEvidence(found, node, reason)
        return best

    def _lightning_trainer(self, call: cst.Call, scope: Scope) -> Device:
        """Lightning's Trainer picks the GPU when there is one, unless told `accelerator="cpu"`."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "accelerator":
                ok, value = literal_of(arg.value)
                if not ok:
                    return Device.UNKNOWN
                if value in ("gpu", "cuda"):
                    return Device.CUDA
                return Device.CUDA_WHEN_AVAILABLE if value == "auto" else Device.CPU
        return Device.CUDA_WHEN_AVAILABLE

    def _is_module(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        root = expr
        while isinstance(root, cst.Attribute):
            root = root.value
        return isinstance(root, cst.Name) and any(
            b.kind is BindingKind.IMPORT for b in scope.lookup(root.value)
        )
