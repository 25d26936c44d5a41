"""Activation checkpointing: where the code already checkpoints, which model classes are trained, and the
questions the TL4xx rules ask about stacks (`structure.py`).

*Checkpoint calls* are `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` under any alias, with
whether `use_reentrant` is passed. *Checkpointing evidence* is anything that says the author decided about
checkpointing: those calls, timm's `checkpoint_seq`, DeepSpeed's and fairscale's checkpoint functions, a
project's own checkpoint function or `autograd.Function`, Hugging Face's `gradient_checkpointing_enable()`
and `TrainingArguments(gradient_checkpointing=...)`, timm's `set_grad_checkpointing()`, FSDP's
`apply_activation_checkpointing` / `checkpoint_wrapper`, torchtune's `set_activation_checkpointing`, a
class's own switch (`self.grad_checkpointing`, `self.gradient_checkpointing`, `use_checkpoint`), and
accelerate's `ParallelismConfig()` built without arguments (read from the launch configuration, where FSDP's
`fsdp_activation_checkpointing` is decided).

A model class is *trained* when a module of the project (the one that defines it, those that import it, and
those that import them) trains a model (`ModelAnalysis.trained`) built from it — directly (`GPT(config)`,
`GPT.from_pretrained(...)`, a classmethod factory `Transformer.from_model_args(args)` whose arguments reach
`cls(...)`), through a factory of the project that returns one, or handed to a project class
whose methods train (`Trainer(config, model, data).run()`) — or when it is a part (an attribute, or the block
of a stack) of a trained class, or a base of one. Classes only ever used for inference are not trained. The
devices of the models that train a class are kept: a class trained only on the CPU gets no TL401 advice.

A checkpoint call *never runs* when it sits under `if self.<switch> ...` of a switch its class only ever sets
to `False` and that nothing else may turn on (`_may_turn_on`): which variant it would use does not matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import Signature, argument_for, read_call
from torchlint.facts.syntax.names import BindingKind, Scope, dotted
from torchlint.facts.syntax.values import is_false_constant
from torchlint.facts.torch.models import ModelAnalysis, may_train, relative_path
from torchlint.facts.torch.reach import may_run_backward
from torchlint.facts.torch.training import TrainingAnalysis
from torchlint.facts.torch.vocabulary import Device
from torchlint.rules.checkpointing.reached import others_may_reach
from torchlint.rules.checkpointing.structure import Stack, StructureAnalysis, environment_default

if TYPE_CHECKING:
    from pathlib import Path

    from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.exports import ExportIndex

MAX_DEPTH = 3
# A depth fixed as a literal where the model is built, below this, is the author's sizing (see
# `_sized_where_built`); from this many blocks on, activations dominate memory whatever the author planned.
FIXED_DEPTH = 24
MAX_BUILD_DEPTH = 6  # factory returns and names followed from a build to the class (DETR: four)
MAX_CLASSES = 500  # classes followed from the trained models of one project, at most
CHECKPOINT = "torch.utils.checkpoint.checkpoint"
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
CHECKPOINT_SIGNATURE = Signature(("function",), star_args=True)
SEQUENTIAL_SIGNATURE = Signature(("functions", "segments", "input"), star_args=True)
# Names that checkpoint, whatever library they come from (their qualname is often unknown: a vendored copy,
# a star import, a library this analysis does not know).
_CHECKPOINT_NAMES = {
    "checkpoint_seq",
    "checkpoint_sequential",
    "checkpoint_wrapper",
    "apply_activation_checkpointing",
    "set_activation_checkpointing",
    "gradient_checkpointing_enable",
    "set_grad_checkpointing",
    "enable_gradient_checkpointing",
    "activation_checkpointing",
    "non_reentrant_wrapper",
    "prepare_model_for_kbit_training",  # peft: turns on gradient checkpointing by default
}
# timm model families built of repeated transformer (or ConvNeXt) blocks, with `set_grad_checkpointing()`.
_TIMM_STACKS = (
    "vit_",
    "deit",
    "swin",
    "beit",
    "eva",
    "cait",
    "convnext",
    "xcit",
    "mvit",
    "twins",
    "pvt",
    "levit",
)
_SWITCHES = {
    "grad_checkpointing",
    "gradient_checkpointing",
    "use_checkpoint",
    "use_checkpointing",
    "checkpoint_activations",
    "activation_checkpointing",
    "use_grad_checkpointing",
    "use_gradient_checkpointing",
    "grad_ckpt",
    "checkpointing",
}
# A framework's checkpointing policy (Lightning's `FSDPStrategy(activation_checkpointing_policy=...)`): set at
# all, even to None, it says the author decided which layers to checkpoint.
_POLICIES = {"activation_checkpointing_policy"}
_TEXT = ("checkpoint", "Checkpoint", "prepare_model_for_kbit_training", "ParallelismConfig")


@dataclass(frozen=True)
class CheckpointCall:
    """`checkpoint(fn, x, ...)` / `checkpoint_sequential(seq, n, x)` of torch, with `use_reentrant`."""

    call: CallRecord
    callee: cst.BaseExpression
    sequential: bool
    lacks_use_reentrant: bool  # surely not passed (a `**kw` that cannot be followed keeps it False)
    # Only under `if self.gradient_checkpointing ...` where that switch is never turned on (`_never_on`).
    never_runs: bool = False


@dataclass(frozen=True)
class LibraryModel:
    """A trained model built by a library whose models have their own checkpointing switch: Hugging Face
    `from_pretrained` (`model.gradient_checkpointing_enable(...)`), timm `create_model` of a transformer
    family (`model.set_grad_checkpointing()`), or a `TrainingArguments` whose Trainer trains it
    (`gradient_checkpointing=True`)."""

    node: cst.CSTNode  # the build call, or the `TrainingArguments(...)` call
    callee: cst.BaseExpression
    library: str  # "transformers", "timm", "trainer"
    model: str  # how the code names the model ("" for TrainingArguments)
    statement: cst.CSTNode | None = None  # the build statement, alone on its lines, unconditional
    scope: Scope | None = None


@dataclass(frozen=True)
class HfCheckpointing:
    """`model.gradient_checkpointing_enable()` or `TrainingArguments(gradient_checkpointing=True)` without
    `gradient_checkpointing_kwargs`: Hugging Face then checkpoints with `use_reentrant=True`."""

    call: cst.Call
    callee: cst.BaseExpression
    training_arguments: bool


class CheckpointAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    # -- calls and evidence in this module -----------------------------------------------------------

    @cached_property
    def checkpoint_calls(self) -> list[CheckpointCall]:
        source = self.source
        if "checkpoint" not in source.text:
            return []
        found = []
        for ref in source.references_to({CHECKPOINT, CHECKPOINT_SEQUENTIAL}):
            if ref.call is None or ref.expr is not ref.call.func:
                continue
            record = self._records.get(id(ref.call))
            if record is None:
                continue
            sequential = ref.qualname == CHECKPOINT_SEQUENTIAL
            signature = SEQUENTIAL_SIGNATURE if sequential else CHECKPOINT_SIGNATURE
            arguments = read_call(source, ref.call, record.scope, signature)
            lacks = arguments.lacks("use_reentrant")
            found.append(
                CheckpointCall(record, ref.expr, sequential, lacks, lacks and self._never_on(record))
            )
        return found

    def _never_on(self, record: CallRecord) -> bool:
        """The call runs only where a switch of its class is on (`if self.gradient_checkpointing and
        self.training:`) that nothing turns on: the class assigns it only `False` (or `None`, `0`), and
        neither this module nor those that import it (up to three levels) assign that attribute anything
        else, name it in a `setattr`, or declare `supports_gradient_checkpointing` (Hugging Face's and
        diffusers' own switch sets the attribute on every submodule that has it)."""
        function = record.function
        if function is None or function.owner is None or not function.params or not record.guards:
            return False
        owner = function.params[0]
        for test, branch in record.guards:
            if not branch:
                continue
            for conjunct in _conjuncts(test):
                if (
                    isinstance(conjunct, cst.Attribute)
                    and dotted(conjunct.value) == owner
                    and self._switch_never_on(function.owner, conjunct.attr.value)
                ):
                    return True
        return False

    def _switch_never_on(self, cls: ClassRecord, name: str) -> bool:
        values = cls.attributes.get(name)
        if not values or not all(is_false_constant(value) for value, _ in values):
            return False
        if _may_turn_on(self.source, name):
            return False
        project, file = self.source.project, self.source.file
        if project is None or file is None:
            return True
        for other in self._candidate_files:
            words = (name, "supports_gradient_checkpointing", "__dict__", "setattr")
            if project.may_name(other, words, file):
                module = project.facts_for(other, file)  # the words `_may_turn_on` looks for are there
                if module is not None and _may_turn_on(module, name):
                    return False
        return True

    @cached_property
    def _records(self) -> dict[int, CallRecord]:
        return {id(call.node): call for call in self.source.calls}

    @cached_property
    def hf_checkpointing(self) -> list[HfCheckpointing]:
        """Hugging Face's switches that checkpoint with the reentrant variant (no kwargs given)."""
        source = self.source
        if "gradient_checkpointing" not in source.text:
            return []
        found = []
        for call in source.calls:
            func = call.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "gradient_checkpointing_enable":
                arguments = read_call(
                    source, call.node, call.scope, Signature(("gradient_checkpointing_kwargs",))
                )
                if arguments.lacks("gradient_checkpointing_kwargs"):
                    found.append(HfCheckpointing(call.node, func, False))
                continue
            qualname = source.qualname(func, call.scope) or ""
            if qualname.startswith(("transformers.", "trl.")) and qualname.endswith(
                ("TrainingArguments", "Config")
            ):
                arguments = read_call(source, call.node, call.scope)
                enabled = arguments.get("gradient_checkpointing")
                if enabled is None or not isinstance(enabled.node, cst.Arg):
                    continue
                value = enabled.node.value
                if (
                    isinstance(value, cst.Name)
                    and value.value == "True"
                    and arguments.lacks("gradient_checkpointing_kwargs")
                ):
                    found.append(HfCheckpointing(call.node, func, True))
        return found

    @cached_property
    def evidence(self) -> list[tuple[cst.CSTNode, str]]:
        """Everything in this module that says the author decided about checkpointing."""
        source = self.source
        if not any(token in source.text for token in _TEXT):
            return []
        found: list[tuple[cst.CSTNode, str]] = [
            (c.call.node, f"`{source.code(c.callee)}(...)`") for c in self.checkpoint_calls
        ]
        for call in source.calls:
            func = call.node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else dotted(func) or ""
            qualname = source.qualname(func, call.scope) or ""
            if name == "ParallelismConfig" and qualname.startswith("accelerate.") and not call.node.args:
                # read from what `accelerate launch --config-file` sets: the FSDP set-up, and its
                # `fsdp_activation_checkpointing`, are decided in that file
                found.append((call.node, "`ParallelismConfig()` (from the accelerate launch configuration)"))
                continue
            if name in _CHECKPOINT_NAMES or (
                "checkpoint" in qualname
                and qualname.split(".")[0] in ("torch", "deepspeed", "fairscale", "timm")
                and not qualname.startswith(("torch.save", "torch.load"))
                and "checkpoint_path" not in qualname
            ):
                if qualname not in (CHECKPOINT, CHECKPOINT_SEQUENTIAL):
                    found.append((call.node, f"`{source.code(func)}(...)`"))
                continue
            for arg in call.node.args:
                if arg.keyword is None:
                    continue
                if arg.keyword.value in _SWITCHES and not is_false_constant(arg.value):
                    found.append((arg, f"`{arg.keyword.value}=`"))
                elif arg.keyword.value in _POLICIES:  # chosen, even as None: the author decided
                    found.append((arg, f"`{arg.keyword.value}=`"))
        for cls in source.classes:
            if "Checkpoint" in cls.name and any(
                (source.qualname(base.value, cls.scope) or "") == "torch.autograd.Function"
                for base in cls.node.bases
            ):
                found.append((cls.node, f"the autograd function `{cls.name}`"))
        for function in source.functions:
            if (
                function.owner is None
                and "checkpoint" in function.name
                and _calls_backward_machinery(function)
            ):
                found.append((function.node, f"the checkpoint function `{function.name}`"))
        return found

    def class_switch(self, cls: ClassRecord) -> str | None:
        """The class's own checkpointing switch (`self.grad_checkpointing`, a `use_checkpoint` parameter), or
        a checkpoint call in one of its methods."""
        for name in cls.attributes:
            if name in _SWITCHES:
                return f"`self.{name}`"
        init = cls.methods.get("__init__")
        if init is not None:
            for param in init.params:
                if param in _SWITCHES:
                    return f"the `{param}` parameter"
        for method in cls.methods.values():
            for node, what in self.evidence:
                if any(call.node is node for call in method.calls):
                    return what
        return None

    @cached_property
    def library_models(self) -> list[LibraryModel]:
        """Library models trained here with no checkpointing decided in this module (nor in a module the
        model is handed to)."""
        source = self.source
        if "from_pretrained" not in source.text and "create_model" not in source.text:
            if "TrainingArguments" not in source.text and "SFTConfig" not in source.text:
                return []
        if self.evidence:
            return []
        found: list[LibraryModel] = []
        from torchlint.facts.torch import frameworks

        for arguments in frameworks.training_arguments(source):
            if arguments.cls.endswith("TrainingArguments") or arguments.cls.endswith("SFTConfig"):
                if arguments.lacks("gradient_checkpointing"):
                    found.append(LibraryModel(arguments.call, arguments.callee, "trainer", ""))
        for model in source.analysis(ModelAnalysis).trained:
            builds = model.builds
            if len(builds) != 1 or not isinstance(builds[0].node, cst.Call):
                continue
            if any(
                other.analysis(CheckpointAnalysis).evidence for other in model.involved if other is not source
            ):
                continue
            event = builds[0]
            call = event.node
            library = _library_of(source, call, model.scope)
            if library is None:
                continue
            statement = event.statement if not event.conditional and not event.in_loop else None
            found.append(LibraryModel(call, call.func, library, model.text, statement, model.scope))
        return found

    # -- which classes are trained --------------------------------------------------------------------

    @cached_property
    def _candidate_files(self) -> list[Path]:
        """The project files that import this module, and up to two more levels of importers, nearest first
        (main.py -> models/__init__.py -> models/detr.py -> models/transformer.py)."""
        source = self.source
        if source.project is None or source.file is None:
            return []
        project, own = source.project, source.real_file
        found: list[Path] = []
        frontier = [own]
        for _ in range(3):
            following = []
            for file in frontier:
                for importer in project.importers_of(file):
                    if importer != own and importer not in found and project.scanned(importer):
                        found.append(importer)
                        following.append(importer)
            frontier = following
        return found

    def _candidates(self) -> list[SourceModule]:
        """This module, and those of `_candidate_files` that may train a model (`may_train`): the others'
        facts are not built, since nothing they hold can train a class of this one."""
        source = self.source
        found = [source]
        if source.project is None or source.file is None or not self._others_may_train:
            return found
        for file in self._candidate_files:
            if may_train(source.project, file, source.file):
                other = source.project.facts_for(file, source.file)
                if other is not None and other not in found:
                    found.append(other)
        return found

    @cached_property
    def _others_may_train(self) -> bool:
        """Whether another module's code may reach a class of this one that holds a stack (`reached`): if
        not, no module that imports this one can train one, and none is built to find out."""
        stacks = self.source.analysis(StructureAnalysis).stacks
        top = {id(statement) for statement in self.source.module.body}
        if any(id(stack.cls.node) not in top for stack in stacks):
            return True  # a class defined in a block or another class: not followed by name
        return bool(stacks) and others_may_reach(self.source, {stack.cls.name for stack in stacks})

    @cached_property
    def trained(self) -> dict[int, list[SourceModule]]:
        """id of a class of this module -> the modules that train it (or a model it is part of); the
        trained builds of each class are kept in `_builds`, the devices the models train on in `_devices`."""
        source = self.source
        self._builds: dict[int, list[Built]] = {}
        self._devices: dict[int, set[Device]] = {}
        own = {id(cls.node): cls for cls in source.classes}
        todo: list[tuple[Built, list[SourceModule], Device]] = []
        for module in self._candidates():
            todo.extend(module.analysis(CheckpointAnalysis).trains)
            names = _registry_names(module)
            if names != set():  # `create_model(args.model)`: what this module registers may be trained
                todo.extend((built, [module], Device.UNKNOWN) for built in self._registered(names))
        result: dict[int, list[SourceModule]] = {}
        seen: set[tuple[int, int, Device]] = set()
        while todo:
            built, trainers, device = todo.pop()
            key = (id(built.cls.node), id(built.call), device)
            if key in seen or len(seen) > MAX_CLASSES:
                continue
            seen.add(key)
            if id(built.cls.node) in own:
                known = result.setdefault(id(built.cls.node), [])
                known.extend(t for t in trainers if t not in known)
                self._builds.setdefault(id(built.cls.node), []).append(built)
                self._devices.setdefault(id(built.cls.node), set()).add(device)
            todo.extend((part, trainers, device) for part in _parts(built))
        return result

    @cached_property
    def trains(self) -> list[tuple[Built, list[SourceModule], Device]]:
        """The project classes this module trains (`_trained_in`), kept with its facts: each class module
        that it imports asks (in the editor, at every keystroke of one of them)."""
        return _trained_in(self.source)

    def _registered(self, names: set[str] | None) -> list[Built]:
        """Classes this module's `@register_model` functions build (those named in `names`; all: None)."""
        source = self.source
        found = []
        for function in source.functions:
            if function.owner is not None or (names is not None and function.name not in names):
                continue
            if not any(
                (dotted(d.decorator) or "").endswith("register_model") for d in function.node.decorators
            ):
                continue
            for returned in function.returns:
                values = [returned]
                if isinstance(returned, cst.Name):
                    values = [a.value for a in source.assigned_values(returned, function.scope)]
                for value in values:
                    found.extend(b for b in _classes_built(source, value, function.scope) if b.home is source)
        return found

    def trainers_of(self, cls: ClassRecord) -> list[SourceModule] | None:
        """The modules that train `cls` (None: it is not known to be trained)."""
        return self.trained.get(id(cls.node))

    def checkpointed_in(self, modules: list[SourceModule]) -> tuple[SourceModule, cst.CSTNode, str] | None:
        """Checkpointing evidence in one of `modules` or in the modules their models are handed to."""
        seen: list[SourceModule] = []
        for module in modules:
            involved = [module]
            for model in module.analysis(ModelAnalysis).optimized:
                involved.extend(m for m in model.involved if m not in involved)
            for other in involved:
                if other in seen:
                    continue
                seen.append(other)
                evidence = other.analysis(CheckpointAnalysis).evidence
                if evidence:
                    node, what = evidence[0]
                    return other, node, what
        return None

    # -- the questions of TL401 ----------------------------------------------------------------------

    def opportunities(self, min_depth: int) -> list[tuple[Stack, list[str]]]:
        """Stacks of at least `min_depth` repeated blocks (or of a configurable depth whose default is not
        known to be smaller) applied by `forward`, in trained classes with no checkpointing anywhere: (the
        stack, the paths of the other modules that train it, as seen from this one)."""
        source = self.source
        stacks = source.analysis(StructureAnalysis).stacks
        found = []
        for stack in stacks:
            if not stack.applications or not _deep(stack, min_depth):
                continue
            if self.class_switch(stack.cls) is not None:
                continue
            trainers = self.trainers_of(stack.cls)
            if trainers is None or self._devices.get(id(stack.cls.node)) == {Device.CPU}:
                continue  # not trained; or trained only on the CPU, where activations are not what binds
            if self._sized_where_built(stack, trainers):
                continue
            if self.evidence and any(self._in_class(node, stack.cls) for node, _ in self.evidence):
                continue
            if self.checkpointed_in([source, *trainers]) is not None:
                continue
            others = [relative_path(module.path, source.path) for module in trainers if module is not source]
            found.append((stack, others))
        return found

    def stack_status(self, stack: Stack) -> tuple[list[str] | None, str | None]:
        """(the paths of the modules that train the stack's class, or None; how it is checkpointed, or
        None) — what `debug facts` shows."""
        trainers = self.trainers_of(stack.cls)
        switch = self.class_switch(stack.cls)
        if switch is None and trainers is not None:
            found = self.checkpointed_in([self.source, *trainers])
            if found is not None:
                module, _, what = found
                switch = f"{what} in {module.path}"
        if trainers is None:
            return None, switch
        return [relative_path(module.path, self.source.path) for module in trainers], switch

    def _sized_where_built(self, stack: Stack, trainers: list[SourceModule]) -> bool:
        """Every trained build, in the script that trains it, passes the depth as a literal below
        `FIXED_DEPTH` (`GPT(num_layers=12)`, `GPT(GPTConfig(n_layer=12))` in a benchmark or speed-run
        script): the author sized the model and its batch for their GPU, so memory is not what limits it. A
        depth from an option or a config file, or a menu of model factories in a library, is the user's to
        grow."""
        depth = stack.depth
        parameter = depth.parameter
        init = stack.cls.methods.get("__init__")
        builds = self._builds.get(id(stack.cls.node), [])
        if not builds:
            return False
        if depth.constant is not None and depth.value is not None:
            # `range(n_layers)` reading the script's own `n_layers = 6`, built and trained by that script
            return depth.value < FIXED_DEPTH and all(built.call_home is self.source for built in builds)
        if parameter is None or init is None:
            return False
        name, _, field = parameter.partition(".")
        for built in builds:
            if built.call is None or built.call_home not in trainers or built.call_scope is None:
                return False
            argument = _constructor_argument(built, init, name)
            scope = built.call_scope
            if field and argument is not None:  # `GPT(GPTConfig(n_layer=12))`, or a name bound to it
                argument, scope = _keyword_of_construction(built.call_home, argument, scope, field)
            if argument is None:
                return False
            count = _fixed_count(built.call_home, argument, scope)
            if count is None or count >= FIXED_DEPTH:
                return False
        return True

    def _in_class(self, node: cst.CSTNode, cls: ClassRecord) -> bool:
        return any(call.node is node for method in cls.methods.values() for call in method.calls)


def _fixed_count(home: SourceModule, argument: cst.BaseExpression, scope: Scope) -> int | None:
    """The count the author wrote where the model is built: a literal, a constant of the module (`n_layer =
    12`), or the literal default of an environment variable read once (`LAYERS = int(os.environ.get("LAYERS",
    "12"))`: a hidden override of a constant, not an option the script offers)."""
    value = home.value(argument, scope)
    if value.is_literal:
        return value.literal if type(value.literal) is int else None
    if isinstance(argument, cst.Name):
        values = home.assigned_values(argument, scope)
        if len(values) != 1 or values[0].index is not None:
            return None
        argument, scope = values[0].value, values[0].scope
    return environment_default(home, argument, scope)


def _constructor_argument(built: Built, init: FunctionRecord, name: str) -> cst.BaseExpression | None:
    """What the build passes for parameter `name` of the class's `__init__`: read from the call itself, or,
    for a factory method (`Transformer.from_model_args(args)` whose every return is `cls(model_args)`), from
    what the call passes for the factory's parameter that the factory hands on unchanged."""
    if built.call is None:
        return None
    factory = built.factory
    if factory is None:
        return argument_for(built.call, init, name)
    handed: set[str] = set()
    for returned in factory.returns:
        inner = argument_for(returned, init, name) if isinstance(returned, cst.Call) else None
        if not isinstance(inner, cst.Name):
            return None
        bindings = factory.scope.lookup(inner.value)
        if not bindings or any(binding.kind is not BindingKind.PARAM for binding in bindings):
            return None  # rebound in the factory, or not its parameter: the factory's own value
        handed.add(inner.value)
    if len(handed) != 1:
        return None
    return argument_for(built.call, factory, handed.pop())


def _factory(home: SourceModule, cls: ClassRecord, name: str) -> FunctionRecord | None:
    """A classmethod or staticmethod of `cls` named `name` whose every return builds `cls` itself
    (`return cls(model_args)`, `return Transformer(args)`)."""
    method = cls.methods.get(name)
    if method is None or not method.returns:
        return None
    kinds = {dotted(decorator.decorator) for decorator in method.node.decorators}
    if "classmethod" in kinds:
        own = method.params[0] if method.params else None
    elif "staticmethod" in kinds:
        own = None
    else:
        return None
    for returned in method.returns:
        if not isinstance(returned, cst.Call):
            return None
        func = returned.func
        if own is not None and isinstance(func, cst.Name) and func.value == own:
            continue
        found = home.resolve_class(func, method.scope)
        if found is None or found[1] is not cls:
            return None
    return method


def _keyword_of_construction(
    home: SourceModule, value: cst.BaseExpression, scope: Scope, field: str
) -> tuple[cst.BaseExpression | None, Scope]:
    """What `Config(n_layer=12, ...)` passes for `field`, also through a name bound once to that call, and
    the scope it is read in."""
    if isinstance(value, cst.Name):
        values = home.assigned_values(value, scope)
        if len(values) == 1:
            value, scope = values[0].value, values[0].scope
    if not isinstance(value, cst.Call):
        return None, scope
    keyword = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == field), None)
    return keyword, scope


def _library_of(source: SourceModule, call: cst.Call, scope: Scope) -> str | None:
    """ "transformers" for `AutoModelFor*.from_pretrained(...)` of a model class, "timm" for
    `timm.create_model("vit_...")` of a family built of repeated blocks."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
        qualname = source.qualname(func.value, scope) or ""
        name = qualname.rsplit(".", 1)[-1]
        if qualname.startswith("transformers.") and ("Model" in name or "For" in name):
            return "transformers"
        return None
    qualname = source.qualname(func, scope) or ""
    if qualname.startswith("timm.") and qualname.endswith("create_model") and call.args:
        first = call.args[0].value
        if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str):
            if first.evaluated_value.lower().startswith(_TIMM_STACKS):
                return "timm"
    return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` -> [a, b, c] (a test that holds only when each of them does)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


_FALSE_TEXT = ("False", "None", "0")


def _may_turn_on(module: SourceModule, name: str) -> bool:
    """Something in `module` may set attribute `name` of an object to a value other than a false constant:
    an assignment (`encoder.gradient_checkpointing = True`, `m.gradient_checkpointing = value` of any
    object), a `setattr` naming it or a computed name, `__dict__.update`, or a model class declaring
    `supports_gradient_checkpointing` (its library's switch sets the attribute on every submodule)."""
    text = module.text
    if "supports_gradient_checkpointing" in text or "__dict__.update" in text:
        return True
    if name in text:
        pattern = re.compile(rf"\.{re.escape(name)}\s*(?::[^=\n]*)?(?:=(?!=)|\+=|\|=)\s*([^\n#;]*)")
        if any(match.group(1).strip() not in _FALSE_TEXT for match in pattern.finditer(text)):
            return True
    if "setattr" in text:
        for call in module.calls:
            args = call.node.args
            if dotted(call.node.func) != "setattr" or len(args) < 2:
                continue
            named = args[1].value
            if not isinstance(named, cst.SimpleString) or named.evaluated_value == name:
                return True
    return False


def _deep(stack: Stack, min_depth: int) -> bool:
    """At least `min_depth` blocks, or a configurable depth whose default is unknown (`config.n_layer`
    filled by presets); a configurable depth with a smaller default is the author's shallow model."""
    depth = stack.depth
    if depth.value is not None:
        return depth.value >= min_depth
    return depth.configurable


def _calls_backward_machinery(function) -> bool:
    """A function named for checkpointing that recomputes (`torch.autograd`, `.backward`, an inner call)."""
    return any(
        "autograd" in (dotted(call.node.func) or "") or (dotted(call.node.func) or "").endswith("apply")
        for call in function.calls
    )


@dataclass(frozen=True)
class Built:
    """A project class some code builds: where the class is, and the call that builds it (where its
    constructor's arguments can be read)."""

    home: SourceModule
    cls: ClassRecord
    call: cst.Call | None = None
    call_home: SourceModule | None = None
    call_scope: Scope | None = None
    # The classmethod (or staticmethod) the call goes through, which builds the class itself
    # (`Transformer.from_model_args(args)`): the constructor's arguments are its returns' (`cls(model_args)`).
    factory: FunctionRecord | None = None


def _classes_built(
    module: SourceModule, value: cst.BaseExpression, scope: Scope, depth: int = 0
) -> list[Built]:
    """The project classes a model built by `value` is an instance of: `GPT(cfg)`, `GPT.from_pretrained`,
    a factory of the project (`build_model(cfg)`) that returns one, a name assigned one, or a function of a
    project module picked by name (`models_mae.__dict__[args.model](...)`, `getattr(models, name)(...)`)."""
    if depth > MAX_BUILD_DEPTH:
        return []
    if isinstance(value, cst.Name):
        return [
            built
            for assignment in module.assigned_values(value, scope)
            for built in _classes_built(module, assignment.value, assignment.scope, depth + 1)
        ]
    if not isinstance(value, cst.Call):
        return []
    func = value.func
    found = module.resolve_class(func, scope) or _star_imported_class(module, func, scope)
    if found is not None:
        return [Built(found[0], found[1], value, module, scope)]
    if isinstance(func, cst.Attribute):  # `GPT.from_pretrained(...)`: a classmethod returning the class
        found = module.resolve_class(func.value, scope)
        if found is not None:
            factory = _factory(found[0], found[1], func.attr.value)
            if factory is not None:  # `Transformer.from_model_args(args)`: `return cls(model_args)`
                return [Built(found[0], found[1], value, module, scope, factory)]
            return [Built(found[0], found[1])]
        if func.attr.value in ("to", "cuda", "float", "half", "bfloat16", "train"):
            return _classes_built(module, func.value, scope, depth + 1)
    picked = _picked_module(module, func, scope)
    if picked is not None:
        return [
            built
            for function in picked.functions
            if function.owner is None and not function.name.startswith("_")
            for returned in function.returns
            for built in _classes_built(picked, returned, function.scope, depth + 1)
        ]
    target = module.callee_of_call(value, scope)
    if target is None:
        return []
    home, function = target
    classes = []
    for returned in function.returns:
        if isinstance(returned, (cst.Tuple, cst.List)) and returned.elements:
            returned = returned.elements[0].value
        classes.extend(_classes_built(home, returned, function.scope, depth + 1))
    return classes


def _star_imported_class(
    module: SourceModule, func: cst.BaseExpression, scope: Scope
) -> tuple[SourceModule, ClassRecord] | None:
    """`GeneratorRRDB(...)` after `from models import *`: a class of a project module imported whole."""
    if (
        not isinstance(func, cst.Name)
        or scope.lookup(func.value)
        or module.project is None
        or module.file is None
    ):
        return None
    for statement in module.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not (isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)):
                continue
            name = "." * len(small.relative) + (dotted(small.module) or "" if small.module else "")
            path = module.project.module_file(module.file, name)
            other = module.project.facts_binding(path, func.value, "class", module.file) if path else None
            cls = other.top_level_class(func.value) if other is not None and other is not module else None
            if cls is not None:
                return other, cls  # type: ignore[return-value]
    return None


def _picked_module(module: SourceModule, func: cst.BaseExpression, scope: Scope) -> SourceModule | None:
    """The project module of `models.__dict__[name]` / `getattr(models, name)` / `vars(models)[name]`."""
    named = None
    if isinstance(func, cst.Subscript):
        base = func.value
        if isinstance(base, cst.Attribute) and base.attr.value == "__dict__":
            named = base.value
        elif isinstance(base, cst.Call) and dotted(base.func) == "vars" and base.args:
            named = base.args[0].value
    elif isinstance(func, cst.Call) and dotted(func.func) == "getattr" and len(func.args) == 2:
        named = func.args[0].value
    if named is None or module.project is None or module.file is None:
        return None
    qualname = module.qualname(named, scope)
    path = module.project.module_file(module.file, qualname) if qualname else None
    other = module.project.facts_for(path, module.file) if path is not None else None
    return other if other is not module else None


def _build_calls(module: SourceModule, model) -> list[tuple[cst.Call, Scope]]:
    """The calls that build a model: its build events, following a build that is another name
    (`model_without_ddp = model`) to that name's assignments."""
    found: list[tuple[cst.Call, Scope]] = []
    todo = [(event.node, model.scope, 0) for event in model.builds]
    seen: set[int] = set()
    while todo:
        node, scope, depth = todo.pop()
        if id(node) in seen or depth > MAX_DEPTH:
            continue
        seen.add(id(node))
        if isinstance(node, cst.Call):
            found.append((node, scope))
        elif isinstance(node, (cst.Name, cst.Attribute)):
            for assignment in module.assigned_values(node, scope):
                todo.append((assignment.value, assignment.scope, depth + 1))
    return found


def _trained_in(module: SourceModule) -> list[tuple[Built, list[SourceModule], Device]]:
    """The project classes whose instances `module` trains, each with the modules that train it and the
    device the model trains on."""
    found = []
    models = module.analysis(ModelAnalysis)
    for model in models.optimized:
        device = models.device(model)
        for node, scope in _build_calls(module, model):
            for built in _classes_built(module, node, scope):
                found.append((built, [module, *model.involved], device))
    for call in module.calls:  # `Trainer(config, model, data)`: a project class whose methods train
        if not call.node.args or not _may_build_a_trainer(module, call):
            continue
        trainer = module.resolve_class(call.node.func, call.scope)
        if trainer is None:
            continue
        home, cls = trainer
        training = home.analysis(TrainingAnalysis)
        if not any(training.has_training_loop(method) for method in cls.methods.values()):
            continue
        for arg in call.node.args:
            if not isinstance(arg.value, cst.Name):
                continue
            for built in _classes_built(module, arg.value, call.scope):
                found.append((built, [module, home], Device.UNKNOWN))
    return found


def _may_build_a_trainer(module: SourceModule, call: CallRecord) -> bool:
    """Whether `call` may construct a project class whose methods train, judged from the exports of the
    files that may define it (a training loop runs a backward pass: `reach.may_run_backward`) without
    building them: most calls with arguments in a training script build datasets, loggers and paths."""
    project: ExportIndex | None = module.project  # type: ignore[assignment]
    requester = module.file
    if project is None or requester is None:
        return True
    return module.class_may_be_from(
        call.node.func, call.scope, lambda home: may_run_backward(project, home, requester)
    )


def _registry_names(module: SourceModule) -> set[str] | None:
    """The model names a module trains through timm's registry (`create_model("deit_small")`); None for a
    name the code computes (`create_model(args.model)`); empty when it trains none that way."""
    names: set[str] | None = set()
    for model in module.analysis(ModelAnalysis).optimized:
        for node, scope in _build_calls(module, model):
            qualname = module.qualname(node.func, scope) or ""
            if not (qualname.startswith("timm.") and qualname.endswith("create_model")):
                continue
            first = node.args[0].value if node.args and node.args[0].keyword is None else None
            if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str):
                if names is not None:
                    names.add(first.evaluated_value)
            else:
                names = None
    return names


def _parts(built: Built) -> list[Built]:
    """The project classes a module of class `cls` is built from — its attributes' classes (also built by a
    factory, or passed to its constructor: `DETR(backbone, transformer)`), the blocks of its stacks — and
    its bases: training `cls` trains them."""
    home, cls = built.home, built.cls
    init = cls.methods.get("__init__")
    found: list[Built] = []
    for values in cls.attributes.values():
        for value, scope in values:
            if isinstance(value, cst.Name) and init is not None and value.value in init.params:
                if built.call is not None and built.call_home is not None and built.call_scope is not None:
                    argument = _constructor_argument(built, init, value.value)
                    if argument is not None:
                        found.extend(_classes_built(built.call_home, argument, built.call_scope))
                continue
            for node in _calls_in_value(value):
                found.extend(_classes_built(home, node, scope, MAX_BUILD_DEPTH - 2))
    for base in cls.node.bases:
        part = home.resolve_class(base.value, cls.scope)
        if part is not None:
            found.append(
                Built(part[0], part[1], built.call, built.call_home, built.call_scope, built.factory)
            )
    return found


def _calls_in_value(value: cst.BaseExpression):
    from torchlint.facts.syntax.walk import subexpressions

    for node in subexpressions(value):
        if isinstance(node, cst.Call):
            yield node
