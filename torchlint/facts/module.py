"""`ModuleFacts`: what torchlint knows about one module, asked by rules instead of walking the tree.

Built from a single LibCST parse and a single walk (`collect.py`). Positions are computed lazily, only when a
rule has something to report, because LibCST's PositionProvider costs more than the parse.

What rules ask today:
- `references_to(qualnames)`: every use of an API, however it was imported (`import torch.cuda.amp as amp`,
  `from torch.cuda import amp`, `from torch.cuda.amp import autocast as ac`, imports inside functions), each
  a `Reference` that knows whether it is a callee, a decorator or a `with` item;
- `references_of(binding)`: every use of one imported name (to know when an import becomes unused);
- `name_for_module("torch", scope)`: how the code spells a module in a scope (`T` after `import torch as T`),
  and `import_anchor()`: where a new top-level import goes;
- `span(node)` / `code(node)`: offsets and source text, for findings and fixes.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.diagnostics import LineIndex
from torchlint.facts.syntax.collect import (
    CallRecord,
    ClassRecord,
    Collected,
    Collector,
    FunctionRecord,
    LoopRecord,
)
from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind, dotted
from torchlint.facts.syntax.values import Evaluator
from torchlint.facts.torch.datasets import DatasetAnalysis
from torchlint.facts.torch.devices import Device, DeviceAnalysis, DeviceEvidence
from torchlint.facts.torch.loaders import (
    LOADER_CLASSES,
    Loader,
    build_loader,
    call_options,
    has_endless_epochs,
)
from torchlint.facts.torch.training import ExternalSource, LoaderUse, TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.index.project import Project


class ModuleFacts:
    def __init__(
        self,
        path: str,
        text: str,
        module: cst.Module,
        project: Project | None = None,
        file: Path | None = None,
    ) -> None:
        self.path = path
        self.text = text
        self.module = module
        self.project = project
        self.file = file.resolve() if file is not None else None
        self._collected: Collected = Collector().collect(module)
        self.evaluator = Evaluator(self)
        self.training = TrainingAnalysis(self)
        self.devices = DeviceAnalysis(self)
        self.datasets = DatasetAnalysis(self)

    # -- names ------------------------------------------------------------------------------------------

    @property
    def module_scope(self) -> Scope:
        return self._collected.module_scope

    @property
    def references(self) -> list[Reference]:
        return self._collected.references

    def references_to(self, qualnames: Collection[str]) -> list[Reference]:
        """Uses of any of `qualnames` (exact qualified names of the longest attribute chain)."""
        return [ref for ref in self.references if ref.qualname in qualnames]

    @cached_property
    def _references_by_binding(self) -> dict[int, list[Reference]]:
        table: dict[int, list[Reference]] = {}
        for ref in self.references:
            for binding in ref.bindings:
                table.setdefault(id(binding), []).append(ref)
        return table

    def references_of(self, binding: Binding) -> list[Reference]:
        return self._references_by_binding.get(id(binding), [])

    def name_for_module(self, qualname: str, scope: Scope) -> str | None:
        """A dotted expression that means module `qualname` in `scope`, or None if the code has none."""
        module_scope = self.module_scope
        for binding_list in module_scope.bindings.values():
            for binding in binding_list:
                if binding.kind is not BindingKind.IMPORT or binding.qualname != qualname:
                    continue
                if scope.resolve(binding.name) == qualname:
                    return binding.name
        return None

    def name_is_free(self, name: str, scope: Scope) -> bool:
        """True when binding `name` at module level would not clash with anything visible from `scope`."""
        return not scope.lookup(name) and name not in self.module_scope.bindings

    def suite_size(self, statement: cst.CSTNode) -> int:
        """How many statements share the block of `statement` (0 if unknown)."""
        return self._collected.suite_sizes.get(id(statement), 0)

    def qualname(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The qualified name of a Name/Attribute chain rooted at an import (`nn.Linear` -> torch.nn.Linear).

        Builtins resolve to themselves (`enumerate`, `next`) unless shadowed.
        """
        name = dotted(expr)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        bindings = scope.lookup(root)
        if not bindings:
            return name if not rest else None
        base = scope.resolve(root)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    # -- structure: functions, classes, loops, calls ---------------------------------------------------

    @property
    def calls(self) -> list[CallRecord]:
        return self._collected.calls

    @property
    def functions(self) -> list[FunctionRecord]:
        return self._collected.functions

    @property
    def classes(self) -> list[ClassRecord]:
        return self._collected.classes

    @property
    def loops(self) -> list[LoopRecord]:
        return self._collected.loops

    @property
    def has_main_guard(self) -> bool:
        return self._collected.has_main_guard

    @cached_property
    def _function_by_scope(self) -> dict[int, FunctionRecord]:
        return {id(f.scope): f for f in self.functions}

    @cached_property
    def _function_by_node(self) -> dict[int, FunctionRecord]:
        return {id(f.node): f for f in self.functions}

    def function_of_scope(self, scope: Scope) -> FunctionRecord | None:
        while scope is not None and scope.kind is ScopeKind.COMPREHENSION:
            scope = scope.parent  # type: ignore[assignment]
        return self._function_by_scope.get(id(scope)) if scope is not None else None

    def class_of_method_scope(self, scope: Scope) -> tuple[ClassRecord, str] | None:
        """(the class, the name of `self`) when `scope` is (inside) a method."""
        function = self.function_of_scope(scope)
        while function is not None and function.owner is None:
            parent = function.scope.parent
            function = self.function_of_scope(parent) if parent is not None else None
        if function is None or function.owner is None or not function.params:
            return None
        return function.owner, function.params[0]

    def top_level_function(self, name: str) -> FunctionRecord | None:
        for binding in self.module_scope.bindings.get(name, []):
            if binding.kind is BindingKind.DEF:
                return self._function_by_node.get(id(binding.node))
        return None

    def callee_of_call(self, call: cst.Call, scope: Scope) -> tuple[ModuleFacts, FunctionRecord] | None:
        """The function a call runs, in this module (a def, a method on self) or in another project file."""
        func = call.func
        if isinstance(func, cst.Name):
            bindings = scope.lookup(func.value)
            defs = [b for b in bindings if b.kind is BindingKind.DEF]
            if defs and len(defs) == len(bindings):
                function = self._function_by_node.get(id(defs[-1].node))
                return (self, function) if function is not None else None
            values = [b for b in bindings if b.kind is BindingKind.ASSIGN and b.value is not None]
            if len(values) == 1 == len(bindings) and isinstance(values[0].value, cst.Call):
                # `scaler = NativeScaler()` ... `scaler(loss, optimizer)`: runs NativeScaler.__call__
                found = self.resolve_class(values[0].value.func, values[0].scope)
                if found is not None and "__call__" in found[1].methods:
                    return found[0], found[1].methods["__call__"]
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = self.class_of_method_scope(scope)
            if owner is not None and func.value.value == owner[1]:
                method = owner[0].methods.get(func.attr.value)
                return (self, method) if method is not None else None
        if self.project is not None and self.file is not None:
            qualname = self.qualname(func, scope)
            if qualname is not None and not qualname.startswith(("torch.", "builtins")) and "." in qualname:
                return self.project.resolve_function(self.file, qualname)
        return None

    def callee(self, call: CallRecord) -> tuple[ModuleFacts, FunctionRecord] | None:
        key = id(call.node)
        cache = self._callee_cache
        if key not in cache:
            cache[key] = self.callee_of_call(call.node, call.scope)
        return cache[key]

    @cached_property
    def _callee_cache(self) -> dict[int, tuple[ModuleFacts, FunctionRecord] | None]:
        return {}

    def calls_of(self, function: FunctionRecord) -> list[CallRecord]:
        """Calls in this module that run `function`."""
        return self._calls_by_callee.get(id(function), [])

    @cached_property
    def _calls_by_callee(self) -> dict[int, list[CallRecord]]:
        """Every call resolved once, indexed by the function it runs (callers are asked for repeatedly)."""
        index: dict[int, list[CallRecord]] = {}
        for call in self.calls:
            target = self.callee(call)
            if target is not None:
                index.setdefault(id(target[1]), []).append(call)
        return index

    def method_calls_on(self, name: str, home: Scope, method: str) -> list[CallRecord]:
        """`name.method(...)` calls where `name` means the variable bound in `home`."""
        found = []
        for call in self.calls:
            func = call.node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == method
                and isinstance(func.value, cst.Name)
                and func.value.value == name
                and call.scope.deciding_scope(name) is home
            ):
                found.append(call)
        return found

    def item_assignments(self, home: Scope, name: str):
        return self._collected.item_assignments.get((id(home), name), [])

    # -- argparse ----------------------------------------------------------------------------------------

    @cached_property
    def _argparse(self) -> dict[str, tuple[str, cst.BaseExpression | None]]:
        """dest -> (the flag as written, its default expression) for every `add_argument(...)` call."""
        options: dict[str, tuple[str, cst.BaseExpression | None]] = {}
        for call in self.calls:
            func = call.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
                continue
            flags = [
                a.value.evaluated_value
                for a in call.node.args
                if a.keyword is None and isinstance(a.value, cst.SimpleString)
            ]
            flags = [f for f in flags if isinstance(f, str)]
            if not flags:
                continue
            keywords = {a.keyword.value: a.value for a in call.node.args if a.keyword is not None}
            long = next((f for f in flags if f.startswith("--")), flags[0])
            dest_node = keywords.get("dest")
            dest = (
                dest_node.evaluated_value
                if isinstance(dest_node, cst.SimpleString)
                else long.lstrip("-").replace("-", "_")
            )
            options[str(dest)] = (long, keywords.get("default"))
        return options

    def argparse_option(self, dest: str) -> str | None:
        found = self._argparse.get(dest)
        if found is None:
            return None
        flag, default = found
        return f"argparse {flag}, default {self.code(default)}" if default is not None else f"argparse {flag}"

    def argparse_default(self, dest: str) -> cst.BaseExpression | None:
        found = self._argparse.get(dest)
        return found[1] if found is not None else None

    # -- loaders and training ------------------------------------------------------------------------------

    @cached_property
    def _loaders(self) -> dict[int, Loader]:
        found: dict[int, Loader] = {}
        for call in self.calls:
            cls = self.loader_class(call.node.func, call.scope)
            if cls is not None:
                found[id(call.node)] = build_loader(self, call.node, call.scope, cls)
        return found

    @property
    def loaders(self) -> list[Loader]:
        return list(self._loaders.values())

    def loader_at(self, call: cst.Call) -> Loader | None:
        return self._loaders.get(id(call))

    def loader_class(self, func: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """The loader class a callee names: torch's DataLoader, a known subclass, or the project's."""
        qualname = self.qualname(func, scope)
        if qualname in LOADER_CLASSES:
            return qualname
        if depth >= 4:
            return None
        # Classes of other files are followed only when named like loaders (timm's MultiEpochsDataLoader):
        # resolving every call of a file across the project would cost more than the rest of the analysis.
        local = self.local_class(func, scope)
        if local is None and (qualname is None or "loader" not in qualname.rpartition(".")[2].lower()):
            return None
        found = (self, local) if local is not None else self.resolve_class(func, scope)
        if found is None:
            return None
        facts, cls = found
        for base in cls.node.bases:
            if facts.loader_class(base.value, cls.scope, depth + 1) is not None:
                return qualname or cls.name
        return None

    def local_class(self, expr: cst.BaseExpression, scope: Scope) -> ClassRecord | None:
        if not isinstance(expr, cst.Name):
            return None
        bindings = scope.lookup(expr.value)
        if len(bindings) == 1 and bindings[0].kind is BindingKind.CLASS:
            return next((c for c in self.classes if c.node is bindings[0].node), None)
        return None

    def resolve_class(self, func: cst.BaseExpression, scope: Scope) -> tuple[ModuleFacts, ClassRecord] | None:
        """The class a name means: defined here, or in another file of the project."""
        local = self.local_class(func, scope)
        if local is not None:
            return self, local
        qualname = self.qualname(func, scope)
        if qualname and self.project is not None and self.file is not None:
            module, _, name = qualname.rpartition(".")
            path = self.project.module_file(self.file, module) if module else None
            other = self.project.facts_for(path, self.file) if path is not None else None
            if other is not None and other is not self:
                cls = other.top_level_class(name)
                if cls is not None:
                    return other, cls
        return None

    def top_level_class(self, name: str) -> ClassRecord | None:
        return self.local_class(cst.Name(name), self.module_scope)

    @cached_property
    def _loader_uses(self) -> dict[int, list[LoaderUse]]:
        uses = self.training.loader_uses()
        for key, found in uses.items():
            loader = self._loaders.get(key)
            if loader is not None and has_endless_epochs(self, loader):
                # Its iterator is never exhausted, so however the loop re-creates it, that code never runs.
                uses[key] = [replace(use, per_epoch=False) for use in found]
        return uses

    def loader_uses(self, loader: Loader) -> list[LoaderUse]:
        """Where `loader` feeds training (empty: it does not, as far as the code shows)."""
        return self._loader_uses.get(id(loader.call), [])

    def uses_from_importers(self) -> dict[int, list[LoaderUse]]:
        """Loaders this module builds in a factory that another project file iterates for training."""
        if self.project is None or self.file is None:
            return {}
        found: dict[int, list[LoaderUse]] = {}
        for importer in self.project.importers_of(self.file):
            other = self.project.facts_for(importer, self.file)
            if other is None or other is self:
                continue
            for source, use in other.training.external_training_sources():
                if source.path != str(self.file):
                    continue
                function = self.top_level_function(source.function)
                if function is None:
                    continue
                for returned in function.returns:
                    for loader in self.training.sources(returned, function.scope, source.index):
                        if isinstance(loader, Loader):
                            found.setdefault(id(loader.call), []).append(use)
        return found

    @cached_property
    def hf_training_arguments(self) -> list[Loader]:
        """`TrainingArguments(...)` calls (Hugging Face): their `dataloader_*` options configure the loader
        the Trainer builds. Represented like a loader whose options are the call's arguments."""
        found = []
        for call in self.calls:
            qualname = self.qualname(call.node.func, call.scope) or ""
            if qualname.startswith(("transformers.", "trl.")) and qualname.endswith(
                ("TrainingArguments", "Config")
            ):
                options, complete, names = call_options(self, call.node, call.scope)
                found.append(Loader(call.node, call.scope, qualname, options, complete, names))
        return found

    @cached_property
    def frameworks(self) -> frozenset[str]:
        """Frameworks that own the training loop here: lightning, transformers, accelerate."""
        roots = {
            (b.qualname or "").lstrip(".").split(".")[0]
            for bindings in self.module_scope.bindings.values()
            for b in bindings
            if b.kind is BindingKind.IMPORT
        }
        names = {
            "pytorch_lightning": "lightning",
            "lightning": "lightning",
            "transformers": "transformers",
            "accelerate": "accelerate",
            "trl": "transformers",
        }
        return frozenset(names[r] for r in roots if r in names)

    @cached_property
    def device(self) -> DeviceEvidence:
        return self.devices.module_evidence()

    def training_device(self, loader: Loader) -> Device:
        """The strongest device evidence of this module and of the modules that train with `loader`."""
        modules = [self, *(use.module for use in self.loader_uses(loader))]
        return max(module.device.device for module in modules)

    def runs_under_main_guard(self, loader: Loader) -> bool:
        """Whether the script that builds or trains with `loader` guards its entry point."""
        return self.has_main_guard or any(use.module.has_main_guard for use in self.loader_uses(loader))

    def loaders_of_loop(self, loop: LoopRecord) -> list[Loader]:
        """The loaders of this module a training loop iterates (directly or through parameters)."""
        found: list[Loader] = []
        for source, _ in self.training.iterated(loop):
            for traced, _ in self.training.trace([source], False):
                if isinstance(traced, ExternalSource):  # built by a factory in another file
                    found += [x for x in self._external_loaders(traced) if x not in found]
                elif isinstance(traced, Loader) and traced not in found:
                    found.append(traced)
        return found

    def _external_loaders(self, source: ExternalSource) -> list[Loader]:
        if self.project is None:
            return []
        other = self.project.facts_for(Path(source.path), self.file)
        function = other.top_level_function(source.function) if other is not None else None
        if other is None or function is None:
            return []
        return [
            loader
            for returned in function.returns
            for loader in other.training.sources(returned, function.scope, source.index)
            if isinstance(loader, Loader)
        ]

    # -- positions and text -----------------------------------------------------------------------------

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.text)

    @cached_property
    def _positions(self):
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a node's own text (no surrounding whitespace) in the decoded source."""
        code_range = self._positions[node]
        lines = self.lines
        return (
            lines.offset(code_range.start.line, code_range.start.column),
            lines.offset(code_range.end.line, code_range.end.column),
        )

    def statement_start(self, statement: cst.CSTNode) -> int:
        """Where a statement's text begins: its first decorator, if it has any (LibCST starts at `def`)."""
        decorators = getattr(statement, "decorators", ())
        return self.span(decorators[0] if decorators else statement)[0]

    @cached_property
    def _statement_starts(self) -> list[int]:
        return [self.statement_start(statement) for statement in self.module.body]

    def top_level_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The module-level statement that contains `node` (found by position, no parent links needed)."""
        index = bisect.bisect_right(self._statement_starts, self.span(node)[0]) - 1
        return self.module.body[max(index, 0)]

    def line_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the whole physical lines a node occupies, newline included."""
        code_range = self._positions[node]
        lines = self.lines
        return lines.offset(code_range.start.line, 0), lines.offset(code_range.end.line + 1, 0)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @property
    def newline(self) -> str:
        return self.module.default_newline

    @cached_property
    def _top_level_imports(self) -> list[cst.SimpleStatementLine]:
        found = []
        for statement in self.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
            ):
                found.append(statement)
            elif found:
                break  # the first block of imports ends here
            elif not _is_docstring(statement):
                break
        return found

    def import_anchor(self) -> int:
        """Where a new top-level import line goes: after the first block of imports, else at the top."""
        imports = self._top_level_imports
        if imports:
            return self.line_span(imports[-1])[1]
        body = self.module.body
        if body and _is_docstring(body[0]):
            return self.line_span(body[0])[1]
        if body:
            return self.line_span(body[0])[0]
        return len(self.text)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
