"""PyTorch's performance tuning guide (TL5xx): what a training loop does that costs time for nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.tuning_guide.checkpoints import CheckpointAnalysis
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis
    from torchlint.rules.tuning_guide.graphs import EvaluationAnalysis, GraphInEvaluation
    from torchlint.rules.tuning_guide.host_tensors import HostTensorAnalysis
    from torchlint.rules.tuning_guide.matmul_precision import Float32Loop, MatmulPrecisionAnalysis
    from torchlint.rules.tuning_guide.optimizers import OptimizerAnalysis
    from torchlint.rules.tuning_guide.running_totals import RunningTotal, RunningTotalAnalysis
    from torchlint.rules.tuning_guide.scalers import ScalerAnalysis
    from torchlint.rules.tuning_guide.syncs import SyncAnalysis


def _syncs(facts: ModuleFacts) -> SyncAnalysis:
    from torchlint.rules.tuning_guide.syncs import SyncAnalysis

    return facts.analysis(SyncAnalysis)


def _running_totals(facts: ModuleFacts) -> RunningTotalAnalysis:
    from torchlint.rules.tuning_guide.running_totals import RunningTotalAnalysis

    return facts.analysis(RunningTotalAnalysis)


def _host_tensors(facts: ModuleFacts) -> HostTensorAnalysis:
    from torchlint.rules.tuning_guide.host_tensors import HostTensorAnalysis

    return facts.analysis(HostTensorAnalysis)


def _matmul_precision(facts: ModuleFacts) -> MatmulPrecisionAnalysis:
    from torchlint.rules.tuning_guide.matmul_precision import MatmulPrecisionAnalysis

    return facts.analysis(MatmulPrecisionAnalysis)


def _optimizers(facts: ModuleFacts) -> OptimizerAnalysis:
    from torchlint.rules.tuning_guide.optimizers import OptimizerAnalysis

    return facts.analysis(OptimizerAnalysis)


def _evaluation(facts: ModuleFacts) -> EvaluationAnalysis:
    from torchlint.rules.tuning_guide.graphs import EvaluationAnalysis

    return facts.analysis(EvaluationAnalysis)


def _checkpoints(facts: ModuleFacts) -> CheckpointAnalysis:
    from torchlint.rules.tuning_guide.checkpoints import CheckpointAnalysis

    return facts.analysis(CheckpointAnalysis)


def _scalers(facts: ModuleFacts) -> ScalerAnalysis:
    from torchlint.rules.tuning_guide.scalers import ScalerAnalysis

    return facts.analysis(ScalerAnalysis)


def _debugging(facts: ModuleFacts) -> DebuggingAnalysis:
    from torchlint.rules.tuning_guide.debugging import DebuggingAnalysis

    return facts.analysis(DebuggingAnalysis)


class HostSyncEveryStep(Rule):
    code = "TL501"
    name = "host-sync-every-step"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("backward",)
    messages = {
        "every-step": (
            "`{read}` reads `{value}` from the GPU every training step: the CPU waits for the step's GPU "
            "work to finish before it can queue the next one"
        ),
    }
    fix_titles = {"running-total": "Keep `{total}` on the device; read it with `float({total})`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if facts.runs_on_xla:
            return  # lazy XLA tensors: every read runs a graph of its own, a different trade-off
        for read in _syncs(facts).every_step:
            fields = {"read": read.text, "value": read.value}
            total = _running_totals(facts).of(read.node, read.loop) if read.loop is not None else None
            if total is not None:
                yield self.report(facts, read.node, "every-step", fix=self._fix(facts, total), **fields)
                continue
            note = no_fix(
                f"keep a running total on the device (`total += {read.value}.detach()`) and read it once per "
                "log interval (`if step % log_every == 0:`)"
            )
            yield self.report(facts, read.node, "every-step", note=note, **fields)

    def _fix(self, facts: ModuleFacts, total: RunningTotal) -> Fix | None:
        edits = [build.replace_expression(facts.source, total.read, f"{total.operand}.detach().float()")]
        edits += [
            build.replace_expression(facts.source, load, f"float({total.total})") for load in total.loads
        ]
        return self.fix("running-total", Applicability.UNSAFE, edits, total=total.total)


class HostTensorMovedEveryStep(Rule):
    code = "TL507"
    name = "host-tensor-moved-every-step"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = (".to(", ".cuda(")
    messages = {
        "every-step": (
            "`{factory}(...)` builds a tensor on the CPU and copies it to the GPU every training step: "
            "create it there with `device={device}`"
        ),
    }
    fix_titles = {"on-the-device": "Create it with `device={device}`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for moved in _host_tensors(facts).every_step:
            safety = Applicability.UNSAFE if moved.random else Applicability.SAFE
            edit = build.call_replacing(facts.source, moved.copy, moved.factory, "device", moved.device)
            fix = self.fix("on-the-device", safety, (edit,), device=moved.device)
            yield self.report(
                facts, moved.copy, "every-step", fix=fix, factory=moved.factory_text, device=moved.device
            )


class Float32MatmulWithoutTf32(Rule):
    code = "TL504"
    name = "float32-matmul-without-tf32"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("backward",)
    messages = {
        "float32": (
            "this training loop may run on the GPU in float32 with TF32 off (torch's default): matrix "
            "multiplications (`nn.Linear`, attention) run at full float32 precision instead of on the tensor "
            "cores of Ampere and later GPUs"
        ),
    }
    fix_titles = {"high": 'Allow TF32 matmuls: `torch.set_float32_matmul_precision("high")` before the loop'}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla or not self.torch_supports((1, 12), facts):
            return  # before torch 1.12, TF32 matmuls were on by default
        found = _matmul_precision(facts).float32_loop
        if found is None:
            return
        fix, reason = self._fix(facts, found)
        yield self.report(facts, found.head, "float32", fix=fix, note=no_fix(reason) if reason else "")

    def _fix(self, facts: ModuleFacts, found: Float32Loop) -> tuple[Fix | None, str]:
        torch = build.name_module(facts.source, "torch", found.loop.scope)
        if torch is None:
            return None, "the name `torch` means something else here"
        name, imports = torch
        edit = build.statement_before(
            facts.source, found.statement, f'{name}.set_float32_matmul_precision("high")'
        )
        if edit is None:
            return None, "the loop shares its line with other code"
        return self.fix("high", Applicability.UNSAFE, (edit,), imports), ""


class OptimizerNotFused(Rule):
    code = "TL505"
    name = "optimizer-not-fused"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("optim",)
    messages = {
        "unfused": (
            "`{callee}(...)` updates parameters on the GPU without `fused=True`: torch's default "
            "multi-tensor {optimizer} launches several kernels per step where the fused one launches one per "
            "group of tensors"
        ),
    }
    fix_titles = {"fused": "Set `fused=True`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla or not self.torch_supports((2, 0), facts):
            return
        for found in _optimizers(facts).unfused:
            fields = {"callee": facts.code(found.callee), "optimizer": found.name}
            if not self.torch_supports((2, 4), facts):
                reason = "fused kernels for every device need torch 2.4 (see the `torch-version` setting)"
                yield self.report(facts, found.callee, "unfused", note=no_fix(reason), **fields)
                continue
            edit = build.add_keyword(facts.source, found.call, "fused", "True")
            fix = self.fix("fused", Applicability.UNSAFE, (edit,))
            yield self.report(facts, found.callee, "unfused", fix=fix, **fields)


class EvaluationBuildsGraphs(Rule):
    code = "TL502"
    name = "evaluation-builds-graphs"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = (".eval()",)
    messages = {
        "gradients-on": (
            "`{model}(...)` runs in an evaluation loop (`{model}.eval()`, no backward pass) with gradients "
            "on: every forward records the autograd graph and keeps its activations for a backward that "
            "never comes"
        ),
    }
    fix_titles = {"no-grad": "Run the loop under `{torch}.no_grad()`"}

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _evaluation(facts).building_graphs:
            yield self.report(
                facts, found.call, "gradients-on", fix=self._fix(facts, found), model=found.model
            )

    def _fix(self, facts: ModuleFacts, found: GraphInEvaluation) -> Fix | None:
        if found.block is None:
            return None
        torch = build.name_module(facts.source, "torch", found.scope)
        if torch is None:
            return None
        name, imports = torch
        edit = build.wrap_in_with(facts.source, found.block, [found.loop], f"{name}.no_grad()")
        return self.fix("no-grad", Applicability.UNSAFE, (edit,), imports, torch=name)


class CompiledWrapperStateDict(Rule):
    code = "TL503"
    name = "compiled-wrapper-state-dict"
    needs_text = ("state_dict",)
    messages = {
        "wrapper-keys": (
            "`{wrapper}.{method}(...)` uses the compiled wrapper `{wrapper}` (bound by the compile at line "
            "{line}): its keys start with `_orig_mod.`, so checkpoints do not load across compiled and "
            "uncompiled models"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _checkpoints(facts).wrapper_state_dicts:
            note = no_fix(
                f"compile in place (`{found.name}.compile()` keeps the keys), or save and load "
                f"`{found.name}._orig_mod`'s state dict"
            )
            yield self.report(
                facts,
                found.call,
                "wrapper-keys",
                note=note,
                wrapper=found.name,
                method=found.method,
                line=facts.line_of(found.compile_site),
            )


class GradScalerStepWithoutUpdate(Rule):
    code = "TL506"
    name = "grad-scaler-step-without-update"
    needs_text = ("scaler",)
    messages = {
        "never-updated": (
            "`{scaler}.step(...)` runs every iteration but `{scaler}.update()` never runs in the loop: the "
            "loss scale never adapts, so every overflow skips its step again at the same scale"
        ),
        "sometimes-updated": (
            "`{scaler}.step(...)` runs every iteration but `{scaler}.update()` runs only on some iterations "
            "(line {line}): the loss scale never adapts, so every overflow skips its step again at the same "
            "scale"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _scalers(facts).steps_without_update:
            note = no_fix(
                f"call `{found.scaler}.update()` right after `{found.scaler}.step(...)`, every iteration"
            )
            if found.update is None:
                yield self.report(facts, found.step, "never-updated", note=note, scaler=found.scaler)
            else:
                line = facts.line_of(found.update)
                yield self.report(
                    facts, found.step, "sometimes-updated", note=note, scaler=found.scaler, line=line
                )


class AnomalyDetectionInTraining(Rule):
    code = "TL508"
    name = "anomaly-detection-in-training"
    speed_advice = True
    needs_text = ("anomaly",)
    messages = {
        "on-in-training": (
            "{switch} keeps autograd's anomaly detection on in training: every backward checks each "
            "operation's result for NaN and keeps the traceback of its forward, a debugging aid that slows "
            "every step"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for site in _debugging(facts).anomaly_modes:
            note = no_fix("it was switched on on purpose: remove it, or put it behind a debug flag")
            yield self.report(facts, site.call, "on-in-training", note=note, switch=site.how)
