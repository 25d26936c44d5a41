"""Which models are trained, how each was built, placed, wrapped and compiled, and where `torch.compile` runs.

A *trained model* is an object whose parameters reach an optimizer — `AdamW(model.parameters())`, parameter
groups built from `model.named_parameters()`, `create_optimizer_v2(model, ...)`,
`model.configure_optimizers(...)` (nanoGPT), `model.setup_optimizer(...)` (nanochat), a Lightning
`trainer.fit(model)`, parameter groups from a helper given the model (`add_weight_decay(model, wd)`) — in a
module that trains (it has a training loop, calls a function that has one, or hands training to a trainer
object), and it is run (called, handed to code that may call it, or through a method of its class that calls
it: `model.loss(x, y)` computing `self(x)`). Parameters are followed through lists filled in place
(`params += list(m.parameters())` in a loop over modules, `groups.append(...)`) and project helpers that
return them (`get_params(model)`); a framework object (`L.Fabric(...)`, `Accelerator()`) is never a model.
It is named by a variable (`model`) or an attribute of `self` (`self.model`); `model.module.parameters()` and
`self.net.encoder.parameters()` name `model` and `self.net`. A model that is a parameter of the function
that builds the optimizer is followed to every caller's argument, in this module and, through the project
index, from the modules that call in (`train(model, ...)` in engine.py, the model built in main.py).

Its *events* are what the code does to it: built (`Net()`, `create_model(...)`,
`AutoModel.from_pretrained(...)`), placed (`.to(device)`, `.cuda()`), wrapped (DDP, FSDP, DataParallel,
`fully_shard`, `accelerator.prepare`, any call that is given the model and whose result is the model again),
compiled, loaded from a state dict, pickled whole (`torch.save(model)`), or copied for an EMA.

*Compile sites* are every place the code asks for compilation: `torch.compile(...)` under any alias,
`x.compile()`, `@torch.compile`, `torch._dynamo.optimize(...)`, and a `compile`/`torch_compile`/
`dynamo_backend` argument of any call (`TrainingArguments(torch_compile=True)`, `Accelerator(dynamo_backend=
...)`, `build_model(cfg, compile=args.compile)`): a module with one has decided about compilation, and that
decision (often behind a flag) is the author's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import argument_for
from torchlint.facts.syntax.module import Assignment
from torchlint.facts.syntax.names import BindingKind, Scope, dotted
from torchlint.facts.syntax.walk import simple_lines, subexpressions
from torchlint.facts.torch import frameworks
from torchlint.facts.torch.composition import Composition, CompositionAnalysis
from torchlint.facts.torch.devices import DeviceAnalysis
from torchlint.facts.torch.reach import may_run_backward
from torchlint.facts.torch.training import TrainingAnalysis
from torchlint.facts.torch.vocabulary import Device
from torchlint.memo import ByIdentity

if TYPE_CHECKING:
    from pathlib import Path

    from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.exports import Export, ExportIndex

    Receiver = tuple[cst.BaseExpression, Scope]  # what `.parameters()` is called on, in its scope

MAX_DEPTH = 4

_OPTIMIZER_MODULES = (
    "torch.optim.",
    "timm.optim.",
    "bitsandbytes.optim.",
    "apex.optimizers.",
    "transformers.optimization.",
    "torch.distributed.optim.",
    "deepspeed.ops.",
)
_OPTIMIZER_ROOTS = tuple(module.rstrip(".") for module in _OPTIMIZER_MODULES)
_OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "Rprop", "NAdam", "RAdam", "LBFGS",
    "SparseAdam", "ASGD", "Lion", "Adafactor", "LAMB", "Lamb", "FusedAdam", "FusedLAMB", "AdamW8bit",
    "Adam8bit", "PagedAdamW", "Muon", "ZeroRedundancyOptimizer", "Adan", "Prodigy", "SGDW", "SAM",
}  # fmt: skip
_OPTIMIZER_FACTORIES = {
    "create_optimizer",
    "create_optimizer_v2",
    "build_optimizer",
    "get_optimizer",
    "make_optimizer",
    "configure_optimizers",
    "init_optimizer",
}
# Methods of a model that build an optimizer over its own parameters (nanoGPT, nanochat): the receiver
# is trained.
_MODEL_OPTIMIZER_METHODS = {"configure_optimizers", "setup_optimizer", "setup_optimizers"}
# Optimizer families, found as a word of a third-party class's CamelCase name (`MuonAdamAtan2`, `SophiaG`).
_OPTIMIZER_FAMILIES = (
    "Adam", "AdamW", "SGD", "Lion", "Muon", "LAMB", "Lamb", "Adafactor", "Adan", "Prodigy", "RMSprop",
    "Adagrad", "Sophia", "Shampoo", "Ranger", "NovoGrad", "LARS", "Lars",
)  # fmt: skip
# Every optimizer call names one of these (an import of torch.optim, a factory named *optimizer*, a class).
_OPTIMIZER_TEXT = ("optim", "Optim", *_OPTIMIZER_CLASSES, *_OPTIMIZER_FAMILIES)
_PARAMETER_METHODS = {"parameters", "named_parameters"}
PLACEMENTS = {"to", "cuda", "to_empty"}
_KERAS_COMPILE = {"optimizer", "loss", "metrics", "loss_weights", "run_eagerly", "jit_compile"}
_WRAPPERS = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
}
_COMPILERS = {"torch.compile", "torch._dynamo.optimize"}
_COMPILE_KEYWORDS = {"compile", "torch_compile", "dynamo_backend", "compile_model", "use_compile"}
# Names of a loss module (`loss_fn`, `mel_loss_func`): not a model to compile.
_LOSS_NAME_ENDINGS = ("loss_fn", "loss_func", "loss_function", "lossfn", "loss_module")
# `torch.nn.Module`'s own methods (all but `forward`): calling one runs none of the model's compute.
MODULE_METHODS = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda", "double", "eval",
    "extra_repr", "float", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu",
    "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules",
    "named_parameters", "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_module",
    "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_",
    "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train", "type",
    "xpu", "zero_grad",
})  # fmt: skip
# Builtins that only show or inspect what they are given (`print(model)`): they do not run it.
SHOWS = frozenset({
    "print", "len", "repr", "str", "id", "type", "isinstance", "issubclass", "hasattr", "getattr", "callable",
    "format", "vars", "dir",
})  # fmt: skip
# Methods iterating a module's submodules: `for m in model.modules(): params += list(m.parameters())`.
_SUBMODULE_ITERATORS = {"modules", "children", "named_modules", "named_children"}
# Methods that add to a list in place: `params.extend(model.parameters())`.
_LIST_FILLERS = {"append", "extend", "insert"}
# Classes whose objects run training for a model (Lightning's `Fabric`, accelerate's `Accelerator`, and
# project subclasses named so): a framework object is never a model, whatever it is handed.
_FRAMEWORK_CLASSES = ("Fabric", "Accelerator")


@dataclass(frozen=True)
class Event:
    """One thing the code does to a model: `kind` is build, place, wrap, compile, load, save-whole or ema."""

    kind: str
    node: cst.CSTNode  # the call (or the assigned expression)
    statement: cst.CSTNode | None  # the assignment or the call that stands alone as a statement
    conditional: bool
    in_loop: bool
    source: SourceModule = field(compare=False, repr=False)
    scope: Scope | None = field(default=None, compare=False, repr=False)  # where it happens

    @property
    def rank(self) -> float:
        """Where it happens in the text, as a rank of the module's `text_order` (ordered as offsets are)."""
        return self.source.text_order().start(self.node)


@dataclass(frozen=True)
class CompileSite:
    """A place the code asks for compilation; `target` is what `x = torch.compile(m)` binds (a Name)."""

    node: cst.CSTNode
    how: str  # "`torch.compile(...)`", "`.compile()`", "`@torch.compile`", "`torch_compile=`"
    call: CallRecord | None
    compiled: cst.BaseExpression | None  # the argument or receiver that is compiled
    target: cst.Assign | None = None  # `compiled = torch.compile(model)`: the assignment
    standalone: bool = False  # `torch.compile(model)` as a statement of its own: its result is dropped
    callee: str = ""  # the compile function as written (`torch.compile`, `tc`)
    target_text: str = ""  # what the assignment binds (`compiled`)

    @property
    def in_place(self) -> bool:
        """`module.compile()`: compiles its receiver and returns nothing to keep."""
        return self.how == "`.compile()`"


@dataclass(eq=False)
class Model:
    """A trained model as this module names it."""

    text: str  # how the code names it: "model", "self.model"
    expr: cst.BaseExpression  # one place it is named (for positions)
    scope: Scope  # the scope that decides the name (a method's, for `self.x`)
    how: str  # how it is trained: "`AdamW(...)`", "`train(...)` in engine.py"
    trained_at: cst.CSTNode  # the optimizer call, or the call that hands it to the function that trains it
    events: list[Event] = field(default_factory=list)  # in the order they were found, not the text's
    involved: list[SourceModule] = field(default_factory=list)  # modules that build, compile or train it
    is_parameter: bool = False  # a parameter here: built by the callers
    framework: str = ""  # "lightning": a LightningModule given to `trainer.fit(...)`

    def of_kind(self, *kinds: str) -> list[Event]:
        return [event for event in self.events if event.kind in kinds]

    @property
    def builds(self) -> list[Event]:
        return self.of_kind("build")


class ModelAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self._params: dict[int, dict[str, str]] | None = None
        self._optimized_only: list[Model] = []
        self._receivers: ByIdentity[list[Receiver]] = ByIdentity()  # per expression, scope and depth

    # -- what trains ------------------------------------------------------------------------------------

    @cached_property
    def trains(self) -> bool:
        """This module runs a training loop, here or through a function it calls, or hands training to a
        trainer object (`trainer.train()` on a `*Trainer` or a project class whose methods train)."""
        source = self.source
        training = source.analysis(TrainingAnalysis)
        if training.training_loops:
            return True
        for call in source.calls:
            # Another file's function whose export shows it runs no backward pass has no training loop:
            # its facts are built only to learn whether the call resolves at all.
            quiet = training.runs_no_training(call, steps=False)
            target = source.callee(call) if not quiet or self._hands_optimizer_to_training(call) else None
            if not quiet and target is not None:
                home, function = target
                if home.analysis(TrainingAnalysis).has_training_loop(function):
                    return True
            if self._runs_a_trainer(call) or target is None and self._hands_optimizer_to_training(call):
                return True
        return False

    def _hands_optimizer_to_training(self, call: CallRecord) -> bool:
        """`train(args, model, loader, optimizer, epoch)` into a function this analysis cannot see (a star
        import, another package): named for training and given an optimizer built here."""
        name = last_name(call.node.func)
        if "train" not in name.lower() or "pretrain" in name.lower():
            return False
        optimizers = {id(found.node) for found, _ in self._optimizers}
        for arg in call.node.args:
            if isinstance(arg.value, cst.Name):
                for assignment in self.source.assigned_values(arg.value, call.scope):
                    if id(assignment.value) in optimizers:
                        return True
        return False

    def _runs_a_trainer(self, call: CallRecord) -> bool:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("train", "fit")):
            return False
        for assignment in self.source.assigned_values(func.value, call.scope):
            value = assignment.value
            if not isinstance(value, cst.Call):
                continue
            if last_name(value.func).endswith("Trainer"):
                return True
            found = self.source.resolve_class(value.func, assignment.scope)
            if found is not None:
                home, cls = found
                training = home.analysis(TrainingAnalysis)
                if any(training.has_training_loop(method) for method in cls.methods.values()):
                    return True
        return False

    @cached_property
    def trained(self) -> list[Model]:
        """The trained models this module names, one per variable or attribute."""
        found: dict[tuple, Model] = {}
        for call, how in self._optimizers:
            for root, scope in self._roots_in(call.node, call.scope):
                self._add(found, root, scope, how, call.node)
        for call, argument in frameworks.lightning_fits(self.source):  # `trainer.fit(model, ...)`
            for root, scope in self._roots_of_value(argument, call.scope):
                model = self._add(found, root, scope, f"`{self.source.code(call.node.func)}(...)`", call.node)
                if model is not None:
                    model.framework = "lightning"
        for call in self.source.calls:  # `train(model, ...)`: a function here or elsewhere that trains it
            if not self._may_hand_over_a_model(call) or not self._may_train_what_it_is_handed(call):
                continue  # resolving every call's callee would parse half the project
            target = self.source.callee(call)
            if target is None:
                continue
            home, function = target
            for name in home.analysis(ModelAnalysis).trained_params(function):
                argument = argument_for(call.node, function, name)
                if argument is None:
                    continue
                where = "" if home is self.source else f" in {relative_path(home.path, self.source.path)}"
                how = f"`{function.name}(...)`{where}"
                for root, scope in self._roots_of_value(argument, call.scope):
                    model = self._add(found, root, scope, how, call.node)
                    if model is not None and home not in model.involved:
                        model.involved.append(home)
        losses = [model for model in found.values() if self._is_loss(model)]
        self._optimized_only = [
            m for m in found.values() if not m.is_parameter and (m in losses or not self._is_run(m))
        ]
        models = [
            model
            for model in found.values()
            if not model.is_parameter and model not in losses and self._is_run(model)
        ]
        if not models or not self.trains:  # asked last: most modules have no model to ask it for
            return []
        for model in models:
            self._collect_events(model)
        return models

    def _is_loss(self, model: Model) -> bool:
        """A loss module whose parameters join the model's in the optimizer (`list(model.parameters()) +
        list(criterion.parameters())`, an adaptive softmax's tail vectors): named like a loss (`criterion`,
        `loss_fn`) or built from a class named like one (`SplitCrossEntropyLoss(...)`, `SetCriterion(...)`).
        It is not a model to compile: the model it scores is."""
        name = model.text.rsplit(".", 1)[-1].lower()
        if "criterion" in name or name.endswith(_LOSS_NAME_ENDINGS):
            return True
        values = self.source.assignments(model.expr, model.scope) or []
        builds = [unplaced(a.value) for a in values if not self.rebinds(model.expr, a.value)]
        return bool(builds) and all(
            isinstance(value, cst.Call) and last_name(value.func).endswith(("Loss", "Criterion"))
            for value in builds
        )

    @cached_property
    def optimized(self) -> list[Model]:
        """`models`, and the names this module gives an optimizer the parameters of without running them
        itself: `model_without_ddp = model` (or `model.module`) next to the `model` that is run — the same
        module under a second name — and loss modules whose parameters it trains (`criterion`). Asked by the
        checkpointing facts, which need the classes built."""
        models = self.trained
        extra = self._optimized_only
        if not extra or not self.trains:
            return models
        for model in extra:
            self._collect_events(model)
        return [*models, *extra]

    def _is_run(self, model: Model) -> bool:
        """The model is called (`model(x)`), handed to code that may call it (`train(model)`, `DDP(model)`;
        not `print(model)`), or runs a method of its project class that calls it (`model.loss(x, y)` computing
        `self(x)`): a parameter server's copy that only an optimizer steps is not trained by a forward pass
        here."""
        source = self.source
        arguments = self._argument_ids
        if isinstance(model.expr, cst.Name):
            if any(
                (ref.call is not None and not ref.attrs)
                or (id(ref.expr) in arguments and not self._shown(ref.expr))
                for binding in model.scope.bindings.get(model.text, [])
                for ref in source.references_of(binding)
            ):
                return True
        else:
            owner = source.class_of_method_scope(model.scope)
            for call in source.calls:
                if source.class_of_method_scope(call.scope) != owner:
                    continue
                if dotted(call.node.func) == model.text:
                    return True
                if any(dotted(arg.value) == model.text for arg in call.node.args) and not self._shows(call):
                    return True
        return self._runs_a_method(model)

    def _runs_a_method(self, model: Model) -> bool:
        """`model.loss(x, y).backward()` (also through `model.module`) where `loss` is a method of the
        model's project class that calls the module itself (`self(x)`): the model runs through its forward.
        The result must be used (`model.init_weights()` alone on its line computes nothing for training). A
        method that only runs submodules (`agent.get_action_and_value(obs)` with `self.actor(x)`) does not
        train the model through its forward: nothing an in-place compile wraps would run."""
        classes = self.classes_of(model)
        if not classes:
            return False
        for call in self.source.calls:
            func = call.node.func
            if not isinstance(func, cst.Attribute) or func.attr.value in MODULE_METHODS:
                continue
            if self._standalone(call.node) or not self._is_model(
                model, _unwrapped(func.value), call.scope, True
            ):
                continue
            for cls in classes:
                found = method_of(cls, func.attr.value)
                if found is not None and calls_itself(*found):
                    return True
        return False

    def classes_of(self, model: Model) -> list[tuple[SourceModule, ClassRecord]]:
        """The project classes the model is built from, where a build names one (`Agent(envs).to(device)`)."""
        found = []
        for assignment in self.source.assignments(model.expr, model.scope) or []:
            value = unplaced(assignment.value)
            if isinstance(value, cst.Call) and not self.rebinds(model.expr, assignment.value):
                cls = self.source.resolve_class(value.func, assignment.scope)
                if cls is not None:
                    found.append(cls)
        return found

    def _shown(self, expr: cst.BaseExpression) -> bool:
        """`expr` is an argument of a builtin that only shows or inspects it (`print(model)`)."""
        call = self._argument_calls.get(id(expr))
        return call is not None and self._shows(call)

    def _shows(self, call: CallRecord) -> bool:
        return (self.source.qualname(call.node.func, call.scope) or "") in SHOWS

    @cached_property
    def _argument_calls(self) -> dict[int, CallRecord]:
        """Every call argument's value, by id, with its call."""
        return {id(arg.value): call for call in self.source.calls for arg in call.node.args}

    @cached_property
    def _argument_ids(self) -> set[int]:
        """Expressions handed to other code: call arguments, and what functions return (a factory's
        `return model, optimizer`; a caller then trains it)."""
        found = set(self._argument_calls)
        for function in self.source.functions:
            for returned in function.returns:
                found.add(id(returned))
                if isinstance(returned, (cst.Tuple, cst.List)):
                    found.update(id(element.value) for element in returned.elements)
        return found

    def trained_params(self, function: FunctionRecord) -> dict[str, str]:
        """Parameters of `function` whose parameters reach an optimizer, in it or in a function it hands
        them to that builds the optimizer itself: name -> how. (One call deep: following every call of
        every module transitively costs more than the whole check of a large project.)"""
        if self._params is None:
            self._params = {}  # a cycle asking back while this runs sees nothing
            table = {key: dict(value) for key, value in self._direct_params.items()}
            for call in self.source.calls:
                if not self._calls_local_function(call):
                    continue  # another module's functions are asked from their callers' side
                target = self.source.callee(call)
                if target is None:
                    continue
                home, callee = target
                for name, how in home.analysis(ModelAnalysis)._direct_params.get(id(callee), {}).items():
                    argument = argument_for(call.node, callee, name)
                    if argument is not None:
                        for root, scope in self._roots_of_value(argument, call.scope):
                            self._note_parameter(table, root, scope, how)
            self._params = table
        return self._params.get(id(function), {})

    def _may_hand_over_a_model(self, call: CallRecord) -> bool:
        """An argument is something built here: a name or `self.x` assigned a call (`Net().to(device)`)."""
        source = self.source
        for arg in call.node.args:
            value = unplaced(arg.value)
            if isinstance(value, cst.Name) or source.is_self_attribute(value, call.scope):
                if any(isinstance(a.value, cst.Call) for a in source.assigned_values(value, call.scope)):
                    return True
        return False

    def _may_train_what_it_is_handed(self, call: CallRecord) -> bool:
        """The function the call runs may be one `trained_params` finds parameters of: one of this module,
        or of a module that may build an optimizer (read from its export, without building its facts)."""
        source = self.source
        files = source.callee_files(call.node, call.scope)
        if files is None or source.project is None or source.file is None or source.real_file in files:
            return True
        project: ExportIndex = source.project  # type: ignore[assignment]
        func = call.node.func
        name = func.value if isinstance(func, cst.Name) else None  # `obj.fit(...)` may be a method
        exports = (project.export_of(file, source.file) for file in files)
        return any(function_may_build_optimizers(export, name) for export in exports)

    def _calls_local_function(self, call: CallRecord) -> bool:
        """`helper(...)` of a def in this module, or `self.method(...)`: resolved without the project."""
        func = call.node.func
        if isinstance(func, cst.Name):
            bindings = call.scope.lookup(func.value)
            return bool(bindings) and all(b.kind is BindingKind.DEF for b in bindings)
        return isinstance(func, cst.Attribute) and self._is_self(func.value, call.scope)

    @cached_property
    def _direct_params(self) -> dict[int, dict[str, str]]:
        """Function id -> its parameters given to an optimizer built in it."""
        table: dict[int, dict[str, str]] = {}
        for call, how in self._optimizers:
            for root, scope in self._roots_in(call.node, call.scope):
                self._note_parameter(table, root, scope, how)
        return table

    def _note_parameter(self, table: dict, root: cst.BaseExpression, scope: Scope, how: str) -> None:
        if isinstance(root, cst.Name) and self._is_parameter(root.value, scope):
            owner = self.source.function_of_scope(scope.deciding_scope(root.value) or scope)
            if owner is not None:
                table.setdefault(id(owner), {})[root.value] = how

    def _add(
        self, found: dict, root: cst.BaseExpression, scope: Scope, how: str, where: cst.CSTNode
    ) -> Model | None:
        key = self._key(root, scope)
        if key is None:
            return None
        if key not in found:
            if self._is_framework_object(root, scope):
                return None  # `fabric.setup_optimizers(...)`: Lightning's Fabric, accelerate's Accelerator
            is_param = isinstance(root, cst.Name) and self._is_parameter(root.value, scope)
            deciding = scope.deciding_scope(root.value) if isinstance(root, cst.Name) else scope
            found[key] = Model(
                self.source.code(root), root, deciding or scope, how, where, involved=[self.source],
                is_parameter=is_param,
            )  # fmt: skip
        return found[key]

    def _key(self, root: cst.BaseExpression, scope: Scope) -> tuple | None:
        if isinstance(root, cst.Name):
            deciding = scope.deciding_scope(root.value)
            return ("name", id(deciding), root.value) if deciding is not None else None
        owner = self.source.class_of_method_scope(scope)
        if owner is not None and isinstance(root, cst.Attribute):
            return ("attr", id(owner[0]), root.attr.value)
        return None

    def _is_parameter(self, name: str, scope: Scope) -> bool:
        bindings = scope.lookup(name)
        return bool(bindings) and all(b.kind is BindingKind.PARAM for b in bindings)

    @cached_property
    def _optimizers(self) -> list[tuple[CallRecord, str]]:
        """Calls that build an optimizer, with how a message names them."""
        source = self.source
        if not any(token in source.text for token in _OPTIMIZER_TEXT):
            return []  # no optimizer can be named without one of these
        found = []
        for call in source.calls:
            if self.builds_optimizer(call):
                found.append((call, f"`{source.code(call.node.func)}(...)`"))
        return found

    def builds_optimizer(self, call: CallRecord) -> bool:
        source = self.source
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MODEL_OPTIMIZER_METHODS:
            # `model.configure_optimizers(weight_decay, lr, ...)` builds one over the model's parameters;
            # Fabric's `fabric.setup_optimizers(optimizer)` is handed one already built: not a model
            return not self._is_self(func.value, call.scope) and not self._given_an_optimizer(call)
        if isinstance(func, cst.Call):  # getattr(torch.optim, name)(model.parameters(), ...)
            return (
                source.qualname(func.func, call.scope) == "getattr"
                and bool(func.args)
                and source.qualname(func.args[0].value, call.scope) == "torch.optim"
            )
        last = last_name(func)
        if not last:
            return False
        if _is_factory(last) or last in _OPTIMIZER_CLASSES or _named_like_an_optimizer_class(last):
            return True
        if not last[:1].isupper() or last == "Optimizer":
            return False
        qualname = source.qualname(func, call.scope) or ""
        return qualname.startswith(_OPTIMIZER_MODULES) and "lr_scheduler" not in qualname

    def _given_an_optimizer(self, call: CallRecord) -> bool:
        """A positional argument that is an optimizer: named so, built in the call
        (`fabric.setup_optimizers(torch.optim.AdamW(...))`), or bound to a call that builds one."""
        for arg in call.node.args:
            if arg.keyword is not None:
                continue
            record = self._call_records.get(id(arg.value))
            if record is not None and self.builds_optimizer(record):
                return True
            if not isinstance(arg.value, cst.Name):
                continue
            if "optim" in arg.value.value.lower():
                return True
            for assigned in self.source.assigned_values(arg.value, call.scope):
                record = self._call_records.get(id(assigned.value))
                if record is not None and self.builds_optimizer(record):
                    return True
        return False

    def _is_framework_object(self, root: cst.BaseExpression, scope: Scope) -> bool:
        """`fabric = L.Fabric(...)`, `accelerator = Accelerator()` (or `self.fabric = ...`): an object of a
        training framework, never a model to compile, whatever its methods are handed."""
        for assignment in self.source.assigned_values(root, scope):
            value = assignment.value
            if not isinstance(value, cst.Call):
                continue
            if last_name(value.func).endswith(_FRAMEWORK_CLASSES):
                return True
        return False

    def _is_self(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        owner = self.source.class_of_method_scope(scope)
        return owner is not None and isinstance(expr, cst.Name) and expr.value == owner[1]

    # -- from an optimizer's arguments to the model -----------------------------------------------------

    def _roots_in(
        self, call: cst.Call, scope: Scope, depth: int = 0
    ) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        """The models whose parameters an optimizer call is given."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MODEL_OPTIMIZER_METHODS:
            root = self._root_of(func.value, scope)
            if root is not None:
                yield root, scope
            return
        factory = _is_factory(last_name(func))
        for arg in call.args:
            if factory and isinstance(arg.value, (cst.Name, cst.Attribute)):
                root = self._root_of(arg.value, scope)
                if root is not None and self._names_a_model(root, scope):
                    yield root, scope
            yield from self._parameter_receivers(arg.value, scope, depth)

    def _parameter_receivers(self, expr: cst.CSTNode, scope: Scope, depth: int) -> list[Receiver]:
        """`m.parameters()` / `m.named_parameters()` anywhere in `expr`, following names to their values.
        Kept per expression, scope and depth: a long script reaches the same names along many paths (timm's
        train.py: 6,120 searches, 174 different), and each search is a pure function of those three (the
        depth grows along every path, so a search never waits on itself)."""
        search = self._search_receivers
        return self._receivers.answer((expr, scope), lambda: list(search(expr, scope, depth)), depth)

    def _search_receivers(self, expr: cst.CSTNode, scope: Scope, depth: int) -> Iterator[Receiver]:
        if depth > MAX_DEPTH:
            return
        for node in subexpressions(expr):  # exact types below: every subexpression of every optimizer call
            if type(node) is cst.Call:
                func = node.func
                if type(func) is cst.Attribute and func.attr.value in _PARAMETER_METHODS:
                    yield from self._receiver_roots(func.value, scope, depth)
                elif groups_parameters(last_name(func)) and node.args and node.args[0].keyword is None:
                    # `add_weight_decay(model, wd)`, `param_groups_lrd(model, ...)`: groups of its parameters
                    first = node.args[0].value
                    root = (
                        self._root_of(first, scope) if isinstance(first, (cst.Name, cst.Attribute)) else None
                    )
                    if root is not None and self._names_a_model(root, scope):
                        yield root, scope
                elif depth < MAX_DEPTH:
                    yield from self._returned_parameters(node, scope, depth)
            elif type(node) is cst.Name and depth < MAX_DEPTH:
                for assignment in self.source.assigned_values(node, scope):
                    yield from self._parameter_receivers(assignment.value, assignment.scope, depth + 1)
                for value, where in self._filled_into(node, scope):
                    yield from self._parameter_receivers(value, where, depth + 1)

    def _filled_into(self, name: cst.Name, scope: Scope) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        """What the code adds to a list in place (`params += list(m.parameters())`,
        `params.extend(...)`, `groups.append({"params": [p]})`), and the iterable a loop variable is drawn
        from (`for name, p in model.named_parameters()`)."""
        bindings = scope.lookup(name.value)
        for binding in bindings:
            if binding.kind is not BindingKind.OTHER:
                continue
            if isinstance(binding.node, cst.AugAssign) and isinstance(binding.node.operator, cst.AddAssign):
                yield binding.node.value, binding.scope
            elif binding.value is not None:  # a `for` (or comprehension) target: its iterable
                yield binding.value, binding.scope
        seen: set[int] = set()
        for binding in bindings:
            for ref in self.source.references_of(binding):
                if id(ref.expr) in seen or ref.call is None or len(ref.attrs) != 1:
                    continue
                seen.add(id(ref.expr))
                if ref.attrs[0] in _LIST_FILLERS:
                    for arg in ref.call.args:
                        yield arg.value, ref.scope

    def _receiver_roots(
        self, receiver: cst.BaseExpression, scope: Scope, depth: int
    ) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        """The models a `.parameters()` receiver names: `model.encoder` -> `model`; a loop variable drawn
        from a literal of modules (`for m in (encoder, decoder)`) or from a model's submodules
        (`for m in model.modules()`) -> those; a loop variable drawn from anything else -> none."""
        root = self._root_of(receiver, scope)
        if root is None:
            return
        iterables = self._loop_iterables(root, scope) if isinstance(root, cst.Name) else None
        if iterables is None:
            yield root, scope
            return
        if depth >= MAX_DEPTH:
            return
        for iterable, where in iterables:
            if isinstance(iterable, cst.Name):
                for assigned in self.source.assigned_values(iterable, where):
                    yield from self._modules_listed(assigned.value, assigned.scope, depth + 1)
            else:
                yield from self._modules_listed(iterable, where, depth + 1)

    def _modules_listed(
        self, iterable: cst.BaseExpression, scope: Scope, depth: int
    ) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        if isinstance(iterable, (cst.Tuple, cst.List)):
            for element in iterable.elements:
                if isinstance(element.value, (cst.Name, cst.Attribute)):
                    yield from self._receiver_roots(element.value, scope, depth)
        elif (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value in _SUBMODULE_ITERATORS
        ):
            yield from self._receiver_roots(iterable.func.value, scope, depth)

    def _loop_iterables(self, name: cst.Name, scope: Scope) -> list[tuple[cst.BaseExpression, Scope]] | None:
        """The iterables a name is drawn from, when every binding of it is a `for` or comprehension target."""
        bindings = scope.lookup(name.value)
        if not bindings or any(
            b.kind is not BindingKind.OTHER or b.value is None or isinstance(b.node, cst.AugAssign)
            for b in bindings
        ):
            return None
        return [(b.value, b.scope) for b in bindings]  # type: ignore[misc]

    def _returned_parameters(
        self, call: cst.Call, scope: Scope, depth: int
    ) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        """`get_params(model)` of a project function that returns parameters of what it is given
        (`return [p for p in net.parameters() if p.requires_grad]`): the caller's argument; also
        `self.trainable_parameters()` returning `self.model.parameters()` in the same class."""
        target = self.source.callee_of_call(call, scope)
        if target is None:
            return
        home, function = target
        analysis = home.analysis(ModelAnalysis)
        for returned in function.returns:
            for root, where in analysis._parameter_receivers(returned, function.scope, depth + 1):
                if isinstance(root, cst.Name):
                    if not analysis._is_parameter(root.value, where):
                        continue
                    argument = argument_for(call, function, root.value)
                    if argument is not None:
                        yield from self._roots_of_value(argument, scope)
                elif home is self.source and self.source.class_of_method_scope(where) == (
                    self.source.class_of_method_scope(scope)
                ):
                    yield root, where

    def _root_of(self, expr: cst.BaseExpression, scope: Scope, hops: int = 0) -> cst.BaseExpression | None:
        """`model.module.backbone` -> `model`; `self.net.encoder` -> `self.net`; `self` alone -> None; a
        second name for a model (`raw_model = model.module if ddp else model`, `model_without_ddp = model`)
        -> the model's own name."""
        chain: list[cst.Attribute] = []
        while isinstance(expr, cst.Attribute):
            chain.append(expr)
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return None
        if self._is_self(expr, scope):
            return chain[-1] if chain else None
        aliased = self._alias_of(expr, scope, at_use=hops == 0) if hops < 3 else None
        return self._root_of(aliased, scope, hops + 1) if aliased is not None else expr

    def _alias_of(self, name: cst.Name, scope: Scope, at_use: bool = False) -> cst.Name | None:
        """The other name `name` is only ever bound to (through `.module` and conditionals). Where it is
        bound to different things, and `name` is a use in the text (`at_use`), the bindings that reach that
        use decide: `raw_model = self.model.module ...` again after the optimizer was built (before saving)
        does not make the name the optimizer was given ambiguous."""
        assigned = self.source.assigned_values(name, scope)
        found = self._single_alias(name, scope, assigned)
        if found is None and at_use and len(assigned) > 1:
            reaching = self._reaching(name, scope)
            if reaching is not None and len(reaching) < len(assigned):
                found = self._single_alias(name, scope, reaching)
        return found

    def _reaching(self, use: cst.Name, scope: Scope) -> list[Assignment] | None:
        """The assignments of `use`'s name in its own function that may reach it: those before it, and those
        after it inside a loop around it (they run before its next pass). Asked only for a name bound to
        different things; the order of the text answers it, not offsets (they cost a rendering of the
        function, in every other module a cross-file question reaches)."""
        source = self.source
        bindings = [
            b for b in scope.lookup(use.value) if b.kind is BindingKind.ASSIGN and b.value is not None
        ]
        if any(b.scope is not scope or b.node is None for b in bindings):
            return None
        order = source.text_order(scope.node)
        if not order.knows(use, *(b.node for b in bindings)):  # type: ignore[misc]
            return None
        at = order.span(use)[0]
        loops = [
            span
            for loop in source.loops
            if loop.scope is scope
            for span in [order.span(loop.node)]
            if span[0] <= at < span[1]
        ]
        reaching = []
        for binding in bindings:
            start = order.span(binding.node)[0]  # type: ignore[arg-type]
            if start < at or any(first <= start < last for first, last in loops):
                reaching.append(Assignment(binding.value, binding.scope, binding.index))  # type: ignore[arg-type]
        return reaching

    def _single_alias(self, name: cst.Name, scope: Scope, assignments: list[Assignment]) -> cst.Name | None:
        """The one other name `assignments` bind `name` to; also when some bind it to `self.model` and the
        others to `model` where `model` is `self.model` (`model, config = self.model, self.config`)."""
        names: set[str] = set()
        attributes: set[str] = set()
        for assigned in assignments:
            if assigned.index is not None or assigned.scope is not scope:
                return None
            for branch in _branches(assigned.value):
                base = _unwrapped(branch)
                if isinstance(base, cst.Name) and base.value != name.value:
                    names.add(base.value)
                elif self.source.is_self_attribute(base, scope):
                    attributes.add(self.source.code(base))
                else:
                    return None
        if len(names) != 1:
            return None
        target = cst.Name(names.pop())
        if attributes and {self._origin(target, scope)} != attributes:
            return None
        return target

    def _origin(self, name: cst.Name, scope: Scope) -> str:
        """The `self.x` a local name is only a second name for (`model, config = self.model, self.config`;
        `model = self.model.module`), else the name itself."""
        assigned = self.source.assigned_values(name, scope)
        if len(assigned) != 1 or assigned[0].scope is not scope:
            return name.value
        value = assigned[0].value
        if assigned[0].index is not None:
            if not isinstance(value, (cst.Tuple, cst.List)) or assigned[0].index >= len(value.elements):
                return name.value
            value = value.elements[assigned[0].index].value
        base = _unwrapped(value)
        return self.source.code(base) if self.source.is_self_attribute(base, scope) else name.value

    def _names_a_model(self, root: cst.BaseExpression, scope: Scope) -> bool:
        """A factory's argument that is a model, not a config: named like one or built like one."""
        name = self.source.code(root).rsplit(".", 1)[-1].lower()
        if "model" in name or name in ("net", "network", "module") or name.endswith("net"):
            return True
        return any(self._builds_module(a.value, a.scope) for a in self.source.assigned_values(root, scope))

    def _builds_module(self, value: cst.BaseExpression, scope: Scope) -> bool:
        value = unplaced(value)
        if not isinstance(value, cst.Call):
            return False
        qualname = self.source.qualname(value.func, scope) or ""
        return qualname.startswith(("torch.nn.", "torchvision.models.", "timm.")) or (
            self.source.resolve_class(value.func, scope) is not None
        )

    def _roots_of_value(
        self, expr: cst.BaseExpression, scope: Scope
    ) -> Iterator[tuple[cst.BaseExpression, Scope]]:
        """The variable a caller hands over as the model (`train(model)`, `train(self.model)`)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in PLACEMENTS:  # train(model.to(device))
                yield from self._roots_of_value(expr.func.value, scope)
            return
        root = self._root_of(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if root is not None:
            yield root, scope

    # -- what happens to a model ------------------------------------------------------------------------

    @cached_property
    def _call_records(self) -> dict[int, CallRecord]:
        return {id(call.node): call for call in self.source.calls}

    def _collect_events(self, model: Model) -> None:
        source = self.source
        assigned: list[tuple[cst.BaseExpression, Scope, cst.CSTNode | None]] = []
        if isinstance(model.expr, cst.Name):
            for binding in model.scope.bindings.get(model.text, []):
                if binding.kind is BindingKind.ASSIGN and binding.value is not None and binding.index is None:
                    assigned.append((binding.value, binding.scope, binding.node))
                elif binding.kind is BindingKind.ASSIGN and binding.value is not None:
                    value = binding.value
                    if isinstance(value, (cst.Tuple, cst.List)):  # `model, config = self.model, self.config`
                        elements = value.elements
                        if binding.index is None or binding.index >= len(elements):
                            continue
                        value = elements[binding.index].value
                    # else `model, optimizer = accelerator.prepare(model, optimizer)`: the call
                    assigned.append((value, binding.scope, binding.node))
        else:
            owner = source.class_of_method_scope(model.scope)
            if owner is not None:
                for value, where in owner[0].attributes.get(model.expr.attr.value, []):  # type: ignore[attr-defined]
                    assigned.append((value, where, self._assignment_of(value)))
        for value, scope, statement in assigned:
            self._classify(model, value, scope, statement)
        for call in source.calls:
            self._call_on_model(model, call)
            self._note_receiver(model, call)
        for event in model.builds:  # a factory of the project that compiles what it builds
            if isinstance(event.node, cst.Call):
                target = source.callee_of_call(event.node, model.scope)
                if target is not None and target[0] not in model.involved:
                    model.involved.append(target[0])
        for event in model.of_kind("wrap"):  # `accelerator.prepare(model)`: who made the accelerator
            self._note_framework_factory(model, event.node, event.scope or model.scope)

    def _note_framework_factory(self, model: Model, call: cst.CSTNode, scope: Scope) -> None:
        """`model = accelerator.prepare(model)` with `accelerator = train_util.prepare_accelerator(args)`:
        the project function that builds the framework object is involved (kohya-ss/sd-scripts builds its
        `Accelerator(dynamo_backend=...)` there, behind `--torch_compile`: the author's decision)."""
        if not (isinstance(call, cst.Call) and self._is_prepare(call.func)):
            return
        receiver = call.func.value  # type: ignore[attr-defined]
        if not isinstance(receiver, cst.Name):
            return
        for assignment in self.source.assigned_values(receiver, scope):
            if isinstance(assignment.value, cst.Call):
                target = self.source.callee_of_call(assignment.value, assignment.scope)
                if target is not None and target[0] not in model.involved:
                    model.involved.append(target[0])

    def _assignment_of(self, value: cst.BaseExpression) -> cst.Assign | None:
        """The `self.x = value` statement of a value (the collector keeps the value only)."""
        statement = self.source.assignment_of(value)
        return statement if isinstance(statement, cst.Assign) else None

    def _event(
        self, model: Model, kind: str, node: cst.CSTNode, statement: cst.CSTNode | None, scope: Scope
    ) -> None:
        record = self._call_records.get(id(node))
        conditional = record.conditional if record is not None else False
        in_loop = record.loop is not None if record is not None else False
        model.events.append(Event(kind, node, statement, conditional, in_loop, self.source, scope))

    def _classify(
        self, model: Model, value: cst.BaseExpression, scope: Scope, statement: cst.CSTNode | None
    ) -> None:
        """What an assignment to the model does: build it, place it, wrap it, compile it."""
        source = self.source
        if self._is_model(model, value, scope):
            return
        if not isinstance(value, cst.Call):
            self._event(model, "build", value, statement, scope)
            return
        func = value.func
        qualname = source.qualname(func, scope) or ""
        positional = [arg.value for arg in value.args if not arg.keyword and not arg.star]
        if qualname in _COMPILERS:
            self._event(model, "compile", value, statement, scope)
            if positional:
                self._classify(model, positional[0], scope, statement)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in PLACEMENTS:
            self._event(model, "place", value, statement, scope)
            self._classify(model, func.value, scope, statement)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in ("compile",):
            self._event(model, "compile", value, statement, scope)
            return
        wrapped = [a.value for a in value.args if self.mentions_model(model, a.value, scope)]
        if qualname in _WRAPPERS or wrapped or self._is_prepare(func):
            self._event(model, "wrap", value, statement, scope)
            if positional and not wrapped:
                self._classify(model, positional[0], scope, statement)
            return
        self._event(model, "build", value, statement, scope)

    def _is_prepare(self, func: cst.BaseExpression) -> bool:
        return isinstance(func, cst.Attribute) and func.attr.value in ("prepare", "setup", "setup_module")

    def _is_model(self, model: Model, expr: cst.BaseExpression, scope: Scope, aliases: bool = False) -> bool:
        """`expr` names the model itself (not a submodule of it); with `aliases`, also by a second name
        (`raw_model = model.module if ddp else model`): what is pickled or copied under it is the model."""
        if isinstance(expr, (cst.Name, cst.Attribute)):
            root = self._root_of(expr, scope)
            return (
                root is not None
                and (expr is root or aliases and isinstance(expr, cst.Name))
                and self._key(root, scope) == self._key(model.expr, model.scope)
            )
        return False

    def mentions_model(self, model: Model, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`expr` is the model, or the model placed (`model.to(device)`)."""
        return self._is_model(model, unplaced(expr), scope)

    def _call_on_model(self, model: Model, call: CallRecord) -> None:
        """Calls that act on the model: `model.to(...)`, `model.compile()`, `torch.save(model)`, EMA
        copies."""
        source = self.source
        func = call.node.func
        alone = self._standalone(call.node)
        if isinstance(func, cst.Attribute) and self._is_model(model, func.value, call.scope):
            method = func.attr.value
            if method in PLACEMENTS and alone:
                self._event(model, "place", call.node, call.node, call.scope)
            elif method == "compile":
                self._event(model, "compile", call.node, call.node if alone else None, call.scope)
            elif method in ("load_state_dict", "state_dict"):
                self._event(
                    model, "load" if method == "load_state_dict" else "state", call.node, None, call.scope
                )
            return
        positional = [arg.value for arg in call.node.args if not arg.keyword and not arg.star]
        if not positional:
            return
        qualname = source.qualname(func, call.scope) or ""
        if qualname in _COMPILERS and self.mentions_model(model, positional[0], call.scope):
            if not self._assigned_to_model(model, call.node):
                self._event(model, "compile", call.node, call.node if alone else None, call.scope)
            return
        first = positional[0]
        if qualname == "torch.save" and self._is_model(model, first, call.scope, aliases=True):
            self._event(model, "save-whole", call.node, None, call.scope)
            return
        name = qualname.rsplit(".", 1)[-1] if qualname else last_name(func)
        ema = "ema" in name.lower() or name in ("AveragedModel", "deepcopy")
        if ema and any(self._is_model(model, unplaced(p), call.scope, aliases=True) for p in positional):
            self._event(model, "ema", call.node, None, call.scope)
            return
        if qualname in _WRAPPERS and alone and self._is_model(model, first, call.scope):
            self._event(model, "wrap", call.node, call.node, call.scope)  # fully_shard(model)

    def _note_receiver(self, model: Model, call: CallRecord) -> None:
        """A project function or class given the model (`Trainer(cfg, model)`) may compile it: its module
        is involved."""
        source = self.source
        if not any(self.mentions_model(model, arg.value, call.scope) for arg in call.node.args):
            return
        target = source.callee(call)
        home = target[0] if target is not None else None
        if home is None:
            found = source.resolve_class(call.node.func, call.scope)
            home = found[0] if found is not None else None
        if home is not None and home not in model.involved:
            model.involved.append(home)

    def _assigned_to_model(self, model: Model, call: cst.Call) -> bool:
        return any(event.node is call for event in model.events)

    def _standalone(self, node: cst.CSTNode) -> bool:
        """`node` is an expression statement of its own (a fix can add a statement after it)."""
        return id(node) in self._expression_statements

    def statement_of(self, call: cst.CSTNode) -> cst.CSTNode | None:
        """The expression statement that is `call` alone."""
        return self._expression_statements.get(id(call))

    @cached_property
    def _expression_statements(self) -> dict[int, cst.Expr]:
        return {
            id(small.value): small
            for line in simple_lines(self.source.module)
            for small in line.body
            if isinstance(small, cst.Expr) and len(line.body) == 1
        }

    # -- compile sites ----------------------------------------------------------------------------------

    @cached_property
    def compile_sites(self) -> list[CompileSite]:
        source = self.source
        sites: list[CompileSite] = []
        for call in source.calls:
            node = call.node
            func = node.func
            qualname = source.qualname(func, call.scope)
            positional = [arg.value for arg in node.args if not arg.keyword and not arg.star]
            if qualname in _COMPILERS:
                target = self._assignment_of(node)
                target = target if target is not None and len(target.targets) == 1 else None
                bound = source.code(target.targets[0].target) if target is not None else ""
                sites.append(
                    CompileSite(
                        node, f"`{source.code(func)}(...)`", call, positional[0] if positional else None,
                        target, self._standalone(node), source.code(func), bound,
                    )
                )  # fmt: skip
            elif qualname is not None and qualname.endswith("TorchDynamoPlugin"):  # accelerate compiles
                sites.append(CompileSite(node, f"`{source.code(func)}(...)`", call, None))
            elif isinstance(func, cst.Attribute) and func.attr.value == "compile":
                receiver = source.qualname(func.value, call.scope)
                if receiver is not None and receiver.split(".")[0] in ("re", "regex", "builtins"):
                    continue  # re.compile(...)
                if isinstance(func.value, (cst.SimpleString, cst.FormattedString)):
                    continue
                if _keras_compile(node):
                    continue  # `model.compile(optimizer, loss=...)`: Keras configures, nothing compiles
                sites.append(CompileSite(node, "`.compile()`", call, func.value))
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in _COMPILE_KEYWORDS:
                    sites.append(CompileSite(arg, f"`{arg.keyword.value}=`", call, None))
        for reference in source.references_to(_COMPILERS):
            if reference.decorator is not None:
                sites.append(
                    CompileSite(reference.decorator, f"`@{source.code(reference.expr)}`", None, None)
                )
            elif reference.call is None:  # `compile_fn = torch.compile if args.compile else ...`
                sites.append(CompileSite(reference.expr, f"`{source.code(reference.expr)}`", None, None))
        return sites

    # -- what a model is made of -------------------------------------------------------------------

    def compositions(self, model: Model) -> list[Composition] | None:
        """What the model computes, once per way it may be built (`nn.LSTM(...)`, `Net()` of a project
        class); None when one of them is unknown (a factory, a library model, a module handed in)."""
        found: list[Composition] = []
        if not self._compositions(model.expr, model.scope, found, 0) or not found:
            return None
        return found

    def _compositions(self, expr: cst.BaseExpression, scope: Scope, found: list, depth: int) -> bool:
        if depth > MAX_DEPTH:
            return False
        expr = unplaced(expr)
        if isinstance(expr, cst.Call):
            composition = self.source.analysis(CompositionAnalysis).of_built(expr, scope)
            if composition is not None:
                found.append(composition)
            return composition is not None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            values = self.source.assignments(expr, scope)
            builds = [a for a in values or [] if not self.rebinds(expr, a.value)]
            return bool(builds) and all(
                self._compositions(a.value, a.scope, found, depth + 1) for a in builds
            )
        return False

    def rebinds(self, expr: cst.BaseExpression, value: cst.BaseExpression) -> bool:
        """`model = model.to(device)`, `model = DDP(model)`: the same module again (placed or wrapped), not a
        new build; what it is, is decided where it was built."""
        code = self.source.code(expr)
        value = unplaced(value)
        if isinstance(value, cst.Call) and any(
            self.source.code(arg.value) == code for arg in value.args if not arg.keyword
        ):
            return True
        return self.source.code(value) == code

    # -- the device ---------------------------------------------------------------------------------------

    def device(self, model: Model) -> Device:
        """Where the model is placed (`.cuda()`, `.to(device)`); placed only on a literal "cpu", the CPU;
        else the strongest device evidence of the modules that build, train or compile it."""
        devices = self.source.analysis(DeviceAnalysis)
        placed = Device.UNKNOWN
        only_cpu = False
        for event in model.of_kind("place"):
            node = event.node
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
                continue
            if node.func.attr.value == "cuda":
                placed = max(placed, Device.CUDA_WHEN_AVAILABLE if event.conditional else Device.CUDA)
                continue
            target = next(
                (a.value for a in node.args if a.keyword is None or a.keyword.value == "device"), None
            )
            if target is not None:
                placed = max(placed, devices.device_of(target, model.scope))
                only_cpu = (only_cpu or placed is Device.CPU) and _names_cpu(target)
        if placed.may_be_cuda:
            return placed
        if only_cpu:
            return Device.CPU
        return max(module.analysis(DeviceAnalysis).evidence.device for module in model.involved)


def relative_path(path: str, seen_from: str) -> str:
    """`path` as a reader of `seen_from` finds it (`engine.py`, `../utils/engine.py`)."""
    import os

    try:
        return os.path.relpath(path, os.path.dirname(os.path.abspath(seen_from)))
    except ValueError:  # another drive (Windows)
        return path


def unplaced(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Net().to(device).cuda()` -> `Net()`: the module a chain of placements moves."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value not in PLACEMENTS:
            break
        expr = expr.func.value
    return expr


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`model.module.module` -> `model`: the module a DataParallel/DDP wrapper holds is the same model."""
    while isinstance(expr, cst.Attribute) and expr.attr.value == "module":
        expr = expr.value
    return expr


def method_of(
    cls: tuple[SourceModule, ClassRecord], name: str, depth: int = 0
) -> tuple[SourceModule, FunctionRecord] | None:
    """The method `name` of a project class, looked up through its project bases."""
    home, record = cls
    if name in record.methods:
        return home, record.methods[name]
    if depth >= MAX_DEPTH:
        return None
    for base in record.node.bases:
        if base.keyword is None:
            found = home.resolve_class(base.value, record.scope)
            method = method_of(found, name, depth + 1) if found is not None else None
            if method is not None:
                return method
    return None


def calls_itself(home: SourceModule, function: FunctionRecord, depth: int = 0) -> bool:
    """A method that calls its own module (`self(x)`), or another method of its class that does: it runs
    the module's call, which is what `.compile()` compiles (measured on torch 2.13: `self(x)` inside a
    method runs the compiled call; `self.forward(x)` and `self.body(x)` do not)."""
    if depth > MAX_DEPTH or function.owner is None or not function.params:
        return False
    me = function.params[0]
    for call in function.calls:
        func = call.node.func
        if isinstance(func, cst.Name) and func.value == me:
            return True
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == me:
            found = method_of((home, function.owner), func.attr.value)
            if found is not None and found[1] is not function and calls_itself(*found, depth + 1):
                return True
    return False


def last_name(func: cst.BaseExpression) -> str:
    """The called name: `AdamW` of `torch.optim.AdamW`, `smart_optimizer`; "" for other callees."""
    kind = type(func)  # exact types: asked of every call, and no concrete node class has subclasses
    if kind is cst.Name:
        return func.value  # type: ignore[attr-defined]
    return func.attr.value if kind is cst.Attribute else ""  # type: ignore[attr-defined]


# Words of a function that reads, saves or steps an optimizer rather than building one.
_NOT_FACTORY_WORDS = ("state", "load", "save", "step", "zero", "grad", "offload", "wrap", "shard")


def _branches(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a conditional expression may take (`a if c else b` -> a, b)."""
    if isinstance(value, cst.IfExp):
        return [*_branches(value.body), *_branches(value.orelse)]
    return [value]


def _named_like_an_optimizer_class(name: str) -> bool:
    """`AdamWScheduleFree`, `SGDScheduleFree`, `MuonAdamAtan2`, `SophiaG`, `DistributedShampoo`: a class whose
    name holds an optimizer family as a word of its own (not `Adamax...`, `Lambda...`, `LAMBDA`), and is not
    a config, scheduler or state class for one (`AdamConfig`, `MuonScheduler`)."""
    if not name[:1].isupper() or name.endswith(_NOT_OPTIMIZER_CLASS_WORDS):
        return False
    return bool(_OPTIMIZER_FAMILY_WORD.search(name))


# Not followed by a lowercase letter (`Adamax`, `Lambda`) nor by two capitals (`LAMBDA`): the word ends there.
_OPTIMIZER_FAMILY_WORD = re.compile(rf"(?:{'|'.join(_OPTIMIZER_FAMILIES)})(?![a-z])(?![A-Z]{{2}})")
_NOT_OPTIMIZER_CLASS_WORDS = (
    "Config", "Args", "Arguments", "Params", "Options", "State", "Scheduler", "Schedule", "Callback", "Hook",
    "Test",
)  # fmt: skip


def _is_factory(name: str) -> bool:
    """`create_optimizer_v2`, `build_optimizer`, yolov5's `smart_optimizer`: a function named for what it
    returns (classes are known by name: `_OPTIMIZER_CLASSES`), not one named for what it does to one or
    takes from one: `get_optimizer_state_dict(model, optim)` returns a dict, `zero_optimizer_grads(opt)`."""
    if name in _OPTIMIZER_FACTORIES:
        return True
    return name.islower() and "optimizer" in name and not any(word in name for word in _NOT_FACTORY_WORDS)


def groups_parameters(name: str) -> bool:
    """A helper that returns parameter groups of the module it is given: timm's `add_weight_decay` /
    `param_groups_weight_decay`, MAE's `param_groups_lrd`, `get_parameter_groups(model)`."""
    name = name.lower()
    groups = ("param_group", "params_group", "parameter_group")
    return any(part in name for part in groups) or name in ("add_weight_decay", "set_weight_decay")


def _keras_compile(call: cst.Call) -> bool:
    """`nn.Module.compile(**kwargs)` takes torch.compile's keywords; Keras's `Model.compile` takes an
    optimizer and a loss, often positionally."""
    return any(arg.keyword is None or arg.keyword.value in _KERAS_COMPILE for arg in call.args)


def _names_cpu(expr: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")` written out."""
    if isinstance(expr, cst.Call) and len(expr.args) == 1:
        expr = expr.args[0].value
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cpu"


def may_train(project: ExportIndex, path: Path, requester: Path) -> bool:
    """Whether the module at `path` may train a model (`ModelAnalysis.trains`) or build a project class
    whose methods train: False only where its analysis cannot find either, judged from exports without
    building any module's facts (`reach.may_run_backward`). Questions that ask "which modules train this
    class?" of every importer then build the facts of those that may.

    The analysis finds training through a training loop, which runs a backward pass here or in code the
    module runs; through a trainer object built here (`*Trainer(...)`, or a project class whose methods
    train: code the module runs); or through an optimizer built here handed to a call named for training
    (`_hands_optimizer_to_training`)."""
    export = project.export_of(path, requester)
    if export is None:
        return True
    called = {symbol.rpartition(".")[2] for scope in export.scopes for symbol in scope.symbols}
    if any(name.endswith("Trainer") for name in called):
        return True
    if any("train" in n.lower() and "pretrain" not in n.lower() for n in called) and may_build_optimizers(
        export
    ):
        return True
    return may_run_backward(project, path, requester)


def function_may_build_optimizers(export: Export | None, name: str | None) -> bool:
    """Whether the function `name` of a file may build an optimizer over what it is handed
    (`trained_params`): itself, or a function of the file it calls (one call deep, as `trained_params`
    follows them). The whole file's calls where the file has no function of that name (a class, a name an
    import gave it) or where the call names none (a method's): a call of one function of yolov5's
    `utils/general.py`, whose other functions call `getattr`, need not build that module's facts."""
    if export is None or export.scopes is None:
        return True
    scopes = {scope.name: scope for scope in export.scopes}
    own = scopes.get(name) if name is not None else None
    if own is None:
        return may_build_optimizers(export)
    return may_build_optimizers(export, {name, *(symbol for symbol in own.symbols if symbol in scopes)})


def may_build_optimizers(export: Export | None, scopes: set[str] | None = None) -> bool:
    """Whether a call of a file (of its `scopes`, by name: all by default) may build an optimizer
    (`builds_optimizer`, read from its export: every call that does names an optimizer class, a factory, a
    model's optimizer method, `getattr` of `torch.optim`, or a class an optimizer module binds); True for
    a file without an export."""
    if export is None:
        return True
    bindings: dict[str, list[str]] = {}
    for name, target in export.bindings:
        bindings.setdefault(name, []).append(target)
    starred = any(name[:-2].startswith(_OPTIMIZER_ROOTS) for name in export.imports if name.endswith(".*"))
    for scope in export.scopes:
        if scopes is not None and scope.name not in scopes:
            continue
        for symbol in scope.symbols:
            last = symbol.rpartition(".")[2]
            if last == "getattr" or last in _MODEL_OPTIMIZER_METHODS or _is_factory(last):
                return True
            if last in _OPTIMIZER_CLASSES or _named_like_an_optimizer_class(last):
                return True
            if not last[:1].isupper() or last == "Optimizer" or symbol.startswith("."):
                continue
            if starred and "." not in symbol:
                return True  # `from torch.optim import *` ... `Foo(...)`
            root, _, rest = symbol.partition(".")
            for target in bindings.get(root, ()):
                qualname = f"{target}.{rest}" if rest else target
                if qualname.startswith(_OPTIMIZER_MODULES) and "lr_scheduler" not in qualname:
                    return True
    return False
