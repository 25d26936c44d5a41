"""Where `nn.DataParallel` runs in training: in a module that trains (`ModelAnalysis.trains`), every
`DataParallel(...)` call among its own statements, in a function that trains (its loop, or a function it
calls), or in a method of a class that trains (a trainer's `__init__`), and the wraps of its trained models
wherever they are built; unless the module surely stays on the CPU, where DataParallel does nothing. A
frozen teacher wrapped beside the trained student is scattered and gathered every step too; an
`evaluate(model)` that wraps for a multi-GPU evaluation is no training.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.models import ModelAnalysis, unplaced
from torchlint.facts.torch.training import TrainingAnalysis
from torchlint.facts.torch.vocabulary import Device

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)


@dataclass(frozen=True)
class DataParallelWrap:
    model: str  # the model as the code names it (or the wrapped expression, as written)
    callee: cst.BaseExpression  # `nn.DataParallel` as written: where the finding goes
    callee_text: str


class WrapperAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def data_parallel(self) -> list[DataParallelWrap]:
        source = self.source
        models = source.analysis(ModelAnalysis)
        if not models.trains or source.analysis(DeviceAnalysis).evidence.device is Device.CPU:
            return []
        found: dict[int, DataParallelWrap] = {}
        for model in models.trained:
            for event in model.of_kind("wrap"):
                call = event.node
                if isinstance(call, cst.Call) and event.scope is not None:
                    if source.qualname(call.func, event.scope) in DATA_PARALLEL:
                        found[id(call)] = DataParallelWrap(model.text, call.func, source.code(call.func))
        training = source.analysis(TrainingAnalysis)
        for record in source.calls:
            call = record.node
            if id(call) in found or source.qualname(call.func, record.scope) not in DATA_PARALLEL:
                continue
            if not _trains_there(source, record, training):
                continue  # `evaluate(model)` wrapping for a multi-GPU evaluation
            wrapped = next((arg.value for arg in call.args if arg.keyword is None and not arg.star), None)
            what = source.code(wrapped) if wrapped is not None else "the module"
            found[id(call)] = DataParallelWrap(what, call.func, source.code(call.func))
        return list(found.values())


def _trains_there(source: SourceModule, record: CallRecord, training: TrainingAnalysis) -> bool:
    """The code around a call trains: the module's own statements, a function that runs a training loop
    (itself or through what it calls), or a method of a class one of whose methods does, when the wrapped
    module is kept on the object or returned (a trainer's `__init__` setting `self.model` for its `train()`;
    not a local of its `sample()` that loads a checkpoint and runs under `no_grad`)."""
    function = record.function
    if function is None:
        return True
    if training.has_training_loop(function):
        return True
    owner = function.owner
    if owner is None or not any(training.has_training_loop(method) for method in owner.methods.values()):
        return False
    kept = [(value, scope) for values in owner.attributes.values() for value, scope in values]
    for value, scope in [*kept, *((returned, function.scope) for returned in function.returns)]:
        if unplaced(value) is record.node:
            return True
        if isinstance(value, cst.Name):  # `model = DataParallel(model)` ... `return model`
            assigned = source.assigned_values(value, scope)
            if any(unplaced(a.value) is record.node for a in assigned):
                return True
    return False
