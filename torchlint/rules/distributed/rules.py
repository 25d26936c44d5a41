"""Distributed training (TL6xx): the ways of spreading training over GPUs that PyTorch's performance tuning
guide advises against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.rules.base import Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.distributed.wrappers import WrapperAnalysis


def _wrappers(facts: ModuleFacts) -> WrapperAnalysis:
    from torchlint.rules.distributed.wrappers import WrapperAnalysis

    return facts.analysis(WrapperAnalysis)


class DataParallelInTraining(Rule):
    code = "TL602"
    name = "data-parallel-in-training"
    speed_advice = True
    needs_text = ("DataParallel",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for wrap in _wrappers(facts).data_parallel:
            message = (
                f"`{wrap.callee_text}` runs `{wrap.model}` in one process with a thread per GPU: every step "
                "copies the model to each GPU and scatters and gathers through the first one, and the "
                "threads share the GIL; PyTorch recommends `DistributedDataParallel`, one process per GPU, "
                "even on one machine"
            )
            note = no_fix(
                "DistributedDataParallel needs a process per GPU (`torchrun`), a process group and a "
                "`DistributedSampler`"
            )
            yield self.finding(facts, wrap.callee, message, note=note)
