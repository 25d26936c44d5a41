"""Where training happens: training loops, the loaders they iterate, and whether that happens every epoch.

A training loop is the innermost loop whose iterations run a backward pass (`loss.backward()`,
`scaler.scale(loss).backward()`, `accelerator.backward(loss)`, `self.manual_backward(loss)`) and an optimizer
step (`opt.step()`, `scaler.step(opt)`), directly or through functions it calls — local ones, methods on
`self`, functions imported from another module of the project, or methods of a project class's instance
(`trainer.train_step(x)` with `trainer = Trainer(model).cuda()`, a wrapper optimizer's
`optimizer.step_and_update_lr()` when every value the receiver can hold is such an object), the overrides of
a step a base class leaves abstract (`self.forward_backward(batch)`), and functions handed to a helper that
runs them (`timer.run(step)`, `optimizer.step(closure)`; not a whole training run handed to a process). A loop
around a training loop (or around a call to a function that contains one) is an epoch loop: the loader is
then iterated once per epoch.

What a loop iterates is followed back to its source: `enumerate(loader)`, `tqdm(loader)`, `iter(loader)` with
`next(it)` in a `while` loop, a parameter (then every call site's argument), `self.train_loader`, a
factory's return value, one element of a tuple or a list (`loaders[0]`, `a, b = build()`), one field of a
dataclass or a NamedTuple or one attribute of a project object (`data.train`: the argument that construction
passes for it), `accelerator.prepare(...)`. Frameworks that own the loop count too: a `train_dataloader()`
method (Lightning) and `trainer.fit(model, loader)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, argument_for, passed_for, read_call
from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord, LoopRecord
from torchlint.facts.syntax.module import is_docstring
from torchlint.facts.syntax.names import BindingKind, Scope, dotted
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.syntax.walk import calls_in
from torchlint.facts.torch import frameworks
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.evaluation import only_evaluates
from torchlint.facts.torch.loaders import Loader, LoaderAnalysis
from torchlint.facts.torch.reach import call_may_run
from torchlint.facts.torch.vocabulary import BACKWARD_METHODS, OPTIMIZER_NAMES, Device

if TYPE_CHECKING:
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.exports import ExportIndex

BACKWARD = "backward"
STEP = "step"
_WRAPPERS = {
    "enumerate",
    "iter",
    "zip",
    "tqdm",
    "tqdm.tqdm",
    "tqdm.auto.tqdm",
    "itertools.islice",
    "reversed",
}
MAX_DEPTH = 6
# At most this many optimizer steps in all: a demo of an API (pytorch/examples' parallelism demos run 10), not
# a training run.
DEMO_STEPS = 10
TOY_ROWS = 64  # rows of a dataset typed into a script: a demo's, not a training set


def is_backward_call(call: cst.Call) -> bool:
    """`loss.backward()`, `accelerator.backward(loss)`, `self.manual_backward(loss)`: a backward pass."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in BACKWARD_METHODS


@dataclass(frozen=True)
class LoaderUse:
    """A loader iterated for training: where, in which module, and whether once per epoch."""

    where: cst.CSTNode  # the training loop, the call that leads to it, or the framework hook
    module: SourceModule = field(compare=False)  # the module that holds `where`
    per_epoch: bool
    how: str  # for people: "a training loop", "`train_one_epoch(...)` in engine.py"

    @property
    def path(self) -> str:
        return self.module.path


# What part of a value is meant: None the value itself, an int one element of a tuple or list (`loaders[0]`,
# `a, b = build()`), a str one attribute of an object (`data.train` of a dataclass or a helper object).
Selector = int | str | None


@dataclass(frozen=True)
class ParamSource:
    """A parameter of `function` (the part `index` of it: `loaders[0]`, `data.train`)."""

    function: FunctionRecord
    name: str
    index: Selector = None


Flags = tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class ExternalSource:
    """The value returned by a function of another module (part `index` of it: an element of a returned
    tuple, an attribute of a returned dataclass)."""

    path: str
    function: str
    index: Selector
    flags: Flags = ()  # the constants the call passes (or defaults to) for the function's parameters


Source = Loader | ParamSource | ExternalSource


@cache
def _closed_expressions() -> tuple[type, ...]:
    """Expressions whose code ends in a bracket, a quote or a digit: never in an optimizer's name."""
    return (
        cst.Call, cst.Subscript, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp,
        cst.DictComp, cst.GeneratorExp, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString,
        cst.Integer, cst.Float, cst.Imaginary, cst.Ellipsis,
    )  # fmt: skip


# The field holding the last part of an expression's code.
_ENDS_WITH = {
    "BinaryOperation": "right", "BooleanOperation": "right", "UnaryOperation": "expression",
    "IfExp": "orelse", "Lambda": "body", "Await": "expression", "NamedExpr": "value",
}  # fmt: skip


class TrainingAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self.loaders = source.analysis(LoaderAnalysis)
        self._events: dict[int, frozenset[str]] = {}
        self._has_loop: dict[int, bool] = {}
        self._training: list[LoopRecord] | None = None
        self._sources: list[tuple[Source, bool, cst.CSTNode, str]] | None = None
        self._returned_params: dict[tuple[int, Selector], list[tuple[str, Selector]]] = {}
        self._exports: dict[tuple[str, Selector, Flags], list[LoaderUse]] | None = None
        self._targets: dict[int, list[tuple[SourceModule, FunctionRecord]]] = {}
        self._subclass_memo: dict[int, list[tuple[SourceModule, ClassRecord]]] = {}
        self._receivers: dict[tuple[int, str], list[tuple[SourceModule, ClassRecord]] | None] = {}

    # -- what runs where --------------------------------------------------------------------------------

    def call_events(self, call: CallRecord, depth: int = 0) -> frozenset[str]:
        func = call.node.func
        events: set[str] = set()
        if isinstance(func, cst.Attribute):
            if func.attr.value in BACKWARD_METHODS:
                events.add(BACKWARD)
            elif func.attr.value == STEP and not self._is_scheduler(func.value, call.scope):
                events.add(STEP)
        if depth < MAX_DEPTH:
            quiet = self.runs_no_training(call, steps=True) and not self._hands_over_loss_and_optimizer(call)
            targets = [] if quiet else self.targets(call)
            for home, function in targets:
                events |= home.analysis(TrainingAnalysis).function_events(function, depth + 1)
            if not targets and self._hands_over_loss_and_optimizer(call):
                events |= {BACKWARD, STEP}
            for home, function in self._handed_over(call):
                # `timer.run(step)`, `optimizer.step(closure)`: a step handed to a helper that runs it; a
                # whole training run handed over (`Process(target=train)`) is not a step of this loop
                there = home.analysis(TrainingAnalysis)
                if not there.has_training_loop(function, depth + 1):
                    events |= there.function_events(function, depth + 1)
        return frozenset(events)

    def targets(self, call: CallRecord) -> list[tuple[SourceModule, FunctionRecord]]:
        """The functions a call may run: the one it names (`source.callee`) or the closures a factory bound
        to its name (`train = make_train_fn(...)`), and where that is not all the code shows,
        `self.method(...)` that a project base class defines, the overrides of `self.method(...)` in the
        subclasses of a class whose own method is abstract or missing (a base class's loop calling
        `self.forward_backward(batch)`), and the method of a project class whose object the receiver holds
        (`optimizer.step_and_update_lr()` with a `ScheduledOptim` passed as `optimizer`,
        `self.mp_trainer.optimize(opt)`) (memoised)."""
        key = id(call.node)
        found = self._targets.get(key)
        if found is None:
            found = []
            target = self.source.callee(call)
            if target is not None:
                found.append(target)
            func = call.node.func
            if target is None and isinstance(func, cst.Name):
                found += self.source.closures_bound_to(func, call.scope)
            if isinstance(func, cst.Attribute):
                owner = self.source.class_of_method_scope(call.scope)
                on_self = (
                    owner is not None and isinstance(func.value, cst.Name) and func.value.value == owner[1]
                )
                if on_self and target is None:  # a method a project base class defines
                    assert owner is not None
                    target = _method_of(self.source, owner[0], func.attr.value)
                    if target is not None:
                        found.append(target)
                if on_self and (target is None or _is_abstract(target[1])):
                    assert owner is not None
                    found += self._overrides(owner[0], func.attr.value)
                elif target is None and not on_self:
                    for home, cls in self._receiver_classes(func.value, call.scope, 0) or ():
                        method = _method_of(home, cls, func.attr.value)
                        if method is not None and method not in found:
                            found.append(method)
            self._targets[key] = found
        return found

    def _overrides(self, cls: ClassRecord, name: str) -> list[tuple[SourceModule, FunctionRecord]]:
        """The methods `name` of the classes deriving from `cls` (this module's class), here and in the
        project files that import this one."""
        found: list[tuple[SourceModule, FunctionRecord]] = []
        for home, subclass in self._subclasses(cls):
            method = subclass.methods.get(name)
            if method is not None and not _is_abstract(method):
                found.append((home, method))
        return found

    def _subclasses(self, cls: ClassRecord, depth: int = 0) -> list[tuple[SourceModule, ClassRecord]]:
        key = id(cls.node)
        if key in self._subclass_memo:
            return self._subclass_memo[key]
        self._subclass_memo[key] = []  # recursion guard
        facts = self.source
        modules = [facts]
        if facts.project is not None and facts.file is not None:
            for importer in facts.project.importers_of(facts.file):
                if facts.project.may_derive(importer, cls.name, facts.file):
                    other = facts.project.facts_for(importer, facts.file)
                    if other is not None and other is not facts:
                        modules.append(other)
        found: list[tuple[SourceModule, ClassRecord]] = []
        for module in modules:
            for candidate in module.classes:
                if candidate is cls:
                    continue
                for base in candidate.node.bases:
                    resolved = module.resolve_class(base.value, candidate.scope)
                    if resolved is not None and resolved[1] is cls:
                        found.append((module, candidate))
                        if depth < MAX_DEPTH:
                            found += module.analysis(TrainingAnalysis)._subclasses(candidate, depth + 1)
                        break
        self._subclass_memo[key] = found
        return found

    def _receiver_classes(
        self, expr: cst.BaseExpression, scope: Scope, depth: int
    ) -> list[tuple[SourceModule, ClassRecord]] | None:
        """The project classes whose objects `expr` holds, when every value the code shows for it is one:
        what it is assigned (`self.x = Wrapper(...)`, `x = Wrapper(...).cuda()`), and for a parameter what
        each of this module's callers passes. None when some value is anything else (`trainer = other` on
        some path, a parameter nobody here passes, a library object): unknown is no evidence."""
        if depth > 2:
            return None
        facts = self.source
        if isinstance(expr, cst.Call):
            value: cst.BaseExpression = expr
            while (  # `Wrapper(...).cuda()`, `.to(device)`: nn.Module's methods that hand back the module
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in _RETURNS_ITSELF
                and isinstance(value.func.value, cst.Call)
            ):
                value = value.func.value
            found = facts.resolve_class(value.func, scope) if isinstance(value, cst.Call) else None
            return [found] if found is not None else None
        if not isinstance(expr, cst.Name) and not facts.is_self_attribute(expr, scope):
            return None
        key = (id(scope), facts.code(expr))
        if key in self._receivers:
            return self._receivers[key]
        self._receivers[key] = None  # recursion guard
        classes: list[tuple[SourceModule, ClassRecord]] = []
        values: list[tuple[cst.BaseExpression, Scope]] = []
        if isinstance(expr, cst.Name):
            for binding in scope.lookup(expr.value):
                is_param = binding.kind is BindingKind.PARAM
                function = facts.function_of_scope(binding.scope) if is_param else None
                if binding.kind is BindingKind.ASSIGN and binding.value is not None and binding.index is None:
                    values.append((binding.value, binding.scope))
                elif function is not None:
                    passed = passed_for(facts, function, expr.value)
                    if not passed or any(argument is None for argument, _ in passed):
                        return None
                    values += passed  # type: ignore[arg-type]
                else:
                    return None  # an import, a loop variable, a tuple's element: not known
        else:
            values = [(a.value, a.scope) for a in facts.assigned_values(expr, scope) if a.index is None]
        if not values:
            return None
        for value, where in values:
            found = self._receiver_classes(value, where, depth + 1)
            if found is None:
                return None
            classes += [(home, cls) for home, cls in found if all(cls is not c for _, c in classes)]
        self._receivers[key] = classes
        return classes

    def _callers(self, function: FunctionRecord) -> list[CallRecord]:
        """`source.callers_of`, and for an `__init__` also the constructions of the subclasses of its class
        that inherit it (`Trainer(model, loader)` of a `class Trainer(BaseTrainer)` without `__init__`)."""
        calls = self.source.callers_of(function)
        owner = function.owner
        if owner is None or function.name != "__init__":
            return calls
        inheriting = [
            cls
            for home, cls in self._subclasses(owner)
            if home is self.source and _method_of(home, cls, "__init__") == (self.source, function)
        ]
        if not inheriting:
            return calls
        facts = self.source
        built = [
            c for c in facts.calls if any(facts.local_class(c.node.func, c.scope) is k for k in inheriting)
        ]
        return [*calls, *built]

    def _constructor(self, call: cst.Call, scope: Scope) -> tuple[SourceModule, FunctionRecord] | None:
        """The `__init__` a construction of a project class runs (`TrainLoop(model=model, data=data)`, also
        one its class inherits); only for callees named like classes (capitalised), which keeps the
        question off the other calls."""
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        if not isinstance(name, str) or not name[:1].isupper():
            return None
        found = self.source.resolve_class(func, scope)
        return _method_of(*found, "__init__") if found is not None else None

    def _handed_over(self, call: CallRecord) -> list[tuple[SourceModule, FunctionRecord]]:
        """The functions of this module a call is given as arguments (`timer.run(step)`, `timeit(step)`,
        `optimizer.step(closure)`, `functools.partial(step, x)`): a helper given a function runs it."""
        found: list[tuple[SourceModule, FunctionRecord]] = []
        for arg in call.node.args:
            value = arg.value
            while isinstance(value, cst.Call) and self.source.qualname(value.func, call.scope) in _PARTIAL:
                value = value.args[0].value if value.args else value
            function = self._function_named(value, call.scope)
            if function is not None:
                found.append((self.source, function))
        return found

    def _function_named(self, expr: cst.BaseExpression, scope: Scope) -> FunctionRecord | None:
        """The function a name (every binding of it a `def`) or `self.method` means here."""
        facts = self.source
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if bindings and all(b.kind is BindingKind.DEF for b in bindings):
                return self._functions_by_node.get(id(bindings[-1].node))
            return None
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            owner = facts.class_of_method_scope(scope)
            if owner is not None and expr.value.value == owner[1]:
                return owner[0].methods.get(expr.attr.value)
        return None

    @cached_property
    def _functions_by_node(self) -> dict[int, FunctionRecord]:
        return {id(function.node): function for function in self.source.functions}

    def _hands_over_loss_and_optimizer(self, call: CallRecord) -> bool:
        """`loss_scaler(loss, optimizer, ...)`, `backward_and_step(loss, opt)`: a helper this analysis cannot
        see into (a parameter, another package) that is given both the loss and the optimizer."""
        args = call.node.args
        # The optimizer first, and only among arguments whose code can end in a word: rendering every
        # argument of every call that resolves nowhere (most of them) cost more than the rest of the check.
        if not any(
            self._last_word(arg.value) in OPTIMIZER_NAMES
            for arg in args
            if not isinstance(arg.value, _closed_expressions()) and not getattr(arg.value, "rpar", ())
        ):
            return False
        names = [self.source.code(arg.value).lower() for arg in args]
        return any(name.split(".")[-1].startswith("loss") or name.endswith("loss") for name in names)

    def _last_word(self, value: cst.BaseExpression) -> str:
        """The code of `value`, lowercased, after its last dot, read off the tree without rendering it (most
        arguments): a word there is the attribute or name the code ends with (`a if c else self.opt`)."""
        node = value
        while not getattr(node, "rpar", ()):
            if isinstance(node, cst.Name):
                return node.value.lower() if node is value else ""  # `not opt`: a dot, or the whole code
            if isinstance(node, cst.Attribute):
                if not (node.dot.whitespace_before.empty and node.dot.whitespace_after.empty):
                    break
                return node.attr.value.lower()
            if isinstance(node, cst.Comparison):
                node = node.comparisons[-1].comparator
                continue
            field = _ENDS_WITH.get(type(node).__name__)
            if field is None:
                break
            node = getattr(node, field)
        else:
            return ""  # it ends in a parenthesis
        return self.source.code(value).lower().split(".")[-1]

    def function_events(self, function: FunctionRecord, depth: int = 0) -> frozenset[str]:
        key = id(function)
        if key not in self._events:
            self._events[key] = frozenset()  # recursion guard
            events: set[str] = set()
            for call in function.calls:
                events |= self.call_events(call, depth)
            self._events[key] = frozenset(events)
        return self._events[key]

    def loop_events(self, loop: LoopRecord) -> frozenset[str]:
        events: set[str] = set()
        for call in loop.all_calls():
            events |= self.call_events(call)
        return frozenset(events)

    def has_training_loop(self, function: FunctionRecord, depth: int = 0) -> bool:
        key = id(function)
        if key not in self._has_loop:
            self._has_loop[key] = False
            found = any(self.is_training_loop(loop) for loop in function.loops)
            if not found and depth < MAX_DEPTH:
                found = any(
                    home.analysis(TrainingAnalysis).has_training_loop(target, depth + 1)
                    for call in function.calls
                    if not self.runs_no_training(call, steps=False)
                    for home, target in self.targets(call)
                )
            self._has_loop[key] = found
        return self._has_loop[key]

    def is_training_loop(self, loop: LoopRecord) -> bool:
        if not {BACKWARD, STEP} <= self.loop_events(loop):
            return False
        if any(self.is_training_loop(inner) for inner in _descendants(loop)):
            return False
        for call in loop.all_calls():
            if self.runs_no_training(call, steps=False):
                continue
            for home, target in self.targets(call):
                if home.analysis(TrainingAnalysis).has_training_loop(target):
                    return False  # this loop runs epochs of a training loop elsewhere
        return True

    def runs_no_training(self, call: CallRecord, steps: bool) -> bool:
        """Nothing the call may run (`targets`) runs a backward pass (nor, with `steps`, a step), read from
        the exports of the files it leads to without building their facts (`reach.call_may_run`): then none
        of those functions has a training loop, nor events. Asked of calls of another file's names (an
        import, an attribute): a def or a class of this module costs nothing to resolve here."""
        source = self.source
        project: ExportIndex | None = source.project  # type: ignore[assignment]
        if project is None or source.file is None or not project.asks_exports:
            return False
        func = call.node.func
        if isinstance(func, cst.Name):
            bindings = call.scope.lookup(func.value)
            if not bindings or any(binding.kind is not BindingKind.IMPORT for binding in bindings):
                return False
            symbol = func.value
        elif isinstance(func, cst.Attribute):
            symbol = dotted(func) or f".{func.attr.value}"
            root, _, rest = symbol.partition(".")
            owner = source.class_of_method_scope(call.scope)
            own = owner[1] if owner is not None else None
            if rest and root in ("self", own):  # as the export writes it: `self.m` on a method's own object
                symbol = f"self.{rest}" if root == own and "." not in rest else f".{func.attr.value}"
        else:
            return False
        return not call_may_run(project, source.file, symbol, source.file, steps=steps)

    @property
    def training_loops(self) -> list[LoopRecord]:
        if self._training is None:
            self._training = [loop for loop in self.source.loops if self.is_training_loop(loop)]
        return self._training

    @cached_property
    def demo_length(self) -> bool:
        """Every training loop here runs a known, tiny number of steps (`for i in range(10):`, nested
        literal ranges): an API demo, where compiling costs more than the whole run and numerics are the
        point, not speed. Unknown counts (a loader, `args.epochs`, a `while`) are never few."""
        loops = self.training_loops
        return bool(loops) and all(self._known_steps(loop) is not None for loop in loops)

    @cached_property
    def toy_demo(self) -> bool:
        """Every training loop here trains on data typed into the script: a loop over a loader of a dataset
        written out as literal rows (at most TOY_ROWS), or one inside or around such a loop. However many
        epochs it runs, nothing about its speed matters (a benchmark of a few steps over real model sizes,
        which is about speed, is not one)."""
        loops = self.training_loops
        return bool(loops) and all(self._over_typed_rows(loop) for loop in loops)

    def _over_typed_rows(self, loop: LoopRecord) -> bool:
        """The loop, or one around it, iterates a loader over rows typed into the script."""
        current: LoopRecord | None = loop
        while current is not None:
            if self._toy_loader_steps(current) is not None:
                return True
            current = current.parent
        inner = (other for other in self.source.loops if other.parent is loop)
        return any(self._toy_loader_steps(other) is not None for other in inner)

    def _known_steps(self, loop: LoopRecord) -> int | None:
        if self.called_repeatedly(loop.function):
            return None
        steps = 1
        current: LoopRecord | None = loop
        while current is not None:
            count = self._literal_range(current)
            if count is None:
                count = self._toy_loader_steps(current)
            if count is None:
                return None
            steps *= count
            current = current.parent
        return steps if steps <= DEMO_STEPS else None

    @cached_property
    def makes_sparse_tensors(self) -> bool:
        """This module gets sparse tensors from a project function it calls (a graph net's data loader that
        returns `adj.to_sparse()`, `torch.sparse_coo_tensor(...)`, or what another such function returns).
        Dynamo does not trace sparse tensors (the frame runs eagerly) and autocast has no half-precision
        sparse matmul. A function that only uses a sparse tensor on the way (`torch.eye(n) + adj`) does not
        count: what it returns is dense."""
        source, project, file = self.source, self.source.project, self.source.file
        if not any(word in source.text for word in _SPARSE_WORDS) and (
            project is None or file is None or not project.mentioned_anywhere(_SPARSE_WORDS, file)
        ):
            return False  # no file writes a sparse call or method: following each call cannot find one
        seen: set[int] = set()
        for call in self.source.calls:
            target = self.source.callee(call)
            if target is not None and _returns_sparse(*target, 0, seen):
                return True
        return False

    def _literal_range(self, loop: LoopRecord) -> int | None:
        """`for _ in range(10):`, or `range(num_iters)` with `num_iters = 10` bound once -> 10; else None."""
        node = loop.node
        if not isinstance(node, cst.For):
            return None
        it = node.iter
        if not (isinstance(it, cst.Call) and self.source.qualname(it.func, loop.scope) == "range"):
            return None
        if len(it.args) != 1:
            return None
        count = it.args[0].value
        if isinstance(count, cst.Name):
            values = self.source.assigned_values(count, loop.scope)
            count = values[0].value if len(values) == 1 and values[0].index is None else None
        ok, value = literal_of(count) if count is not None else (False, None)
        return value if ok and isinstance(value, int) and not isinstance(value, bool) else None

    def _toy_loader_steps(self, loop: LoopRecord) -> int | None:
        """The batches of a loop over a loader of this module whose dataset is written out in the script
        (`TensorDataset(torch.tensor([[-1.2, 3.1], ...]), ...)`, or a project dataset class built from
        such tensors): its rows over the literal batch size (1 when not given). Data typed in by hand is a
        demo of the API, however it is iterated."""
        loaders = self.loaders_of_loop(loop)
        if len(loaders) != 1 or loaders[0].record is None:
            return None
        loader = loaders[0]
        dataset = loader.option("dataset")
        if dataset is None or dataset.conditional or dataset.expression is None:
            return None
        rows = self._literal_rows(dataset.expression, loader.scope, 0)
        if rows is None:
            return None
        if loader.lacks("batch_size"):
            return rows
        known, size = loader.constant("batch_size")
        if not known or not isinstance(size, int) or isinstance(size, bool) or size < 1:
            return None
        return -(-rows // size)

    def _literal_rows(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> int | None:
        """How many rows a dataset or tensor written out in the code has (None: not written out)."""
        source = self.source
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            values = source.assigned_values(expr, scope)
            if len(values) != 1 or values[0].index is not None:
                return None
            return self._literal_rows(values[0].value, values[0].scope, depth + 1)
        if not isinstance(expr, cst.Call) or not expr.args or expr.args[0].keyword is not None:
            return None
        first = expr.args[0].value
        qualname = source.qualname(expr.func, scope) or ""
        if qualname == "torch.tensor":
            rows = len(first.elements) if isinstance(first, (cst.List, cst.Tuple)) else None
            return rows if rows is not None and rows <= TOY_ROWS else None
        if qualname.endswith("TensorDataset") or source.resolve_class(expr.func, scope) is not None:
            return self._literal_rows(first, scope, depth + 1)  # the first tensor's rows
        return None

    def called_repeatedly(self, function: FunctionRecord | None, depth: int = 0) -> bool:
        """Is `function` called inside a loop (here, or by a function that is)? Then its loops rerun."""
        if function is None or depth > MAX_DEPTH:
            return False
        for call in self.source.calls_of(function):
            if call.loop is not None or self.called_repeatedly(call.function, depth + 1):
                return True
        return False

    def _is_scheduler(self, receiver: cst.BaseExpression, scope: Scope) -> bool:
        text = self.source.code(receiver).lower()
        if "sched" in text or "warmup" in text:
            return True
        if isinstance(receiver, cst.Name):
            for binding in scope.lookup(receiver.value):
                value = binding.value
                if isinstance(value, cst.Call):
                    callee = self.source.qualname(value.func, binding.scope) or ""
                    if "lr_scheduler" in callee or "scheduler" in callee.lower():
                        return True
        return False

    # -- what a loop iterates ---------------------------------------------------------------------------

    def iterated(self, loop: LoopRecord) -> list[tuple[Source, bool, str]]:
        """(source, re-created inside the loop's run, how) for what the loop iterates."""
        node = loop.node
        found: list[tuple[Source, bool, str]] = []
        if isinstance(node, cst.For):
            forever = self.re_iterates_forever(node.iter, loop.scope)
            how = "a generator re-iterated forever by a training loop" if forever else "a training loop"
            found += [(source, forever, how) for source in self.sources(node.iter, loop.scope)]
        for call in loop.all_calls():  # `batch = next(it)` with `it = iter(loader)`
            if self.source.qualname(call.node.func, call.scope) == "next" and call.node.args:
                if only_evaluates(self.source, loop, call.node, self._trains_in(loop)):
                    continue  # `with torch.no_grad(): loss = model(next(val_loader))`: evaluation
                argument = call.node.args[0].value
                # `it = iter(loader)` again after StopIteration: the loader is iterated over and over
                recreated = isinstance(argument, cst.Name) and len(call.scope.lookup(argument.value)) > 1
                forever = self.re_iterates_forever(argument, call.scope)
                if forever:
                    how = "a generator re-iterated forever, consumed with `next(...)` by a training loop"
                elif recreated:
                    how = "`iter(...)` re-created after StopIteration in a training loop"
                else:
                    how = "`next(...)` in a training loop"
                again = recreated or forever
                found += [(source, again, how) for source in self.sources(argument, call.scope)]
        return found

    def _trains_in(self, loop: LoopRecord):
        """Whether the code below a node of `loop` runs a backward pass or an optimizer step."""
        records = {id(call.node): call for call in loop.all_calls()}

        def trains(node: cst.CSTNode) -> bool:
            for found in calls_in(node):
                record = records.get(id(found))
                if record is not None and self.call_events(record) & {BACKWARD, STEP}:
                    return True
            return False

        return trains

    def re_iterates_forever(
        self, expr: cst.BaseExpression, scope: Scope, index: int | None = None, depth: int = 0
    ) -> bool:
        """`expr` is (bound to) a generator of this module that iterates what it is given inside `while
        True:` (`while True: yield from loader`): each pass over the loader is an epoch of its own."""
        if depth > MAX_DEPTH:
            return False
        facts = self.source
        if isinstance(expr, (cst.Tuple, cst.List)) and index is not None:
            elements = expr.elements
            return index < len(elements) and self.re_iterates_forever(
                elements[index].value, scope, None, depth + 1
            )
        if isinstance(expr, cst.Name):
            return any(
                self.re_iterates_forever(a.value, a.scope, a.index, depth + 1)
                for a in facts.assigned_values(expr, scope)
            )
        if isinstance(expr, cst.Call):
            target = facts.callee_of_call(expr, scope)
            if target is not None and target[1].yields_forever:
                return True
            callee = facts.qualname(expr.func, scope) or ""
            return callee in _WRAPPERS and any(
                self.re_iterates_forever(arg.value, scope, None, depth + 1)
                for arg in expr.args
                if not arg.keyword
            )
        return False

    def sources(
        self, expr: cst.BaseExpression, scope: Scope, index: Selector = None, depth: int = 0
    ) -> list[Source]:
        """What `expr` (the part `index` of it) can be: loaders, parameters, other modules' values."""
        if depth > MAX_DEPTH:
            return []
        facts = self.source
        if isinstance(expr, (cst.Tuple, cst.List)) and index is not None:
            elements = expr.elements
            if isinstance(index, str) or index >= len(elements):
                return []
            if any(isinstance(e, cst.StarredElement) for e in elements[: index + 1]):
                return []  # `[*first, loader]`: which element is which is unknown
            return self.sources(elements[index].value, scope, None, depth + 1)
        if isinstance(expr, cst.Call):
            loader = self.loaders.loader_at(expr)
            if loader is not None:
                return [loader] if not isinstance(index, str) else []
            if isinstance(index, str):  # `Loaders(train=DataLoader(...)).train`
                held = self._held_by_object(expr, scope, index, depth)
                if held is not None:
                    return held
            target = facts.callee_of_call(expr, scope)
            if target is not None:
                return self._returned(expr, scope, *target, index, depth)
            if isinstance(index, str):
                return []  # an attribute of what an unknown call returns
            callee = facts.qualname(expr.func, scope) or ""
            passed = [a.value for a in expr.args if not a.keyword and not a.star]
            # `backend.distribute(training_data=loader)`: a call of which nothing is known hands back what
            # it is given, positionally or (when nothing is positional) by keyword
            passed = passed or [a.value for a in expr.args if a.keyword is not None]
            if index is not None and callee not in _WRAPPERS:  # `a, b = accelerator.prepare(a, b)`
                return self.sources(passed[index], scope, None, depth + 1) if index < len(passed) else []
            found = []
            for value in passed:  # enumerate(loader), tqdm(loader), log_every(loader, 10)
                found += self.sources(value, scope, None, depth + 1)
            return found
        if isinstance(expr, cst.IfExp):  # `build_a(cfg) if cfg.kind == "a" else build_b(cfg)`
            return self.sources(expr.body, scope, index, depth + 1) + self.sources(
                expr.orelse, scope, index, depth + 1
            )
        if isinstance(expr, cst.BooleanOperation):  # `loader or default_loader()`
            return self.sources(expr.left, scope, index, depth + 1) + self.sources(
                expr.right, scope, index, depth + 1
            )
        if isinstance(expr, cst.Name):
            found = []
            for binding in scope.lookup(expr.value):
                if binding.kind is BindingKind.PARAM:
                    function = facts.function_of_scope(binding.scope)
                    if function is not None:
                        found.append(ParamSource(function, expr.value, index))
            for assignment in facts.reaching_values(expr, scope):
                # `loaders = build()` then `loaders[0]`: the part asked of the name is the part of its value
                part = assignment.index if assignment.index is not None else index
                found += self.sources(assignment.value, assignment.scope, part, depth + 1)
            return found
        if isinstance(
            expr, (cst.DictComp, cst.ListComp, cst.GeneratorExp)
        ):  # {x: DataLoader(...) for x in ...}
            element = expr.value if isinstance(expr, cst.DictComp) else expr.elt
            loader = self.loaders.loader_at(element) if isinstance(element, cst.Call) else None
            return [loader] if loader is not None else []
        if isinstance(expr, cst.Dict):
            found = []
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    found += self.sources(element.value, scope, None, depth + 1)
            return found
        if isinstance(expr, cst.Subscript):  # loaders["train"], dataloaders[phase], loaders[0]
            position = _literal_position(expr) if index is None else None
            return self.sources(expr.value, scope, position, depth + 1)
        if facts.is_self_attribute(expr, scope):  # self.train_loader
            found = []
            for assignment in facts.assigned_values(expr, scope):
                found += self.sources(assignment.value, assignment.scope, index, depth + 1)
            return found
        if isinstance(expr, cst.Attribute) and index is None:  # data.train_loader, self.data.train_loader
            return self.sources(expr.value, scope, expr.attr.value, depth + 1)
        return []

    def _held_by_object(self, call: cst.Call, scope: Scope, attr: str, depth: int) -> list[Source] | None:
        """What `attr` of the object a construction of a project class builds holds: the argument given for
        that field of a dataclass or a NamedTuple, or what its methods assign to `self.<attr>` (a parameter
        of `__init__` read from this very call). None when the call builds no project class."""
        facts = self.source
        found = facts.resolve_class(call.func, scope)
        if found is None:
            return None
        home, cls = found
        fields = _declared_fields(home, cls)
        if fields is not None and attr in fields[0]:
            argument = _field_argument(call, attr, fields)
            return self.sources(argument, scope, None, depth + 1) if argument is not None else []
        init = cls.methods.get("__init__")
        held: list[Source] = []
        there = home.analysis(TrainingAnalysis)
        for value, method_scope in cls.attributes.get(attr, []):
            for source in there.sources(value, method_scope, None, depth + 1):
                if isinstance(source, ParamSource):
                    argument = (
                        argument_for(call, init, source.name)
                        if init is not None and source.function is init
                        else None
                    )
                    if argument is not None:  # another method's parameter: who sets it is unknown
                        held += self.sources(argument, scope, source.index, depth + 1)
                elif home is facts or isinstance(source, ExternalSource):
                    held.append(source)  # (a loader of another module feeds its training there)
        return held

    def _returned(
        self,
        call: cst.Call,
        scope: Scope,
        other: SourceModule,
        function: FunctionRecord,
        index: int | None,
        depth: int,
    ) -> list[Source]:
        """What a call of a project function hands back: what it builds or gets (in another module: that
        function's value, resolved there), and the arguments of this very call for the parameters it returns
        (`wrap_loader(loader)` returning `loader` or a wrapper of it) — never the other callers' arguments."""
        found: list[Source] = []
        flags = call_flags(self.source, call, scope, function)
        if other is not self.source:
            found.append(ExternalSource(str(other.file), function.name, index, flags))
        for name, part in other.analysis(TrainingAnalysis).returned_parameters(function, index):
            argument = argument_for(call, function, name)
            if argument is not None:
                found += self.sources(argument, scope, part, depth + 1)
        if other is self.source:
            for returned in function.outputs:
                for source in self.sources(returned, function.scope, index, depth + 1):
                    if isinstance(source, ParamSource) and source.function is function:
                        continue
                    if isinstance(source, Loader) and not branch_runs(source, function, flags):
                        continue  # `if train: ... else: DataLoader(val_set)` called with train=True
                    found.append(source)
        return found

    def returned_parameters(
        self, function: FunctionRecord, index: Selector = None
    ) -> list[tuple[str, Selector]]:
        """The parameters of `function` whose value (or a wrapper of it, or the part of it named with the
        parameter) it returns or yields from."""
        key = (id(function), index)
        if key not in self._returned_params:
            self._returned_params[key] = []  # recursion guard
            names: list[tuple[str, Selector]] = []
            for returned in function.outputs:
                for source in self.sources(returned, function.scope, index):
                    if isinstance(source, ParamSource) and source.function is function:
                        names.append((source.name, source.index))
            self._returned_params[key] = list(dict.fromkeys(names))
        return self._returned_params[key]

    # -- the answers rules need -------------------------------------------------------------------------

    def trace(self, sources, per_epoch: bool, depth: int = 0):
        """Every source on the way up from what a loop iterates, through parameters to callers' arguments."""
        for source in sources:
            yield source, per_epoch
            if isinstance(source, ParamSource) and depth < MAX_DEPTH:
                for call in self._callers(source.function):
                    argument = argument_for(call.node, source.function, source.name)
                    if argument is not None:
                        outer = per_epoch or call.loop is not None
                        found = self.sources(argument, call.scope, source.index)
                        yield from self.trace(found, outer, depth + 1)

    def _training_sources(self) -> list[tuple[Source, bool, cst.CSTNode, str]]:
        """(source, per epoch, where, how) for everything this module iterates for training (memoised)."""
        if self._sources is None:
            self._sources = []  # an import cycle asking back while this runs sees nothing
            self._sources = list(self._find_training_sources())
        return self._sources

    def _find_training_sources(self):
        facts = self.source
        for loop in self.training_loops:
            around = loop.parent is not None or self.called_repeatedly(loop.function)
            for source, again, how in self.iterated(loop):
                for found, per_epoch in self.trace([source], around or again):
                    if found is source and not again and _built_for_each_run(loop, found):
                        per_epoch = False  # a new loader object (new workers) every epoch
                    yield found, per_epoch, loop.node, how
        for call in facts.calls:  # calls into other modules' training functions (and trainers' constructors)
            target = facts.callee(call) or self._constructor(call.node, call.scope)
            if target is None or target[0] is facts:
                continue
            other, function = target
            uses = other.analysis(TrainingAnalysis).param_uses(function)
            for (name, part), per_epoch_inside in uses.items():
                argument = argument_for(call.node, function, name)
                if argument is not None:
                    per_epoch = per_epoch_inside or call.loop is not None
                    named = (
                        function.owner.name
                        if function.name == "__init__" and function.owner
                        else function.name
                    )
                    how = f"`{named}(...)` in {other.path}"
                    passed = self.sources(argument, call.scope, part)
                    for found, outer in self.trace(passed, per_epoch):
                        yield found, outer, call.node, how
        for function in frameworks.lightning_train_dataloaders(facts):  # iterated every epoch
            for returned in function.returns:
                for found, _ in self.trace(self.sources(returned, function.scope), True):
                    yield found, True, function.node, "Lightning `train_dataloader()`"
        for call, loader in frameworks.fit_loaders(facts):
            for found, _ in self.trace(self.sources(loader, call.scope), True):
                yield found, True, call.node, "`trainer.fit(...)`"

    def param_uses(self, function: FunctionRecord) -> dict[tuple[str, Selector], bool]:
        """Parameters of `function` (the part of each) iterated for training, in it or below it: (name,
        part) -> per epoch."""
        uses: dict[tuple[str, Selector], bool] = {}
        for source, per_epoch, _, _ in self._training_sources():
            if isinstance(source, ParamSource) and source.function is function:
                key = (source.name, source.index)
                uses[key] = uses.get(key, False) or per_epoch
        return uses

    def _all_loader_uses(self) -> dict[int, list[LoaderUse]]:
        """Every loader of this module that feeds training, keyed by the id of its call."""
        uses: dict[int, list[LoaderUse]] = {}
        seen: dict[tuple[int, int], int] = {}  # one use per (loader, place), however many paths lead there
        for source, per_epoch, where, how in self._training_sources():
            if not isinstance(source, Loader):
                continue
            found = uses.setdefault(id(source.call), [])
            key = (id(source.call), id(where))
            if key in seen:
                previous = found[seen[key]]
                found[seen[key]] = LoaderUse(
                    where, previous.module, previous.per_epoch or per_epoch, previous.how
                )
                continue
            seen[key] = len(found)
            found.append(LoaderUse(where, self.source, per_epoch, how))
        for loader_call_id, external_uses in self._uses_from_importers().items():
            uses.setdefault(loader_call_id, []).extend(external_uses)
        return uses

    def external_training_sources(self) -> list[tuple[ExternalSource, LoaderUse]]:
        """Values returned by other modules' functions that this module iterates for training."""
        return [
            (source, LoaderUse(where, self.source, per_epoch, how))
            for source, per_epoch, where, how in self._training_sources()
            if isinstance(source, ExternalSource)
        ]

    # -- the answers about one loader -------------------------------------------------------------------

    @cached_property
    def _loader_uses(self) -> dict[int, list[LoaderUse]]:
        uses = self._all_loader_uses()
        by_call = {id(loader.call): loader for loader in self.loaders.loaders}
        for key, found in uses.items():
            loader = by_call.get(key)
            if loader is not None and (
                self.loaders.has_endless_epochs(loader) or self.loaders.iterates_its_own_way(loader)
            ):
                # Its iterator is never exhausted (or its class decides how it iterates): however the loop
                # re-creates it, its workers are not known to restart.
                uses[key] = [replace(use, per_epoch=False) for use in found]
        return uses

    def loader_uses(self, loader: Loader) -> list[LoaderUse]:
        """Where `loader` feeds training (empty: it does not, as far as the code shows)."""
        return self._loader_uses.get(id(loader.call), [])

    def _uses_from_importers(self) -> dict[int, list[LoaderUse]]:
        """Loaders this module builds in a factory whose value another project file iterates for training."""
        found: dict[int, list[LoaderUse]] = {}
        for (name, index, flags), uses in self._function_uses().items():
            function = self.source.top_level_function(name)
            if function is None:
                continue
            for returned in function.outputs:
                for loader in self.sources(returned, function.scope, index):
                    if isinstance(loader, Loader) and branch_runs(loader, function, flags):
                        if _re_yielded_forever(function, returned, loader):
                            how = f"re-yielded forever by `{name}(...)`"
                            uses = [replace(use, per_epoch=True, how=f"{use.how}, {how}") for use in uses]
                        found.setdefault(id(loader.call), []).extend(uses)
        return found

    def _function_uses(self) -> dict[tuple[str, Selector, Flags], list[LoaderUse]]:
        """(function, tuple index, the constants passed) -> where other project files train with what this
        module's top-level function returns: files that import this one, and those that import it through a
        package's `__init__.py` re-exporting it (memoised)."""
        if self._exports is not None:
            return self._exports
        self._exports = {}  # an import cycle asking back while this runs sees nothing
        facts = self.source
        if facts.project is None or facts.file is None:
            return self._exports
        feeding = self._feeding_functions()
        if not feeding:  # no function here hands back a loader: what importers do with them cannot matter
            return self._exports
        importers = list(facts.project.importers_of(facts.file))
        for importer in list(importers):
            if importer.name == "__init__.py":
                importers += [p for p in facts.project.importers_of(importer) if p not in importers]
        exports: dict[tuple[str, Selector, Flags], list[LoaderUse]] = {}
        for importer in importers:
            if not facts.project.may_name(importer, feeding, facts.file):
                continue  # it cannot call them: its facts are not built
            other = facts.project.facts_for(importer, facts.file)
            if other is None or other is facts:
                continue
            for source, use in other.analysis(TrainingAnalysis).exported_training_sources():
                if source.path == str(facts.file):
                    exports.setdefault((source.function, source.index, source.flags), []).append(use)
        self._exports = exports
        return exports

    def _feeding_functions(self) -> set[str]:
        """The top-level functions of this module whose value can be a loader, or another module's function's
        value: the only ones whose callers in other files `_function_uses` looks for. Asked first, so that a
        module of helpers (`utils/general.py`) never has its importers' facts built; an over-approximation
        (every tuple index a caller could pick is tried) keeps the answers what they were."""
        names: set[str] = set()
        widest = _widest_output(self.source.functions)
        for name in self.source.module_scope.bindings:
            function = self.source.top_level_function(name)
            if function is None or not function.outputs:
                continue
            for index in (None, *range(widest)):
                if any(
                    isinstance(source, (Loader, ExternalSource))
                    for returned in function.outputs
                    for source in self.sources(returned, function.scope, index)
                ):
                    names.add(name)
                    break
        return names

    def exported_training_sources(self) -> list[tuple[ExternalSource, LoaderUse]]:
        """Other modules' functions whose value feeds training: iterated here, or returned by a function of
        this module whose value another file iterates (`def build_loader(cfg): return build_a(cfg)`)."""
        found = self.external_training_sources()
        for (name, index, _), uses in self._function_uses().items():
            function = self.source.top_level_function(name)
            if function is None:
                continue
            for returned in function.outputs:
                for source in self.sources(returned, function.scope, index):
                    if isinstance(source, ExternalSource):
                        found += [(source, use) for use in uses]
        return found

    def training_device(self, loader: Loader) -> Device:
        """The strongest device evidence of this module and of the modules that train with `loader`."""
        modules = [self.source, *(use.module for use in self.loader_uses(loader))]
        return max(module.analysis(DeviceAnalysis).evidence.device for module in modules)

    def runs_under_main_guard(self, loader: Loader) -> bool:
        """Whether the script that builds or trains with `loader` guards its entry point."""
        uses = self.loader_uses(loader)
        return self.source.has_main_guard or any(use.module.has_main_guard for use in uses)

    def loaders_of_loop(self, loop: LoopRecord) -> list[Loader]:
        """The loaders a training loop iterates: directly, through parameters, or from another file's
        factory."""
        found: list[Loader] = []
        for source, _, _ in self.iterated(loop):
            for traced, _ in self.trace([source], False):
                if isinstance(traced, ExternalSource):
                    found += [x for x in self._external_loaders(traced) if x not in found]
                elif isinstance(traced, Loader) and traced not in found:
                    found.append(traced)
                elif isinstance(traced, ParamSource):
                    found += [x for x in self._loaders_from_importers(traced) if x not in found]
        return found

    def _loaders_from_importers(self, param: ParamSource) -> list[Loader]:
        """The loaders other project files pass for a parameter of this module's top-level function
        (`train_one_epoch(model, train_loader, ...)` in train.py, for the loop of engine.py)."""
        facts = self.source
        function = param.function
        owner = function.owner
        if owner is not None and function.name == "__init__" and facts.top_level_class(owner.name) is owner:
            name = owner.name  # `TrainLoop(data=data)` in train.py, for the loop of `TrainLoop.run_loop`
        elif facts.top_level_function(function.name) is function:
            name = function.name
        else:
            return []
        if facts.project is None or facts.file is None:
            return []
        found: list[Loader] = []
        for importer in facts.project.importers_of(facts.file):
            if not facts.project.may_name(importer, {name}, facts.file):
                continue  # it cannot call `function`: its facts are not built
            other = facts.project.facts_for(importer, facts.file)
            if other is None or other is facts:
                continue
            analysis = other.analysis(TrainingAnalysis)
            for call in other.calls:
                target = other.callee(call) or analysis._constructor(call.node, call.scope)
                argument = argument_for(call.node, function, param.name) if target is not None else None
                if target is None or target[1] is not function or argument is None:
                    continue
                passed = analysis.sources(argument, call.scope, param.index)
                for traced, _ in analysis.trace(passed, False):
                    if isinstance(traced, Loader):
                        found.append(traced)
                    elif isinstance(traced, ExternalSource):
                        found += analysis._external_loaders(traced)
        return found

    def _external_loaders(self, source: ExternalSource, depth: int = 0) -> list[Loader]:
        """The loaders another module's function returns, also through the functions it returns the value
        of (a dispatching `build_loader(cfg)`)."""
        facts = self.source
        if facts.project is None or depth > MAX_DEPTH:
            return []
        other = facts.project.facts_for(Path(source.path), facts.file)
        function = other.top_level_function(source.function) if other is not None else None
        if other is None or function is None:
            return []
        analysis = other.analysis(TrainingAnalysis)
        found: list[Loader] = []
        for returned in function.outputs:
            for traced in analysis.sources(returned, function.scope, source.index):
                if isinstance(traced, Loader):
                    if branch_runs(traced, function, source.flags):
                        found.append(traced)
                elif isinstance(traced, ExternalSource):
                    found += analysis._external_loaders(traced, depth + 1)
        return found


def call_flags(source: SourceModule, call: cst.Call, scope: Scope, function: FunctionRecord) -> Flags:
    """The constants a call gives `function`'s parameters: passed (also through a `**` dict the reader
    follows) or, when every argument is accounted for, by default (`is_training=True`)."""
    params = function.node.params
    positional = list(function.params)
    if function.owner is not None and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    arguments = read_call(
        source, call, scope, Signature(tuple(positional), star_args=params.star_arg is not None)
    )
    flags = []
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        name = param.name.value
        argument = arguments.get(name)
        if argument is not None:
            known, value = argument.constant()
        elif arguments.complete and param.default is not None:
            known, value = literal_of(param.default)
        else:
            known = False
        if known:
            flags.append((name, value))
    return tuple(flags)


def branch_runs(loader: Loader, function: FunctionRecord, flags: Flags) -> bool:
    """False when the loader is built in a branch of `function` that a call with these constants skips
    (`if is_training: ... else: DataLoader(val_set)` called with `is_training=True`); True otherwise."""
    known = dict(flags)
    for test, branch in loader.guards:
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        operand = test.expression if negated else test  # type: ignore[attr-defined]
        truth: bool | None = None
        if isinstance(operand, cst.Name) and _is_parameter(operand, loader, function, known):
            truth = bool(known[operand.value])
        elif (
            isinstance(operand, cst.Comparison)
            and len(operand.comparisons) == 1
            and isinstance(operand.left, cst.Name)
            and isinstance(operand.comparisons[0].operator, (cst.Equal, cst.NotEqual))
            and _is_parameter(operand.left, loader, function, known)
        ):  # `if split == "train":`
            ok, other = literal_of(operand.comparisons[0].comparator)
            if ok:
                truth = known[operand.left.value] == other
                truth = truth if isinstance(operand.comparisons[0].operator, cst.Equal) else not truth
        if truth is not None and (truth != negated) != branch:
            return False
    return True


def _is_parameter(name: cst.Name, loader: Loader, function: FunctionRecord, known: dict) -> bool:
    return name.value in known and any(
        b.kind is BindingKind.PARAM and b.scope is function.scope for b in loader.scope.lookup(name.value)
    )


_PARTIAL = {"functools.partial"}
# nn.Module's methods that hand back the module itself (`Trainer(model).cuda()`)
_RETURNS_ITSELF = frozenset({"to", "cuda", "cpu", "train", "half", "float", "double", "bfloat16"})


def _re_yielded_forever(function: FunctionRecord, output: cst.BaseExpression, loader: Loader) -> bool:
    """`function` is a generator that yields from `loader` inside `while True:` (`while True: yield from
    loader`), built once before that loop: each pass iterates the same loader again, an epoch of its own."""
    if not function.yields_forever or all(output is not other for other in function.yields_from):
        return False
    record = loader.record
    return record is not None and record.function is function and record.loop is None


def _is_abstract(function: FunctionRecord) -> bool:
    """A method with no code of its own: `@abstractmethod`, or a body that only raises
    `NotImplementedError`, passes, or is `...` (after a docstring)."""
    for decorator in function.node.decorators:
        expr = decorator.decorator
        name = expr.attr.value if isinstance(expr, cst.Attribute) else getattr(expr, "value", None)
        if name == "abstractmethod":
            return True
    body = function.node.body
    if not isinstance(body, cst.IndentedBlock):
        return False
    statements = list(body.body)
    if statements and is_docstring(statements[0]):
        statements = statements[1:]
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis):
                continue
            if isinstance(small, cst.Raise) and small.exc is not None:
                raised = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
                if isinstance(raised, cst.Name) and raised.value == "NotImplementedError":
                    continue
            return False
    return True


def _method_of(
    home: SourceModule, cls: ClassRecord, name: str, depth: int = 0
) -> tuple[SourceModule, FunctionRecord] | None:
    """The method `name` an object of `cls` runs: its own, or one a base class of the project defines."""
    if name in cls.methods:
        return home, cls.methods[name]
    if depth >= 4:
        return None
    for base in cls.node.bases:
        resolved = home.resolve_class(base.value, cls.scope)
        found = _method_of(*resolved, name, depth + 1) if resolved is not None else None
        if found is not None:
            return found
    return None


def _literal_position(expr: cst.Subscript) -> int | None:
    """`loaders[0]` -> 0: one non-negative integer literal as the index; None for anything else."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    ok, value = literal_of(expr.slice[0].slice.value)
    if ok and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


_DATACLASSES = {"dataclasses.dataclass", "pydantic.dataclasses.dataclass"}
_NAMED_TUPLES = {"typing.NamedTuple", "typing_extensions.NamedTuple"}


def _declared_fields(home: SourceModule, cls: ClassRecord) -> tuple[list[str], bool] | None:
    """(the fields in order, whether a positional argument can be matched to one) of a dataclass or a
    NamedTuple class; None for any other class. Positions are known only without base classes (a base
    dataclass's fields come first) and without fields left out of `__init__` (`field(init=False)`)."""
    decorators = [d.decorator for d in cls.node.decorators]
    decorators = [d.func if isinstance(d, cst.Call) else d for d in decorators]
    bases = [home.qualname(base.value, cls.scope) or "" for base in cls.node.bases]
    is_tuple = bool(bases) and all(base in _NAMED_TUPLES for base in bases)
    if not is_tuple and not any(home.qualname(d, cls.scope) in _DATACLASSES for d in decorators):
        return None
    body = cls.node.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else ()
    fields: list[str] = []
    positional = is_tuple or not bases
    for line in statements:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                annotation = home.code(small.annotation.annotation)
                if "ClassVar" in annotation or "InitVar" in annotation or "KW_ONLY" in annotation:
                    positional = False  # (InitVar and KW_ONLY change what the positions mean)
                    continue
                if isinstance(small.value, cst.Call) and "init" in {
                    a.keyword.value for a in small.value.args if a.keyword is not None
                }:
                    positional = False
                fields.append(small.target.value)
    return fields, positional


def _field_argument(call: cst.Call, name: str, fields: tuple[list[str], bool]) -> cst.BaseExpression | None:
    """The expression a construction passes for field `name` (None: not passed, or not known)."""
    names, positional = fields
    for position, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
        if arg.star:
            return None  # `Loaders(*pair)`, `Loaders(**parts)`: which argument is which is unknown
        if arg.keyword is None and positional and position < len(names) and names[position] == name:
            return arg.value
    return None


def _widest_output(functions: list[FunctionRecord]) -> int:
    """More than any tuple index `sources` can use in these functions' values: an index past every tuple,
    list and call argument list a value passes it to finds nothing that index None does not find."""
    widest = 0
    todo = [output for function in functions for output in function.outputs]
    while todo:
        expr = todo.pop()
        if isinstance(expr, (cst.Tuple, cst.List)):
            widest = max(widest, len(expr.elements))
        elif isinstance(expr, cst.Call):
            widest = max(widest, len(expr.args))
        elif isinstance(expr, cst.IfExp):
            todo += [expr.body, expr.orelse]
        elif isinstance(expr, cst.BooleanOperation):
            todo += [expr.left, expr.right]
    return widest


def _built_for_each_run(loop: LoopRecord, source: Source) -> bool:
    """`source` is a loader built again every time the training loop `loop` runs again: inside the loop
    around it (`for epoch ...: loader = DataLoader(...)`), or, with no loop around it in its function, in
    that function (a `run_epoch()` called once per epoch that builds its own loader). Each pass then
    iterates a new loader object once."""
    record = source.record if isinstance(source, Loader) else None
    if record is None:
        return False
    if loop.parent is None:
        return loop.function is not None and record.function is loop.function
    around = record.loop
    while around is not None:
        if around is loop.parent:
            return True
        around = around.parent
    return False


def _descendants(loop: LoopRecord):
    for child in loop.children:
        yield child
        yield from _descendants(child)


_SPARSE_CALLS = {
    "torch.sparse_coo_tensor", "torch.sparse_csr_tensor", "torch.spmm", "torch.sparse.mm",
    "torch.sparse.addmm",
    "torch.sparse.FloatTensor", "torch.sparse.LongTensor", "torch.sparse.sum", "torch.sparse.softmax",
}  # fmt: skip
_SPARSE_METHODS = {"to_sparse", "to_sparse_csr", "to_sparse_coo"}
_SPARSE_WORDS = ("sparse", "spmm")  # in every name above, and in any import of one


def _returns_sparse(home: SourceModule, function: FunctionRecord, depth: int, seen: set[int]) -> bool:
    if depth > 2 or id(function) in seen:
        return False
    seen.add(id(function))
    return any(_sparse_value(home, value, function.scope, depth, seen) for value in function.returns)


def _sparse_value(
    home: SourceModule, expr: cst.BaseExpression, scope: Scope, depth: int, seen: set[int], hops: int = 0
) -> bool:
    """`x.to_sparse()`, `torch.sparse_coo_tensor(...)`, moved with `.to(device)`, in a returned tuple, or
    the last value a name was given (a later `adj = torch.eye(n) + adj` makes it dense again)."""
    if hops > 8:
        return False
    if isinstance(expr, (cst.Tuple, cst.List)):
        return any(_sparse_value(home, e.value, scope, depth, seen, hops + 1) for e in expr.elements)
    if isinstance(expr, cst.Name):
        values = home.assigned_values(expr, scope)
        last = values[-1] if values else None
        return last is not None and _sparse_value(home, last.value, last.scope, depth, seen, hops + 1)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute):
        if func.attr.value in _SPARSE_METHODS:
            return True
        if func.attr.value in ("to", "cuda", "coalesce", "float", "double"):
            return _sparse_value(home, func.value, scope, depth, seen, hops + 1)
    if (home.qualname(func, scope) or "") in _SPARSE_CALLS:
        return True
    target = home.callee_of_call(expr, scope)
    return target is not None and _returns_sparse(*target, depth + 1, seen)
