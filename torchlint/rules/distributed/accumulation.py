"""Gradient accumulation under `DistributedDataParallel` / FSDP without `no_sync`: every backward pass
all-reduces the gradients, though the optimizer steps only every N micro-batches.

A training loop accumulates when its backward pass runs on every iteration while each optimizer step
(`optimizer.step()`, `scaler.step(optimizer)`) sits under an `if` inside it whose test changes from one
iteration to the next (`if (i + 1) % accumulation == 0:`, `if ni - last_opt_step >= accumulate:`), or when
the backward runs in a loop of micro-batches inside it and the step after that loop (nanoGPT's shape).

The model is distributed when the module, or a module that runs this loop (`train_one_epoch(...)` called
from main.py), constructs `DistributedDataParallel` or `FullyShardedDataParallel`. The module has decided
about synchronisation, and is left alone, when it names `no_sync` or `require_backward_grad_sync`
anywhere (nanoGPT toggles the flag on the last micro-step) or accumulates through a framework
(`accelerator.accumulate`, Lightning's `accumulate_grad_batches`, DeepSpeed's engine).

A fix is planned only in the plainest shape, where it is known to be right: the model wrapped once, on every
run, by `name = DistributedDataParallel(...)` in this module (a model wrapped only on some runs has no
`no_sync`), called by that name in the loop; the step under an `if` of the loop's body whose test reads
nothing the body assigns and calls nothing (so that it can be asked before the forward pass, with the same
answer); the backward pass in a statement of the loop's body before that `if`. The statements from the
start of the body through the backward then go under `model.no_sync()` unless the iteration steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.iterations import assigned_in, bound_names, dotted_name, mentioned_names, varies
from torchlint.facts.syntax.walk import descendants, statements
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.training import BACKWARD, STEP, TrainingAnalysis, is_backward_call

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

DISTRIBUTED_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
# Calls and attributes that show the module decided about gradient synchronisation itself, or handed
# accumulation to a framework that does (a docstring that names `no_sync` decides nothing).
DECIDING_CALLS = frozenset({"no_sync", "accumulate"})
DECIDING_WORDS = ("require_backward_grad_sync", "accumulate_grad_batches")


@dataclass(frozen=True)
class Accumulation:
    """A backward pass that all-reduces on micro-batches that do not step."""

    backward: cst.Call  # where the finding goes
    backward_text: str  # "loss.backward()", "scaler.scale(loss).backward()"
    wrapper: str  # "DistributedDataParallel" (as the module that wraps names it, last part)
    how: str  # "every `accumulate` iterations" said from the step's test, or "after the micro-batch loop"
    plan: NoSyncPlan | None = None


@dataclass(frozen=True)
class NoSyncPlan:
    """How a fix puts the non-stepping micro-batches under `model.no_sync()`."""

    block: cst.IndentedBlock  # the loop's body
    statements: list[cst.CSTNode]  # from its first statement through the backward
    model: str  # the wrapped model's name: "model"
    not_stepping: str  # the step's test negated: "(step + 1) % args.accumulation != 0"
    scope: Scope  # the loop's, where the fix names `contextlib`


class AccumulationAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def without_no_sync(self) -> list[Accumulation]:
        source = self.source
        if _decided(source):
            return []
        training = source.analysis(TrainingAnalysis)
        found: list[Accumulation] = []
        for loop in training.training_loops:
            wrapper = self._wrapper(loop)
            if wrapper is None:
                continue
            accumulation = self._accumulates(loop, training)
            if accumulation is not None:
                backward, how, test = accumulation
                plan = self._plan(loop, backward, test) if test is not None else None
                found.append(Accumulation(backward.node, source.code(backward.node), wrapper, how, plan))
        return found

    def _wrapper(self, loop: LoopRecord) -> str | None:
        """The distributed wrapper the module, or one that runs this loop, constructs."""
        modules = [self.source]
        modules += [m for m, _ in self.source.analysis(CallerAnalysis).callers_elsewhere(loop)]
        for module in modules:
            if module is not self.source and _decided(module):
                return None
            for call in module.calls:
                qualname = module.qualname(call.node.func, call.scope) or ""
                if qualname in DISTRIBUTED_WRAPPERS:
                    return qualname.rpartition(".")[2]
                wrapper = _wrapped_by_helper(module, call, qualname)
                if wrapper is not None:
                    return wrapper
        return None

    def _accumulates(
        self, loop: LoopRecord, training: TrainingAnalysis
    ) -> tuple[CallRecord, str, cst.BaseExpression | None] | None:
        """The backward call that runs on micro-batches the optimizer does not step on, how the step is
        spaced, and the step's test when an `if` spaces it; None when every iteration steps."""
        source = self.source
        assigned = assigned_in(loop.node)
        varying = {
            id(statement.test): statement.test
            for statement in statements(loop.node.body)
            if isinstance(statement, cst.If) and varies(statement.test, assigned)
        }
        backwards: list[CallRecord] = []
        steps: list[CallRecord] = []
        for record in loop.all_calls():
            events = training.call_events(record)
            if BACKWARD in events and is_backward_call(record.node):
                backwards.append(record)
            elif STEP in events and _is_step(record.node):
                steps.append(record)
        if not backwards or not steps:
            return None
        every_iteration = [b for b in backwards if not any(id(test) in varying for test, _ in b.guards)]
        if not every_iteration:
            return None
        spaced = [
            next((test for test, _ in step.guards if id(test) in varying), None)
            for step in steps
            if step.loop is loop
        ]
        if spaced and all(test is not None for test in spaced):
            test = spaced[0] if all(test is spaced[0] for test in spaced) else None
            return every_iteration[0], f"under `if {source.code(spaced[0])}:`", test
        inner = [b for b in every_iteration if b.loop is not loop]
        if inner and all(step.loop is loop for step in steps):
            return inner[0], "after the loop over micro-batches", None
        return None

    def _plan(self, loop: LoopRecord, backward: CallRecord, test: cst.BaseExpression) -> NoSyncPlan | None:
        body = loop.node.body
        if not isinstance(body, cst.IndentedBlock):
            return None
        own_targets = set(bound_names(loop.node.target)) if isinstance(loop.node, cst.For) else set()
        if mentioned_names(test) & (assigned_in(loop.node) - own_targets):
            return None  # the test reads what the body computes: not known before the forward pass
        if any(isinstance(node, cst.Call) for node in descendants(test)):
            return None
        top = list(body.body)
        backward_at = _index_holding(top, backward.node)
        step_at = next((i for i, s in enumerate(top) if isinstance(s, cst.If) and s.test is test), None)
        if backward_at is None or step_at is None or backward_at >= step_at:
            return None
        model = self._wrapped_model(loop)
        if model is None:
            return None
        return NoSyncPlan(body, top[: backward_at + 1], model, self._negated(test), loop.scope)

    def _negated(self, test: cst.BaseExpression) -> str:
        """`a == b` as `a != b`; anything else as `not (...)`."""
        code = self.source.code
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and not test.lpar:
            target = test.comparisons[0]
            if isinstance(target.operator, cst.Equal):
                return f"{code(test.left)} != {code(target.comparator)}"
        return f"not ({code(test)})"

    def _wrapped_model(self, loop: LoopRecord) -> str | None:
        """The name the module binds, on every run, to its one `DistributedDataParallel(...)`, when the loop
        calls it by that name: in the same function, as a parameter of the loop's function, or as an
        attribute of `self` set by another method of the same class."""
        source = self.source
        wraps = [
            c for c in source.calls if (source.qualname(c.node.func, c.scope) or "") in DISTRIBUTED_WRAPPERS
        ]
        if len(wraps) != 1 or wraps[0].conditional:
            return None
        assignment = source.assignment_of(wraps[0].node)
        if assignment is None or not isinstance(assignment, cst.Assign) or len(assignment.targets) != 1:
            return None
        name = dotted_name(assignment.targets[0].target)
        if name is None:
            return None
        called = any(dotted_name(call.node.func) == name for call in loop.all_calls())
        wrapped_in, runs_in = wraps[0].function, loop.function
        same_function = wrapped_in is runs_in
        handed = runs_in is not None and name in runs_in.params
        same_object = (  # `self.model = DDP(...)` in `__init__`, the loop in another method
            name.startswith("self.")
            and wrapped_in is not None
            and runs_in is not None
            and wrapped_in.owner is not None
            and wrapped_in.owner is runs_in.owner
        )
        return name if called and (same_function or handed or same_object) else None


def _index_holding(statements: list[cst.CSTNode], node: cst.CSTNode) -> int | None:
    """The index of the statement that holds `node`."""
    for index, statement in enumerate(statements):
        if any(inner is node for inner in descendants(statement)):
            return index
    return None


def _decided(module: SourceModule) -> bool:
    """The module calls `model.no_sync()` / `accelerator.accumulate(model)`, sets
    `require_backward_grad_sync` or Lightning's `accumulate_grad_batches`, or trains through DeepSpeed."""
    if any(word in module.text for word in DECIDING_WORDS):
        return True
    for call in module.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in DECIDING_CALLS:
            return True
        if (module.qualname(func, call.scope) or "").startswith("deepspeed."):
            return True
    return False


def _wrapped_by_helper(module: SourceModule, call: CallRecord, qualname: str) -> str | None:
    """The wrapper a project helper named like one constructs (yolov5's `model = smart_DDP(model)`);
    helpers named otherwise are not resolved (resolving every call would read half the project)."""
    name = qualname.rpartition(".")[2].lower()
    if not any(word in name for word in ("ddp", "distributed", "parallel", "fsdp")):
        return None
    target = module.callee(call)
    if target is None:
        return None
    home, function = target
    for inner in function.calls:
        inner_name = home.qualname(inner.node.func, inner.scope) or ""
        if inner_name in DISTRIBUTED_WRAPPERS:
            return inner_name.rpartition(".")[2]
    return None


def _is_step(call: cst.Call) -> bool:
    """`optimizer.step()`, `scaler.step(optimizer)` (not a helper handed the loss and the optimizer, like
    apex's `amp.scale_loss(loss, optimizer)`)."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "step"
