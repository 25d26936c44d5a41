"""What the compile rules ask that no other family does: is a model compiled anywhere, does a compile call
run every step, is a compiled result used, which distributed wrapper a site compiles, and is the model
worth compiling at all (one kernel, an RNN Dynamo runs eagerly). Answered from the shared `ModelAnalysis`
and `TrainingAnalysis`, kept apart from how models are found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.torch.models import ModelAnalysis
from torchlint.facts.torch.training import MAX_DEPTH, TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope
    from torchlint.facts.torch.models import CompileSite, Model


class CompileQuestions:
    """The compile family's questions about one module's models and compile sites."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self.models = source.analysis(ModelAnalysis)
        self.training = source.analysis(TrainingAnalysis)

    def compiled_somewhere(self, model: Model) -> bool:
        """Compiled, or built, trained or handed over in a module that asks for compilation somewhere."""
        if model.of_kind("compile"):
            return True
        return any(module.analysis(ModelAnalysis).compile_sites for module in model.involved)

    def runs_every_step(self, site: CompileSite) -> bool:
        """The compile call runs on every step or epoch of training."""
        return site.call is not None and self._runs_every_step(site.call)

    def _runs_every_step(self, call: CallRecord, depth: int = 0) -> bool:
        """`call` runs on every step or epoch of training: in (or around) a training loop, or in a function
        called from one."""
        loop = call.loop
        while loop is not None:
            if self._trains(loop):
                return True
            loop = loop.parent
        if call.function is not None and depth < MAX_DEPTH:
            return any(self._runs_every_step(c, depth + 1) for c in self.source.calls_of(call.function))
        return False

    def _trains(self, loop) -> bool:
        training = self.training
        if training.is_training_loop(loop):
            return True
        stack = list(loop.children)
        while stack:
            inner = stack.pop()
            if training.is_training_loop(inner):
                return True
            stack.extend(inner.children)
        for call in loop.all_calls():
            target = self.source.callee(call)
            if target is not None and target[0].analysis(TrainingAnalysis).has_training_loop(target[1]):
                return True
        return False

    def unused_result(self, site: CompileSite) -> bool:
        """`compiled = torch.compile(model)` where `compiled` is never read and `model` itself is called."""
        source = self.source
        assign = site.target
        if assign is None or site.call is None or site.compiled is None:
            return False
        target = assign.targets[0].target
        if not isinstance(target, cst.Name) or source.code(site.compiled) == target.value:
            return False
        bindings = site.call.scope.lookup(target.value)
        if not bindings or any(source.references_of(binding) for binding in bindings):
            return False
        return self._is_called(site.compiled, site.call.scope)

    def _is_called(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        source = self.source
        if isinstance(expr, cst.Name):
            return any(
                ref.call is not None and not ref.attrs
                for binding in scope.lookup(expr.value)
                for ref in source.references_of(binding)
            )
        if source.is_self_attribute(expr, scope):
            text = source.code(expr)
            owner = source.class_of_method_scope(scope)
            return any(
                source.code(call.node.func) == text and source.class_of_method_scope(call.scope) == owner
                for call in source.calls
            )
        return False

    def standalone_statement(self, call: cst.CSTNode) -> cst.CSTNode | None:
        """The expression statement that is `call` alone on its lines, if it is one."""
        return self.models.statement_of(call)

    def is_one_layer(self, model: Model) -> bool:
        """The model is one built-in layer that runs as one kernel (`nn.Linear(20, 1)`, a convolution), also
        behind a project module whose forward only reshapes around it."""
        found = self.models.compositions(model)
        return found is not None and all(composition.is_one_layer for composition in found)

    def is_rnn_bound(self, model: Model) -> bool:
        """The model's compute is an `nn.LSTM`/`GRU`/`RNN` with light layers around it, which Dynamo runs
        eagerly (unless the code sets `torch._dynamo.config.allow_rnn`)."""
        if any("allow_rnn" in module.text for module in model.involved):
            return False
        found = self.models.compositions(model)
        return found is not None and all(composition.is_rnn_bound for composition in found)

    def wrapper_compiled(self, site: CompileSite) -> str | None:
        """The distributed wrapper (`DistributedDataParallel`, `FullyShardedDataParallel`) that `site`
        compiles, as the code names it: `torch.compile(DDP(model))`, or `model = DDP(model)` as the last
        assignment of `model` before `torch.compile(model)` / `model.compile()`."""
        source = self.source
        compiled, call = site.compiled, site.call
        if compiled is None or call is None:
            return None
        if isinstance(compiled, cst.Call):
            if source.qualname(compiled.func, call.scope) in _DISTRIBUTED_WRAPPERS:
                return source.code(compiled.func)
            return None
        if not isinstance(compiled, (cst.Name, cst.Attribute)):
            return None
        # Only assignments in the same function: another method's (`def ddp(self)` and `def compile(self)`)
        # may run in either order.
        assigned = [a for a in source.assigned_values(compiled, call.scope) if a.scope is call.scope]
        if not any(
            isinstance(a.value, cst.Call) and source.qualname(a.value.func, a.scope) in _DISTRIBUTED_WRAPPERS
            for a in assigned
        ):
            return None  # decided without positions (they cost a metadata pass over the module)
        at = source.span(site.node)[0]
        before = [a for a in assigned if source.span(a.value)[0] < at]
        if not before:
            return None
        last = max(before, key=lambda a: source.span(a.value)[0])
        value = last.value
        if isinstance(value, cst.Call) and source.qualname(value.func, last.scope) in _DISTRIBUTED_WRAPPERS:
            return source.code(value.func)
        return None


_DISTRIBUTED_WRAPPERS = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
}
