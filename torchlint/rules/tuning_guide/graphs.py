"""Evaluation that builds autograd graphs: a function that puts a model in evaluation mode (`model.eval()`)
and calls it in a loop with gradients on.

`model.eval()` switches dropout and batch norm to inference; it does not stop autograd, which records every
operation of the forward and keeps its activations for a backward that never comes. The function counts when
it calls `R.eval()` and, in a loop, `R(...)`, and nothing in it differentiates (no backward pass, optimizer
step, `torch.autograd.grad`, `requires_grad_`, `torch.enable_grad`). It is left alone when gradients are off
where the call runs: a `with torch.no_grad():` / `torch.inference_mode()` / `torch.set_grad_enabled(False)`
around it in the function, a decorator of the function (`@torch.no_grad()`), a grad-free block around a call
of the function (in its module or a module importing it), or `torch.set_grad_enabled(False)` anywhere in the
module. A function no visible code calls (a framework's hook, an entry point of a library) is left alone:
its caller may turn gradients off.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.iterations import dotted_name
from torchlint.facts.syntax.walk import calls_in, statements
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.evaluation import grad_free
from torchlint.facts.torch.training import BACKWARD, STEP, TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import FunctionRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

DIFFERENTIATING = frozenset({"backward", "requires_grad_", "grad", "enable_grad", "manual_backward"})
GRAD_FREE_DECORATORS = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


@dataclass(frozen=True)
class GraphInEvaluation:
    """A forward call of an evaluated model in a loop with gradients on."""

    call: cst.Call  # `model(inputs)`: where the finding goes
    model: str  # "model", "self.model"
    loop: cst.For | cst.While  # the function's outermost loop around the call: what the fix wraps
    block: cst.BaseSuite | None  # the block holding that loop (None: the fix cannot place the `with`)
    scope: Scope  # the function's scope (the fix names torch there)


class EvaluationAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def building_graphs(self) -> list[GraphInEvaluation]:
        source = self.source
        if self._grad_off_for_the_module():
            return []
        training = source.analysis(TrainingAnalysis)
        found: list[GraphInEvaluation] = []
        for function in source.functions:
            evaluated = {
                receiver for record in function.calls if (receiver := _eval_receiver(record.node)) is not None
            }
            if not evaluated or not function.loops or self._decorated_grad_free(function):
                continue
            # Local questions first: what differentiates and who calls the function may read other files.
            free = self._calls_without_gradients(function.node, function.scope)
            forwards = [
                (loop, record)
                for loop in function.loops
                for record in loop.calls
                if dotted_name(record.node.func) in evaluated and id(record.node) not in free
            ]
            if not forwards or self._differentiates(function, training):
                continue
            if not self._called_with_gradients(function):
                continue
            for loop, record in forwards:
                if any(other.call is record.node for other in found):
                    continue
                outer = _outermost(loop, function)
                block = _block_holding(function.node, outer.node)
                name = dotted_name(record.node.func) or ""
                found.append(GraphInEvaluation(record.node, name, outer.node, block, function.scope))
        return found

    # -- where gradients are off ------------------------------------------------------------------------

    def _grad_off_for_the_module(self) -> bool:
        """`torch.set_grad_enabled(False)` called as a statement of its own anywhere in the module."""
        source = self.source
        for record in source.calls:
            if (source.qualname(record.node.func, record.scope) or "") in SET_GRAD and record.node.args:
                first = record.node.args[0].value
                if isinstance(first, cst.Name) and first.value == "False":
                    return True
        return False

    def _decorated_grad_free(self, function: FunctionRecord) -> bool:
        source = self.source
        scope = function.scope.parent or source.module_scope
        for decorator in function.node.decorators:
            expr = decorator.decorator
            func = expr.func if isinstance(expr, cst.Call) else expr
            if (source.qualname(func, scope) or "") in GRAD_FREE_DECORATORS or _says_grad_free(func):
                return True
        return False

    def _calls_without_gradients(
        self, node: cst.CSTNode, scope: Scope, module: SourceModule | None = None
    ) -> set[int]:
        """The calls inside grad-free `with` blocks below `node`."""
        module = module or self.source
        free: set[int] = set()
        for statement in statements(node):
            if isinstance(statement, cst.With) and (
                grad_free(module, statement, scope) or _named_grad_free(statement)
            ):
                free.update(id(call) for call in calls_in(statement.body))
        return free

    def _called_with_gradients(self, function: FunctionRecord) -> bool:
        """Some code calls the function, and none of its calls runs under a grad-free block."""
        source = self.source
        callers = [(source, record) for record in source.callers_of(function)]
        callers += source.analysis(CallerAnalysis).calls_elsewhere([function])
        if not callers:
            return False
        for module, record in callers:
            holder = record.function.node if record.function is not None else module.module
            scope = record.function.scope if record.function is not None else module.module_scope
            if id(record.node) in self._calls_without_gradients(holder, scope, module):
                return False
            if record.function is not None and module.analysis(EvaluationAnalysis)._decorated_grad_free(
                record.function
            ):
                return False
        return True

    # -- what differentiates -----------------------------------------------------------------------------

    def _differentiates(self, function: FunctionRecord, training: TrainingAnalysis) -> bool:
        """A backward pass or an optimizer step (also through what it calls), or a call that differentiates
        in its body, in a function defined inside it, or in a function of this module it calls by name."""
        if training.function_events(function) & {BACKWARD, STEP}:
            return True
        bodies = [function.node]
        for record in function.calls:  # this file's functions called by name (no project-wide resolution)
            func = record.node.func
            helper = self.source.top_level_function(func.value) if isinstance(func, cst.Name) else None
            if helper is not None:
                bodies.append(helper.node)
        for body in bodies:
            for call in calls_in(body):
                func = call.func
                name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
                if name in DIFFERENTIATING:
                    return True
        return False


def _says_grad_free(func: cst.BaseExpression) -> bool:
    """A callee named for turning gradients off (`torch.no_grad` behind a star import, yolov5's
    `smart_inference_mode`): unresolved names are not evidence that gradients are on."""
    name = (dotted_name(func) or "").rpartition(".")[2]
    return "no_grad" in name or "inference_mode" in name


def _named_grad_free(statement: cst.With) -> bool:
    for item in statement.items:
        call = item.item
        if isinstance(call, cst.Call) and _says_grad_free(call.func):
            first = call.args[0].value if call.args else None
            if not (isinstance(first, cst.Name) and first.value == "False"):
                return True
        if isinstance(call, cst.Call) and (dotted_name(call.func) or "").endswith("set_grad_enabled"):
            first = call.args[0].value if call.args else None
            if not (isinstance(first, cst.Name) and first.value == "True"):
                return True  # `set_grad_enabled(False)`, or a flag: unknown
    return False


def _eval_receiver(call: cst.Call) -> str | None:
    """`model.eval()` -> "model" (a dotted name, no arguments)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "eval" and not call.args:
        return dotted_name(func.value)
    return None


def _outermost(loop: LoopRecord, function: FunctionRecord) -> LoopRecord:
    while loop.parent is not None and loop.parent.function is function:
        loop = loop.parent
    return loop


def _block_holding(node: cst.CSTNode, target: cst.CSTNode) -> cst.BaseSuite | None:
    for statement in statements(node):
        body = getattr(statement, "body", None)
        if isinstance(body, cst.IndentedBlock) and any(child is target for child in body.body):
            return body
    return None
