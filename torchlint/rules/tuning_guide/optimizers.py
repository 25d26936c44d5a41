"""Optimizers that could run fused: `torch.optim.Adam`, `AdamW` or `SGD` built without `fused=` in a module
whose training loop may run on CUDA.

With neither `fused` nor `foreach` given, torch picks the multi-tensor ("foreach") implementation on CUDA;
`fused=True` does each parameter group's whole update in one kernel launch per group of tensors, which the
optimizer docs call "theoretically fastest". Only these three have fused CUDA kernels in every torch since
2.4 (where fused kernels exist for the CPU too, and the device check moved from construction to `step`).

The training loop may be in the module, or, for a module without one (the model file whose
`configure_optimizers` builds the optimizer, an algorithm class), in a project module importing it; or it is
Lightning's, for the `configure_optimizers` of a module that builds a `Trainer` which may pick the GPU.
Silent when the call already chooses (`fused=`, `foreach=`, `differentiable=`, or a `**` dict that may), when
no such training loop may run on CUDA, for SGD where gradients may be sparse (the fused kernel refuses them)
or sharded as DTensors (FSDP2's `fully_shard`, tensor parallelism: torch has no DTensor rule for fused SGD,
while it has them for fused Adam and AdamW), in modules that hand optimizers to DeepSpeed, Megatron-LM or
MS-AMP, which replace them with their own (also when an importing module does), in modules whose imports
pin a torch older than `fused=` (`torchtext.legacy`), and for an optimizer nothing steps (built to show a
checkpoint's loading or to plot a learning-rate schedule).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, read_call
from torchlint.facts.syntax.names import BindingKind
from torchlint.facts.torch import frameworks
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.reach import may_run_backward
from torchlint.facts.torch.training import TrainingAnalysis

if TYPE_CHECKING:
    from pathlib import Path

    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.exports import ExportIndex

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
# What an optimizer's state or settings are read, loaded or cleared by: none of them steps it.
STATE_ONLY = frozenset({"zero_grad", "state_dict", "load_state_dict", "param_groups", "state", "defaults"})
# The choices are keyword-only in all three: positional arguments (params, lr, ...) never pass one.
SIGNATURE = Signature(("params",), star_args=True)


@dataclass(frozen=True)
class UnfusedOptimizer:
    call: cst.Call
    callee: cst.BaseExpression  # `torch.optim.AdamW`, as written: where the finding goes
    name: str  # "AdamW"
    in_lightning_hook: bool = False  # built in a `configure_optimizers` method


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
            if _never_stepped(source, record):
                continue  # built to show a checkpoint's loading or a schedule's curve: no step to speed up
            found.append(UnfusedOptimizer(record.node, record.node.func, name, _in_lightning_hook(record)))
        if found and not self._trains_on_cuda:
            return [optimizer for optimizer in found if optimizer.in_lightning_hook and self._fit_on_gpu]
        return found

    @cached_property
    def _fit_on_gpu(self) -> bool:
        """This module builds a Lightning `Trainer` (or `LightningCLI`) that may pick the GPU: Lightning
        steps the optimizers `configure_optimizers` returns, on the module's device. Not a `Trainer` in an
        importing module: a test's `Trainer()` of Lightning 1.x (`from_argparse_args` in the module) ran on
        the CPU unless told `gpus=`, and nothing here says which Lightning the project runs."""
        return _lightning_on_gpu(self.source)

    @cached_property
    def _trains_on_cuda(self) -> bool:
        """A training loop of this module may run on CUDA; or, for a module without one (a model file's
        `configure_optimizers`, an algorithm class), one of the project modules importing it has one."""
        if _has_cuda_loop(self.source):
            return True
        if self.source.analysis(TrainingAnalysis).training_loops:
            return False
        source, project = self.source, self.source.project
        if project is None or source.file is None:
            return False
        callers = source.analysis(CallerAnalysis)
        index: ExportIndex = project  # type: ignore[assignment]
        may_train = (path for path in callers.importer_files() if may_run_backward(index, path, source.file))
        if not any(_has_cuda_loop(other) for other in callers.built(may_train)):  # built one by one
            return False

        def mentions_a_replacement(path: Path) -> bool:
            said = project.mentions(path, REPLACED_OR_OLD, source.file)
            if said is None:  # its bytes may not be its text: read the facts'
                return any(word in other.text for other in callers.built([path]) for word in REPLACED_OR_OLD)
            return said

        # the module that trains hands the optimizer to a framework that replaces it
        return not any(mentions_a_replacement(path) for path in callers.importer_files())


def _never_stepped(source: SourceModule, record: CallRecord) -> bool:
    """The optimizer is bound to a name (`optimizer = torch.optim.AdamW(...)`, not in a loop nor under an
    `if`) whose uses, from there to the statement that surely binds the name again, only load, read or
    clear its state or set its learning rate (`optimizer.load_state_dict(checkpoint["optimizer"])` in a
    checkpoint demo, `optimizer.param_groups[0]["lr"] = lr` to plot a schedule): nothing steps this one.
    Any other use (`.step()`, handed to a call, returned, used in a function) may step it."""
    if record.loop is not None or record.conditional:
        return False
    bindings = [
        b
        for found in record.scope.bindings.values()
        for b in found
        if b.kind is BindingKind.ASSIGN and b.value is record.node and b.index is None
    ]
    if len(bindings) != 1 or bindings[0].node is None:
        return False
    binding = bindings[0]
    order = source.text_order(record.scope.node)  # ranks, compared as offsets would be
    start = order.span(binding.node)[1]
    unconditional = {id(call.node) for call in source.calls if not call.conditional and call.loop is None}
    later = [  # rebound for sure: by a statement that always runs (its value read first)
        order.span(other.node)[1]
        for other in record.scope.bindings.get(binding.name, [])
        if other.node is not None
        and order.span(other.node)[0] >= start
        and isinstance(other.value, cst.Call)
        and id(other.value) in unconditional
    ]
    end = min(later, default=sys.maxsize)
    for reference in source.references_of(binding):
        if reference.scope is not record.scope:
            return False  # a function may run later, and step it
        at = order.span(reference.expr)[0]
        if start <= at < end and (not reference.attrs or reference.attrs[0] not in STATE_ONLY):
            return False
    return True


def _in_lightning_hook(record: CallRecord) -> bool:
    function = record.function
    return function is not None and function.owner is not None and function.name == "configure_optimizers"


def _lightning_on_gpu(source: SourceModule) -> bool:
    if "lightning" not in source.text:
        return False
    for call in source.calls:
        callee = source.qualname(call.node.func, call.scope) or ""
        if callee.split(".")[0] not in ("lightning", "pytorch_lightning"):
            continue
        if not callee.endswith(("Trainer", "LightningCLI")):
            continue
        placed = frameworks.placement(source, call.node, callee, call.scope)
        if placed is not None and placed[0].may_be_cuda:
            return True
    return False


def _has_cuda_loop(source: SourceModule) -> bool:
    return bool(source.analysis(CallerAnalysis).cuda_training_loops)
