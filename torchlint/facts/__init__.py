"""The semantic model of one module, as rules see it: `ModuleFacts`, the door rules go through.

Below it, two layers that rules never import:

- `facts/syntax/`: the parsed module (`SourceModule`): names and qualified names, scopes, calls, functions,
  classes, loops, values and their provenance, the one call-argument reader (`calls.py`), positions. It
  knows nothing about torch.
- `facts/torch/`: the analyses several rule families share, one per question — training loops and the
  loaders feeding them, trained models, devices, batch moves, what a model is made of, and the framework
  adapters (Lightning, Hugging Face, accelerate). Each is created once per module on first use
  (`SourceModule.analysis`), so that cross-file questions reach the other module's.

What only one family asks lives in that family's folder (`torchlint/rules/<family>/`) and is reached
through `ModuleFacts.analysis(SomeAnalysis)`: facts never import rules. `ModuleFacts` itself holds the file,
its names, what a fix may change, the script's shape, and one attribute per shared analysis. See
CONTRIBUTING.md.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind
from torchlint.facts.torch.vocabulary import NEWER_TORCH_APIS, DatasetKind, Device, DeviceEvidence

if TYPE_CHECKING:
    from libcst import CSTNode as Node  # noqa: F401  (rules hand nodes to `finding` and `fix.build`, unopened)

    from torchlint._lazy import cst
    from torchlint.facts.syntax.calls import Argument, CallArguments, Signature
    from torchlint.facts.syntax.collect import LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.callers import CallerAnalysis
    from torchlint.facts.torch.loaders import Loader
    from torchlint.facts.torch.models import CompileSite, Model, ModelAnalysis
    from torchlint.facts.torch.moves import Move
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
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "Argument",
    "Binding",
    "BindingKind",
    "CallArguments",
    "CompileSite",
    "DatasetKind",
    "Device",
    "DeviceEvidence",
    "Loader",
    "LoaderUse",
    "Model",
    "ModuleFacts",
    "Move",
    "Reference",
    "Scope",
    "ScopeKind",
    "Signature",
    "SourceModule",
]

Analysis = TypeVar("Analysis")


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

    def code_of_arguments(self, call: cst.Call, skip: int = 0) -> list[str]:
        """A call's arguments as written (`mode="max-autotune"`), without its first `skip` positional ones."""
        found = []
        for arg in call.args:
            if skip and arg.keyword is None and not arg.star:
                skip -= 1
                continue
            found.append(self.source.code(arg.with_changes(comma=None)).strip())
        return found

    def is_variable(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """A plain name or `self.x`: something a fix can assign to or call a method on."""
        from torchlint._lazy import cst

        return isinstance(expr, cst.Name) or self.source.is_self_attribute(expr, scope)

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
    def torch_it_runs(self) -> tuple[int, int] | None:
        """The oldest torch this module's own code needs: an API it calls on every path
        (`model = torch.compile(model)`: 2.0) proves its torch has it, whatever an older README or pin says
        (RWKV-LM's README pins torch 1.13 for one of its versions; the later ones compile)."""
        found = [
            NEWER_TORCH_APIS[qualname]
            for call in self.source.calls
            if not call.conditional
            and (qualname := self.source.qualname(call.node.func, call.scope)) in NEWER_TORCH_APIS
        ]
        return max(found, default=None)

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

    # -- the analyses several families share -----------------------------------------------------------

    def analysis(self, kind: type[Analysis]) -> Analysis:
        """This module's `kind` analysis, made on first use and shared by every rule and every other module
        that asks (a family's own analyses are reached this way)."""
        return self.source.analysis(kind)

    @property
    def training(self) -> TrainingAnalysis:
        """Training loops, the loaders that feed them, and the device and shape of the training."""
        from torchlint.facts.torch.training import TrainingAnalysis

        return self.source.analysis(TrainingAnalysis)

    @property
    def callers(self) -> CallerAnalysis:
        """Who runs this module's code from other project files, and the device a loop trains on as they
        say (`callers.loop_device(loop)`)."""
        from torchlint.facts.torch.callers import CallerAnalysis

        return self.source.analysis(CallerAnalysis)

    @property
    def models(self) -> ModelAnalysis:
        """The trained models (`models.trained`), what is done to each, and every compile site."""
        from torchlint.facts.torch.models import ModelAnalysis

        return self.source.analysis(ModelAnalysis)

    @property
    def loaders(self) -> list[Loader]:
        """Every `DataLoader` built here, with its options."""
        from torchlint.facts.torch.loaders import LoaderAnalysis

        return self.source.analysis(LoaderAnalysis).loaders

    def batch_moves(self, loop: LoopRecord) -> list[Move]:
        """`.to(device)` / `.cuda()` of what the loop iterates."""
        from torchlint.facts.torch.moves import batch_moves

        return batch_moves(self.source, loop)

    @cached_property
    def hf_training_arguments(self) -> list[Loader]:
        """Hugging Face `TrainingArguments(...)`: the `dataloader_*` options of the Trainer's loader."""
        from torchlint.facts.torch import frameworks

        return frameworks.training_arguments(self.source)

    # -- what a fix's change of a name reaches --------------------------------------------------------------

    def name_is_free(self, name: str, scope: Scope) -> bool:
        """No binding of `name` is visible in `scope`, nor may a star import bind it (a fix may add it)."""
        return self.source.name_is_free(name, scope)

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
