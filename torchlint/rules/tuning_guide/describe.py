"""`debug facts`, the tuning-guide family's section: where anomaly detection is on for every run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out = ["anomaly detection on in training:"]
    for site in facts.analysis(DebuggingAnalysis).anomaly_modes:
        out.append(f"  line {facts.line_of(site.call)}: {site.how}")
    if len(out) == 1:
        out.append("  (none)")
    return out
