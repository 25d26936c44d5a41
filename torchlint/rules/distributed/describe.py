"""`debug facts`, the distributed family's section: the trained models wrapped in `nn.DataParallel`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.distributed.wrappers import WrapperAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out = ["data-parallel wraps of trained models:"]
    for wrap in facts.analysis(WrapperAnalysis).data_parallel:
        out.append(f"  line {facts.line_of(wrap.callee)}: `{wrap.model}` in `{wrap.callee_text}`")
    if len(out) == 1:
        out.append("  (none)")
    return out
