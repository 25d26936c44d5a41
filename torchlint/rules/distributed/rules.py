"""Distributed training (TL6xx): the ways of spreading training over GPUs that PyTorch's performance tuning
guide advises against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
from torchlint.rules.base import FixAvailability, Rule, no_fix

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.rules.distributed.accumulation import AccumulationAnalysis, NoSyncPlan
    from torchlint.rules.distributed.wrappers import WrapperAnalysis


def _wrappers(facts: ModuleFacts) -> WrapperAnalysis:
    from torchlint.rules.distributed.wrappers import WrapperAnalysis

    return facts.analysis(WrapperAnalysis)


def _accumulation(facts: ModuleFacts) -> AccumulationAnalysis:
    from torchlint.rules.distributed.accumulation import AccumulationAnalysis

    return facts.analysis(AccumulationAnalysis)


class AccumulationWithoutNoSync(Rule):
    code = "TL601"
    name = "ddp-accumulation-without-no-sync"
    speed_advice = True
    fix_availability = FixAvailability.SOMETIMES
    needs_text = ("DistributedDataParallel", "FullyShardedDataParallel", "DDP", "FSDP", "backward")
    messages = {
        "every-micro-batch": (
            "`{backward}` runs on every micro-batch of a `{wrapper}` model while the optimizer steps only "
            "{how}: each backward all-reduces the gradients across the processes; skip that on the "
            "micro-batches that do not step, with `model.no_sync()`"
        ),
    }
    fix_titles = {
        "no-sync": "Skip the all-reduce on the micro-batches that do not step (`{model}.no_sync()`)"
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for found in _accumulation(facts).without_no_sync:
            fix = self._fix(facts, found.plan) if found.plan is not None else None
            reason = (
                "the forward and backward passes of the micro-batches that do not step go under "
                "`with model.no_sync():` (`contextlib.nullcontext()` on the stepping one), which depends "
                "on the loop's shape"
            )
            note = "" if fix else no_fix(reason)
            yield self.report(
                facts,
                found.backward,
                "every-micro-batch",
                fix=fix,
                note=note,
                backward=found.backward_text,
                wrapper=found.wrapper,
                how=found.how,
            )

    def _fix(self, facts: ModuleFacts, plan: NoSyncPlan) -> Fix | None:
        contextlib = build.name_module(facts.source, "contextlib", plan.scope)
        if contextlib is None:
            return None
        name, imports = contextlib
        header = f"{plan.model}.no_sync() if {plan.not_stepping} else {name}.nullcontext()"
        try:
            edit = build.wrap_in_with(facts.source, plan.block, plan.statements, header)
        except build.EditError:
            return None
        return self.fix("no-sync", Applicability.UNSAFE, (edit,), imports, model=plan.model)


class DataParallelInTraining(Rule):
    code = "TL602"
    name = "data-parallel-in-training"
    speed_advice = True
    needs_text = ("DataParallel",)
    messages = {
        "threads": (
            "`{wrapper}` runs `{model}` in one process with a thread per GPU: every step copies the model to "
            "each GPU and scatters and gathers through the first one, and the threads share the GIL; PyTorch "
            "recommends `DistributedDataParallel`, one process per GPU, even on one machine"
        ),
    }

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        for wrap in _wrappers(facts).data_parallel:
            note = no_fix(
                "DistributedDataParallel needs a process per GPU (`torchrun`), a process group and a "
                "`DistributedSampler`"
            )
            yield self.report(
                facts, wrap.callee, "threads", note=note, wrapper=wrap.callee_text, model=wrap.model
            )
