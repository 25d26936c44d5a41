"""PyTorch's performance tuning guide (TL5xx): what a training loop does that costs time for nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.rules.base import Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis


def _debugging(facts: ModuleFacts) -> DebuggingAnalysis:
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis

    return facts.analysis(DebuggingAnalysis)


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
