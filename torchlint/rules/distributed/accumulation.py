"""Gradient accumulation under `DistributedDataParallel` / FSDP without `no_sync`: every backward pass
all-reduces the gradients, though the optimizer steps only every N micro-batches.

A training loop accumulates when its backward pass runs on every iteration while each optimizer step
(`optimizer.step()`, `scaler.step(optimizer)`) sits under an `if` inside it whose test changes from one
iteration to the next (`if (i + 1) % accumulation == 0:`, `if ni - last_opt_step >= accumulate:`), or when
the backward runs in a loop of micro-batches inside it and the step after that loop (nanoGPT's shape).

The model is distributed when the module, or a module that runs this loop (`train_one_epoch(...)` called
from main.py), constructs `DistributedDataParallel` or `FullyShardedDataParallel`. The module has decided
about synchronisation, and is left alone, when it names `no_sync` or `require_backward_grad_sync`
anywhere (nanoGPT toggles the flag on the last micro-step) or accumulates through a framework
(`accelerator.accumulate`, Lightning's `accumulate_grad_batches`, DeepSpeed's engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.iterations import assigned_in, varies
from torchlint.facts.syntax.walk import statements
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.training import BACKWARD, STEP, TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule

DISTRIBUTED_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
# Calls and attributes that show the module decided about gradient synchronisation itself, or handed
# accumulation to a framework that does (a docstring that names `no_sync` decides nothing).
DECIDING_CALLS = frozenset({"no_sync", "accumulate"})
DECIDING_WORDS = ("require_backward_grad_sync", "accumulate_grad_batches")


@dataclass(frozen=True)
class Accumulation:
    """A backward pass that all-reduces on micro-batches that do not step."""

    backward: cst.Call  # where the finding goes
    backward_text: str  # "loss.backward()", "scaler.scale(loss).backward()"
    wrapper: str  # "DistributedDataParallel" (as the module that wraps names it, last part)
    how: str  # "every `accumulate` iterations" said from the step's test, or "after the micro-batch loop"


class AccumulationAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def without_no_sync(self) -> list[Accumulation]:
        source = self.source
        if _decided(source):
            return []
        training = source.analysis(TrainingAnalysis)
        found: list[Accumulation] = []
        for loop in training.training_loops:
            wrapper = self._wrapper(loop)
            if wrapper is None:
                continue
            accumulation = self._accumulates(loop, training)
            if accumulation is not None:
                backward, how = accumulation
                found.append(Accumulation(backward.node, source.code(backward.node), wrapper, how))
        return found

    def _wrapper(self, loop: LoopRecord) -> str | None:
        """The distributed wrapper the module, or one that runs this loop, constructs."""
        modules = [self.source]
        modules += [m for m, _ in self.source.analysis(CallerAnalysis).callers_elsewhere(loop)]
        for module in modules:
            if module is not self.source and _decided(module):
                return None
            for call in module.calls:
                qualname = module.qualname(call.node.func, call.scope) or ""
                if qualname in DISTRIBUTED_WRAPPERS:
                    return qualname.rpartition(".")[2]
                wrapper = _wrapped_by_helper(module, call, qualname)
                if wrapper is not None:
                    return wrapper
        return None

    def _accumulates(self, loop: LoopRecord, training: TrainingAnalysis) -> tuple[CallRecord, str] | None:
        """The backward call that runs on micro-batches the optimizer does not step on, and how the step is
        spaced; None when every iteration steps."""
        source = self.source
        assigned = assigned_in(loop.node)
        varying = {
            id(statement.test): statement.test
            for statement in statements(loop.node.body)
            if isinstance(statement, cst.If) and varies(statement.test, assigned)
        }
        backwards: list[CallRecord] = []
        steps: list[CallRecord] = []
        for record in loop.all_calls():
            events = training.call_events(record)
            if BACKWARD in events and _is_backward(record.node):
                backwards.append(record)
            elif STEP in events and _is_step(record.node):
                steps.append(record)
        if not backwards or not steps:
            return None
        every_iteration = [b for b in backwards if not any(id(test) in varying for test, _ in b.guards)]
        if not every_iteration:
            return None
        spaced = [
            next((test for test, _ in step.guards if id(test) in varying), None)
            for step in steps
            if step.loop is loop
        ]
        if spaced and all(test is not None for test in spaced):
            return every_iteration[0], f"under `if {source.code(spaced[0])}:`"
        inner = [b for b in every_iteration if b.loop is not loop]
        if inner and all(step.loop is loop for step in steps):
            return inner[0], "after the loop over micro-batches"
        return None


def _decided(module: SourceModule) -> bool:
    """The module calls `model.no_sync()` / `accelerator.accumulate(model)`, sets
    `require_backward_grad_sync` or Lightning's `accumulate_grad_batches`, or trains through DeepSpeed."""
    if any(word in module.text for word in DECIDING_WORDS):
        return True
    for call in module.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in DECIDING_CALLS:
            return True
        if (module.qualname(func, call.scope) or "").startswith("deepspeed."):
            return True
    return False


def _wrapped_by_helper(module: SourceModule, call: CallRecord, qualname: str) -> str | None:
    """The wrapper a project helper named like one constructs (yolov5's `model = smart_DDP(model)`);
    helpers named otherwise are not resolved (resolving every call would read half the project)."""
    name = qualname.rpartition(".")[2].lower()
    if not any(word in name for word in ("ddp", "distributed", "parallel", "fsdp")):
        return None
    target = module.callee(call)
    if target is None:
        return None
    home, function = target
    for inner in function.calls:
        inner_name = home.qualname(inner.node.func, inner.scope) or ""
        if inner_name in DISTRIBUTED_WRAPPERS:
            return inner_name.rpartition(".")[2]
    return None


def _is_step(call: cst.Call) -> bool:
    """`optimizer.step()`, `scaler.step(optimizer)` (not a helper handed the loss and the optimizer, like
    apex's `amp.scale_loss(loss, optimizer)`)."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "step"


def _is_backward(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward")
