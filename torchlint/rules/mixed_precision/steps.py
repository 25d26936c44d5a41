"""The statements of one training step: the forward call, the statements up to the backward pass, and
whether they can be wrapped in an autocast block as they stand.

Why apart from the loop finder: the precision rules put their finding on the forward call and their fix
around exactly the forward and loss statements, never the backward or the optimizer step (the AMP docs:
"Backward passes under autocast are not recommended"). Wrapping is only offered when those statements are
consecutive simple statements of one block, directly followed by the backward statement — anything else
(the backward in another block, an optimizer call among them) is left to the author.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import argument_for
from torchlint.facts.syntax.names import dotted
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.syntax.walk import calls_in, child_nodes, contains, descendants, statements
from torchlint.facts.torch.models import ModelAnalysis
from torchlint.facts.torch.moves import batch_moves, device_type_of_moves

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, FunctionRecord, LoopRecord
    from torchlint.facts.syntax.module import SourceModule

_MODEL_WORD = re.compile(r"(^|_)(model|net|network|gpt|transformer)s?(_|$)", re.IGNORECASE)
_OPTIMIZER_METHODS = {"step", "unscale_"}
# nn.Module's own API: called on a model, none of these runs its forward pass.
_MODULE_API = frozenset(
    "train eval parameters named_parameters buffers named_buffers modules children named_modules "
    "named_children state_dict load_state_dict to cuda cpu zero_grad requires_grad_ apply half float double "
    "bfloat16 type share_memory get_parameter get_submodule get_buffer add_module register_module "
    "register_buffer register_parameter register_forward_hook register_forward_pre_hook "
    "register_full_backward_hook extra_repr save_pretrained resize_token_embeddings "
    "gradient_checkpointing_enable compile".split()
)
# Builtins given a model that do not run it (`print(model)`, `isinstance(model, DDP)`).
_NOT_A_FORWARD = {"print", "len", "isinstance", "hasattr", "getattr", "setattr", "id", "type", "repr", "str"}


@dataclass(frozen=True)
class TrainingStep:
    """The forward call of a training loop and the statements a precision fix would wrap."""

    forward: cst.Call
    backward: cst.Call | None
    block: cst.BaseSuite | None  # the block holding the region
    region: tuple[cst.SimpleStatementLine, ...]  # forward ... loss; empty when it cannot be wrapped
    why_not: str  # why the region is empty

    @property
    def callee(self) -> cst.BaseExpression:
        """The model as the forward call names it (`model`, `self.net`)."""
        return self.forward.func


def training_step(source: SourceModule, loop: LoopRecord, models: set[str]) -> TrainingStep | None:
    """The step of `loop`: its first call of a trained model (by the names in `models`, or a name that
    reads like one: `model`, `self.net`) in the block of the backward pass when there is one there, written
    in the loop itself or in a function of this module the
    loop calls to run the step (`self._run_batch(x, y)`, `train_iter(model, ...)`); None when the forward is
    elsewhere. Without a direct call of the model, the forward is a call whose result reaches the backward
    pass: a method of the trained model (`model.encode(x)`), a call handed the model, a helper of this module
    that calls it (`gap = self.loss_gap(batches)`)."""
    from torchlint.facts.torch.training import BACKWARD, MAX_DEPTH, TrainingAnalysis

    training = source.analysis(TrainingAnalysis)

    def backward_in(calls: list[CallRecord]) -> CallRecord | None:
        # the backward pass written here (at the depth limit the training analysis reads the call itself)
        return next((c for c in calls if BACKWARD in training.call_events(c, MAX_DEPTH)), None)

    calls = list(loop.all_calls())
    here = (calls, loop.node.body, backward_in(calls))
    steps = []
    for call in calls:
        target = source.callee(call)
        if target is None or target[0] is not source:
            continue
        function = target[1]
        if BACKWARD not in training.function_events(function):
            continue  # an evaluation helper (`estimate_loss()`) calls the model too
        steps.append((function.calls, function.node.body, backward_in(function.calls)))
    # The forward sits next to its backward pass: when the loop runs none itself, a step function it calls
    # comes first (an RL loop acts with the network, then calls `optimize_model(batch)`); a call under
    # `torch.no_grad()` (acting, the target network) is never the trained forward, unless nothing else is.
    places = [here, *steps] if here[2] is not None else [*steps, here]
    for grad_free_too in (False, True):
        for place_calls, body_node, backward in places:
            found = _forward_in(source, place_calls, body_node, models, backward, grad_free_too)
            if found is not None:
                forward, backward_node = _trained_forward(source, found, body_node, backward, models)
                return _step(source, forward, backward_node, body_node)
    return None


def _trained_forward(
    source: SourceModule,
    forwards: list[CallRecord],
    body: cst.CSTNode,
    backward: CallRecord | None,
    models: set[str],
) -> tuple[cst.Call, cst.Call | None]:
    """The forward among `forwards` whose result the backward pass differentiates: one whose result reaches
    it through operations that carry a gradient (in a reinforcement-learning step the acting call's result
    leaves through `argmax`, `.item()`, `.sample()`, the replay buffer's `sample`), then one whose result
    reaches it at all, then a call of a model the optimizer trains (not the target network, whose result
    reaches the loss too), then one in the block of the backward pass (the update under `if global_step >
    learning_starts:`), then the first."""
    if backward is None:
        return forwards[0].node, None
    home = _statement_in_block(body, backward.node)

    def rank(forward: CallRecord) -> tuple[bool, bool, bool, bool]:
        func = forward.node.func
        named = {dotted(func), dotted(func.value) if isinstance(func, cst.Attribute) else None}
        return (
            not _reaches(body, forward.node, backward.node, gradient=True),
            not _reaches(body, forward.node, backward.node),
            bool(models) and not named & models,
            home is None or _block_of(body, forward.node) is not home[0],
        )

    return min(forwards, key=rank).node, backward.node


def _block_of(body: cst.CSTNode, call: cst.Call) -> cst.BaseSuite | None:
    found = _statement_in_block(body, call)
    return found[0] if found is not None else None


def _forward_in(
    source: SourceModule,
    calls,
    body: cst.CSTNode,
    models: set[str],
    backward: CallRecord | None,
    grad_free_too: bool = False,
) -> list[CallRecord] | None:
    """The model calls among `calls`, in source order; without one, the calls whose result reaches the
    backward pass that run the model: methods of a trained model (`model.encode(x)`), calls handed one whose
    result is kept (DiT's `loss_dict = diffusion.training_losses(model, x, t)`; with no backward here, any
    such call), helpers of this module calling one (DomainBed's `gap = self.loss_gap(minibatches)`). Calls
    under `torch.no_grad()` count only with `grad_free_too` (they build no graph: acting, a target)."""
    calls = list(calls)
    grad_free = set() if grad_free_too else grad_free_calls(body)

    def kept(found: list[CallRecord]) -> list[CallRecord]:
        return [c for c in found if id(c.node) not in grad_free]

    forwards = kept([c for c in calls if _is_model_call(source, c, models)])
    if not forwards:
        handed = [
            c for c in calls if _is_handed_the_model(source, c, models) and source.assignment_of(c.node)
        ]
        if backward is None:
            forwards = kept(handed)
        else:
            for kind in (
                [c for c in calls if _is_model_method_call(source, c, models)],
                handed,
                [c for c in calls if _runs_the_model(source, c, models)],
            ):
                forwards = kept([c for c in kind if _reaches(body, c.node, backward.node)])
                if forwards:
                    break
    if not forwards:
        return None
    return sorted(forwards, key=lambda c: source.span(c.node)[0])


def grad_free_calls(body: cst.CSTNode) -> set[int]:
    """The ids of the calls under `body` made in a block without gradients: `with torch.no_grad():`,
    `torch.inference_mode()` (not `(False)`), `torch.set_grad_enabled(False)`."""
    found: set[int] = set()
    for statement in statements(body):
        if isinstance(statement, cst.With) and any(_turns_grad_off(item.item) for item in statement.items):
            found |= {id(node) for node in descendants(statement.body) if isinstance(node, cst.Call)}
    return found


def _turns_grad_off(item: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()` (not `(False)`), `torch.set_grad_enabled(False)`."""
    if not isinstance(item, cst.Call):
        return False
    name = dotted(item.func) or ""
    first = literal_of(item.args[0].value) if item.args else None
    if name.endswith("no_grad"):
        return not item.args
    if name.endswith("inference_mode"):
        return first is None or first == (True, True)
    if name.endswith("set_grad_enabled"):
        return first == (True, False)
    return False


def _step(
    source: SourceModule, forward: cst.Call, backward: cst.Call | None, body: cst.CSTNode
) -> TrainingStep:
    found = _statement_in_block(body, forward)
    if found is None:
        return TrainingStep(forward, backward, None, (), "the forward call is not a statement of its own")
    block, index = found
    if backward is None:
        return TrainingStep(forward, None, block, (), "the backward call is not with the forward call")
    statements = list(block.body)
    end = next((i for i in range(index, len(statements)) if contains(statements[i], backward)), None)
    if end is None or end == index:
        return TrainingStep(
            forward, backward, block, (), "the backward pass is not a later statement of the same block"
        )
    loss = _loss_of(backward)
    last = max((i for i in range(index, end) if loss and _assigns(statements[i], loss)), default=None)
    if last is None:
        return TrainingStep(forward, backward, block, (), "the loss is not computed next to the forward call")
    region = statements[index : last + 1]
    for statement in region:
        if not isinstance(statement, cst.SimpleStatementLine):
            return TrainingStep(
                forward, backward, block, (), "the forward and loss statements are not simple statements"
            )
        if any(_optimizer_call(node) for node in calls_in(statement)):
            return TrainingStep(
                forward, backward, block, (), "an optimizer call sits between the forward and the loss"
            )
    return TrainingStep(forward, backward, block, tuple(region), "")  # type: ignore[arg-type]


def _loss_of(backward: cst.Call) -> str:
    """What is differentiated: `loss` in `loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`."""
    assert isinstance(backward.func, cst.Attribute)
    receiver = backward.func.value
    positional = [arg.value for arg in backward.args if arg.keyword is None and not arg.star]
    if isinstance(receiver, cst.Call) and receiver.args:  # scaler.scale(loss).backward()
        receiver = receiver.args[0].value
    elif positional:  # accelerator.backward(loss), self.manual_backward(loss)
        receiver = positional[0]
    return dotted(receiver) or ""


def _assigns(statement: cst.CSTNode, name: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        targets: list[cst.BaseExpression] = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
            targets = [small.target]
        while targets:
            target = targets.pop()
            if isinstance(target, (cst.Tuple, cst.List)):
                targets += [e.value for e in target.elements]
            elif dotted(target) == name:
                return True
    return False


def _is_model_call(source: SourceModule, call: CallRecord, models: set[str]) -> bool:
    func = call.node.func
    if not isinstance(func, (cst.Name, cst.Attribute)) or not call.node.args:
        return False
    code = dotted(func)
    if code is None:
        return False  # `self.models[0](x)`: not a name the analysis follows
    if code in models or code == "self.forward":  # a module training itself (forward-forward layers)
        return True
    if source.callee(call) is not None:
        return False
    qualname = source.qualname(func, call.scope)
    if qualname is not None and "." in qualname:
        return False  # an imported function
    last = code.split(".")[-1]
    return _MODEL_WORD.search(last) is not None and code.count(".") <= 1


def _is_model_method_call(source: SourceModule, call: CallRecord, models: set[str]) -> bool:
    """`model.encode(x)`: a method of a trained model (by the names in `models`, or a name that reads like
    one, not an imported module) given an input, other than nn.Module's own API (`model.train()`,
    `model.parameters()`, `model.to(device)`), which runs part of its forward pass."""
    func = call.node.func
    if not isinstance(func, cst.Attribute) or not call.node.args or func.attr.value in _MODULE_API:
        return False
    receiver = dotted(func.value)
    if receiver is None:
        return False
    if receiver in models:
        return True
    qualname = source.qualname(func, call.scope)
    if qualname is not None and "." in qualname:
        return False  # a function of an imported module (`model.build(cfg)` of a `model.py`)
    last = receiver.split(".")[-1]
    return _MODEL_WORD.search(last) is not None and receiver.count(".") <= 1


def _runs_the_model(source: SourceModule, call: CallRecord, models: set[str]) -> bool:
    """A function of this module that calls a trained model itself (`self.loss_gap(minibatches)`)."""
    target = source.callee(call)
    if target is None or target[0] is not source:
        return False
    return any(_is_model_call(source, inner, models) for inner in target[1].calls)


def _reaches(body: cst.CSTNode, call: cst.Call, backward: cst.Call, gradient: bool = False) -> bool:
    """The result of `call` flows into the backward pass within `body`: through the names assigned from it
    (`out = model(x)`, then `loss = criterion(out, y)`), the containers it is added to (`losses.append(
    out)`), or in the backward statement itself. Twice over the statements, for what a loop carries into its
    next iteration; conditions are not followed (what an `if` tests does not flow into its branches). With
    `gradient`, not through operations whose result carries no gradient (`argmax`, `.item()`, `.numpy()`,
    `.sample()` of a distribution or a replay buffer): how an acting call's action reaches the update."""
    held: set[str] = set()
    for _ in range(2):
        for statement, read in _small_statements(body):
            if gradient:
                read = tuple(part for whole in read for part in _carrying(whole))
            if any(contains(part, call) for part in read) or _reads(read, held):
                if any(contains(part, backward) for part in read):
                    return True
                held |= _written(statement)
    return False


# Methods (or functions of a module: `torch.argmax`, `random.sample`) whose result carries no gradient of
# their receiver and arguments: indices, Python numbers, NumPy arrays, samples (`rsample` keeps it).
_NO_GRADIENT = frozenset({"argmax", "argmin", "item", "tolist", "numpy", "sample", "multinomial"})


def _carrying(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of `node` outside the receivers and arguments of calls in `_NO_GRADIENT` (`node` itself
    when it holds none)."""
    if not any(_cuts(inner) for inner in descendants(node)):
        return [node]
    found: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if _cuts(current):
            continue
        if not any(_cuts(inner) for inner in descendants(current)):
            found.append(current)
            continue
        stack.extend(child_nodes(current))
    return found


def _cuts(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _NO_GRADIENT
    )


def _small_statements(body: cst.CSTNode):
    """The small statements below `body` in the order of the text (one-line suites included), and the
    headers of `for` and `with` (which bind names from what they read), each with what it reads."""
    for statement in statements(body):
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    yield small, (small.value,) if small.value is not None else ()
                else:  # `total += out` reads `total` too; an expression statement reads all of it
                    yield small, (small,)
        elif isinstance(statement, cst.For):
            yield statement, (statement.iter,)
        elif isinstance(statement, cst.With):
            yield statement, tuple(item.item for item in statement.items)


def _reads(read: tuple[cst.CSTNode, ...], held: set[str]) -> bool:
    return bool(held) and any(
        isinstance(node, (cst.Name, cst.Attribute)) and dotted(node) in held
        for part in read
        for node in descendants(part)
    )


def _written(statement: cst.CSTNode) -> set[str]:
    """The names a statement binds or fills (`losses.append(out)` fills `losses`)."""
    targets: list[cst.BaseExpression] = []
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
    elif isinstance(statement, (cst.AugAssign, cst.AnnAssign)):
        targets = [statement.target]
    elif isinstance(statement, cst.For):
        targets = [statement.target]
    elif isinstance(statement, cst.With):
        targets = [item.asname.name for item in statement.items if item.asname is not None]
    elif isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        func = statement.value.func
        if isinstance(func, cst.Attribute):
            targets = [func.value]
    found = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets += [e.value for e in target.elements]
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)
        elif isinstance(target, cst.Subscript):
            targets.append(target.value)
        elif (name := dotted(target)) is not None:
            found.add(name)
    return found


def _is_handed_the_model(source: SourceModule, call: CallRecord, models: set[str]) -> bool:
    """A call of the project's or a library's code given a trained model positionally, which runs its
    forward pass (`diffusion.training_losses(model, x, t)`, `compute_loss(model, batch)`)."""
    qualname = source.qualname(call.node.func, call.scope) or ""
    if qualname.split(".")[0] in ("torch", "copy", "builtins") or qualname in _NOT_A_FORWARD:
        return False
    return any(arg.keyword is None and not arg.star and dotted(arg.value) in models for arg in call.node.args)


def _statement_in_block(node: cst.CSTNode, call: cst.Call) -> tuple[cst.BaseSuite, int] | None:
    """The block and index of the statement that holds `call`, searching compound statements inward."""
    if isinstance(node, cst.IndentedBlock):
        for index, statement in enumerate(node.body):
            if not contains(statement, call):
                continue
            if isinstance(statement, cst.SimpleStatementLine):
                return node, index
            for child in statement.children:
                found = _statement_in_block(child, call)
                if found is not None:
                    return found
            return None
        return None
    for child in node.children:
        if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.Else)):
            found = _statement_in_block(child, call)
            if found is not None:
                return found
    return None


def _optimizer_call(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _OPTIMIZER_METHODS


# Device types autocast takes, as a script names them in a string (`"cuda"`, `"cpu"`).
_DEVICE_TYPES = frozenset({"cuda", "cpu", "mps", "xpu"})
_DEVICE_MAKERS = frozenset({"torch.device", "torch.accelerator.current_accelerator"})


def _device_kinds(
    source: SourceModule, target: cst.BaseExpression, scope, function: FunctionRecord | None
) -> set[str] | None:
    """How the values of the device variable `target` name their device (see `_device_kind`): its
    assignments, or for a parameter of `function` (`def train(args, model, device, loader, ...)`), what
    each call of it in this module passes (`train(args, model, device, ...)` in `main()`); None when a value
    cannot be read, or a parameter has no caller here."""
    values = source.assignments(target, scope)  # None: a parameter or a loop variable among the bindings
    if values is None and function is not None and isinstance(target, cst.Name):
        bindings = scope.lookup(target.value)
        if len(bindings) != 1 or target.value not in function.params:
            return None
        callers = source.callers_of(function)
        kinds: set[str] = set()
        for call in callers:
            value = argument_for(call.node, function, target.value)
            if value is None:
                return None  # not passed (the default), or passed in a way not followed
            if isinstance(value, cst.Name):
                found = _device_kinds(source, value, call.scope, None)
            else:
                kind = _device_kind(source, value, call.scope)
                found = {kind} if kind is not None else None
            if found is None:
                return None
            kinds |= found
        return kinds or None
    if not values:
        return None
    kinds = set()
    for value in values:
        kind = _device_kind(source, value.value, value.scope)
        if kind is None:
            return None
        kinds.add(kind)
    return kinds


def _device_kind(source: SourceModule, value: cst.BaseExpression, scope) -> str | None:
    """How a device variable's value names its device: "device" (a `torch.device`), "type" (a string that
    is a device type: `"cuda"`, also `"cuda" if ... else "cpu"`), "string" (a device string with an index:
    `"cuda:0"`); None when it cannot be read."""
    if isinstance(value, cst.IfExp):
        kinds = {_device_kind(source, value.body, scope), _device_kind(source, value.orelse, scope)}
        if None in kinds:
            return None
        return kinds.pop() if len(kinds) == 1 else "string"
    if isinstance(value, cst.Call):
        return "device" if source.qualname(value.func, scope) in _DEVICE_MAKERS else None
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        if not isinstance(text, str):
            return None
        kind, _, index = text.partition(":")
        if kind not in _DEVICE_TYPES or (index and not index.isdigit()):
            return None
        return "string" if index else "type"
    return None


class StepAnalysis:
    """The training steps of one module's loops, as the precision rules see them (made once per module)."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def _models(self) -> set[str]:
        return {model.text for model in self.source.analysis(ModelAnalysis).trained}

    def of(self, loop: LoopRecord) -> TrainingStep | None:
        """The forward call of a training loop and the forward-and-loss statements a fix may wrap."""
        return training_step(self.source, loop, self._models)

    def device_type(self, loop: LoopRecord, torch: str) -> str | None:
        """What an autocast region in `loop` names as its device type so that it follows the device the
        script picks, when the loop moves its batches to one variable whose every value is known: a
        `torch.device` (`device.type`; `torch.accelerator.current_accelerator()` is one), a device type
        as a string (`device = "cuda" if torch.cuda.is_available() else "cpu"`: `device` itself), or a mix
        of those and strings with an index (`torch.device(device).type`, `torch` as the module names it).
        None: no such variable, or a value that cannot be read (`config.device`)."""
        found = device_type_of_moves(self.source, loop)
        if found is not None:
            return found
        source = self.source
        names, kinds = set(), set()
        for move in batch_moves(source, loop):
            target = move.call.args[0].value if move.call.args and move.method == "to" else None
            name = dotted(target) if target is not None else None
            if name is None:
                return None
            found = _device_kinds(source, target, loop.scope, loop.function)
            if found is None:
                return None
            kinds |= found
            names.add(name)
        if len(names) != 1:
            return None
        name = names.pop()
        if kinds == {"device"}:
            return f"{name}.type"
        if kinds == {"type"}:
            return name
        return f"{torch}.device({name}).type"
