"""PyTorch's performance tuning guide (TL5xx): what a training loop does that costs time for nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.rules.base import Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis
    from torchlint.rules.tuning_guide.syncs import SyncAnalysis


def _syncs(facts: ModuleFacts) -> SyncAnalysis:
    from torchlint.rules.tuning_guide.syncs import SyncAnalysis

    return facts.analysis(SyncAnalysis)


def _debugging(facts: ModuleFacts) -> DebuggingAnalysis:
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis

    return facts.analysis(DebuggingAnalysis)


class HostSyncEveryStep(Rule):
    code = "TL501"
    name = "host-sync-every-step"
    speed_advice = True
    needs_text = ("backward",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for read in _syncs(facts).every_step:
            message = (
                f"`{read.text}` reads `{read.value}` from the GPU every training step: the CPU waits for "
                "the step's GPU work to finish before it can queue the next one"
            )
            note = no_fix(
                f"keep a running total on the device (`total += {read.value}.detach()`) and read it once per "
                "log interval (`if step % log_every == 0:`)"
            )
            yield self.finding(facts, read.node, message, note=note)


class AnomalyDetectionInTraining(Rule):
    code = "TL508"
    name = "anomaly-detection-in-training"
    speed_advice = True
    needs_text = ("anomaly",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in _debugging(facts).anomaly_modes:
            message = (
                f"{site.how} keeps autograd's anomaly detection on in training: every backward checks each "
                "operation's result for NaN and keeps the traceback of its forward, a debugging aid that "
                "slows every step"
            )
            note = no_fix("it was switched on on purpose: remove it, or put it behind a debug flag")
            yield self.finding(facts, site.call, message, note=note)
