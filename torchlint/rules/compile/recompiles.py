"""A compiled optimizer step whose float learning rate a scheduler changes (TL107).

Dynamo reads `param_groups[i]["lr"]` inside `optimizer.step()`. Before torch 2.6 it specialised every Python
float it read: the compiled step carries a guard `lr == 0.0003`, each scheduler step fails it, and the step
is compiled again, until the recompile limit (8) after which it runs uncompiled. Measured here on torch 2.13
with `torch._dynamo.config.specialize_float = True` (the old default): a `LinearLR` over 5 epochs recompiled
the step 4 times; with the default of 2.6 and later (floats traced as symbols), once. PyTorch's recipe
"Running the compiled optimizer with an LR Scheduler" wraps the learning rate in a tensor, which Dynamo
treats as a graph input: no guard on its value.

So only a project on torch older than 2.6 (the `torch-version` setting, or the torch its dependency files
pin) is told; the current torch pays one recompile.

A compiled step is a function decorated with `@torch.compile` that calls `<optimizer>.step()`, or
`torch.compile(<optimizer>.step)`; the optimizer is built from `torch.optim` with `lr=` (or the second
positional argument) anything but a tensor made on the spot (`torch.tensor(0.01)`), or without one (the
default is a float); a scheduler changes it when `torch.optim.lr_scheduler.*` or a `transformers` schedule
is built over that same optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import positional_and_keywords
from torchlint.facts.torch.models import ModelAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

TENSOR_MAKERS = frozenset(
    {"torch.tensor", "torch.as_tensor", "torch.scalar_tensor", "torch.full", "torch.ones"}
)
SCHEDULE_PREFIXES = ("torch.optim.lr_scheduler.", "transformers.optimization.", "transformers.get_")


@dataclass(frozen=True)
class RecompilingStep:
    site: cst.CSTNode  # the decorator or the `torch.compile(...)` call: where the finding goes
    optimizer: str  # the optimizer as the code names it
    scheduler: str  # the scheduler's constructor as written


class RecompileAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def recompiling_steps(self) -> list[RecompilingStep]:
        found = []
        for site in self.source.analysis(ModelAnalysis).compile_sites:
            for receiver, scope in self._compiled_steps(site):
                built = self._optimizer_built(receiver, scope)
                if built is None or not self._float_lr(*built):
                    continue
                scheduler = self._scheduler_of(self.source.code(receiver))
                if scheduler:
                    found.append(RecompilingStep(site.node, self.source.code(receiver), scheduler))
        return found

    def _compiled_steps(self, site):
        """The receivers of the `.step()` calls a compile site compiles, with their scopes."""
        if site.compiled is not None and site.call is not None:  # `torch.compile(optimizer.step)`
            compiled = site.compiled
            if isinstance(compiled, cst.Attribute) and compiled.attr.value == "step":
                yield compiled.value, site.call.scope
            return
        function = self.source.decorated_by(site.node)
        for call in function.calls if function is not None else ():
            func = call.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step" and not call.node.args:
                yield func.value, call.scope

    def _optimizer_built(self, receiver: cst.BaseExpression, scope: Scope) -> tuple[cst.Call, Scope] | None:
        """The `torch.optim` construction the receiver is bound to, on every path, and its scope."""
        assignments = self.source.assignments(receiver, scope) or []
        built = [a for a in assignments if isinstance(a.value, cst.Call)]
        if not built or len(built) != len(assignments):
            return None
        for assignment in built:
            qualname = self.source.qualname(assignment.value.func, assignment.scope) or ""
            if not qualname.startswith("torch.optim.") or "lr_scheduler" in qualname:
                return None
        return built[0].value, built[0].scope

    def _float_lr(self, optimizer: cst.Call, scope: Scope) -> bool:
        positional, keywords = positional_and_keywords(optimizer)
        lr = keywords.get("lr", positional[1] if len(positional) > 1 else None)
        if lr is None:
            return not any(arg.star for arg in optimizer.args)  # the default is a float; `**kw` may pass one
        values = [lr]
        if isinstance(lr, cst.Name):
            values += [a.value for a in self.source.assignments(lr, scope) or []]
        return not any(
            isinstance(value, cst.Call) and self.source.qualname(value.func, scope) in TENSOR_MAKERS
            for value in values
        )

    def _scheduler_of(self, optimizer: str) -> str:
        """The constructor of a scheduler built over the optimizer named `optimizer` (as written)."""
        for call in self.source.calls:
            qualname = self.source.qualname(call.node.func, call.scope) or ""
            if not qualname.startswith(SCHEDULE_PREFIXES) or not self._over(call, optimizer):
                continue
            return self.source.code(call.node.func)
        return ""

    def _over(self, call: CallRecord, optimizer: str) -> bool:
        positional, keywords = positional_and_keywords(call.node)
        given = keywords.get("optimizer", positional[0] if positional else None)
        return given is not None and self.source.code(given) == optimizer
