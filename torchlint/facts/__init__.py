"""The semantic model of one module, as rules see it: `ModuleFacts`, the only surface rules import.

Rules ask questions in the terms of their docs — which loaders feed training, on which device, with which
options; which loops train and what they copy to the GPU; which APIs are used where — and this facade answers
them from the layers below, which rules never import:

- `facts/syntax/`: the parsed module (`SourceModule`): names and qualified names, scopes, calls, functions,
  classes, loops, values and their provenance, the one call-argument reader (`calls.py`), positions. It
  knows nothing about torch.
- `facts/torch/`: analyses built on it, one per question family — loaders, training loops, devices, datasets,
  batch moves, and the framework adapters (Lightning, Hugging Face, accelerate). Each is created once per
  module on first use (`SourceModule.analysis`), so that cross-file questions reach the other module's.

Adding a fact: put it in the analysis it belongs to (or a new module under `facts/torch/`), show it in
`torchlint debug facts` (`debug.py`), and expose here the question a rule asks. See CONTRIBUTING.md.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind
from torchlint.facts.torch.vocabulary import DatasetKind, Device, DeviceEvidence

if TYPE_CHECKING:
    from libcst import CSTNode as Node  # noqa: F401  (rules hand nodes to `finding` and `fix.build`, unopened)

    from torchlint._lazy import cst
    from torchlint.facts.syntax.calls import Argument, CallArguments, Signature
    from torchlint.facts.syntax.collect import LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.checkpointing import (
        CheckpointAnalysis,
        CheckpointCall,
        HfCheckpointing,
        LibraryModel,
    )
    from torchlint.facts.torch.datasets import DatasetAnalysis, Unpicklable
    from torchlint.facts.torch.loaders import Loader
    from torchlint.facts.torch.models import CompileQuestions, CompileSite, Model, ModelAnalysis
    from torchlint.facts.torch.moves import Move
    from torchlint.facts.torch.precision import (
        AutocastSite,
        BackwardInAutocast,
        ClipWithoutUnscale,
        Evidence,
        PrecisionAnalysis,
        Scaler,
        ScalerPlan,
        Switch,
    )
    from torchlint.facts.torch.steps import TrainingStep
    from torchlint.facts.torch.structure import Application, Stack
    from torchlint.facts.torch.training import LoaderUse, TrainingAnalysis

# Loaded on first use (PEP 562): importing the rules (every run does, also one answered from the cache)
# must not import the whole model. name -> the module that defines it.
_LAZY = {
    "Argument": "torchlint.facts.syntax.calls",
    "CallArguments": "torchlint.facts.syntax.calls",
    "Signature": "torchlint.facts.syntax.calls",
    "SourceModule": "torchlint.facts.syntax.module",
    "Loader": "torchlint.facts.torch.loaders",
    "CompileSite": "torchlint.facts.torch.models",
    "Model": "torchlint.facts.torch.models",
    "LoaderUse": "torchlint.facts.torch.training",
    "Move": "torchlint.facts.torch.moves",
    "AutocastSite": "torchlint.facts.torch.precision",
    "BackwardInAutocast": "torchlint.facts.torch.precision",
    "Evidence": "torchlint.facts.torch.precision",
    "EvidenceKind": "torchlint.facts.torch.precision",
    "Scaler": "torchlint.facts.torch.precision",
    "ScalerPlan": "torchlint.facts.torch.precision",
    "Switch": "torchlint.facts.torch.precision",
    "TrainingStep": "torchlint.facts.torch.steps",
    "Unpicklable": "torchlint.facts.torch.datasets",
    "Application": "torchlint.facts.torch.structure",
    "Stack": "torchlint.facts.torch.structure",
    "CheckpointCall": "torchlint.facts.torch.checkpointing",
    "HfCheckpointing": "torchlint.facts.torch.checkpointing",
    "LibraryModel": "torchlint.facts.torch.checkpointing",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "Application",
    "Argument",
    "AutocastSite",
    "BackwardInAutocast",
    "Binding",
    "BindingKind",
    "CallArguments",
    "CheckpointCall",
    "CompileSite",
    "DatasetKind",
    "Device",
    "HfCheckpointing",
    "DeviceEvidence",
    "Evidence",
    "EvidenceKind",
    "LibraryModel",
    "Loader",
    "LoaderUse",
    "Model",
    "ModuleFacts",
    "Move",
    "Reference",
    "Scaler",
    "ScalerPlan",
    "Scope",
    "ScopeKind",
    "Signature",
    "SourceModule",
    "Stack",
    "Switch",
    "TrainingStep",
    "Unpicklable",
]


_TEST_FOLDERS = frozenset({"tests", "test", "testing", "test_utils"})


class ModuleFacts:
    """What torchlint knows about one module, answered from its `SourceModule` and the analyses on it."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source

    # -- the file -------------------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.source.path

    @property
    def text(self) -> str:
        return self.source.text

    @property
    def lines(self):
        return self.source.lines

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a node's own text in the decoded source (where a finding starts and ends)."""
        return self.source.span(node)

    def code(self, node: cst.CSTNode) -> str:
        return self.source.code(node)

    def surely_positive(self, argument: Argument) -> bool:
        """The argument's value is at least 1 on every run (`min(8, os.cpu_count() or 1)`, also through the
        name it was assigned to): a worker count that surely starts workers."""
        from torchlint.facts.syntax.values import surely_positive

        node = argument.value.node if argument.value.node is not None else argument.expression
        return surely_positive(node)

    def operand(self, expr: cst.BaseExpression) -> str:
        """The code of `expr`, parenthesised where an operator next to it would bind first."""
        return self.source.operand(expr)

    def line_of(self, node: cst.CSTNode) -> int:
        return self.source.lines.position(self.source.span(node)[0]).line

    # -- names ----------------------------------------------------------------------------------------------

    @property
    def module_scope(self) -> Scope:
        return self.source.module_scope

    def qualname(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        return self.source.qualname(expr, scope)

    def references_to(self, qualnames: Collection[str]) -> list[Reference]:
        """Every use of these APIs, however they were imported (each knows if it is called, a decorator,
        a `with` item or an annotation)."""
        return self.source.references_to(qualnames)

    def references_of(self, binding: Binding) -> list[Reference]:
        return self.source.references_of(binding)

    def call_arguments(
        self, call: cst.Call, scope: Scope, signature: Signature | None = None
    ) -> CallArguments:
        """A call's arguments by parameter name (keywords, positional through `signature`, `**kwargs`)."""
        from torchlint.facts.syntax.calls import KEYWORDS_ONLY, read_call

        return read_call(self.source, call, scope, signature or KEYWORDS_ONLY)

    # -- the script -----------------------------------------------------------------------------------------

    @property
    def has_main_guard(self) -> bool:
        return self.source.has_main_guard

    @property
    def device(self) -> DeviceEvidence:
        """The strongest device evidence in the module."""
        from torchlint.facts.torch.devices import DeviceAnalysis

        return self.source.analysis(DeviceAnalysis).evidence

    @cached_property
    def is_test_module(self) -> bool:
        """A test file (`test_*.py`, `*_test.py`, `conftest.py`, or in a `tests`, `test`, `testing` or
        `test_utils` folder, as accelerate's scripts its test suite runs). A file named like a test that is
        a script and no test (a `__main__` guard or a loop among its own statements; no test framework
        imported, no `test_*` function, no `Test*` class) is an experiment's entry point: research
        repositories name training scripts for the task they test a model on (`add_test.py`)."""
        from pathlib import PurePath

        path = PurePath(self.path)
        name = path.name
        folders = path.parts[:-1]
        if name == "conftest.py" or any(part in _TEST_FOLDERS for part in folders):
            return True
        if not (name.startswith("test_") or name.endswith("_test.py")):
            return False
        if self._uses_a_test_framework:
            return True
        return not (self.has_main_guard or self._loops_at_module_level)

    @property
    def _loops_at_module_level(self) -> bool:
        """A script that runs as it is read: a `for`/`while` among the module's own statements."""
        return any(loop.function is None for loop in self.source.loops)

    @property
    def _uses_a_test_framework(self) -> bool:
        frameworks = ("pytest", "unittest", "torch.testing", "hypothesis", "nose")
        imported = (
            binding.qualname or ""
            for bindings in self.source.module_scope.bindings.values()
            for binding in bindings
            if binding.kind is BindingKind.IMPORT
        )
        return (
            any(q == f or q.startswith(f + ".") for q in imported for f in frameworks)
            or any(function.node.name.value.startswith("test_") for function in self.source.functions)
            or any(cls.name.startswith("Test") for cls in self.source.classes)
        )  # a script's `def test(epoch)` is its evaluation, not a test case

    @cached_property
    def runs_on_xla(self) -> bool:
        """The module imports torch_xla: it trains on a TPU (or another XLA device), not through CUDA."""
        return any(
            (binding.qualname or "").split(".")[0] == "torch_xla"
            for bindings in self.source.module_scope.bindings.values()
            for binding in bindings
            if binding.kind is BindingKind.IMPORT
        )

    @cached_property
    def frameworks(self) -> frozenset[str]:
        """Frameworks that own the training loop here: lightning, transformers, accelerate."""
        from torchlint.facts.torch import frameworks

        return frameworks.frameworks(self.source)

    # -- training -------------------------------------------------------------------------------------------

    @property
    def training(self) -> TrainingAnalysis:
        from torchlint.facts.torch.training import TrainingAnalysis

        return self.source.analysis(TrainingAnalysis)

    @property
    def training_loops(self) -> list[LoopRecord]:
        return self.training.training_loops

    @property
    def makes_sparse_tensors(self) -> bool:
        """The project functions this module calls hand it sparse tensors (a graph net's adjacency)."""
        return self.training.makes_sparse_tensors

    @property
    def demo_length_training(self) -> bool:
        """Every training loop of this module runs a known few steps (`for i in range(10):`)."""
        return self.training.demo_length

    def loaders_of_loop(self, loop: LoopRecord) -> list[Loader]:
        return self.training.loaders_of_loop(loop)

    def batch_moves(self, loop: LoopRecord) -> list[Move]:
        """`.to(device)` / `.cuda()` of what the loop iterates."""
        from torchlint.facts.torch.moves import batch_moves

        return batch_moves(self.source, loop)

    def autocast_device_type(self, loop: LoopRecord) -> str | None:
        """`device.type` when the loop moves its batches to one `torch.device` variable (else None)."""
        from torchlint.facts.torch.moves import device_type_of_moves

        return device_type_of_moves(self.source, loop)

    # -- loaders --------------------------------------------------------------------------------------------

    @property
    def loaders(self) -> list[Loader]:
        from torchlint.facts.torch.loaders import LoaderAnalysis

        return self.source.analysis(LoaderAnalysis).loaders

    def loader_uses(self, loader: Loader) -> list[LoaderUse]:
        """Where `loader` feeds training (empty: it does not, as far as the code shows)."""
        return self.training.loader_uses(loader)

    def training_device(self, loader: Loader) -> Device:
        """The strongest device evidence of this module and of the modules that train with `loader`."""
        return self.training.training_device(loader)

    def runs_under_main_guard(self, loader: Loader) -> bool:
        return self.training.runs_under_main_guard(loader)

    @cached_property
    def hf_training_arguments(self) -> list[Loader]:
        """Hugging Face `TrainingArguments(...)`: the `dataloader_*` options of the Trainer's loader."""
        from torchlint.facts.torch import frameworks

        return frameworks.training_arguments(self.source)

    @property
    def datasets(self) -> DatasetAnalysis:
        from torchlint.facts.torch.datasets import DatasetAnalysis

        return self.source.analysis(DatasetAnalysis)

    def dataset_kind(self, loader: Loader) -> DatasetKind:
        return self.datasets.kind(loader)

    def unpicklable(self, loader: Loader) -> list[Unpicklable]:
        """What worker processes started by spawn/forkserver could not pickle (dataset, collate_fn, ...)."""
        return self.datasets.unpicklable(loader)

    def samples_on_cpu(self, loader: Loader) -> bool | None:
        """True: the dataset's class never moves samples to a device; False: it does; None: unknown."""
        return self.datasets.samples_on_cpu(loader)

    # -- models and compilation ---------------------------------------------------------------------------

    @property
    def _models(self) -> ModelAnalysis:
        from torchlint.facts.torch.models import ModelAnalysis

        return self.source.analysis(ModelAnalysis)

    @property
    def _compiling(self) -> CompileQuestions:
        from torchlint.facts.torch.models import CompileQuestions

        return self.source.analysis(CompileQuestions)

    @property
    def trained_models(self) -> list[Model]:
        """Models whose parameters reach an optimizer in a module that trains, with what is done to them."""
        return self._models.models

    @property
    def compile_sites(self) -> list[CompileSite]:
        """Every place this module asks for compilation (calls, decorators, `torch_compile=` arguments)."""
        return self._models.compile_sites

    def compiled_somewhere(self, model: Model) -> bool:
        return self._compiling.compiled_somewhere(model)

    def model_device(self, model: Model) -> Device:
        return self._models.device(model)

    def is_sequential(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`expr` holds an `nn.Sequential` (or a subclass without its own `forward`)."""
        return self._models.is_sequential(expr, scope)

    def state_dict_elsewhere(self, model: Model) -> str:
        """How code the model is handed to (a helper here or in another file, followed through the helpers
        it hands it on to) may save or load its `state_dict`, or why that cannot be known; "" when none."""
        return self._models.state_dict_elsewhere(model)

    def wrap_against_in_place_compile(self, model: Model) -> str | None:
        """Why the model's wrapper (DataParallel, FSDP1 without original parameters) rules out
        `.compile()`."""
        return self._models.wrap_against_in_place_compile(model)

    @property
    def double_backward(self) -> bool:
        """The module differentiates a graph twice (`autograd.grad(..., create_graph=True)`)."""
        return self._models.double_backward

    def is_one_layer(self, model: Model) -> bool:
        """The model is one built-in layer that runs as one kernel (`nn.Linear(20, 1)`, a convolution), also
        behind a project module whose forward only reshapes around it."""
        found = self._models.compositions(model)
        return found is not None and all(composition.is_one_layer for composition in found)

    def is_rnn_bound(self, model: Model) -> bool:
        """The model's compute is an `nn.LSTM`/`GRU`/`RNN` with light layers around it, which Dynamo runs
        eagerly (unless the code sets `torch._dynamo.config.allow_rnn`)."""
        if any("allow_rnn" in module.text for module in model.involved):
            return False
        found = self._models.compositions(model)
        return found is not None and all(composition.is_rnn_bound for composition in found)

    def builtin_module(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The `torch.nn` class of a built-in module `expr` holds (`Linear`, `Sequential`), else None."""
        return self._models.builtin_module(expr, scope)

    def runs_every_step(self, site: CompileSite) -> bool:
        """The compile call runs on every step or epoch of training."""
        return site.call is not None and self._compiling.runs_every_step(site.call)

    def wrapper_compiled(self, site: CompileSite) -> str | None:
        """The DDP/FSDP wrapper a compile site compiles instead of the module inside it (its name as
        written), or None."""
        from torchlint.facts.torch.models import wrapper_compiled

        return wrapper_compiled(self._compiling, site)

    def compiled_result_unused(self, site: CompileSite) -> bool:
        """`compiled = torch.compile(model)`, `compiled` never read, and `model` itself called."""
        return self._compiling.unused_result(site)

    def standalone_statement(self, call: Node) -> Node | None:
        """The expression statement that is `call` alone, if it is one."""
        return self._compiling.standalone_statement(call)

    def is_variable(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """A plain name or `self.x`: something a fix can assign to or call a method on."""
        from torchlint._lazy import cst

        return isinstance(expr, cst.Name) or self.source.is_self_attribute(expr, scope)

    def code_of_arguments(self, call: cst.Call, skip: int = 0) -> list[str]:
        """A call's arguments as written (`mode="max-autotune"`), without its first `skip` positional ones."""
        found = []
        for arg in call.args:
            if skip and arg.keyword is None and not arg.star:
                skip -= 1
                continue
            found.append(self.source.code(arg.with_changes(comma=None)).strip())
        return found

    # -- mixed precision ------------------------------------------------------------------------------------

    @property
    def _precision(self) -> PrecisionAnalysis:
        from torchlint.facts.torch.precision import PrecisionAnalysis

        return self.source.analysis(PrecisionAnalysis)

    @property
    def autocast_sites(self) -> list[AutocastSite]:
        """Every reference to an autocast entry point, with its device, dtype, `enabled=` and use."""
        return self._precision.autocast_sites

    @property
    def grad_scalers(self) -> list[Scaler]:
        """GradScalers (also project classes wrapping one) and the calls made on each."""
        return self._precision.scalers

    @property
    def precision_switches(self) -> list[Switch]:
        """Precision supplied another way: framework arguments, half-precision casts, FSDP/apex/DeepSpeed."""
        return self._precision.switches

    @property
    def precision_evidence(self) -> list[Evidence]:
        """Everything that says this module decided about precision (sites, scalers, switches, flags)."""
        return self._precision.evidence

    def precision_decided(self, loop: LoopRecord) -> bool:
        """This module, one the loop calls into, or one that calls into it decides about precision."""
        return self._precision.decided_for(loop)

    @property
    def autocast_regions(self) -> list[tuple[AutocastSite, Node]]:
        """`with` blocks that open an enabled autocast context (directly, a variable, a parameter)."""
        return self._precision.regions

    def framework_owns(self, loop: LoopRecord) -> bool:
        """A Lightning or accelerate object made here, or the loop's framework backward, decides it."""
        return self._precision.framework_owns(loop)

    def runs_over_rpc(self, loop: LoopRecord) -> bool:
        """The loop trains through distributed autograd: its model runs on RPC workers."""
        return self._precision.runs_over_rpc(loop)

    def loop_device(self, loop: LoopRecord) -> Device:
        """The device a training loop runs on: this module's evidence, else that of the files calling it."""
        return self._precision.loop_device(loop)

    @property
    def unsafe_under_autocast(self) -> str:
        """Why wrapping this module's forward in CUDA autocast would raise (BCELoss, an autograd.Function
        without `custom_fwd`), with the safe replacement; "" when nothing known would."""
        return self._precision.unsafe_under_autocast

    def training_step(self, loop: LoopRecord) -> TrainingStep | None:
        """The forward call of a training loop and the forward-and-loss statements a fix may wrap."""
        from torchlint.facts.torch.steps import training_step

        return training_step(self.source, loop, {model.text for model in self.trained_models})

    def framework_precision_gaps(self) -> list[tuple[Node, Node, str, str, str]]:
        """Framework objects that own a training loop and run it in full precision on the GPU: (call,
        callee, framework, the switch, its mixed-precision value) — a Lightning `Trainer`, an accelerate
        `Accelerator`, a Hugging Face `TrainingArguments` whose arguments surely lack it."""
        return self._precision.framework_gaps

    def backward_in_autocast(self) -> list[BackwardInAutocast]:
        """`.backward()` calls written inside an enabled autocast `with` block, with the block's site and,
        when moving it out is a pure dedent, where."""
        return self._precision.backward_in_autocast()

    def clips_without_unscale(self) -> list[ClipWithoutUnscale]:
        """Gradient clipping before `scaler.step(opt)` in a step that does not unscale first, with where the
        step's one `unscale_` goes (on its first clip) or why there is none."""
        return self._precision.clips_without_unscale()

    def fp16_autocast_without_scaler(self) -> list[tuple[AutocastSite, LoopRecord]]:
        """float16 autocast (explicit, the CUDA default, or float16 on some hardware) around training, in a
        module with no GradScaler, scaler class or other loss scaling, with the training loop."""
        return self._precision.fp16_without_scaler()

    def scaler_plan(self, loop: LoopRecord) -> ScalerPlan | None:
        """The statements a GradScaler rewrite of `loop` touches, when its shape is simple enough."""
        return self._precision.scaler_plan(loop)

    def name_is_free(self, name: str, scope: Scope) -> bool:
        """No binding of `name` is visible in `scope`, nor may a star import bind it (a fix may add it)."""
        return self.source.name_is_free(name, scope)

    # -- what a fix's change of a name reaches --------------------------------------------------------------

    def name_clash(self, name: str, scope: Scope, meaning: str | None = None) -> str:
        """Why a fix may not bind `name` anew (to the qualified name `meaning`, for an import) at module
        level or in `scope`: taken, maybe bound by a star import, or read where nothing binds it; "" when it
        may."""
        return self.source.name_changes.insertion_clash(name, scope, meaning)

    def rebinding_clash(self, expr: cst.BaseExpression, scope: Scope) -> str:
        """Why a fix may not write `expr = ...` in `scope` (a name bound outside the function would become a
        local variable of it); "" when it may, and for `self.x`."""
        from torchlint._lazy import cst

        if not isinstance(expr, cst.Name):
            return ""
        return self.source.name_changes.rebinding_clash(expr.value, scope)

    def removal_observers(self, name: str, scope: Scope) -> str:
        """Who may still read `name` (bound in `scope`) once a fix removes its binding: another project
        file, `__all__`, `globals()`, ...; "" when only the references this file shows."""
        return self.source.name_changes.removal_observers(name, scope)

    def scalers_with_bfloat16(self) -> list[Scaler]:
        """Always-enabled GradScalers in a module whose every autocast asks for bfloat16."""
        return self._precision.scalers_with_bfloat16()

    # -- activation checkpointing ---------------------------------------------------------------------------

    @property
    def _checkpointing(self) -> CheckpointAnalysis:
        from torchlint.facts.torch.checkpointing import CheckpointAnalysis

        return self.source.analysis(CheckpointAnalysis)

    @property
    def stacks(self) -> list[Stack]:
        """Attributes of this module's classes that hold a stack of repeated blocks, with their depth and
        where the forward pass applies them."""
        from torchlint.facts.torch.structure import StructureAnalysis

        return self.source.analysis(StructureAnalysis).stacks

    @property
    def checkpoint_calls(self) -> list[CheckpointCall]:
        """`torch.utils.checkpoint.checkpoint` / `checkpoint_sequential` calls, under any alias."""
        return self._checkpointing.checkpoint_calls

    @property
    def hf_reentrant_checkpointing(self) -> list[HfCheckpointing]:
        """Hugging Face checkpointing switched on without `gradient_checkpointing_kwargs` (reentrant)."""
        return self._checkpointing.hf_checkpointing

    @property
    def checkpointing_evidence(self) -> list[tuple[Node, str]]:
        """Everything in this module that says its author decided about activation checkpointing."""
        return self._checkpointing.evidence

    @property
    def library_models_without_checkpointing(self) -> list[LibraryModel]:
        """Trained library models with their own checkpointing switch (Hugging Face, timm, a Trainer's
        `TrainingArguments`) that nothing in this module turns on."""
        return self._checkpointing.library_models

    def checkpointing_opportunities(self, min_depth: int) -> list[tuple[Stack, list[str]]]:
        """Stacks of at least `min_depth` repeated blocks (or of a configurable depth whose default is
        unknown) applied by `forward` in a trained class checkpointed nowhere: (the stack, the paths of
        the other modules that train it, as seen from this one)."""
        from torchlint.facts.torch.models import _relative

        return [
            (stack, [_relative(module.path, self.path) for module in trainers if module is not self.source])
            for stack, trainers in self._checkpointing.opportunities(min_depth)
        ]

    def stack_status(self, stack: Stack) -> tuple[list[str] | None, str | None]:
        """(the paths of the modules that train the stack's class, or None; how it is checkpointed, or
        None) — what `debug facts` shows."""
        analysis = self._checkpointing
        trainers = analysis.trainers_of(stack.cls)
        switch = analysis.class_switch(stack.cls)
        if switch is None and trainers is not None:
            found = analysis.checkpointed_in([self.source, *trainers])
            if found is not None:
                module, node, what = found
                switch = f"{what} in {module.path}"
        from torchlint.facts.torch.models import _relative

        paths = [_relative(module.path, self.path) for module in trainers] if trainers is not None else None
        return paths, switch
