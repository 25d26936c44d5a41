"""`debug facts`, the distributed family's section: the trained models wrapped in `nn.DataParallel`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.distributed.accumulation import AccumulationAnalysis
from torchlint.rules.distributed.wrappers import WrapperAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out = ["gradient accumulation that all-reduces every micro-batch:"]
    for found in facts.analysis(AccumulationAnalysis).without_no_sync:
        out.append(
            f"  line {facts.line_of(found.backward)}: `{found.backward_text}` ({found.wrapper}, {found.how})"
        )
    if len(out) == 1:
        out.append("  (none)")
    out.append("data-parallel wraps in training:")
    for wrap in facts.analysis(WrapperAnalysis).data_parallel:
        out.append(f"  line {facts.line_of(wrap.callee)}: `{wrap.model}` in `{wrap.callee_text}`")
    if out[-1].endswith(":"):
        out.append("  (none)")
    return out
