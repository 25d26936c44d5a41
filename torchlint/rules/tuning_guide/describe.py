"""`debug facts`, the tuning-guide family's section: where anomaly detection is on for every run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis
from torchlint.rules.tuning_guide.graphs import EvaluationAnalysis
from torchlint.rules.tuning_guide.host_tensors import HostTensorAnalysis
from torchlint.rules.tuning_guide.scalers import ScalerAnalysis
from torchlint.rules.tuning_guide.syncs import SyncAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out = ["host reads of the loss every training step:"]
    for read in facts.analysis(SyncAnalysis).every_step:
        out.append(f"  line {facts.line_of(read.node)}: `{read.text}` reads `{read.value}`")
    if len(out) == 1:
        out.append("  (none)")
    out.append("tensors made on the host and copied every training step:")
    for moved in facts.analysis(HostTensorAnalysis).every_step:
        out.append(f"  line {facts.line_of(moved.copy)}: `{moved.factory_text}(...)` to {moved.device}")
    if out[-1].endswith(":"):
        out.append("  (none)")
    out.append("evaluation loops that run with gradients on:")
    for found in facts.analysis(EvaluationAnalysis).building_graphs:
        out.append(f"  line {facts.line_of(found.call)}: `{found.model}(...)`")
    if out[-1].endswith(":"):
        out.append("  (none)")
    out.append("grad scalers stepped without an update every iteration:")
    for found in facts.analysis(ScalerAnalysis).steps_without_update:
        out.append(f"  line {facts.line_of(found.step)}: `{found.scaler}`")
    if out[-1].endswith(":"):
        out.append("  (none)")
    out.append("anomaly detection on in training:")
    for site in facts.analysis(DebuggingAnalysis).anomaly_modes:
        out.append(f"  line {facts.line_of(site.call)}: {site.how}")
    if out[-1].endswith(":"):
        out.append("  (none)")
    return out
