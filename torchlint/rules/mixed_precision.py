"""Mixed precision used where it helps, and used correctly (TL301, TL305, TL306): the loop on the GPU that
runs in float32, backward passes inside autocast, gradients clipped while still scaled.

The policies follow PyTorch's "Automatic Mixed Precision" docs (torch.amp, checked on torch 2.13):
- autocast should wrap only the forward pass and the loss computation; "backward passes under autocast are
  not recommended" (the backward ops run in the dtype autocast chose for the forward ones anyway);
- with a GradScaler, gradients are scaled until `scaler.step`: "if you wish to modify or inspect the
  parameters' .grad attributes between backward() and scaler.step(optimizer), you should unscale them
  first" — clipping included.
TL301 stays silent wherever the code shows any decision about precision (facts: `precision_evidence`), since
claiming AMP is missing where a flag, a helper or a framework supplies it is the costliest mistake here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.facts import Device
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts, TrainingStep

_FRAMEWORK_NAMES = {"lightning": "Lightning", "accelerate": "accelerate", "transformers": "Hugging Face"}


class TrainingWithoutAutocast(Rule):
    """A training loop that may run on CUDA with its forward and loss under no precision mechanism."""

    code = "TL301"
    name = "training-without-autocast"
    fix_availability = FixAvailability.SOMETIMES
    # A backward pass (`.backward(`, `manual_backward`) or a framework object that runs one.
    needs_text = ("backward", "Trainer", "Accelerator", "TrainingArguments", "Config")

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla:
            return
        # Each framework trains on the GPU when there is one (unless told otherwise, which the facts exclude).
        for call, callee, framework, switch, value in facts.framework_precision_gaps():
            owner = _FRAMEWORK_NAMES[framework]
            message = (
                f"`{facts.code(callee)}(...)` trains in full precision: without `{switch}=` the {owner} "
                f"loop runs float32 on the GPU; `{switch}={value}` runs matrix math on tensor cores"
            )
            edit = build.add_keyword(facts.source, call, switch, value)
            fix = Fix(f"Set `{switch}={value}`", Applicability.UNSAFE, (edit,)) if edit else None
            yield self.finding(facts, callee, message, fix)
        if facts.frameworks & {"lightning", "accelerate"}:
            return  # the framework object's switch is the fix, above
        device = facts.device.device
        if not (device.may_be_cuda or (self.settings.device == "cuda" and device is Device.UNKNOWN)):
            return  # CPU-only (or unknown) training: autocast on the GPU does not apply
        if facts.is_test_module:
            return  # a test trains to check numerics (an optimizer's convergence): autocast would change them
        for loop in facts.training_loops:
            if facts.precision_decided(loop):
                continue
            step = facts.training_step(loop)
            if step is None:
                continue
            message = (
                f"`{facts.code(step.callee)}(...)` runs the forward pass of a training loop on the GPU "
                "in float32: `torch.autocast` runs matrix math in half precision on tensor cores and "
                "roughly halves activation memory"
            )
            reason = facts.unsafe_under_autocast or step.why_not
            fix = None if reason else self._fix(facts, loop, step)
            if fix is None:
                message += f" (no automatic fix: {reason or 'the statements cannot be wrapped as written'})"
            yield self.finding(facts, step.forward, message, fix)

    def _fix(self, facts: ModuleFacts, loop, step: TrainingStep) -> Fix | None:
        torch = build.name_module(facts.source, "torch", loop.scope)
        if torch is None or step.block is None:
            return None
        name, imports = torch
        header = f'{name}.autocast(device_type="cuda", dtype={name}.bfloat16)'
        try:
            edit = build.wrap_in_with(facts.source, step.block, step.region, header)
        except build.EditError:
            return None
        if edit is None:
            return None
        title = "Run the forward pass and the loss under `torch.autocast` (bfloat16)"
        return Fix(title, Applicability.UNSAFE, (edit,), imports)
