"""Which device a module trains on, from what the code says: `.cuda()`, `.to(device)`, `torch.device(...)`.

- CUDA: an unconditional `.cuda()`, `"cuda"`/`"cuda:0"`/`f"cuda:{rank}"`/`"cuda:{}".format(rank)`,
  `torch.device("cuda", rank)`, a `--device` option defaulting to cuda, `init_process_group("nccl")`, an
  unconditional `torch.cuda.set_device(...)` / `torch.cuda.current_device()`;
- CUDA when available: `"cuda" if torch.cuda.is_available() else "cpu"` (any ternary with a cuda branch),
  `accelerator.device` (accelerate), `torch.accelerator.current_accelerator()` or `.is_available()` called
  anywhere (a device named `f"{device_type}:{rank}"` follows `device_type`), a conditional `.cuda()`,
  and the frameworks that pick the GPU when there is one (`frameworks.placement`);
- CPU: only `"cpu"` is ever named (`torch.load(..., map_location="cpu")` does not count: it says where a
  checkpoint is loaded, not where training runs);
- unknown otherwise — then the `device` setting decides.

A device a project function returns (`dist_util.dev()` in another module) is what its `return`s say.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import passed_for, positional_and_keywords
from torchlint.facts.syntax.names import BindingKind, Scope
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.torch import frameworks
from torchlint.facts.torch.vocabulary import Device, DeviceEvidence

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import FunctionRecord
    from torchlint.facts.syntax.module import SourceModule

__all__ = ["Device", "DeviceAnalysis", "DeviceEvidence"]

_AVAILABILITY = {"torch.cuda.is_available", "torch.accelerator.is_available"}
_CWA_CALLS = {"torch.accelerator.current_accelerator", "torch.accelerator.is_available"}
# Calls that only make sense with a GPU: the script picks one (`torch.cuda.set_device(local_rank)`).
_CUDA_CALLS = {"torch.cuda.set_device", "torch.cuda.current_device"}
MAX_DEPTH = 6


class DeviceAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    def _asks_for_cuda(self, test: cst.BaseExpression, scope: Scope) -> bool:
        """The test is `torch.cuda.is_available()` (or the accelerator's), alone or first in an `and`."""
        while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            test = test.left
        return isinstance(test, cst.Call) and (self.source.qualname(test.func, scope) or "") in _AVAILABILITY

    def device_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Device:
        if depth > MAX_DEPTH:
            return Device.UNKNOWN
        source = self.source
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
            if isinstance(head, cst.FormattedStringExpression):  # f"{device_type}:{rank}"
                return self.device_of(head.expression, scope, depth + 1)
            return Device.UNKNOWN
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
            # `"cuda:" + str(rank)`, `"cuda:%d" % rank`
            ok, head = literal_of(expr.left)
            return Device.CUDA if ok and isinstance(head, str) and head.startswith("cuda") else Device.UNKNOWN
        if isinstance(expr, cst.IfExp):
            if self._asks_for_cuda(expr.test, scope):  # `<a GPU> if torch.cuda.is_available() else "cpu"`
                return Device.CUDA_WHEN_AVAILABLE
            branches = {
                self.device_of(expr.body, scope, depth + 1),
                self.device_of(expr.orelse, scope, depth + 1),
            }
            if Device.CUDA in branches or Device.CUDA_WHEN_AVAILABLE in branches:
                return Device.CUDA_WHEN_AVAILABLE
            return max(branches)
        if isinstance(expr, cst.Call):
            callee = source.qualname(expr.func, scope) or ""
            if callee in _CWA_CALLS:
                return Device.CUDA_WHEN_AVAILABLE
            if callee == "torch.device" and expr.args:
                return self.device_of(expr.args[0].value, scope, depth + 1)
            if callee.startswith("torch.cuda.") and callee.endswith("current_device"):
                return Device.CUDA
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "format":  # "cuda:{}".format(rank)
                ok, template = literal_of(func.value)
                if ok and isinstance(template, str) and template.startswith("cuda"):
                    return Device.CUDA
            target = source.callee_of_call(expr, scope)  # `dist_util.dev()`: a project helper, read there
            if target is not None:
                return target[0].analysis(DeviceAnalysis).returned_device(target[1], depth + 1)
            return Device.UNKNOWN
        if isinstance(expr, cst.Name):
            devices = {
                self.device_of(a.value, a.scope, depth + 1)
                for a in source.assigned_values(expr, scope)
                if a.index is None
            }
            if any(b.kind is BindingKind.PARAM for b in scope.lookup(expr.value)):
                devices |= self._passed_to(scope, expr.value, depth)  # what the callers pass
            if Device.CPU in devices and Device.CUDA in devices:
                return Device.CUDA_WHEN_AVAILABLE  # `device = "cuda"`, then "cpu" when there is none
            return max(devices, default=Device.UNKNOWN)
        if isinstance(expr, cst.Attribute):
            if frameworks.is_accelerator_device(source, expr):
                return Device.CUDA_WHEN_AVAILABLE
            if source.is_self_attribute(expr, scope):  # self.device set in __init__
                values = source.assigned_values(expr, scope)
                return max(
                    (self.device_of(a.value, a.scope, depth + 1) for a in values), default=Device.UNKNOWN
                )
            if isinstance(expr.value, cst.Name):
                default = source.argparse_default(expr.attr.value)
                if default is not None:  # `--device` defaulting to cuda: the user may say cpu
                    found = self.device_of(default, source.module_scope, depth + 1)
                    return Device.CUDA_WHEN_AVAILABLE if found is Device.CUDA else found
        return Device.UNKNOWN

    def returned_device(self, function: FunctionRecord, depth: int) -> Device:
        """The device a function of this module returns (`if torch.cuda.is_available(): return
        torch.device("cuda")` then `return torch.device("cpu")`: CUDA when available)."""
        devices = {self.device_of(value, function.scope, depth + 1) for value in function.returns}
        if Device.CPU in devices and Device.CUDA in devices:
            return Device.CUDA_WHEN_AVAILABLE
        return max(devices, default=Device.UNKNOWN)

    def _passed_to(self, scope: Scope, name: str, depth: int) -> set[Device]:
        """What the callers pass for a parameter; for `__init__`, what `Trainer(..., gpu_id)` passes."""
        function = self.source.function_of_scope(scope)
        if function is None:
            return set()
        return {
            self.device_of(argument, caller, depth + 1)
            for argument, caller in passed_for(self.source, function, name)
            if argument is not None
        }

    @cached_property
    def evidence(self) -> DeviceEvidence:
        """The strongest device evidence anywhere in the module."""
        source = self.source
        best = DeviceEvidence(Device.UNKNOWN)
        for call in source.calls:
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
                reason = f"`.to({source.code(node.args[0].value)})`"
            else:
                callee = source.qualname(func, call.scope) or ""
                placed = frameworks.placement(source, node, callee, call.scope)
                if callee == "torch.device" and node.args:
                    found = self.device_of(node.args[0].value, call.scope)
                    reason = f"`{source.code(node)}`"
                elif callee.endswith("init_process_group") and "nccl" in source.code(node):
                    found, reason = Device.CUDA, "the nccl backend"
                elif callee in _CWA_CALLS:
                    found, reason = Device.CUDA_WHEN_AVAILABLE, f"`{source.code(func)}()`"
                elif callee in _CUDA_CALLS:
                    found = Device.CUDA_WHEN_AVAILABLE if call.conditional else Device.CUDA
                    reason = f"`{source.code(func)}(...)`"
                elif placed is not None:
                    found, reason = placed
            if found is Device.UNKNOWN:
                _, keywords = positional_and_keywords(node)
                target = keywords.get("device")
                if target is not None:
                    found = self.device_of(target, call.scope)
                    reason = f"`device={source.code(target)}`"
                elif "map_location" in keywords:
                    # Where a checkpoint is loaded says nothing of a CPU run (scripts load to the CPU first
                    # and move the model after); loading it onto a GPU does say there is one.
                    loaded_to = self.device_of(keywords["map_location"], call.scope)
                    if loaded_to.may_be_cuda:
                        found, reason = loaded_to, f"`map_location={source.code(keywords['map_location'])}`"
            if found > best.device:
                best = DeviceEvidence(found, node, reason)
        return best

    def _is_module(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`expr` is (an attribute of) an imported name and nothing else: a name also assigned (`import
        model`, then `model = model.RNNModel(...)`, `model.cuda()`) may be the model by then."""
        root = expr
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        bindings = scope.lookup(root.value)
        return bool(bindings) and all(b.kind is BindingKind.IMPORT for b in bindings)
