"""Which trained models are wrapped in `nn.DataParallel`: a wrap event of a trained model (`ModelAnalysis`:
its parameters reach an optimizer in a module that trains) whose callee is DataParallel, unless the model
surely stays on the CPU, where DataParallel does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.torch.models import ModelAnalysis

if TYPE_CHECKING:
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
    model: str  # the model as the code names it
    callee: cst.BaseExpression  # `nn.DataParallel` as written: where the finding goes
    callee_text: str


class WrapperAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def data_parallel(self) -> list[DataParallelWrap]:
        source = self.source
        models = source.analysis(ModelAnalysis)
        found = []
        for model in models.trained:
            if not models.device(model).may_be_cuda:
                continue
            for event in model.of_kind("wrap"):
                call = event.node
                if not isinstance(call, cst.Call) or event.scope is None:
                    continue
                if source.qualname(call.func, event.scope) in DATA_PARALLEL:
                    found.append(DataParallelWrap(model.text, call.func, source.code(call.func)))
        return found
