"""Models too small for autocast to speed up: one `nn.Linear` with a side of at most `MAX_SIDE` features.

Why one bound on one layer, and why it is sound: per input row an `nn.Linear(n, m)` does 2·n·m FLOPs and moves
4·(n + m) bytes in float32 (its weight is read once per batch), so its arithmetic intensity is
n·m / (2·(n + m)) < min(n, m) / 2 FLOP per byte. With a side of at most 16 that is under 8 FLOP/byte, below
the float32 ridge point of every data-center GPU (V100 ~17, A100 19.5 TFLOPS / 1.55 TB/s ~13, H100 ~20): the
layer is memory-bound before tensor cores come in, and autocast only adds a pass that casts the float32 batch
to bfloat16 (read 4 bytes, write 2, read 2 again) — there is nothing for it to speed up. That is the
placeholder of pytorch/examples' DDP tutorials, `torch.nn.Linear(20, 1)` on random data, and a logistic
regression `nn.Linear(features, 1)`. Only one built-in `nn.Linear` is judged (a size heuristic over whole
networks would drop real CNNs); any second layer, a project class, or a value this reading cannot follow keeps
the finding.

The model is followed from the forward call of the step back to where it is built: assignments (also
`self.model = ...` in the class), placements (`.to(device)`, `.cuda()`), `DistributedDataParallel` /
`DataParallel` / `torch.compile` wrappers, the values a function of the project returns (`dataset, model,
optimizer = load_train_objs()`), and parameters, through every call of their function that this module and
the project files importing it make (`Trainer(model, ...)` for `__init__`). A function handed over as a value
(`mp.spawn(fit, ...)`), a class with subclasses (`super().__init__(other)`), a parameter some caller does not
pass, or a function nobody calls is unknown, and unknown keeps the finding.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, argument_for, read_call
from torchlint.facts.syntax.names import BindingKind, dotted
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.models import ModelAnalysis, unplaced

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope
    from torchlint.rules.mixed_precision.steps import TrainingStep

# A literal side of at most this many features makes one `nn.Linear` memory-bound in float32 (see above).
MAX_SIDE = 16
MAX_DEPTH = 10
_LINEAR = frozenset({"torch.nn.Linear", "torch.nn.modules.linear.Linear"})
_LINEAR_SIGNATURE = Signature(("in_features", "out_features", "bias", "device", "dtype"))
# Wrappers that run the module they are given, as it is: the model is what they wrap.
_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.compile",
    }
)
_WRAPPED_KEYWORDS = ("module", "model")

Build = tuple["SourceModule", cst.Call, "Scope"]


class SizeAnalysis:
    """Whether the models a training step runs are one small `nn.Linear` each (made once per module)."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def _call_records(self) -> dict[int, CallRecord]:
        return {id(call.node): call for call in self.source.calls}

    def too_small(self, step: TrainingStep) -> cst.Call | None:
        """The `nn.Linear(...)` the step's forward call runs, when it and every model this module trains
        is surely one `nn.Linear` with a literal side of at most `MAX_SIDE` features; else None."""
        source = self.source
        record = self._call_records.get(id(step.forward))
        if record is None:
            return None
        builds = _builds(source, step.callee, record.scope, None, 0)
        if not builds or not all(_small_linear(*build) for build in builds):
            return None
        for model in source.analysis(ModelAnalysis).trained:
            found = _builds(source, model.expr, model.scope, None, 0)
            if not found or not all(_small_linear(*build) for build in found):
                return None
        return builds[0][1]


def _small_linear(home: SourceModule, call: cst.Call, scope: Scope) -> bool:
    """`nn.Linear(n, m)` with `n` or `m` a literal integer of at most `MAX_SIDE` (the other: anything)."""
    if home.qualname(call.func, scope) not in _LINEAR:
        return False
    arguments = read_call(home, call, scope, _LINEAR_SIGNATURE)
    for side in ("in_features", "out_features"):
        known, value = arguments.constant(side)
        if known and type(value) is int and 0 < value <= MAX_SIDE:
            return True
    return False


def _builds(
    home: SourceModule, expr: cst.BaseExpression, scope: Scope, index: int | None, depth: int
) -> list[Build] | None:
    """The calls that build the module `expr` may hold (a built-in layer's or any other call this reading
    stops at); None when some value cannot be followed. `index`: the element of a returned tuple that was
    unpacked (`dataset, model, optimizer = load_train_objs()`)."""
    if depth > MAX_DEPTH:
        return None
    expr = unplaced(expr)
    if index is not None:
        if not isinstance(expr, (cst.Tuple, cst.List)):
            return _returned(home, expr, scope, index, depth) if isinstance(expr, cst.Call) else None
        elements = expr.elements
        if index >= len(elements) or any(isinstance(e, cst.StarredElement) for e in elements):
            return None
        return _builds(home, elements[index].value, scope, None, depth + 1)
    if isinstance(expr, cst.Call):
        qualname = home.qualname(expr.func, scope) or ""
        if qualname.startswith("torch.nn.") and qualname not in _WRAPPERS:
            return [(home, expr, scope)]  # a built-in layer (judged by the caller)
        if qualname in _WRAPPERS:
            wrapped = _wrapped(expr)
            return _builds(home, wrapped, scope, None, depth + 1) if wrapped is not None else None
        return _returned(home, expr, scope, None, depth)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return _named(home, expr, scope, depth)
    return None


def _wrapped(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value in _WRAPPED_KEYWORDS:
            return arg.value
    return None


def _returned(
    home: SourceModule, call: cst.Call, scope: Scope, index: int | None, depth: int
) -> list[Build] | None:
    """What a project function returns (every `return` of it), as the call's value."""
    target = home.callee_of_call(call, scope)
    if target is None:
        return None
    other, function = target
    if not function.returns:
        return None
    found: list[Build] = []
    for returned in function.returns:
        builds = _builds(other, returned, function.scope, index, depth + 1)
        if builds is None:
            return None
        found += builds
    return found


def _named(home: SourceModule, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Build] | None:
    """A name's or `self.x`'s values: its assignments (less those that rebind it: `model = model.cuda()`,
    `self.model = DDP(self.model)`) and, for a parameter, what every caller passes."""
    models = home.analysis(ModelAnalysis)
    assignments = home.assignments(expr, scope)
    parameter: str | None = None
    if assignments is None:
        if not isinstance(expr, cst.Name):
            return None
        bindings = scope.lookup(expr.value)
        if any(b.kind not in (BindingKind.ASSIGN, BindingKind.PARAM) for b in bindings):
            return None
        if any(b.kind is BindingKind.ASSIGN and b.value is None for b in bindings):
            return None
        if sum(b.kind is BindingKind.PARAM for b in bindings) != 1:
            return None
        parameter = expr.value
        assignments = home.assigned_values(expr, scope)
    found: list[Build] = []
    for assignment in assignments:
        if models.rebinds(expr, assignment.value):
            continue
        builds = _builds(home, assignment.value, assignment.scope, assignment.index, depth + 1)
        if builds is None:
            return None
        found += builds
    if parameter is not None:
        passed = _passed(home, parameter, scope, depth)
        if passed is None:
            return None
        found += passed
    return found or None


def _passed(home: SourceModule, name: str, scope: Scope, depth: int) -> list[Build] | None:
    """What every call of the function whose parameter `name` is passes for it."""
    [binding] = [b for b in scope.lookup(name) if b.kind is BindingKind.PARAM]
    function = home.function_of_scope(binding.scope)
    if function is None or _handed_over(home, function):
        return None
    calls: list[tuple[SourceModule, CallRecord]] = [(home, call) for call in home.callers_of(function)]
    calls += home.analysis(CallerAnalysis).calls_elsewhere([function])
    if not calls:
        return None  # called from nowhere this reading sees
    found: list[Build] = []
    for other, call in calls:
        argument = argument_for(call.node, function, name)
        if argument is None or any(arg.star for arg in call.node.args):
            return None  # not passed (a default), or passed through `*args` / `**kwargs`
        builds = _builds(other, argument, call.scope, None, depth + 1)
        if builds is None:
            return None
        found += builds
    return found


def _handed_over(home: SourceModule, function: FunctionRecord) -> bool:
    """The function may run from calls no one writes: referenced as a value (`mp.spawn(fit, ...)`), or a
    method of a class subclassed here or in a file importing this one (`super().__init__(other)`)."""
    owner = function.owner
    if owner is not None:
        # by name first: resolving every base of every class would read the files they come from
        return any(
            (dotted(base.value) or "").rpartition(".")[2] == owner.name
            and (resolved := module.resolve_class(base.value, cls.scope)) is not None
            and resolved[1] is owner
            for module in (home, *home.analysis(CallerAnalysis).importers())
            for cls in module.classes
            for base in cls.node.bases
        )
    home_scope = function.scope.parent
    for binding in home_scope.lookup(function.name) if home_scope is not None else ():
        if binding.kind is not BindingKind.DEF or binding.node is not function.node:
            continue
        if any(ref.call is None or ref.attrs for ref in home.references_of(binding)):
            return True
    return False
