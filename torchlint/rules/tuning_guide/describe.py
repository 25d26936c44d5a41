"""`debug facts`, the tuning-guide family's section: each place one of its rules looks at, by kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.tuning_guide.checkpoints import CheckpointAnalysis
from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis
from torchlint.rules.tuning_guide.graphs import EvaluationAnalysis
from torchlint.rules.tuning_guide.host_tensors import HostTensorAnalysis
from torchlint.rules.tuning_guide.matmul_precision import MatmulPrecisionAnalysis
from torchlint.rules.tuning_guide.optimizers import OptimizerAnalysis
from torchlint.rules.tuning_guide.scalers import ScalerAnalysis
from torchlint.rules.tuning_guide.syncs import SyncAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    line = facts.line_of
    float32 = facts.analysis(MatmulPrecisionAnalysis).float32_loop
    sections = {
        "host reads of the loss every training step": [
            f"line {line(read.node)}: `{read.text}` reads `{read.value}`"
            for read in facts.analysis(SyncAnalysis).every_step
        ],
        "tensors made on the host and copied every training step": [
            f"line {line(moved.copy)}: `{moved.factory_text}(...)` to {moved.device}"
            for moved in facts.analysis(HostTensorAnalysis).every_step
        ],
        "training loops on the GPU with nothing deciding about precision (TF32 off)": [
            f"line {line(float32.head)}: `{facts.code(float32.head)}`"
        ]
        if float32
        else [],
        "optimizers built without `fused=` for a loop on the GPU": [
            f"line {line(found.call)}: `{found.name}`" for found in facts.analysis(OptimizerAnalysis).unfused
        ],
        "evaluation loops that run with gradients on": [
            f"line {line(found.call)}: `{found.model}(...)`"
            for found in facts.analysis(EvaluationAnalysis).building_graphs
        ],
        "compiled wrappers' state dicts saved or loaded": [
            f"line {line(found.call)}: `{found.name}.{found.method}(...)`"
            for found in facts.analysis(CheckpointAnalysis).wrapper_state_dicts
        ],
        "grad scalers stepped without an update every iteration": [
            f"line {line(found.step)}: `{found.scaler}`"
            for found in facts.analysis(ScalerAnalysis).steps_without_update
        ],
        "anomaly detection on in training": [
            f"line {line(site.call)}: {site.how}" for site in facts.analysis(DebuggingAnalysis).anomaly_modes
        ],
    }
    out: list[str] = []
    for title, items in sections.items():
        out.append(f"{title}:")
        out += [f"  {item}" for item in items] or ["  (none)"]
    return out
