"""Mixed precision used where it helps, and used correctly (TL301, TL302, TL305-TL307): the loop on the GPU
that runs in float32, backward passes inside autocast, gradients clipped while still scaled; and the current
API (TL303, TL304: the deprecated `torch.cuda.amp` entry points, from the table in `deprecations.py`).

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
from torchlint.rules.base import FixAvailability, Rule, no_fix
from torchlint.rules.mixed_precision.deprecations import AMP_WORD, DEPRECATED, DEPRECATED_MODULES, Deprecated

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts, Reference
    from torchlint.rules.mixed_precision.precision import PrecisionAnalysis, ScalerPlan
    from torchlint.rules.mixed_precision.sizes import SizeAnalysis
    from torchlint.rules.mixed_precision.steps import StepAnalysis, TrainingStep


def _precision(facts: ModuleFacts) -> PrecisionAnalysis:
    from torchlint.rules.mixed_precision.precision import PrecisionAnalysis

    return facts.analysis(PrecisionAnalysis)


def _steps(facts: ModuleFacts) -> StepAnalysis:
    from torchlint.rules.mixed_precision.steps import StepAnalysis

    return facts.analysis(StepAnalysis)


def _sizes(facts: ModuleFacts) -> SizeAnalysis:
    from torchlint.rules.mixed_precision.sizes import SizeAnalysis

    return facts.analysis(SizeAnalysis)


_FRAMEWORK_NAMES = {"lightning": "Lightning", "accelerate": "accelerate", "transformers": "Hugging Face"}


class TrainingWithoutAutocast(Rule):
    """A training loop that may run on CUDA with its forward and loss under no precision mechanism."""

    code = "TL301"
    name = "training-without-autocast"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    # A backward pass (`.backward(`, `manual_backward`) or a framework object that runs one.
    needs_text = ("backward", "Trainer", "Accelerator", "TrainingArguments", "Config")
    messages = {
        "framework": (
            "`{callee}(...)` trains in full precision: without `{switch}=` the {framework} loop runs float32 "
            "on the GPU; `{switch}={value}` runs matrix math on tensor cores"
        ),
        "float32-forward": (
            "`{callee}(...)` runs the forward pass of a training loop on the GPU in float32: "
            "`torch.autocast` runs matrix math in half precision on tensor cores and roughly halves "
            "activation memory"
        ),
    }
    fix_titles = {
        "switch": "Set `{switch}={value}`",
        "autocast": "Run the forward pass and the loss under `torch.autocast` (bfloat16)",
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla:
            return
        # Each framework trains on the GPU when there is one (unless told otherwise, which the facts exclude).
        for call, callee, framework, switch, value in _precision(facts).framework_gaps:
            fields = {"switch": switch, "value": value}
            edit = build.add_keyword(facts.source, call, switch, value)
            fix = self.fix("switch", Applicability.UNSAFE, (edit,), **fields)
            framework_name = _FRAMEWORK_NAMES[framework]
            yield self.report(
                facts,
                callee,
                "framework",
                fix=fix,
                callee=facts.code(callee),
                framework=framework_name,
                **fields,
            )
        if facts.training.demo_length:
            return  # an API demo of a few steps: its numerics are the point, not its speed
        for loop in facts.training.training_loops:
            # The device of this file, or of the files that call the loop's function when it shows none
            device = facts.callers.loop_device(loop)
            if not (device.may_be_cuda or (self.settings.device == "cuda" and device is Device.UNKNOWN)):
                continue  # CPU-only (or unknown) training: autocast on the GPU does not apply
            if _precision(facts).framework_owns(loop):
                continue  # the framework object's switch is the fix, above
            if _precision(facts).decided_for(loop) or _precision(facts).runs_over_rpc(loop):
                continue  # decided; or the model runs on RPC workers, out of this thread's autocast
            step = _steps(facts).of(loop)
            if step is None:
                continue
            if facts.training.makes_sparse_tensors:
                return  # sparse matmuls (graph nets) have no half-precision kernels for autocast to pick
            if _sizes(facts).too_small(step) is not None:
                continue  # one narrow `nn.Linear`: memory-bound in float32, autocast would only add casts
            reason = _precision(facts).unsafe_under_autocast or step.why_not
            fix = None if reason else self._fix(facts, loop, step)
            note = "" if fix else no_fix(reason or "the statements cannot be wrapped as written")
            yield self.report(
                facts, step.forward, "float32-forward", fix=fix, note=note, callee=facts.code(step.callee)
            )

    def _fix(self, facts: ModuleFacts, loop, step: TrainingStep) -> Fix | None:
        torch = build.name_module(facts.source, "torch", loop.scope)
        if torch is None or step.block is None:
            return None
        name, imports = torch
        # The device the script picks (`device.type`, or `device` when it is a string "cuda" or "cpu") when
        # it may be the CPU ("cuda when available"), so that the CPU path gets CPU autocast instead of a
        # disabled CUDA one and a warning; else "cuda".
        may_be_cpu = facts.callers.loop_device(loop) is not Device.CUDA
        picked = may_be_cpu and _steps(facts).device_type(loop, name)
        device_type = picked or '"cuda"'
        header = f"{name}.autocast(device_type={device_type}, dtype={name}.bfloat16)"
        try:
            edit = build.wrap_in_with(facts.source, step.block, step.region, header)
        except build.EditError:
            return None
        return self.fix("autocast", Applicability.UNSAFE, (edit,), imports)


class BackwardInsideAutocast(Rule):
    """`loss.backward()` inside the autocast block: the AMP docs advise against it."""

    code = "TL305"
    name = "backward-inside-autocast"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("autocast",)
    messages = {
        "inside": (
            "`{backward}` runs inside an autocast block ({autocast}): backward passes under autocast are not "
            "recommended (PyTorch AMP docs); end the block after the loss"
        ),
    }
    fix_titles = {"move-out": "Move the backward pass (and what follows it) out of the autocast block"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _precision(facts).backward_in_autocast():
            call = facts.code(found.call).splitlines()[0]
            fix = None
            if found.block is not None and found.region is not None:
                try:
                    edit = build.move_out_of_with(facts.source, found.block, found.region, found.start)
                except build.EditError:
                    edit = None
                fix = self.fix("move-out", Applicability.UNSAFE, (edit,))
            yield self.report(facts, found.call, "inside", fix=fix, backward=call, autocast=found.site.how)


class ClipGradWithoutUnscale(Rule):
    """Clipping scaled gradients: the threshold applies to gradients multiplied by the loss scale."""

    code = "TL306"
    name = "clip-grad-without-unscale"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("clip_grad",)
    messages = {
        "scaled": (
            "gradients are clipped while still scaled by `{scaler}`: call `{scaler}.unscale_({optimizer})` "
            "before clipping, or the threshold applies to gradients multiplied by the loss scale"
        ),
    }
    fix_titles = {"unscale": "Unscale the gradients first (`{scaler}.unscale_({optimizer})`)"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        # One `unscale_` per step (a second one raises): the step's first clip carries it, placed by the facts
        for found in _precision(facts).clips_without_unscale():
            scaler, optimizer = found.scaler, found.optimizer
            fields = {"scaler": scaler, "optimizer": optimizer}
            fix = None
            if found.before is not None:
                edit = build.statement_before(facts.source, found.before, f"{scaler}.unscale_({optimizer})")
                fix = self.fix("unscale", Applicability.UNSAFE, (edit,), **fields)
            yield self.report(facts, found.clip, "scaled", fix=fix, note=found.note, **fields)


class Fp16AutocastWithoutGradScaler(Rule):
    """float16 autocast in training with no loss scaling: small gradients underflow to zero."""

    code = "TL302"
    name = "fp16-autocast-without-grad-scaler"
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("autocast",)
    messages = {
        "no-scaler": (
            "this autocast runs training in {dtype} with no GradScaler: small gradients underflow to zero in "
            'float16; scale the loss with `torch.amp.GradScaler("cuda")` or use `dtype=torch.bfloat16`'
        ),
    }
    fix_titles = {
        "scaler": 'Scale the loss with `torch.amp.GradScaler("cuda")` (scale, unscale_, step, update)'
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site, loop in _precision(facts).fp16_without_scaler():
            if site.dtype == "float16":
                why = "explicitly" if site.dtype_explicit else "by default on CUDA"
                dtype = f"float16 ({why})"
            else:
                dtype = "float16 on GPUs without bfloat16"
            # a new `scaler` must not take a name bound elsewhere, a star import's included (N3); `unscale_`
            # may run once per step, and some steps have no one place for it (N2)
            plan = _precision(facts).scaler_plan(loop)
            why_not = facts.name_clash("scaler", loop.scope) or (plan.why_not if plan is not None else "")
            fix = None if why_not or plan is None else self._fix(facts, loop, plan)
            yield self.report(facts, site.node, "no-scaler", fix=fix, note=no_fix(why_not), dtype=dtype)

    def _fix(self, facts: ModuleFacts, loop, plan: ScalerPlan) -> Fix | None:
        """A scaler made once before the (outermost) loop; the backward and the step rewritten where they
        are, so accumulation and `zero_grad` keep their places; one `unscale_` before the step's first clip
        (at the place the facts chose: once per step, outside loops that run more than once per step)."""
        torch = build.name_module(facts.source, "torch", loop.scope)
        if torch is None or not facts.name_is_free("scaler", plan.scope):
            return None
        name, imports = torch
        optimizer = facts.code(plan.optimizer)
        unscale = f"scaler.unscale_({optimizer})"
        try:
            edits = [
                build.statement_before(
                    facts.source, plan.outer_loop, f'scaler = {name}.amp.GradScaler("cuda")'
                ),
                build.replace_expression(facts.source, plan.loss, f"scaler.scale({facts.code(plan.loss)})"),
                build.replace_statement(facts.source, plan.step, f"scaler.step({optimizer})"),
                build.statement_after(facts.source, plan.step, "scaler.update()"),
                *(
                    (build.statement_before(facts.source, plan.unscale_before, unscale),)
                    if plan.unscale_before is not None
                    else ()
                ),
            ]
        except build.EditError:
            return None
        return self.fix("scaler", Applicability.UNSAFE, edits, imports)


class GradScalerWithBfloat16(Rule):
    """A GradScaler next to bfloat16 autocast only: needless work, and an error with bfloat16 parameters."""

    code = "TL307"
    name = "grad-scaler-with-bfloat16"
    needs_text = ("GradScaler",)
    messages = {
        "needless": (
            "a GradScaler with bfloat16 autocast only: bfloat16 has float32's range, so gradients do not "
            "underflow and scaling is needless work (and with bfloat16 parameters `unscale_` fails on CUDA, "
            "pytorch/pytorch#127176)"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for scaler in _precision(facts).scalers_with_bfloat16():
            yield self.report(facts, scaler.node, "needless")


class _DeprecatedAmpRule(Rule):
    """Shared detection and rewrite; the two rules differ only in which entry points they own."""

    replacements: frozenset[str] = frozenset()
    fix_availability = FixAvailability.SOMETIMES
    messages = {"deprecated": "`{old}` is deprecated since torch 2.4: use `{use}`"}
    fix_titles = {"replace": "Replace with `{callee}`"}

    @classmethod
    def could_fire(cls, text: str) -> bool:
        # Every spelling of torch.cuda.amp / torch.cpu.amp names the module as a word ("example" does not).
        return "amp" in text and AMP_WORD.search(text) is not None

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        owned = {q: d for q, d in DEPRECATED.items() if d.replacement in self.replacements}
        for ref in facts.references_to(owned):
            old = ref.qualname
            assert old is not None
            new = owned[old]
            if not self.torch_supports(new.since, facts):
                continue
            if facts.source.is_fallback_for(ref.expr, "torch.amp"):
                continue  # the old API where the new one is missing (old torch): it must stay
            shown_old = ".".join(old.split(".")[:3] + [old.rsplit(".", 1)[1]])
            fix, note = self.rewrite(facts, ref, new)
            yield self.report(facts, ref.expr, "deprecated", fix=fix, note=note, old=shown_old, use=_use(new))

    def rewrite(self, facts: ModuleFacts, ref: Reference, new: Deprecated) -> tuple[Fix | None, str]:
        """The fix and, when there is none, why."""
        from_import = ref.bindings[0] if ref.imported_from(DEPRECATED_MODULES) else None
        torch = build.name_module(facts.source, "torch", ref.scope, beside=from_import)
        if torch is None:
            return None, ""
        torch_name, imports = torch
        callee = f"{torch_name}.amp.{new.replacement}"
        try:
            edit = self._rewrite(facts, ref, callee, new)
        except build.EditError:
            return None, ""  # the rewrite cannot be mapped onto the text as written
        if edit is None:
            return None, self._why_no_fix(ref)
        drops = ()
        if ref.imported_from(DEPRECATED_MODULES):
            drop = build.drop_import_if_unused(facts.source, ref.bindings[0])
            drops = (drop,) if drop is not None else ()
        return self.fix("replace", Applicability.SAFE, (edit,), imports, drops, callee=callee), ""

    @staticmethod
    def _rewrite(facts: ModuleFacts, ref: Reference, callee: str, new: Deprecated):
        device = f'"{new.device}"'
        if ref.call is not None and new.device_keyword:
            return build.call_with_keyword_after_positional(
                facts.source, ref.call, callee, new.device_keyword, device
            )
        if ref.call is not None:
            return build.call_with_first_argument(facts.source, ref.call, callee, device, new.old_positional)
        if ref.decorator is not None and new.device_keyword:
            # `@torch.cuda.amp.custom_fwd` becomes `@torch.amp.custom_fwd(device_type="cuda")`
            return build.call_of(facts.source, ref.expr, callee, new.device_keyword, device)
        if ref.in_annotation:
            return build.replace_expression(
                facts.source, ref.expr, callee
            )  # `torch.amp.GradScaler` is its base
        return None

    @staticmethod
    def _why_no_fix(ref: Reference) -> str:
        if ref.call is not None:
            return no_fix("`*args` cannot be mapped onto the new signature")
        return no_fix("it is referenced, not called, and the new API takes the device first")


def _use(new: Deprecated) -> str:
    """What to call instead: `torch.amp.autocast(..., device_type="cuda")`, `torch.amp.GradScaler("cuda",
    ...)`."""
    target = f"torch.amp.{new.replacement}"
    device = f'"{new.device}"'
    if new.device_keyword:
        return f"{target}(..., {new.device_keyword}={device})"
    return f"{target}({device}, ...)"


class DeprecatedAmpAutocast(_DeprecatedAmpRule):
    """`torch.cuda.amp.autocast` and friends: deprecated, one FutureWarning per use."""

    code = "TL303"
    name = "deprecated-amp-autocast"
    replacements = frozenset({"autocast", "custom_fwd", "custom_bwd"})


class DeprecatedGradScaler(_DeprecatedAmpRule):
    """`torch.cuda.amp.GradScaler`: deprecated; `torch.amp.GradScaler` takes the device first."""

    code = "TL304"
    name = "deprecated-grad-scaler"
    replacements = frozenset({"GradScaler"})
