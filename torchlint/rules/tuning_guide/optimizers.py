"""Optimizers that could run fused: `torch.optim.Adam`, `AdamW` or `SGD` built without `fused=` in a module
whose training loop may run on CUDA.

With neither `fused` nor `foreach` given, torch picks the multi-tensor ("foreach") implementation on CUDA;
`fused=True` does each parameter group's whole update in one kernel launch per group of tensors, which the
optimizer docs call "theoretically fastest". Only these three have fused CUDA kernels in every torch since
2.4 (where fused kernels exist for the CPU too, and the device check moved from construction to `step`).

The training loop may be in the module, or, for a module without one (the model file whose
`configure_optimizers` builds the optimizer, an algorithm class), in a project module importing it.
Silent when the call already chooses (`fused=`, `foreach=`, `differentiable=`, or a `**` dict that may), when
no such training loop may run on CUDA, for SGD where gradients may be sparse (the fused kernel refuses them)
or sharded as DTensors (FSDP2's `fully_shard`, tensor parallelism: torch has no DTensor rule for fused SGD,
while it has them for fused Adam and AdamW), in modules that hand optimizers to DeepSpeed, Megatron-LM or
MS-AMP, which replace them with their own (also when an importing module does), and in modules whose
imports pin a torch older than `fused=` (`torchtext.legacy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, read_call
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.training import TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule

FUSABLE = {
    f"torch.optim.{module}{name}": name
    for name in ("Adam", "AdamW", "SGD")
    for module in ("", f"{name.lower()}.")
}
CHOICES = ("fused", "foreach", "differentiable")
# Frameworks that replace the optimizer with their own (DeepSpeed's engine, Megatron-LM's through accelerate,
# MS-AMP's `msamp.initialize`), and imports that pin a torch without `fused=` (`torchtext.legacy`: 1.8-1.10).
REPLACED_OR_OLD = ("deepspeed", "megatron", "Megatron", "msamp", "torchtext.legacy")
# Parameters sharded as DTensors (FSDP2, tensor parallelism): torch has DTensor rules for fused Adam and AdamW
# but none for fused SGD, whose step would fail.
DTENSOR_WORDS = (
    "fully_shard",
    "parallelize_module",
    "distribute_tensor",
    "DeviceMesh",
    "device_mesh",
    "tp_plan",
)
# The choices are keyword-only in all three: positional arguments (params, lr, ...) never pass one.
SIGNATURE = Signature(("params",), star_args=True)


@dataclass(frozen=True)
class UnfusedOptimizer:
    call: cst.Call
    callee: cst.BaseExpression  # `torch.optim.AdamW`, as written: where the finding goes
    name: str  # "AdamW"


class OptimizerAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def unfused(self) -> list[UnfusedOptimizer]:
        source = self.source
        if any(word in source.text for word in REPLACED_OR_OLD):
            return []
        sharded = any(word in source.text for word in DTENSOR_WORDS)
        found = []
        for record in source.calls:
            name = FUSABLE.get(source.qualname(record.node.func, record.scope) or "")
            if name is None or (name == "SGD" and ("sparse" in source.text or sharded)):
                continue  # fused SGD refuses sparse gradients (`nn.Embedding(sparse=True)`) and DTensors
            arguments = read_call(source, record.node, record.scope, SIGNATURE)
            if not arguments.complete or any(arguments.get(choice) is not None for choice in CHOICES):
                continue
            found.append(UnfusedOptimizer(record.node, record.node.func, name))
        if found and not self._trains_on_cuda:
            return []
        return found

    @cached_property
    def _trains_on_cuda(self) -> bool:
        """A training loop of this module may run on CUDA; or, for a module without one (a model file's
        `configure_optimizers`, an algorithm class), one of the project modules importing it has one."""
        if _has_cuda_loop(self.source):
            return True
        if self.source.analysis(TrainingAnalysis).training_loops:
            return False
        importers = self.source.analysis(CallerAnalysis).importers()
        if any(word in other.text for other in importers for word in REPLACED_OR_OLD):
            return False  # the module that trains hands the optimizer to a framework that replaces it
        return any(_has_cuda_loop(other) for other in importers)


def _has_cuda_loop(source: SourceModule) -> bool:
    return bool(source.analysis(CallerAnalysis).cuda_training_loops)
