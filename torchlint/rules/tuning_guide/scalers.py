"""A GradScaler stepped without being updated: `scaler.step(optimizer)` in a training loop with no
`scaler.update()` on the same scaler in that iteration, or with the update under an `if` whose test changes
from one iteration to the next while the step is not (`if step % 100 == 0: scaler.update()`).

Without `update()` the scale never grows back after an overflow, and never shrinks after the next one:
every step whose gradients overflow is skipped at the same scale again (float16 training stalls), and the
one after a skipped step is not re-checked. The scaler is named by the receiver of `step` (`scaler`,
`self.scaler`); an update through another name of the same object is not followed, so a loop that hands
the scaler to a helper (`finish_step(scaler)`) is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.iterations import assigned_in, dotted_name, varies
from torchlint.facts.syntax.walk import descendants, statements
from torchlint.facts.torch.training import TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule


@dataclass(frozen=True)
class UnupdatedStep:
    step: cst.Call  # `scaler.step(optimizer)`: where the finding goes
    scaler: str  # "scaler", "self.scaler"
    update: cst.Call | None  # the update under a varying `if`, when there is one


class ScalerAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def steps_without_update(self) -> list[UnupdatedStep]:
        found: list[UnupdatedStep] = []
        for loop in self.source.analysis(TrainingAnalysis).training_loops:
            calls = list(loop.all_calls())
            varying = self._varying_tests(loop)
            for record in calls:
                scaler = _scaler_step(record.node)
                if scaler is None or _handed_over(scaler, calls):
                    continue
                updates = [r for r in calls if _is_update_of(r.node, scaler)]
                if not updates:
                    found.append(UnupdatedStep(record.node, scaler, None))
                    continue
                step_guards = {id(test) for test, _ in record.guards}
                sometimes = [
                    update
                    for update in updates
                    if any(id(test) in varying and id(test) not in step_guards for test, _ in update.guards)
                ]
                if len(sometimes) == len(updates):
                    found.append(UnupdatedStep(record.node, scaler, sometimes[0].node))
        return found

    def _varying_tests(self, loop: LoopRecord) -> set[int]:
        assigned = assigned_in(loop.node)
        return {
            id(statement.test)
            for statement in statements(loop.node.body)
            if isinstance(statement, cst.If) and varies(statement.test, assigned)
        }


def _scaler_step(call: cst.Call) -> str | None:
    """`scaler.step(optimizer)`: the scaler's name; None for other calls (`optimizer.step()` takes none)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step" or len(call.args) != 1:
        return None
    receiver = dotted_name(func.value)
    if receiver is None or "scaler" not in receiver.rpartition(".")[2].lower():
        return None
    return receiver


def _is_update_of(call: cst.Call, scaler: str) -> bool:
    func = call.func
    return (
        isinstance(func, cst.Attribute) and func.attr.value == "update" and dotted_name(func.value) == scaler
    )


def _handed_over(scaler: str, calls: list[CallRecord]) -> bool:
    """The scaler is passed to a call in the loop (a helper may update it)."""
    for record in calls:
        for arg in record.node.args:
            if any(dotted_name(node) == scaler for node in descendants(arg.value)):
                return True
    return False
