"""Host-device synchronisations every training step: the loss read on the host in a loop that trains on CUDA.

A value is on the device when it is the loss (what `backward` runs on: `loss.backward()`,
`scaler.scale(loss).backward()`, `accelerator.backward(loss)`, a project function's backward on the argument
it is handed: `_backward(loss)`; and the terms named as losses of the sum it runs on) or computed from it in
the loop's body (`loss = loss / accumulation`, `reduced = reduce_mean(loss)`), and not already read to the
host (`value = loss.item()` is a float). Reading such a value on the host waits for the GPU to finish every
kernel queued so far: `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `float(...)`, `int(...)`, `print(...)`
of it, an f-string that formats it. Only the innermost read of an expression counts
(`loss.detach().cpu().numpy()` is one read, at `.cpu()`).

Only the loss and what is computed from it: a model's output read on the host can be what the step needs
(a reinforcement-learning loop hands its action to the environment as a Python number), the loss almost
never is (it is logged, summed, checked for NaN, all of which can stay on the device between log steps).

Silent when the read is under an `if` inside the loop whose test changes from step to step (`if step %
log_every == 0`, `if not math.isfinite(loss_value)`), or in a branch of a conditional expression; a test fixed
for the run (`if accelerator.is_main_process:`, `if args.verbose:`) reads every step where it holds. A name
assigned a host read (`lossf = lossf.item()`) holds a number from there on. Silent also when the loop does not
train on CUDA (the module's device evidence or, for a helper, that of the files calling it; a CPU tensor's
read costs nothing). A module that runs on XLA (`facts.runs_on_xla`) is the rule's to leave alone: its lazy
tensors make every read a graph execution of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, read_call
from torchlint.facts.syntax.iterations import assigned_in, assignments, dotted_name, mentioned_names, varies
from torchlint.facts.syntax.walk import child_nodes, descendants, statements
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.training import TrainingAnalysis, is_backward_call

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule

READ_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
READ_BUILTINS = frozenset({"float", "int"})
FRAMEWORK_BACKWARD = frozenset({"accelerator", "fabric", "self.accelerator", "self.fabric"})


@dataclass(frozen=True)
class HostRead:
    """One read of a device value on the host, every training step."""

    node: cst.CSTNode  # the call (or the f-string) that reads it: where the finding goes
    text: str  # as written: "loss.item()", "print(loss)", "f\"{loss:.3f}\""
    value: str  # the device value read, as written: "loss"
    loop: LoopRecord | None = field(default=None, compare=False)  # the training loop it is read in


@dataclass(frozen=True)
class StepBody:
    """Code that runs once per training step: a training loop's body, or a step function's (see
    `CallerAnalysis.cuda_step_functions`), whose parameters change from call to call as a loop's
    variables change from step to step."""

    node: cst.For | cst.While | cst.FunctionDef
    calls: tuple[CallRecord, ...]
    varying: frozenset[str] = frozenset()
    loop: LoopRecord | None = None  # the training loop, when the body is one


class SyncAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self._occasional: dict[int, set[int]] = {}  # by the body's node: see `occasional`

    @cached_property
    def step_bodies(self) -> list[StepBody]:
        callers = self.source.analysis(CallerAnalysis)
        loops = [
            StepBody(loop.node, tuple(loop.all_calls()), loop=loop) for loop in callers.cuda_training_loops
        ]
        functions = [
            StepBody(function.node, tuple(function.calls), frozenset(function.params))
            for function in callers.cuda_step_functions
        ]
        return loops + functions

    @cached_property
    def every_step(self) -> list[HostRead]:
        found: list[HostRead] = []
        for body in self.step_bodies:
            seeds = self._losses(body)
            if not seeds:
                continue
            values = self._device_values(body, seeds)
            records = {id(record.node): record for record in body.calls}
            sometimes = self._sometimes(body, values)
            other_phase = self._beside_the_backward(body)
            branches = self._in_branches(body)
            current = set(values)
            occasional = self._occasional[id(body.node)] = _in_branches_of(body, sometimes, other_phase)
            for statement in statements(body.node.body):
                if isinstance(statement, (cst.If, cst.While)) and id(statement) not in occasional:
                    read = self._tested(statement, current)
                    if read is not None:
                        found.append(replace(read, loop=body.loop))
                for part in _evaluated(statement):
                    for node in descendants(part):
                        record = records.get(id(node)) if isinstance(node, cst.Call) else None
                        if record is None or id(node) in branches:
                            continue
                        if any(
                            id(test) in sometimes or (id(test), branch) in other_phase
                            for test, branch in record.guards
                        ):
                            continue
                        read = self._read(record.node, current)
                        if read is not None and all(read.node is not other.node for other in found):
                            found.append(replace(read, loop=body.loop))
                _rebind(statement, current, seeds)
        return found

    def occasional(self, loop: LoopRecord) -> set[int]:
        """The ids of the nodes of a training loop's body that do not run every step: the branches of its
        `if`s whose test changes from step to step, and the side of an `if` without the backward pass when
        the other side has it (a validation branch)."""
        self.every_step  # noqa: B018 (computes them, loop by loop)
        return self._occasional.get(id(loop.node), set())

    def _tested(self, statement: cst.If | cst.While, values: set[str]) -> HostRead | None:
        """`if loss > best:`, `if torch.isnan(loss).any():`: Python asks the tensor for its truth, which waits
        for the device. Not a test on what the tensor is (`loss is None`, `loss.shape[0]`, `isinstance`),
        nor one that reads it through `.item()` (reported where it reads)."""
        names = _tensor_operands(statement.test) & values
        if not names:
            return None
        keyword = "while" if isinstance(statement, cst.While) else "if"
        return HostRead(statement.test, f"{keyword} {self.source.code(statement.test)}:", sorted(names)[0])

    # -- which loops and which branches -----------------------------------------------------------------

    def _sometimes(self, body: StepBody, values: set[str]) -> set[int]:
        """The tests of the `if`s inside the loop whose branches run on some steps only: a test that changes
        from step to step (`step % log_every == 0`, `i > 0`, `not math.isfinite(loss_value)`: it mentions a
        loop variable or a name the loop assigns, or takes a remainder) or calls something (`random()`). A
        test fixed for the run (`accelerator.is_main_process`, `args.verbose`, `rank == 0`, a call naming the
        rank) selects the runs or the process, not the steps: its branches run every step there."""
        assigned = assigned_in(body.node) | values | body.varying
        return {
            id(statement.test)
            for statement in statements(body.node.body)
            if isinstance(statement, cst.If) and varies(statement.test, assigned)
        }

    def _beside_the_backward(self, body: StepBody) -> set[tuple[int, bool]]:
        """The branches of the `if`s inside the loop that hold no backward pass while the other branch does
        (`if phase == TRAIN: loss.backward() ... else: val_losses.append(loss.item())`), and those of a later
        `if` on the same test (`if phase == TRAIN: log(...) elif phase == VAL: ...`): a loop that also
        validates, whose other branch is no training step."""
        source = self.source
        found: set[tuple[int, bool]] = set()
        ifs = [statement for statement in statements(body.node.body) if isinstance(statement, cst.If)]
        training: dict[str, bool] = {}  # a test's text -> the branch that trains
        for statement in ifs:
            in_body = _has_backward(statement.body)
            in_else = statement.orelse is not None and _has_backward(statement.orelse)
            if in_body != in_else:
                training[source.code(statement.test)] = in_body
        for statement in ifs:
            trains = training.get(source.code(statement.test))
            if trains is not None:
                found.add((id(statement.test), not trains))
        return found

    def _in_branches(self, body: StepBody) -> set[int]:
        """The nodes in a branch of a conditional expression in the loop's body (`loss.item() if first else
        0.7 * average + 0.3 * loss.item()`): each runs on some steps only."""
        inside: set[int] = set()
        for line in statements(body.node.body):
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for node in descendants(line):
                if isinstance(node, cst.IfExp):
                    inside.update(id(n) for branch in (node.body, node.orelse) for n in descendants(branch))
        return inside

    # -- which values are on the device -----------------------------------------------------------------

    def _losses(self, body: StepBody) -> set[str]:
        """What the backward pass runs on, and the losses it sums (`qf_loss = qf1_loss + qf2_loss`,
        `total = loss + aux_loss * weight`): a term named as a loss and computed in the body is a tensor of
        this step as much as the total is."""
        found = set()
        for record in body.calls:
            loss = _backward_operand(record.node) or self._handed_to_backward(record)
            if loss is not None:
                found.add(loss)
        if not found:
            return found
        assigned = [pair for line in statements(body.node.body) for pair in assignments(line)]
        computed = {target for targets, _ in assigned for target in targets}
        for targets, value in assigned:
            if found & set(targets):
                found |= {
                    term for term in _summed_terms(value) if "loss" in term.lower() and term in computed
                }
        return found

    def _handed_to_backward(self, record: CallRecord) -> str | None:
        """`_backward(loss)`, `backward_step(loss, optimizer)`: the argument a project function (a closure
        of the loop's function, as timm's) runs the backward pass on, through the parameter it receives."""
        for _, function in self.source.analysis(TrainingAnalysis).targets(record):
            operands = {_backward_operand(call.node) for call in function.calls} & set(function.params)
            if not operands:
                continue
            positional = function.params[1:] if function.owner is not None else function.params
            arguments = read_call(self.source, record.node, record.scope, Signature(tuple(positional)))
            for param in (p for p in function.params if p in operands):  # in order: the output is stable
                argument = arguments.get(param)
                expression = argument.expression if argument is not None else None
                if expression is not None:
                    return dotted_name(expression)
        return None

    def _device_values(self, body: StepBody, seeds: set[str]) -> set[str]:
        """The loss and every name the loop's body assigns from it (not from a host read of it), wherever
        in the body: on the next step, a value assigned at its end is there at its start."""
        values = set(seeds)
        assigned = [pair for line in statements(body.node.body) for pair in assignments(line)]
        changed = True
        while changed:
            changed = False
            for targets, value in assigned:
                if _reads_on_host(value, inner=True, of=values) or not (mentioned_names(value) & values):
                    continue
                for target in targets:
                    if target not in values:
                        values.add(target)
                        changed = True
        return values

    # -- which reads -----------------------------------------------------------------------------------

    def _read(self, call: cst.Call, values: set[str]) -> HostRead | None:
        source = self.source
        func = call.func
        operand: cst.BaseExpression | None = None
        node: cst.CSTNode = call
        if isinstance(func, cst.Attribute) and func.attr.value in READ_METHODS and not call.args:
            operand = func.value
        elif isinstance(func, cst.Name) and func.value in READ_BUILTINS and len(call.args) == 1:
            operand = call.args[0].value
        elif isinstance(func, cst.Name) and func.value == "print":
            operand = next((arg.value for arg in call.args if mentioned_names(arg.value) & values), None)
        if operand is None:
            formatted = self._formatted(call, values)
            if formatted is None:
                return None
            node, operand = formatted
        if _reads_on_host(operand, inner=True):
            return None  # `loss.item()` inside `float(loss.item())`: counted once, at the inner read
        read = sorted(mentioned_names(operand) & values)
        if not read:
            return None
        return HostRead(node, source.code(node), read[0])

    def _formatted(self, call: cst.Call, values: set[str]) -> tuple[cst.CSTNode, cst.BaseExpression] | None:
        """An f-string argument of `call` that formats a device value (`f"{loss:.3f}"`)."""
        for arg in call.args:
            if not isinstance(arg.value, cst.FormattedString):
                continue
            for part in arg.value.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    if mentioned_names(part.expression) & values and not _reads_on_host(
                        part.expression, inner=True
                    ):
                        return arg.value, part.expression
        return None


def _backward_operand(call: cst.Call) -> str | None:
    """The loss a backward call runs on, as written: `loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)` (any engine's: DeepSpeed's `model_engine.backward(loss)`),
    `self.manual_backward(loss)`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not is_backward_call(call):
        return None
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if (
        positional
    ):  # an engine's backward takes the loss (a tensor's own takes a gradient only when not scalar)
        return dotted_name(positional[0])
    if func.attr.value != "backward":
        return None
    receiver = func.value
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
        if receiver.func.attr.value == "scale" and receiver.args:
            return dotted_name(receiver.args[0].value)
    return dotted_name(receiver)


def _summed_terms(value: cst.BaseExpression) -> set[str]:
    """The names a sum adds or subtracts, each alone or scaled (`(a + b * w - c) / n`: a, b, c and w)."""
    if isinstance(value, cst.BinaryOperation) and isinstance(
        value.operator, (cst.Add, cst.Subtract, cst.Multiply)
    ):
        return _summed_terms(value.left) | _summed_terms(value.right)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        return _summed_terms(value.left)
    name = dotted_name(value)
    return {name} if name is not None else set()


def _has_backward(block: cst.CSTNode) -> bool:
    return any(isinstance(node, cst.Call) and _backward_operand(node) for node in descendants(block))


def _evaluated(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """What a statement evaluates itself, its nested blocks left to their own statements: a line whole, an
    `if`'s or `while`'s test, a `for`'s iterable, a `with`'s items."""
    if isinstance(statement, cst.SimpleStatementLine):
        return [statement]
    if isinstance(statement, (cst.If, cst.While)):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return [item.item for item in statement.items]
    return []


def _rebind(statement: cst.CSTNode, current: set[str], seeds: set[str]) -> None:
    """The device values after a statement: a name assigned a host read (`lossf = lossf.item()`) holds a
    number from there on, one assigned from a device value a tensor; the loss stays the loss."""
    for targets, value in assignments(statement):
        host = _reads_on_host(value, inner=True, of=current)
        device = not host and bool(mentioned_names(value) & current)
        for target in targets:
            if device:
                current.add(target)
            elif target not in seeds or host:
                current.discard(target)


# What a test may ask of a tensor without reading its values: its metadata, its identity, its type.
METADATA = frozenset(
    {"shape", "ndim", "dim", "numel", "size", "dtype", "device", "is_cuda", "requires_grad", "grad_fn"}
)
NOT_VALUES = frozenset({"isinstance", "len", "hasattr", "type", "callable", "id", "getattr"})


def _tensor_operands(test: cst.BaseExpression) -> set[str]:
    """The names whose values `test` reads as a tensor's truth: outside metadata (`loss.shape`), `is`
    comparisons, type questions (`isinstance(loss, ...)`) and host reads (`loss.item()`)."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and node.attr.value in METADATA:
            continue
        if isinstance(node, cst.Call):
            func = node.func
            if _reads_on_host(node) or (isinstance(func, cst.Name) and func.value in NOT_VALUES):
                continue
        if isinstance(node, cst.Comparison) and all(
            isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons
        ):
            continue
        name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name is not None:
            found.add(name)
            if isinstance(node, cst.Name):
                continue
        stack.extend(child_nodes(node))
    return found


def _in_branches_of(body: StepBody, sometimes: set[int], other_phase: set[tuple[int, bool]]) -> set[int]:
    """The ids of the nodes in the branches of the loop's `if`s that `sometimes` (both branches, by test) and
    `other_phase` (one branch, by test and side) name."""
    found: set[int] = set()
    for statement in statements(body.node.body):
        if not isinstance(statement, cst.If):
            continue
        for side, branch in ((True, statement.body), (False, statement.orelse)):
            if branch is not None and (
                id(statement.test) in sometimes or (id(statement.test), side) in other_phase
            ):
                found.update(id(node) for node in descendants(branch))
    return found


def _reads_on_host(expr: cst.CSTNode, inner: bool = False, of: set[str] | None = None) -> bool:
    """`expr` is (or, with `inner`, contains) a host read: `loss.item()`, `float(loss)`; with `of`, one
    of those values (`loss / float(accumulation)` reads a setting, and stays the loss's tensor)."""
    nodes = descendants(expr) if inner else iter([expr])
    for node in nodes:
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        operand: cst.CSTNode | None = None
        if isinstance(func, cst.Attribute) and func.attr.value in READ_METHODS and not node.args:
            operand = func.value
        elif isinstance(func, cst.Name) and func.value in READ_BUILTINS:
            operand = node
        if operand is not None and (of is None or mentioned_names(operand) & of):
            return True
    return False
