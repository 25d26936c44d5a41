"""Debugging aids left on in training: autograd's anomaly mode switched on for good.

`torch.autograd.set_detect_anomaly(True)` (or `mode=True`) called, or `torch.autograd.detect_anomaly()`
entered (`with`, or as a decorator), in a module that trains, on every run: not under an `if` (a
`--detect-anomaly` flag, `if debug:`), except the script's `if __name__ == "__main__":`, and with the
constant `True` (a value the user passes, `set_detect_anomaly(args.debug)`, is theirs to choose).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, read_call
from torchlint.facts.syntax.collect import is_main_guard
from torchlint.facts.torch.models import ModelAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule

SET_DETECT_ANOMALY = frozenset(
    {"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"}
)
DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
SET_SIGNATURE = Signature(("mode", "check_nan"))


@dataclass(frozen=True)
class AnomalyMode:
    """One place anomaly detection is switched on for every run."""

    call: cst.Call
    how: str  # "`torch.autograd.set_detect_anomaly(True)`", "`with torch.autograd.detect_anomaly()`"


class DebuggingAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def anomaly_modes(self) -> list[AnomalyMode]:
        """The calls that keep anomaly detection on, in a module that trains: the calls first, since
        whether a module trains is a cross-file question (the modules its calls reach), and most modules
        never switch it on (each of timm's model files asked it, building the modules they call)."""
        source = self.source
        found = []
        for record in source.calls:
            qualname = source.qualname(record.node.func, record.scope)
            if qualname not in SET_DETECT_ANOMALY and qualname not in DETECT_ANOMALY:
                continue
            if not _always(record):
                continue
            if qualname in SET_DETECT_ANOMALY:
                mode = read_call(source, record.node, record.scope, SET_SIGNATURE).get("mode")
                if mode is None or mode.constant() != (True, True):
                    continue
                found.append(AnomalyMode(record.node, f"`{source.code(record.node)}`"))
            elif self._entered(record.node):
                found.append(AnomalyMode(record.node, f"`with {source.code(record.node)}`"))
        return found if found and source.analysis(ModelAnalysis).trains else []

    @cached_property
    def _entered_calls(self) -> set[int]:
        """The calls that are `with` items or decorators (walked only in a module that calls
        `detect_anomaly`: the collected calls do not say how a call is used)."""
        entered: set[int] = set()

        class Visitor(cst.CSTVisitor):
            def visit_WithItem(self, node: cst.WithItem) -> None:
                entered.add(id(node.item))

            def visit_Decorator(self, node: cst.Decorator) -> None:
                entered.add(id(node.decorator))

        self.source.module.visit(Visitor())
        return entered

    def _entered(self, call: cst.Call) -> bool:
        return id(call) in self._entered_calls


def _always(record: CallRecord) -> bool:
    """Runs on every run of its function: under no `if` but the script's main guard."""
    return all(branch and is_main_guard(test) for test, branch in record.guards)
