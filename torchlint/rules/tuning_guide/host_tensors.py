"""Tensors built on the host and copied to the device every training step: `torch.zeros(n).to(device)`,
`torch.tensor(labels).cuda()`, in the body of a training loop that trains on CUDA, or of a function that runs
one training step per call (`CallerAnalysis.cuda_step_functions`).

The factory is one of torch's that takes `device=` (`torch.tensor`, `zeros`, `ones`, `full`, `empty`,
`arange`, `linspace`, `eye`, and the random ones), called without a `device=` of its own, and the copy is
`.to(D)` (D a device: `device`, `args.device`, `x.device`, `"cuda"`, `torch.device(...)`, a GPU index; not a
dtype) or `.cuda()`. Creating the tensor on the device skips the host allocation and the copy; for the
constant factories the values are the same, so the fix is safe. A random factory draws from the device's
generator instead of the CPU's: other numbers, so that fix is unsafe.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.vocabulary import Device

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

CONSTANT_FACTORIES = frozenset(
    f"torch.{name}" for name in ("tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "eye")
)
RANDOM_FACTORIES = frozenset(f"torch.{name}" for name in ("rand", "randn", "randint", "randperm"))
DEVICE_WORDS = ("device",)
DEVICE_NAMES = frozenset({"dev", "gpu", "rank", "local_rank"})


@dataclass(frozen=True)
class HostTensor:
    """`torch.zeros(n).to(device)` in a training loop: the factory call, the copy, and the device."""

    copy: cst.Call  # the whole `factory(...).to(D)`: where the finding goes and what the fix replaces
    factory: cst.Call
    factory_text: str  # "torch.zeros" as written
    device: str  # the device as the fix writes it: "device", '"cuda"'
    random: bool  # a random factory: the device's generator draws other numbers


class HostTensorAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def every_step(self) -> list[HostTensor]:
        found: list[HostTensor] = []
        callers = self.source.analysis(CallerAnalysis)
        bodies = [
            *(list(loop.all_calls()) for loop in callers.cuda_training_loops),
            *(function.calls for function in callers.cuda_step_functions),  # one step per call
        ]
        for calls in bodies:
            for record in calls:
                moved = self._moved(record.node, record.scope)
                if moved is not None and all(moved.copy is not other.copy for other in found):
                    found.append(moved)
        return found

    def _moved(self, call: cst.Call, scope: Scope) -> HostTensor | None:
        source = self.source
        func = call.func
        if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Call):
            return None
        factory = func.value
        qualname = source.qualname(factory.func, scope) or ""
        if qualname not in CONSTANT_FACTORIES and qualname not in RANDOM_FACTORIES:
            return None
        if any(arg.keyword is not None and arg.keyword.value == "device" for arg in factory.args):
            return None
        if any(arg.star for arg in factory.args):
            return None  # `torch.zeros(*shape, **options)`: a device may come through them
        device = self._device(call, scope)
        if device is None:
            return None
        return HostTensor(call, factory, source.code(factory.func), device, qualname in RANDOM_FACTORIES)

    def _device(self, call: cst.Call, scope: Scope) -> str | None:
        """The device a `.to(...)` / `.cuda()` copies to, as the fix writes it; None when it is not only a
        device (a dtype, a tensor, `copy=True`)."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        source = self.source
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if set(keywords) - {"device", "non_blocking"} or any(arg.star for arg in call.args):
            return None
        if func.attr.value == "cuda":
            return '"cuda"' if not positional and "device" not in keywords else None
        if func.attr.value != "to":
            return None
        targets = positional + ([keywords["device"]] if "device" in keywords else [])
        if len(targets) != 1:
            return None
        target = targets[0]
        if source.analysis(DeviceAnalysis).device_of(target, scope) is not Device.UNKNOWN:
            return source.code(target)
        name = _last_name(target)
        if name and (name in DEVICE_NAMES or any(word in name.lower() for word in DEVICE_WORDS)):
            return source.code(target)
        return None


def _last_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None
