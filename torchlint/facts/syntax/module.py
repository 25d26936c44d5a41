"""`SourceModule`: one parsed module as torchlint's analyses see it, before any torch knowledge.

Built from a single LibCST parse and a single walk (`collect.py`): names resolved to qualified names, the
functions, classes, loops and calls, what a name or `self.x` was assigned, the value of an expression with
its provenance (`values.py`), and positions, computed lazily (LibCST's PositionProvider costs more than the
parse).
What torch means (loaders, training loops, devices) is built on top, in `facts/torch/`, as *analyses*: each
one is created once per module on first use, by `module.analysis(TrainingAnalysis)`, so that an analysis
can ask another module's (`engine.py`'s training loop, seen from `train.py`) without a central registry.

Other files of the project are reached through `project`, a `ProjectIndex`: facts depend on that protocol,
never on `torchlint.index` that implements it (an import contract enforces it), so the semantic model can be
built and tested for one module alone (`project=None`: every cross-file question is unknown).
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from torchlint._lazy import cst
from torchlint.facts.syntax import walk
from torchlint.facts.syntax.collect import (
    CallRecord,
    ClassRecord,
    Collected,
    Collector,
    FunctionRecord,
    LoopRecord,
)
from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind, dotted
from torchlint.facts.syntax.order import TextOrder
from torchlint.facts.syntax.rebinding import NameChanges
from torchlint.facts.syntax.spans import Spans, statement_at
from torchlint.facts.syntax.values import Evaluator, Value
from torchlint.memo import ByIdentity
from torchlint.positions import LineIndex

MAX_BASE_DEPTH = 4  # base classes followed up a class's hierarchy

Analysis = TypeVar("Analysis")
# nn.Module's methods that return the module itself (`Trainer(model).cuda()` is still the Trainer)
_RETURNS_THE_MODULE = frozenset({"cuda", "to", "cpu", "train", "eval", "float", "double", "half", "bfloat16"})


class ProjectIndex(Protocol):
    def module_file(self, importer: Path, dotted: str) -> Path | None:
        """The file a module name means when imported by `importer` (None: not in the project)."""
        ...

    def resolve_function(self, importer: Path, qualname: str) -> tuple[SourceModule, FunctionRecord] | None:
        """A module-level function of another project file, as `importer` names it."""
        ...

    def resolve_class(self, importer: Path, qualname: str) -> tuple[SourceModule, ClassRecord] | None:
        """A module-level class of another project file, as `importer` names it (also re-exported)."""
        ...

    def facts_for(self, path: Path, requester: Path | None = None) -> SourceModule | None:
        """Another file's module (None: unreadable or unparsable); `requester` depends on it from now on."""
        ...

    def facts_binding(
        self, path: Path, name: str, kind: Literal["class", "function"], requester: Path
    ) -> SourceModule | None:
        """`facts_for(path, requester)`, or None where `path` certainly binds no class (no def or import,
        for "function") named `name`: a question about that name alone need not build the facts."""
        ...

    def importers_of(self, path: Path) -> list[Path]:
        """The project files that import `path` (the answer then depends on the project's file list)."""
        ...

    def may_name(self, path: Path, names: Collection[str], requester: Path | None = None) -> bool:
        """False only when project file `path` cannot refer to any of `names` (checked before its facts are
        built for a question about who calls them); `requester` depends on `path`'s text from now on."""
        ...

    def mentions(self, path: Path, words: Collection[str], requester: Path | None = None) -> bool | None:
        """Whether project file `path`'s text holds one of `words`, read without building its facts (None:
        unknown); `requester` depends on `path`'s text from now on."""
        ...

    def named_anywhere(self, names: Collection[str], requester: Path) -> bool:
        """Whether some project file may refer to one of `names` (`may_name` of each); `requester` depends on
        every file's text from now on."""
        ...

    def mentioned_anywhere(self, words: Collection[str], requester: Path) -> bool:
        """Whether some project file's text holds one of `words` (True: unknown); `requester` depends on
        every file's text from now on."""
        ...

    def scanned(self, path: Path) -> bool:
        """Whether the import scan parsed project file `path` (CPython reads it as Python)."""
        ...

    def may_derive(self, path: Path, name: str, requester: Path) -> bool:
        """False only when no class of project file `path` derives from a base named `name` (or a name an
        import gives it); `requester` depends on `path` from now on."""
        ...

    def homes(self, importer: Path, qualname: str, kind: Literal["class", "function"]) -> set[Path] | None:
        """The files whose `kind` of that name `resolve_class` / `resolve_function` may answer, judged without
        building other files' facts (None: unknown)."""
        ...


@dataclass(frozen=True)
class Assignment:
    """A value a name (or `self.x`) was bound to: the expression, the scope it is evaluated in, and for
    `a, b = value` the position of the name in the target tuple."""

    value: cst.BaseExpression
    scope: Scope
    index: int | None = None


class SourceModule:
    def __init__(
        self,
        path: str,
        text: str,
        module: cst.Module,
        project: ProjectIndex | None = None,
        file: Path | None = None,
        collected: Collected | None = None,
    ) -> None:
        # `collected`: the records `Collector().collect(module)` gives, where the caller kept them for this
        # very module (the Language Server, for other files whose text did not change since its last check).
        self.path = path
        self.text = text
        self.module = module
        self.project = project
        self.file = file.resolve() if file is not None else None
        self._collected: Collected = collected if collected is not None else Collector().collect(module)
        self._evaluator = Evaluator(self)
        self._analyses: dict[type, object] = {}
        self._orders: dict[int, TextOrder] = {}  # id(scope node) -> its nodes in the order of the text
        self._qualnames: ByIdentity[str | None] = ByIdentity()  # `qualname`, per expression and scope
        self._reaching: ByIdentity[list[Assignment]] = ByIdentity()  # `reaching_values`, likewise

    def analysis(self, kind: type[Analysis]) -> Analysis:
        """This module's instance of an analysis (`kind(self)`), made on first use."""
        found = self._analyses.get(kind)
        if found is None:
            found = self._analyses[kind] = kind(self)  # type: ignore[call-arg]
        return found  # type: ignore[return-value]

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

    @cached_property
    def _alternatives(self) -> list[tuple[list[tuple[int, int]], set[str]]]:
        """Alternatives: where code runs instead of a branch (a `try`'s handlers, an `if`'s other branch),
        and what that branch uses or imports (qualified names with their parents: `torch.amp.GradScaler`
        names `torch.amp` too). Where they are is said in the ranks of `text_order` (not offsets: this is
        asked of every module with a deprecated call, and offsets would render its long functions)."""
        found = []
        for statement in walk.statements(self.module):
            if isinstance(statement, (cst.Try, cst.TryStar)):
                handlers = [self.text_order().span(handler) for handler in statement.handlers]
                found.append((handlers, self._named_in(statement.body)))
            elif isinstance(statement, cst.If) and isinstance(statement.orelse, cst.Else):
                # `if is_torch_version(">=", "2.3"): torch.amp.GradScaler("cuda") else: torch.cuda.amp...`
                body, orelse = statement.body, statement.orelse.body
                found.append(([self.text_order().span(orelse)], self._named_in(body)))
                found.append(([self.text_order().span(body)], self._named_in(orelse)))
        return found

    def _named_in(self, block: cst.BaseSuite) -> set[str]:
        order = self.text_order()
        start, end = order.span(block)
        return _names_used(
            (ref for ref in self.references if ref.qualname and start <= order.span(ref.expr)[0] < end), block
        )

    @cached_property
    def _named_anywhere(self) -> set[str]:
        """What any part of the module uses or imports (as `_named_in` reads a block): no other part of a
        `try` or an `if` can name what the whole module does not, and most modules with a deprecated call
        name no newer API anywhere (their alternatives would rank every node of the module, 20 ms of
        yolov5's `train.py` in the editor's first look)."""
        return _names_used(self.references, self.module)

    def is_fallback_for(self, node: cst.CSTNode, module: str) -> bool:
        """Whether `node` sits in an `except` handler of a `try`, or in a branch of an `if`/`else`, whose
        other part uses or imports something from `module`: the fallback that runs when the newer API is
        missing (`try: torch.amp.GradScaler("cuda") except AttributeError: torch.cuda.amp.GradScaler()`, or
        the same under `if is_torch_version(">=", "2.3"):`), which must stay the older API."""
        if module not in self._named_anywhere or not self._alternatives:
            return False
        start = self.text_order().span(node)[0]
        return any(
            module in named and any(h_start <= start < h_end for h_start, h_end in handlers)
            for handlers, named in self._alternatives
        )

    @cached_property
    def exported_names(self) -> frozenset[str]:
        """The names the module's `__all__` lists (assigned, `+=`, `.extend`/`.append`), read from its
        top-level statements: removing an import of one of them breaks `from module import *` users."""
        names: set[str] = set()
        for line in self.module.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                listed: cst.BaseExpression | None = None
                if isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    targets = (
                        [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    )
                    if any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
                        listed = small.value
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    func = small.value.func
                    if (
                        isinstance(func, cst.Attribute)
                        and isinstance(func.value, cst.Name)
                        and func.value.value == "__all__"
                        and small.value.args
                    ):
                        listed = small.value.args[0].value
                        if func.attr.value == "append":
                            listed = cst.List([cst.Element(listed)])
                if isinstance(listed, (cst.List, cst.Tuple, cst.Set)):
                    for element in listed.elements:
                        value = element.value
                        if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                            names.add(value.evaluated_value)
        return frozenset(names)

    def name_for_module(self, qualname: str, scope: Scope) -> str | None:
        """A dotted expression that means module `qualname` in `scope`, or None if the code has none (a star
        import after the import may bind its name to something else: `rebinding.py`)."""
        module_scope = self.module_scope
        for binding_list in module_scope.bindings.values():
            for binding in binding_list:
                if binding.kind is not BindingKind.IMPORT or binding.qualname != qualname:
                    continue
                if scope.resolve(binding.name) == qualname and not self.name_changes.existing_binding_clash(
                    binding
                ):
                    return binding.name
        return None

    def name_is_free(self, name: str, scope: Scope, meaning: str | None = None) -> bool:
        """True when binding `name` (to the qualified name `meaning`, for an import) at module level or in
        `scope` would not clash with anything visible from `scope`, a star import that may bind it, or a
        read of it that nothing in the file binds (`rebinding.py` says why)."""
        return not self.name_changes.insertion_clash(name, scope, meaning)

    @property
    def name_changes(self) -> NameChanges:
        """What a fix's new, changed or removed binding of a name would change elsewhere."""
        return self.analysis(NameChanges)

    @property
    def star_imports(self) -> list[cst.ImportFrom]:
        """`from module import *` statements (the names they bind are unknown to the collector)."""
        return self._collected.star_imports

    def suite_size(self, statement: cst.CSTNode) -> int:
        """How many statements share the block of `statement` (0 if unknown)."""
        return self._collected.suite_sizes.get(id(statement), 0)

    def qualname(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The qualified name of a Name/Attribute chain rooted at an import (`nn.Linear` -> torch.nn.Linear).

        Builtins resolve to themselves (`enumerate`, `next`) unless shadowed. Kept per expression and
        scope (about twenty questions ask it of every call's callee), with both, so that neither id is
        reused by another object while its answer is kept (a question may ask of an expression it made).
        """
        return self._qualnames.answer((expr, scope), lambda: self._qualname(expr, scope))

    @staticmethod
    def _qualname(expr: cst.BaseExpression, scope: Scope) -> str | None:
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

    def exported_function(self, name: str) -> tuple[SourceModule, FunctionRecord] | None:
        """The module-level function `name` means here: defined in this module, or imported into it from
        another project file (a package's `__init__.py` re-exporting `from .build import build_loader`)."""
        function = self.top_level_function(name)
        if function is not None:
            return self, function
        return self._reexported(name, "function")

    def _reexported(self, name: str, kind: Literal["class", "function"]):
        """What the one import binding `name` here names in another project file, followed there (a cycle of
        re-exports answers None)."""
        bindings = self.module_scope.bindings.get(name, [])
        if self.project is None or self.file is None or (kind, name) in self._exporting:
            return None
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.IMPORT or not bindings[0].qualname:
            return None
        self._exporting.add((kind, name))
        try:
            resolve = self.project.resolve_class if kind == "class" else self.project.resolve_function
            return resolve(self.file, bindings[0].qualname)
        finally:
            self._exporting.discard((kind, name))

    @cached_property
    def _exporting(self) -> set[tuple[str, str]]:
        return set()

    def callee_of_call(self, call: cst.Call, scope: Scope) -> tuple[SourceModule, FunctionRecord] | None:
        """The function a call runs, in this module (a def, a method on self) or in another project file."""
        func = call.func
        if isinstance(func, cst.Name):
            bindings = scope.lookup(func.value)
            defs = [b for b in bindings if b.kind is BindingKind.DEF]
            if defs and all(b.kind is BindingKind.DEF or _is_stand_in(b) for b in bindings):
                # Every def, also when the name is swapped for another function on some runs
                # (`get_dataloaders = mocked_dataloaders` for tests): the code shown is what runs otherwise.
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
            found = self._method_of_instance(func.value, func.attr.value, scope)
            if found is not None:
                return found
        if self.project is not None and self.file is not None:
            qualname = self.qualname(func, scope)
            if qualname is not None and not qualname.startswith(("torch.", "builtins")) and "." in qualname:
                return self.project.resolve_function(self.file, qualname)
        return None

    def closures_bound_to(self, name: cst.Name, scope: Scope) -> list[tuple[SourceModule, FunctionRecord]]:
        """`train = train_fns.GAN_training_function(G, D, config)` ... `train(x, y)`: the functions the
        name may hold when every binding of it is a call of a project function that returns a def of its
        own by name (the training step a factory closes over its models). Empty otherwise."""
        bindings = scope.lookup(name.value)
        found: list[tuple[SourceModule, FunctionRecord]] = []
        for binding in bindings:
            if binding.kind is not BindingKind.ASSIGN or not isinstance(binding.value, cst.Call):
                return []
            factory = self.callee_of_call(binding.value, binding.scope)
            if factory is None:
                return []
            home, function = factory
            inner = [
                f
                for f in home.functions
                if f.scope.parent is function.scope
                and any(isinstance(r, cst.Name) and r.value == f.name for r in function.returns)
            ]
            if not inner:
                return []
            found += [(home, f) for f in inner]
        return found

    def _method_of_instance(
        self, name: cst.Name, method: str, scope: Scope
    ) -> tuple[SourceModule, FunctionRecord] | None:
        """`trainer.train_step(x)` with `trainer = Trainer(model)` (or `Trainer(model).cuda()`) the name's
        only binding: the method of that project class (here or imported), followed as a plain call would
        be. A method the class inherits is not looked for: the class named is the one whose code is known."""
        bindings = scope.lookup(name.value)
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.ASSIGN or bindings[0].index is not None:
            return None
        value = _constructed(bindings[0].value)  # also `Trainer(model).cuda()`, `.to(device)`
        if value is None:
            return None
        found = self.resolve_class(value.func, bindings[0].scope)
        if found is None or method not in found[1].methods:
            return None
        return found[0], found[1].methods[method]

    def callee(self, call: CallRecord) -> tuple[SourceModule, FunctionRecord] | None:
        key = id(call.node)
        cache = self._callee_cache
        if key not in cache:
            cache[key] = self.callee_of_call(call.node, call.scope)
        return cache[key]

    @cached_property
    def _callee_cache(self) -> dict[int, tuple[SourceModule, FunctionRecord] | None]:
        return {}

    def calls_of(self, function: FunctionRecord) -> list[CallRecord]:
        """Calls in this module that run `function`."""
        return self._calls_by_callee.get(id(function), [])

    @cached_property
    def _calls_by_callee(self) -> dict[int, list[CallRecord]]:
        """The calls that may run a function of this module, each resolved once and indexed by the function
        it runs (callers are asked for repeatedly, and only of this module's functions). The other calls
        are not resolved: that built the facts of every project module this one calls into."""
        index: dict[int, list[CallRecord]] = {}
        for call in self.calls:
            if not self._may_run_here(call.node, call.scope):
                continue
            target = self.callee(call)
            if target is not None:
                index.setdefault(id(target[1]), []).append(call)
        return index

    def _may_run_here(self, call: cst.Call, scope: Scope) -> bool:
        files = self.callee_files(call, scope)
        return files is None or self.real_file in files

    def callee_files(self, call: cst.Call, scope: Scope) -> set[Path] | None:
        """The files whose function `callee_of_call` may answer, read as it reads the call but from other
        files' exports, without building their facts (None: unknown): a def here or a method of `self`, a
        method of an object of a class here or elsewhere, or another module's function."""
        found: set[Path] = set()
        func = call.func
        constructions: list[Binding] = []
        if isinstance(func, cst.Name):
            bindings = scope.lookup(func.value)
            if any(b.kind is BindingKind.DEF for b in bindings):
                found.add(self.real_file)
            constructions = [b for b in bindings if b.kind is BindingKind.ASSIGN]  # `scaler(loss)`
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = self.class_of_method_scope(scope)
            if owner is not None and func.value.value == owner[1]:
                found.add(self.real_file)
            constructions = scope.lookup(func.value.value)  # `trainer = Trainer(model)` ... `trainer.step()`
        for binding in constructions:
            value = _constructed(binding.value)
            if value is None:
                continue
            homes = self.class_files(value.func, binding.scope)
            if homes is None:
                return None
            found |= homes
        if self.project is None or self.file is None:
            return found
        qualname = self.qualname(func, scope)
        if qualname is None or qualname.startswith(("torch.", "builtins")) or "." not in qualname:
            return found
        homes = self.project.homes(self.file, qualname, "function")
        return found | homes if homes is not None else None

    def class_files(self, func: cst.BaseExpression, scope: Scope) -> set[Path] | None:
        """The files of the class `resolve_class(func, scope)` may answer (None: unknown)."""
        if self.local_class(func, scope) is not None:
            return {self.real_file}
        qualname = self.qualname(func, scope)
        if not qualname or self.project is None or self.file is None:
            return set()
        return self.project.homes(self.file, qualname, "class")

    def class_may_be_from(self, func: cst.BaseExpression, scope: Scope, test: Callable[[Path], bool]) -> bool:
        """Whether the class `resolve_class(func, scope)` may answer can be one of another file passing
        `test` (a question about the file, answered without building it: its export, its bytes). True
        where the files are unknown, or where it is a class of this module (read at no cost)."""
        homes = self.class_files(func, scope)
        if homes is None or self.real_file in homes:
            return True
        return any(test(home) for home in homes)

    @cached_property
    def real_file(self) -> Path:
        return self.file.resolve() if self.file is not None else Path(self.path)

    def callers_of(self, function: FunctionRecord) -> list[CallRecord]:
        """Calls in this module that run `function`; for an `__init__`, also the constructions of its class
        (`Trainer(model, loader)` runs `Trainer.__init__(self, model, loader)`)."""
        calls = self.calls_of(function)
        owner = function.owner
        if owner is None or function.name != "__init__":
            return calls
        return [*calls, *(c for c in self.calls if self.local_class(c.node.func, c.scope) is owner)]

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

    # -- classes ----------------------------------------------------------------------------------------

    def local_class(self, expr: cst.BaseExpression, scope: Scope) -> ClassRecord | None:
        if not isinstance(expr, cst.Name):
            return None
        bindings = scope.lookup(expr.value)
        if len(bindings) == 1 and bindings[0].kind is BindingKind.CLASS:
            return next((c for c in self.classes if c.node is bindings[0].node), None)
        return None

    def resolve_class(
        self, func: cst.BaseExpression, scope: Scope
    ) -> tuple[SourceModule, ClassRecord] | None:
        """The class a name means: defined here, or in another file of the project."""
        local = self.local_class(func, scope)
        if local is not None:
            return self, local
        qualname = self.qualname(func, scope)
        if qualname and self.project is not None and self.file is not None:
            found = self.project.resolve_class(self.file, qualname)
            if found is not None and found[0] is not self:
                return found
        return None

    def top_level_class(self, name: str) -> ClassRecord | None:
        return self.local_class(cst.Name(name), self.module_scope)

    def defines(self, cls: ClassRecord, method: str, depth: int = 0) -> bool | None:
        """`cls` or one of its bases defines `method`: True, False, or None where a base is not a class of
        the project (a library's may define it)."""
        if method in cls.methods:
            return True
        if depth >= MAX_BASE_DEPTH:
            return None
        answer: bool | None = False
        for base in cls.node.bases:
            if isinstance(base.value, cst.Name) and base.value.value == "object":
                continue
            found = self.resolve_class(base.value, cls.scope)
            inherited = found[0].defines(found[1], method, depth + 1) if found is not None else None
            if inherited:
                return True
            if inherited is None:
                answer = None
        return answer

    def decorated_by(self, node: cst.CSTNode) -> FunctionRecord | None:
        """The function `node` decorates, when it is one of its decorators (`@torch.compile`) or the
        expression of one (`torch.compile(...)` in `@torch.compile(...)`)."""
        return self._decorated.get(id(node))

    @cached_property
    def _decorated(self) -> dict[int, FunctionRecord]:
        table: dict[int, FunctionRecord] = {}
        for function in self.functions:
            for decorator in function.node.decorators:
                table[id(decorator)] = table[id(decorator.decorator)] = function
        return table

    def exported_class(self, name: str) -> tuple[SourceModule, ClassRecord] | None:
        """The module-level class `name` means here: defined in this module, or imported into it from
        another project file (a package's `__init__.py` re-exporting `from .model import Transformer`)."""
        cls = self.top_level_class(name)
        if cls is not None:
            return self, cls
        return self._reexported(name, "class")

    # -- values -----------------------------------------------------------------------------------------

    def value(self, expr: cst.BaseExpression, scope: Scope) -> Value:
        """What `expr` evaluates to as far as the code shows, and whether the user controls it."""
        return self._evaluator.value(expr, scope)

    def assignments(self, expr: cst.BaseExpression, scope: Scope) -> list[Assignment] | None:
        """Every value `expr` (a name, or `self.x` in a method) can hold, when all of them are assignments
        in the code; None when some binding is not one (a parameter, a loop variable, an import)."""
        if isinstance(expr, cst.Name):
            bindings = scope.lookup(expr.value)
            if not bindings or any(b.kind is not BindingKind.ASSIGN or b.value is None for b in bindings):
                return None
            return [Assignment(b.value, b.scope, b.index) for b in bindings]  # type: ignore[arg-type]
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            owner = self.class_of_method_scope(scope)
            if owner is not None and expr.value.value == owner[1]:
                return [
                    Assignment(value, where) for value, where in owner[0].attributes.get(expr.attr.value, [])
                ]
        return None

    def assigned_values(self, expr: cst.BaseExpression, scope: Scope) -> list[Assignment]:
        """The assignments among the bindings of a name (or every `self.x = ...` of an attribute)."""
        if isinstance(expr, cst.Name):
            return [
                Assignment(b.value, b.scope, b.index)
                for b in scope.lookup(expr.value)
                if b.kind is BindingKind.ASSIGN and b.value is not None
            ]
        return self.assignments(expr, scope) or []

    def reaching_values(self, name: cst.Name, scope: Scope) -> list[Assignment]:
        """`assigned_values` of a name, less the bindings that an unconditional rebinding hides from this
        read: one written earlier in the same block as the read (`loader = DataLoader(a)` ...
        `loader = DataLoader(b)`, `return loader` returns the second only; in `if hf: ds = load(...);
        ds = ds.map(f); dl = DataLoader(ds)` the `else:` branch's `ds` does not reach `dl`), or an `if`
        earlier in that block each of whose branches binds it or leaves (`seq = encode(text)`; `if short:
        seq = torch.tensor(seq) else: continue`; `x.append(seq)` appends the tensor only). Kept per read
        and scope, as `qualname` is: tracing a loader's sources asks of the same reads again and again
        (timm's train.py: 1,253 questions, 42 different)."""
        return list(self._reaching.answer((name, scope), lambda: self._reaching_values(name, scope)))

    def _reaching_values(self, name: cst.Name, scope: Scope) -> list[Assignment]:
        bindings = [
            b for b in scope.lookup(name.value) if b.kind is BindingKind.ASSIGN and b.value is not None
        ]
        if len(bindings) < 2:
            return self.assigned_values(name, scope)
        root = bindings[0].scope.node
        order = self.text_order(root)
        if not order.knows(name, *(b.node for b in bindings if b.node is not None)):
            return self.assigned_values(name, scope)
        located = _innermost_block(root if root is not None else self.module, name, order.holds)
        if located is None:
            return self.assigned_values(name, scope)
        statements, read = located
        earlier = [
            index
            for index in range(read)
            if any(_binds_directly(statements[index], b.node) for b in bindings)
            or _binds_on_every_path(statements[index], bindings)
        ]
        if not earlier:
            return self.assigned_values(name, scope)
        # The read's own line binds after it reads (`ds = ds.map(f)` reads the earlier `ds`); a compound
        # statement (a loop) may rebind before its header reads again.
        last = read + 1 if not isinstance(statements[read], cst.SimpleStatementLine) else read
        kept = statements[earlier[-1] : last]
        return [
            Assignment(b.value, b.scope, b.index)  # type: ignore[arg-type]
            for b in bindings
            if b.node is not None and any(order.holds(statement, b.node) for statement in kept)
        ]

    def assignment_of(
        self, value: cst.BaseExpression, *, through_branches: bool = False
    ) -> cst.Assign | cst.AnnAssign | None:
        """The `target = value` statement that binds `value` (the collector keeps values, not statements);
        with `through_branches`, also one binding a conditional value `value` is a branch of (`ctx =
        nullcontext() if cpu else torch.autocast(...)`)."""
        found = self._assignments_by_value.get(id(value))
        if found is None or (found[1] and not through_branches):
            return None
        return found[0]

    @cached_property
    def _assignments_by_value(self) -> dict[int, tuple[cst.Assign | cst.AnnAssign, bool]]:
        """Every assignment statement by the id of its value (False) and of its value's branches (True)."""
        found: dict[int, tuple[cst.Assign | cst.AnnAssign, bool]] = {}
        for line in walk.simple_lines(self.module):
            for small in line.body:
                if not isinstance(small, (cst.Assign, cst.AnnAssign)) or small.value is None:
                    continue
                value = small.value
                found[id(value)] = (small, False)
                while isinstance(value, cst.IfExp):
                    found[id(value.body)] = (small, True)
                    found[id(value.orelse)] = (small, True)
                    value = value.orelse
        return found

    def is_self_attribute(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`self.x` inside a method of a class (where `self` is the method's first parameter)."""
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
            return False
        owner = self.class_of_method_scope(scope)
        return owner is not None and expr.value.value == owner[1]

    # -- positions and text -----------------------------------------------------------------------------

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.text)

    @cached_property
    def _spans(self) -> Spans:
        return Spans(self.text, self.module, self.lines)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of a node's own text (no surrounding whitespace) in the decoded source."""
        return self._spans.span(node)

    def text_order(self, root: cst.CSTNode | None = None) -> TextOrder:
        """The nodes of `root` (a function, a class; by default the module) in the order of the text: which
        of two comes first, which holds which, where offsets (`span`) would render statements to find out."""
        root = root if root is not None else self.module
        found = self._orders.get(id(root))
        if found is None:
            whole = self._orders.get(id(self.module))
            found = (
                whole.within(root)
                if whole is not None and whole.knows(root)
                else TextOrder(root, self._orders)
            )
            self._orders[id(root)] = found
        return found

    def written(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """Where an expression's code, parentheses included, is in the text, found by the text alone
        (None: that cannot tell where it is); see `Spans.written`."""
        return self._spans.written(node)

    def nested_statement(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, int, str, str] | None:
        """The innermost statement below the top-level one that is or holds `node`, found by its text: (it,
        where its text starts, that text, its indentation); see `Spans.nested_statement`."""
        return self._spans.nested_statement(node)

    def statement_code(self, statement: cst.BaseStatement, indent: str) -> str | None:
        """A statement's code, comment lines above it included, as written in blocks indented by `indent`."""
        return statement_at(self.module, statement, indent)

    def code_at(self, node: cst.BaseExpression, where: cst.CSTNode) -> str | None:
        """`node`'s code as written in place of `where` (a multi-line one indented as the blocks around
        `where` are); None where that is not known."""
        return self._spans.code_in_place(node, where)

    def statement_start(self, statement: cst.CSTNode) -> int:
        """Where a statement's text begins: its first decorator, if it has any (LibCST starts at `def`)."""
        decorators = getattr(statement, "decorators", ())
        return self.span(decorators[0] if decorators else statement)[0]

    @cached_property
    def _statement_starts(self) -> list[int]:
        return [self.statement_start(statement) for statement in self.module.body]

    def top_level_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The module-level statement that contains `node` (from the span index; else found by position)."""
        index = self._spans.statement_index(node)
        if index is None:
            index = max(bisect.bisect_right(self._statement_starts, self.span(node)[0]) - 1, 0)
        return self.module.body[index]

    def line_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the whole physical lines a node occupies, newline included."""
        start, end = self.span(node)
        lines = self.lines
        return lines.offset(lines.position(start).line, 0), lines.offset(lines.position(end).line + 1, 0)

    def operand(self, expr: cst.BaseExpression) -> str:
        """The expression's code, parenthesised unless it binds tighter than any operator (a name, an
        attribute, a call, a subscript, a literal), so that a fix can write `<it> > 0`."""
        code = self.code(expr)
        atoms = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.SimpleString)
        return code if isinstance(expr, atoms) or getattr(expr, "lpar", ()) else f"({code})"

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
            elif not is_docstring(statement):
                break
        return found

    def import_placement(self, code: str) -> tuple[int, str]:
        """Where the new top-level import statement `code` goes, and its text there, the way isort and
        ruff's I001 order an import block: sections (`__future__`, the standard library, everything else,
        relative imports) apart by a blank line; straight imports before from-imports within a section,
        each by module name. A block that is not sorted gets the import after the last one that sorts
        before it. With no import block: where `import_anchor` says."""
        newline = self.newline
        imports = self._top_level_imports
        if not imports:
            return self.import_anchor(), code + newline
        key = _import_key(cst.parse_statement(code).body[0])  # type: ignore[attr-defined]
        keyed = [(_import_key(line.body[0]), line) for line in imports]
        earlier = [(k, line) for k, line in keyed if k <= key]
        later = [(k, line) for k, line in keyed if k > key]
        if earlier and earlier[-1][0][0] == key[0]:
            return self.line_span(earlier[-1][1])[1], code + newline
        if later and later[0][0][0] == key[0]:
            return self.line_span(later[0][1])[0], code + newline
        if earlier:  # the first import of its section, after the sections before it
            return self.line_span(earlier[-1][1])[1], newline + code + newline
        return self.line_span(keyed[0][1])[0], code + newline + newline

    def import_anchor(self) -> int:
        """Where a new top-level import line goes: after the first block of imports, else at the top."""
        imports = self._top_level_imports
        if imports:
            return self.line_span(imports[-1])[1]
        body = self.module.body
        if body and is_docstring(body[0]):
            return self.line_span(body[0])[1]
        if body:
            return self.line_span(body[0])[0]
        return len(self.text)


def _import_key(small: cst.CSTNode) -> tuple[int, int, str]:
    """(section, straight 0 or from 1, module) of an import statement, as isort sorts them."""
    if isinstance(small, cst.ImportFrom):
        if small.relative:
            return (3, 1, dotted(small.module) or "" if small.module is not None else "")
        module = dotted(small.module) if small.module is not None else None
        return (_section(module or ""), 1, (module or "").lower())
    if isinstance(small, cst.Import):
        module = dotted(small.names[0].name) or ""
        return (_section(module), 0, module.lower())
    return (2, 1, "")


def _section(module: str) -> int:
    top = module.split(".")[0]
    if top == "__future__":
        return 0
    return 1 if top in sys.stdlib_module_names else 2


def _names_used(references: Iterable[Reference], block: cst.CSTNode) -> set[str]:
    """The qualified names of `references` and the modules the imports below `block` name, with their
    parents (`torch.amp.GradScaler` names `torch.amp` and `torch` too)."""
    named: set[str] = set()
    for ref in references:
        if ref.qualname:
            named |= _with_parents(ref.qualname)
    for line in walk.simple_lines(block):
        for small in line.body:
            named |= _imported_modules(small)
    return named


def _imported_modules(small: cst.CSTNode) -> set[str]:
    """The modules an import statement names, with their parents (`import torch.amp` names both)."""
    named: list[str] = []
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        base = dotted(small.module)
        if base is not None:
            named.append(base)
            if not isinstance(small.names, cst.ImportStar):
                named.extend(f"{base}.{dotted(alias.name)}" for alias in small.names)
    elif isinstance(small, cst.Import):
        named.extend(d for d in (dotted(alias.name) for alias in small.names) if d is not None)
    return {parent for name in named for parent in _with_parents(name)}


def _with_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


def _constructed(value: cst.BaseExpression | None) -> cst.Call | None:
    """The construction a value is (`Net()`, also `Net().cuda()`: nn.Module's methods that hand back the
    module itself), or None."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _RETURNS_THE_MODULE
        and isinstance(value.func.value, cst.Call)
    ):
        value = value.func.value
    return value if isinstance(value, cst.Call) else None


def _is_stand_in(binding: Binding) -> bool:
    """A module-level rebinding of a function's name to another function (`train = train_fast`), or an
    import of one under it."""
    if binding.scope.kind is not ScopeKind.MODULE:
        return False
    if binding.kind is BindingKind.IMPORT:
        return True
    return binding.kind is BindingKind.ASSIGN and isinstance(binding.value, (cst.Name, cst.Attribute))


def is_docstring(statement: cst.CSTNode) -> bool:
    """A statement that is a string alone: a docstring."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _innermost_block(
    root: cst.CSTNode, target: cst.CSTNode, holds: Callable[[cst.CSTNode, cst.CSTNode], bool]
) -> tuple[list[cst.CSTNode], int] | None:
    """The statements of the innermost block (a module's, a function's, a branch's, a loop's body) that
    holds the statement holding `target`, and that statement's index; None when `target` is not under it.
    `holds(outer, inner)`: whether `inner` is inside `outer` (a `TextOrder`'s, which knows both)."""
    parts = (cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.Finally)
    if isinstance(root, (cst.Module, cst.IndentedBlock)):
        statements = list(root.body)
        for index, statement in enumerate(statements):
            if not holds(statement, target):
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                for child in statement.children:
                    found = _innermost_block(child, target, holds) if isinstance(child, parts) else None
                    if found is not None:
                        return found
            return statements, index  # a simple line, or the header of a compound statement
        return None
    for child in root.children:
        found = _innermost_block(child, target, holds) if isinstance(child, parts) else None
        if found is not None:
            return found
    return None


def _binds_on_every_path(statement: cst.CSTNode, bindings: list[Binding]) -> bool:
    """`statement` is an `if` (with its `elif`s and an `else:`) each branch of which binds one of `bindings`
    in its own block or ends by leaving it (`continue`, `break`, `return`, `raise`), and one branch binds:
    what was bound before it does not get past it."""
    branches: list[cst.BaseSuite] = []
    while isinstance(statement, cst.If):
        branches.append(statement.body)
        statement = statement.orelse
    if not branches or not isinstance(statement, cst.Else):
        return False
    branches.append(statement.body)
    binding = [
        isinstance(block, cst.IndentedBlock)
        and any(_binds_directly(line, b.node) for line in block.body for b in bindings)
        for block in branches
    ]
    return any(binding) and all(
        bound or _leaves(block) for bound, block in zip(binding, branches, strict=True)
    )


def _leaves(block: cst.BaseSuite) -> bool:
    """The block's last statement leaves it: `continue`, `break`, `return` or `raise`."""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(
        last.body[-1], (cst.Continue, cst.Break, cst.Return, cst.Raise)
    )


def _binds_directly(statement: cst.CSTNode, node: cst.CSTNode | None) -> bool:
    """`statement` is a simple line of the block whose own small statement is `node`: an unconditional
    binding of that block."""
    return isinstance(statement, cst.SimpleStatementLine) and any(small is node for small in statement.body)
