"""`debug facts`, the mixed precision family's section: autocast sites and regions, scalers, other
precision switches and flags, and each training loop's device and forward-and-loss region."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.mixed_precision.precision import EvidenceKind, PrecisionAnalysis
from torchlint.rules.mixed_precision.sizes import SizeAnalysis
from torchlint.rules.mixed_precision.steps import StepAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    out: list[str] = []
    line = facts.line_of
    precision = facts.analysis(PrecisionAnalysis)
    steps = facts.analysis(StepAnalysis)
    sizes = facts.analysis(SizeAnalysis)
    out.append("precision:")
    for site in precision.autocast_sites:
        dtype = site.dtype + ("" if site.dtype_explicit else " (the device's default)")
        out.append(
            f"  line {line(site.node)}: autocast ({site.how}), device {site.device}, dtype {dtype}, "
            f"enabled {site.enabled}"
        )
    for site, _ in precision.regions:
        if site.call is None and site.how.startswith("parameter"):  # the others are listed above
            out.append(
                f"  line {line(site.node)}: autocast region ({site.how}), device {site.device}, dtype "
                f"{site.dtype}, enabled {site.enabled}"
            )
    for scaler in precision.scalers:
        held = f" as `{scaler.name}`" if scaler.name else ""
        uses = ", ".join(f"{method} x{len(calls)}" for method, calls in sorted(scaler.uses.items()))
        out.append(
            f"  line {line(scaler.node)}: scaler {scaler.how}{held}, enabled {scaler.enabled}; "
            f"used: {uses or 'never'}"
        )
    for switch in precision.switches:
        out.append(f"  line {line(switch.node)}: {switch.what}")
    flags = [(e.node, e.what) for e in precision.evidence if e.kind is EvidenceKind.FLAG]
    if flags:
        shown = ", ".join(f"{what} (line {line(node)})" for node, what in flags[:5])
        more = f" and {len(flags) - 5} more" if len(flags) > 5 else ""
        out.append(f"  flags: {shown}{more}")
    if not precision.evidence:
        out.append("  (none)")
    if precision.unsafe_under_autocast:  # why TL301 offers no autocast fix in this module
        out.append(f"  no autocast fix: {precision.unsafe_under_autocast}")
    for loop in facts.training.training_loops:
        device = facts.callers.loop_device(loop)
        if device is not facts.device.device:
            said = f"trains on {device.label}, as the files calling it say"
            out.append(f"  loop at line {line(loop.node)}: {said}")
        step = steps.of(loop)
        if step is None:
            continue
        region = f"lines {line(step.region[0])}-{line(step.region[-1])}" if step.region else step.why_not
        out.append(
            f"  loop at line {line(loop.node)}: forward `{facts.code(step.callee)}` at line "
            f"{line(step.forward)}; forward and loss: {region}"
        )
        layer = sizes.too_small(step)
        if layer is not None:
            # the layer may be built in another file (a caller's): its text says which, not a line here
            built = " ".join(facts.code(layer).split())
            out.append(f"    its model is one narrow layer, `{built}`: memory-bound in float32")
    return out
