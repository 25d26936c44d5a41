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

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if facts.runs_on_xla:
            return  # lazy XLA tensors: every read runs a graph of its own, a different trade-off
        for read in _syncs(facts).every_step:
            message = (
                f"`{read.text}` reads `{read.value}` from the GPU every training step: the CPU waits for "
                "the step's GPU work to finish before it can queue the next one"
            )
            total = _running_totals(facts).of(read.node, read.loop) if read.loop is not None else None
            if total is not None:
                yield self.finding(facts, read.node, message, self._fix(facts, total))
                continue
            note = no_fix(
                f"keep a running total on the device (`total += {read.value}.detach()`) and read it once per "
                "log interval (`if step % log_every == 0:`)"
            )
            yield self.finding(facts, read.node, message, note=note)

    def _fix(self, facts: ModuleFacts, total: RunningTotal) -> Fix:
        edits = [build.replace_expression(facts.source, total.read, f"{total.operand}.detach().float()")]
        edits += [
            build.replace_expression(facts.source, load, f"float({total.total})") for load in total.loads
        ]
        title = f"Keep `{total.total}` on the device; read it with `float({total.total})`"
        return Fix(title, Applicability.UNSAFE, tuple(edits))


class HostTensorMovedEveryStep(Rule):
    code = "TL507"
    name = "host-tensor-moved-every-step"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = (".to(", ".cuda(")

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for moved in _host_tensors(facts).every_step:
            message = (
                f"`{moved.factory_text}(...)` builds a tensor on the CPU and copies it to the GPU every "
                f"training step: create it there with `device={moved.device}`"
            )
            safety = Applicability.UNSAFE if moved.random else Applicability.SAFE
            edit = build.call_replacing(facts.source, moved.copy, moved.factory, "device", moved.device)
            fix = (
                Fix(f"Create it with `device={moved.device}`", safety, (edit,)) if edit is not None else None
            )
            yield self.finding(facts, moved.copy, message, fix)


class Float32MatmulWithoutTf32(Rule):
    code = "TL504"
    name = "float32-matmul-without-tf32"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("backward",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla or not self.torch_supports((1, 12), facts):
            return  # before torch 1.12, TF32 matmuls were on by default
        found = _matmul_precision(facts).float32_loop
        if found is None:
            return
        message = (
            "this training loop may run on the GPU in float32 with TF32 off (torch's default): matrix "
            "multiplications (`nn.Linear`, attention) run at full float32 precision instead of on the tensor "
            "cores of Ampere and later GPUs"
        )
        fix, reason = self._fix(facts, found)
        yield self.finding(facts, found.head, message, fix, note=no_fix(reason) if reason else "")

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
        title = 'Allow TF32 matmuls: `torch.set_float32_matmul_precision("high")` before the loop'
        return Fix(title, Applicability.UNSAFE, (edit,), imports), ""


class OptimizerNotFused(Rule):
    code = "TL505"
    name = "optimizer-not-fused"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("optim",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        if self.settings.device == "cpu" or facts.runs_on_xla or not self.torch_supports((2, 0), facts):
            return
        for found in _optimizers(facts).unfused:
            callee = facts.code(found.callee)
            message = (
                f"`{callee}(...)` updates parameters on the GPU without `fused=True`: torch's default "
                f"multi-tensor {found.name} launches several kernels per step where the fused one launches "
                "one per group of tensors"
            )
            if not self.torch_supports((2, 4), facts):
                reason = "fused kernels for every device need torch 2.4 (see the `torch-version` setting)"
                yield self.finding(facts, found.callee, message, note=no_fix(reason))
                continue
            edit = build.add_keyword(facts.source, found.call, "fused", "True")
            fix = Fix("Set `fused=True`", Applicability.UNSAFE, (edit,)) if edit is not None else None
            yield self.finding(facts, found.callee, message, fix)


class EvaluationBuildsGraphs(Rule):
    code = "TL502"
    name = "evaluation-builds-graphs"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = (".eval()",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _evaluation(facts).building_graphs:
            message = (
                f"`{found.model}(...)` runs in an evaluation loop (`{found.model}.eval()`, no backward pass) "
                "with gradients on: every forward records the autograd graph and keeps its activations for a "
                "backward that never comes"
            )
            yield self.finding(facts, found.call, message, self._fix(facts, found))

    def _fix(self, facts: ModuleFacts, found: GraphInEvaluation) -> Fix | None:
        if found.block is None:
            return None
        torch = build.name_module(facts.source, "torch", found.scope)
        if torch is None:
            return None
        name, imports = torch
        edit = build.wrap_in_with(facts.source, found.block, [found.loop], f"{name}.no_grad()")
        if edit is None:
            return None
        return Fix(f"Run the loop under `{name}.no_grad()`", Applicability.UNSAFE, (edit,), imports)


class CompiledWrapperStateDict(Rule):
    code = "TL503"
    name = "compiled-wrapper-state-dict"
    needs_text = ("state_dict",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _checkpoints(facts).wrapper_state_dicts:
            line = facts.line_of(found.compile_site)
            message = (
                f"`{found.name}.{found.method}(...)` uses the compiled wrapper `{found.name}` (bound by the "
                f"compile at line {line}): its keys start with `_orig_mod.`, so checkpoints do not load "
                "across compiled and uncompiled models"
            )
            note = no_fix(
                f"compile in place (`{found.name}.compile()` keeps the keys), or save and load "
                f"`{found.name}._orig_mod`'s state dict"
            )
            yield self.finding(facts, found.call, message, note=note)


class GradScalerStepWithoutUpdate(Rule):
    code = "TL506"
    name = "grad-scaler-step-without-update"
    needs_text = ("scaler",)

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _scalers(facts).steps_without_update:
            when = (
                "never runs in the loop"
                if found.update is None
                else f"runs only on some iterations (line {facts.line_of(found.update)})"
            )
            message = (
                f"`{found.scaler}.step(...)` runs every iteration but `{found.scaler}.update()` {when}: the "
                "loss scale never adapts, so every overflow skips its step again at the same scale"
            )
            note = no_fix(
                f"call `{found.scaler}.update()` right after `{found.scaler}.step(...)`, every iteration"
            )
            yield self.finding(facts, found.step, message, note=note)


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
