"""What the compile rules ask that no other family does: is a model compiled anywhere, does a compile call
run every step, is a compiled result used, which distributed wrapper a site compiles, and is the model
worth compiling at all (one kernel, an RNN Dynamo runs eagerly). Answered from the shared `ModelAnalysis`
and `TrainingAnalysis`, kept apart from how models are found.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import argument_for
from torchlint.facts.syntax.names import BindingKind, dotted
from torchlint.facts.syntax.values import is_false_constant
from torchlint.facts.syntax.walk import simple_lines
from torchlint.facts.torch.models import (
    MAX_DEPTH,
    MODULE_METHODS,
    PLACEMENTS,
    SHOWS,
    ModelAnalysis,
    calls_itself,
    groups_parameters,
    last_name,
    method_of,
    relative_path,
    unplaced,
)
from torchlint.facts.torch.training import TrainingAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord, ClassRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope
    from torchlint.facts.torch.models import CompileSite, Model

    _Class = tuple[SourceModule, ClassRecord]


class CompileQuestions:
    """The compile family's questions about one module's models and compile sites."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def models(self) -> ModelAnalysis:
        return self.source.analysis(ModelAnalysis)

    @cached_property
    def training(self) -> TrainingAnalysis:
        return self.source.analysis(TrainingAnalysis)

    def compiled_somewhere(self, model: Model) -> bool:
        """Compiled, or built, trained or handed over in a module that asks for compilation somewhere."""
        if model.of_kind("compile"):
            return True
        return any(module.analysis(ModelAnalysis).compile_sites for module in model.involved)

    def runs_every_step(self, site: CompileSite) -> bool:
        """The compile call runs on every step or epoch of training."""
        return site.call is not None and self._runs_every_step(site.call)

    def _runs_every_step(self, call: CallRecord, depth: int = 0) -> bool:
        """`call` runs on every step or epoch of training: in (or around) a training loop, or in a function
        called from one."""
        loop = call.loop
        while loop is not None:
            if self._trains(loop):
                return True
            loop = loop.parent
        if call.function is not None and depth < MAX_DEPTH:
            return any(self._runs_every_step(c, depth + 1) for c in self.source.calls_of(call.function))
        return False

    def _trains(self, loop) -> bool:
        training = self.training
        if training.is_training_loop(loop):
            return True
        stack = list(loop.children)
        while stack:
            inner = stack.pop()
            if training.is_training_loop(inner):
                return True
            stack.extend(inner.children)
        for call in loop.all_calls():
            target = self.source.callee(call)
            if target is not None and target[0].analysis(TrainingAnalysis).has_training_loop(target[1]):
                return True
        return False

    def unused_result(self, site: CompileSite) -> bool:
        """`compiled = torch.compile(model)` where `compiled` is never read and `model` itself is called."""
        source = self.source
        assign = site.target
        if assign is None or site.call is None or site.compiled is None:
            return False
        target = assign.targets[0].target
        if not isinstance(target, cst.Name) or source.code(site.compiled) == target.value:
            return False
        bindings = site.call.scope.lookup(target.value)
        if not bindings or any(source.references_of(binding) for binding in bindings):
            return False
        return self._is_called(site.compiled, site.call.scope)

    def _is_called(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        source = self.source
        if isinstance(expr, cst.Name):
            return any(
                ref.call is not None and not ref.attrs
                for binding in scope.lookup(expr.value)
                for ref in source.references_of(binding)
            )
        if source.is_self_attribute(expr, scope):
            text = source.code(expr)
            owner = source.class_of_method_scope(scope)
            return any(
                source.code(call.node.func) == text and source.class_of_method_scope(call.scope) == owner
                for call in source.calls
            )
        return False

    def standalone_statement(self, call: cst.CSTNode) -> cst.CSTNode | None:
        """The expression statement that is `call` alone on its lines, if it is one."""
        return self.models.statement_of(call)

    def is_one_layer(self, model: Model) -> bool:
        """The model is one built-in layer that runs as one kernel (`nn.Linear(20, 1)`, a convolution), also
        behind a project module whose forward only reshapes around it."""
        found = self.models.compositions(model)
        return found is not None and all(composition.is_one_layer for composition in found)

    def is_rnn_bound(self, model: Model) -> bool:
        """The model's compute is an `nn.LSTM`/`GRU`/`RNN` with light layers around it, which Dynamo runs
        eagerly (unless the code sets `torch._dynamo.config.allow_rnn`)."""
        if any("allow_rnn" in module.text for module in model.involved):
            return False
        found = self.models.compositions(model)
        return found is not None and all(composition.is_rnn_bound for composition in found)

    @cached_property
    def torch_before_compile(self) -> str:
        """The import that ties this module to a torch older than 2.0, which has no `torch.compile` ("" when
        none): a module removed before then, imported at the top level with no fallback
        (`from torchtext.legacy import data`: gone with torchtext 0.12, which pairs with torch 1.11)."""
        for statement in self.source.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue  # an import inside `try:` / `if` may have a fallback
            for small in statement.body:
                for name in _imported_names(small):
                    if any(name == old or name.startswith(f"{old}.") for old in _REMOVED_BEFORE_COMPILE):
                        return name
        return ""

    # -- what class the model is an instance of ----------------------------------------------------------

    def surely_not_a_module(self, model: Model) -> bool:
        """Every way the model is built makes an instance of a project class with no `torch.nn.Module` among
        its bases (a dataclass holding the model: `WrappedModel(model=DDP(net))`, also as the annotated
        return of a project function or method). It has no `.compile()`, and compiling it is not a question:
        its optimizer was given the parameters of a module it holds. A base torchlint cannot read (a
        library's class) may be a Module: unknown keeps the model."""
        builds = model.builds
        return bool(builds) and all(
            isinstance(event.node, cst.Call)
            and event.scope is not None
            and _all_surely_not_modules(_classes_built(self.source, event.node, event.scope, 0))
            for event in builds
        )

    # -- what an in-place compile would compile ------------------------------------------------------------

    def not_trained_through_forward(self, model: Model) -> str:
        """Why the model is surely not trained through its forward ("" when it may be), so that `.compile()`,
        which wraps the module's call, would compile nothing training runs: its project class defines no
        `forward`, or training runs only methods of that class that never call the module itself
        (`model.encode(...)` / `model.decode(...)`, `agent.get_action_and_value(obs)` computing with
        `self.actor(x)`; `self(x)` inside a method runs the compiled call, `self.forward(x)` does not).
        Called, handed to code that may call it (followed into the project's functions), or built from a
        class torchlint cannot read: "". The reason names the method to compile instead."""
        if model.framework:
            return ""  # Lightning runs `training_step`, and compiles what `torch.compile` gave `trainer.fit`
        classes = self._model_classes(model)
        if not classes:
            return ""
        uses, complete = self._uses(model)
        methods = [name for name in uses if name != "forward"]
        advice = ""
        if methods:
            method = f"{model.text}.{methods[0]}"
            advice = f"; compile the methods training runs instead, e.g. `{method} = torch.compile({method})`"
        if all(_defines_forward(cls) is False for cls in classes):
            name = sorted(cls[1].name for cls in classes)[0]
            return (
                f"its class `{name}` defines no `forward`, so `.compile()`, which compiles the module's "
                f"call, would compile nothing{advice}"
            )
        if not complete or not uses:
            return ""  # called, handed to code that may call it, or never seen running
        for name in uses:
            for cls in classes:
                found = method_of(cls, name)
                if found is None or calls_itself(*found):
                    return ""
        runs = ", ".join(f"`{model.text}.{name}(...)`" for name in uses)
        which = "which never calls" if len(uses) == 1 else "none of which calls"
        return (
            f"it is trained through {runs}, {which} the module itself, and `.compile()` compiles only the "
            f"module's call{advice}"
        )

    def trained_over_rpc(self, model: Model) -> bool:
        """The model's optimizer is RPC's `DistributedOptimizer` (`torch.distributed.optim`), which steps
        parameters through RRefs: the model runs `RemoteModule`s or RPC calls, and on torch 2.13 compiling a
        module that holds a `RemoteModule` fails at its first call (Dynamo's `InternalTorchDynamoError`:
        "Method `named_modules` not supported for RemoteModule")."""
        call = next((c for c in self.source.calls if c.node is model.trained_at), None)
        if call is None:
            return False
        return (self.source.qualname(call.node.func, call.scope) or "") in _RPC_OPTIMIZERS

    def _model_classes(self, model: Model) -> list[_Class]:
        """The project classes every build of the model makes (empty: some build is unknown)."""
        found: list[_Class] = []
        for event in model.builds:
            if not isinstance(event.node, cst.Call) or event.scope is None:
                return []
            classes = _classes_built(self.source, event.node, event.scope, 0)
            if not classes:
                return []
            found.extend(classes)
        return found

    def _uses(self, model: Model) -> tuple[list[str], bool]:
        """The methods of the model that run (`model.loss(...)`, through `model.module` too), followed into
        the project functions it is handed to (`train(agent, ...)`), and whether those are all training can
        run of it (False: the model is called, or handed to or kept by code that may call it)."""
        found: dict[str, None] = {}
        source = self.source
        if isinstance(model.expr, cst.Name):
            refs = [
                (ref, ref.attrs, ref.scope)
                for binding in model.scope.bindings.get(model.text, [])
                for ref in source.references_of(binding)
            ]
        elif source.is_self_attribute(model.expr, model.scope):
            owner = source.class_of_method_scope(model.scope)
            attr = model.expr.attr.value  # type: ignore[attr-defined]
            refs = [
                (ref, ref.attrs[1:], ref.scope)
                for ref in source.references
                if ref.attrs[:1] == (attr,)
                and id(ref.expr) not in self._assignment_targets
                and source.class_of_method_scope(ref.scope) == (owner[0] if owner else None, ref.name)
            ]
        else:
            return [], False
        complete = self._ran_through(refs, model.text, 0, set(), found)
        return list(found), complete

    def _ran_through(self, refs: list, name: str, depth: int, seen: set, found: dict[str, None]) -> bool:
        """Adds to `found` the methods `refs` (uses of one module, with the attributes after it) run; False
        when one of them calls it or hands it to code that may."""
        unique = {id(ref.expr): (ref, attrs) for ref, attrs, _ in refs}
        complete = True
        for ref, attrs in unique.values():
            attrs = list(attrs)
            while attrs and attrs[0] == "module":
                attrs.pop(0)
            if not attrs:
                if ref.call is not None:
                    complete = False  # `model(x)`
                elif not self._handed_only_to_known(ref.expr, name, depth, seen, found):
                    complete = False
            elif attrs[0] in MODULE_METHODS:
                if len(attrs) == 1 and ref.call is not None and attrs[0] in PLACEMENTS:
                    if not self._handed_only_to_known(ref.call, name, depth, seen, found):
                        complete = False  # `train(model.to(device))`
            elif len(attrs) == 1 and ref.call is not None:
                found[attrs[0]] = None
        return complete

    def _handed_only_to_known(
        self, expr: cst.BaseExpression, name: str, depth: int, seen: set, found: dict[str, None]
    ) -> bool:
        """The module (as `expr`) goes nowhere it may be called: a statement of its own, an assignment back
        to its own name (`model = DDP(model)`, `model = model.to(device)`), `print(model)`, an optimizer,
        `torch.save`/`deepcopy`, or a project function that runs only its methods in turn."""
        source = self.source
        if self.models.statement_of(expr) is not None:
            return True
        statement = source.assignment_of(expr)
        if statement is not None:
            return _binds_only(source, statement, name)
        call = self._argument_calls.get(id(expr))
        if call is None:
            return False  # returned, kept in a container, a second name: unknown
        func = call.node.func
        qualname = source.qualname(func, call.scope) or ""
        if qualname in SHOWS or qualname in _NOT_RUNNING or qualname.startswith("logging."):
            return True
        if self.models.builds_optimizer(call) or groups_parameters(last_name(func)):
            return True
        assigned = source.assignment_of(call.node)
        if assigned is not None and _binds_only(source, assigned, name):
            return True  # `model = DDP(model)`: its uses are the name's
        target = source.callee(call)
        if target is None or depth >= MAX_DEPTH:
            return False
        home, function = target
        param = _receiving_parameter(call, function, expr)
        if param is None:
            return False
        key = (id(function), param)
        if key in seen:
            return True
        seen.add(key)
        other = home.analysis(CompileQuestions)
        refs = [
            (ref, ref.attrs, ref.scope)
            for binding in function.scope.bindings.get(param, [])
            for ref in home.references_of(binding)
        ]
        return other._ran_through(refs, param, depth + 1, seen, found)

    @cached_property
    def _assignment_targets(self) -> set[int]:
        """The targets of every assignment (`self.model = ...` is a store, not a use)."""
        found: set[int] = set()
        for line in simple_lines(self.source.module):
            for small in line.body:
                if isinstance(small, cst.Assign):
                    found.update(id(target.target) for target in small.targets)
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    found.add(id(small.target))
        return found

    # -- the state_dict in the code the model is handed to ---------------------------------------------

    def state_dict_elsewhere(self, model: Model) -> str:
        """How the model's `state_dict` may be saved or loaded by code it is handed to ("" when by none): a
        function, here or in another project file, that calls `state_dict()` / `load_state_dict()` on it or
        pickles it, also through the functions it hands the model on to; or code this analysis cannot follow
        into (unknown, so it may). `torch.compile(model)` would prefix those keys with `_orig_mod.`."""
        source = self.source
        for call in source.calls:
            for arg in call.node.args:
                if self.models.mentions_model(model, arg.value, call.scope):
                    found = self._handed_over(call, arg.value, "", 0, set())
                    if found:
                        return found
        return ""

    def _handed_over(
        self, call: CallRecord, given: cst.BaseExpression, label: str, depth: int, seen: set
    ) -> str:
        """Why `call`, given the model as `given`, may save or load its `state_dict` ("": it does not).
        `label` names the call of the checked module the model went through (empty at the first call)."""
        source = self.source
        func = call.node.func
        qualname = source.qualname(func, call.scope) or ""
        here = f"`{_head(source.code(func))}(...)`"
        if qualname == "torch.save":
            return f"{label or here} pickles it whole"
        if qualname.startswith(("torch.", "logging.")) or qualname in SHOWS:
            return ""
        if self.models.builds_optimizer(call) or groups_parameters(last_name(func)):
            return ""  # builds an optimizer (or its parameter groups) from its parameters
        target = source.callee(call)
        if not label:
            label = here
            if target is not None and target[0] is not source:
                label = f"{here} ({relative_path(target[0].path, source.path)})"
        cannot = (
            f"it is handed to {here}, which torchlint cannot follow"
            if label == here
            else (f"{label} hands it on to {here}, which torchlint cannot follow")
        )
        if target is None or depth >= MAX_DEPTH:
            return cannot
        home, function = target
        param = _receiving_parameter(call, function, given)
        if param is None:
            return cannot
        return home.analysis(CompileQuestions)._parameter_state(function, param, label, depth + 1, seen)

    def _parameter_state(
        self, function: FunctionRecord, param: str, label: str, depth: int, seen: set
    ) -> str:
        """Why `function` may save or load the `state_dict` of the module passed as `param` ("": it does
        not): `param.state_dict()`, `param.load_state_dict(...)`, or handing it to code that may."""
        key = (id(function), param)
        if key in seen:
            return ""
        seen.add(key)
        source = self.source
        bindings = [b for b in function.scope.bindings.get(param, []) if b.kind is BindingKind.PARAM]
        if not bindings:
            return f"{label} hands it on to code torchlint cannot follow"
        for ref in source.references_of(bindings[0]):
            if ref.attrs:
                if ref.attrs[0] in ("state_dict", "load_state_dict"):
                    return f"{label} saves or loads its `state_dict`"
                if len(ref.attrs) == 1 and ref.attrs[0] in PLACEMENTS and ref.call is not None:
                    found = self._use_of(ref.call, param, label, depth, seen)  # `param.to(device)` as a value
                    if found:
                        return found
                continue  # `param.parameters()`, `param.train()`: its own methods
            if ref.call is not None:
                continue  # `param(x)`: a forward pass
            found = self._use_of(ref.expr, param, label, depth, seen)
            if found:
                return found
        return ""

    def _use_of(self, expr: cst.BaseExpression, param: str, label: str, depth: int, seen: set) -> str:
        """Why a use of the model as a value (`save(m, path)`, `self.m = m`) may reach its `state_dict`."""
        call = self._argument_calls.get(id(expr))
        if call is not None:
            return self._handed_over(call, expr, label, depth, seen)
        if self.models.statement_of(expr) is not None:
            return ""  # `param.to(device)` alone
        statement = self.source.assignment_of(expr)
        if isinstance(statement, cst.Assign) and all(
            isinstance(t.target, cst.Name) and t.target.value == param for t in statement.targets
        ):
            return ""  # `param = param.to(device)`: the same name again
        return f"{label} keeps it where torchlint cannot follow it"

    @cached_property
    def _argument_calls(self) -> dict[int, CallRecord]:
        """Every call argument's value, by id, with its call."""
        return {id(arg.value): call for call in self.source.calls for arg in call.node.args}

    def _is_sequential_class(self, cls: ClassRecord, home: SourceModule, depth: int = 0) -> bool:
        if "forward" in cls.methods or depth > MAX_DEPTH:
            return False
        for base in cls.node.bases:
            if home.qualname(base.value, cls.scope) == _SEQUENTIAL:
                return True
            found = home.resolve_class(base.value, cls.scope)
            if found is not None and self._is_sequential_class(found[1], found[0], depth + 1):
                return True
        return False

    def is_sequential(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`expr` holds an `nn.Sequential` (built here, directly or through a variable or `self.x`)."""
        return self.builtin_module(expr, scope) == "Sequential"

    def builtin_module(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """The `torch.nn` class `expr` holds when it is a built-in module (`Linear`, `LSTM`; `Sequential` also
        for a project subclass without a `forward`), built here, directly or through a variable or `self.x`.
        Their in-place `.compile()` compiles nothing: Dynamo skips torch.nn's own `_call_impl` (measured on
        torch 2.13: `nn.Linear(4, 4).compile()` captures no graph, `torch.compile(linear)` one)."""
        if depth > MAX_DEPTH:
            return None
        source = self.source
        expr = unplaced(expr)
        if isinstance(expr, cst.Call):
            qualname = source.qualname(expr.func, scope) or ""
            if qualname.startswith("torch.nn.") and qualname.count(".") == 2:
                last = qualname.rsplit(".", 1)[1]
                return last if last[:1].isupper() and last not in ("Module", "Parameter") else None
            found = source.resolve_class(expr.func, scope)
            return (
                "Sequential" if found is not None and self._is_sequential_class(found[1], found[0]) else None
            )
        if isinstance(expr, (cst.Name, cst.Attribute)):
            values = source.assignments(expr, scope) or []
            builds = [a for a in values if not self.models.rebinds(expr, a.value)]
            kinds = {self.builtin_module(a.value, a.scope, depth + 1) for a in builds}
            return kinds.pop() if len(kinds) == 1 else None
        return None

    def wrap_against_in_place_compile(self, model: Model) -> str | None:
        """Why the wrapper the model goes into rules out compiling it in place first (None: nothing does):
        `nn.DataParallel` replicates the module and would run the compiled call bound to the original's
        parameters; FSDP1 without `use_orig_params=True` flattens the parameters Dynamo traced, so the graph
        breaks at every FSDP unit."""
        for event in model.of_kind("wrap"):
            call = event.node
            if not isinstance(call, cst.Call):
                continue
            qualname = self.source.qualname(call.func, model.scope) or ""
            if qualname.endswith(".DataParallel"):
                return (
                    "it is wrapped in `nn.DataParallel`, whose replicas would run an in-place compiled call "
                    "bound to the original module's parameters"
                )
            keeps_originals = any(
                arg.keyword is not None
                and arg.keyword.value == "use_orig_params"
                and not is_false_constant(arg.value)
                for arg in call.args
            )
            if qualname.endswith("FullyShardedDataParallel") and not keeps_originals:
                return (
                    "it is wrapped in FSDP without `use_orig_params=True`, which flattens the parameters the "
                    "compiled graph would use (compile the FSDP module with `use_orig_params=True` instead)"
                )
        return None

    @cached_property
    def double_backward(self) -> bool:
        """`torch.autograd.grad(..., create_graph=True)` here (a gradient penalty, MAML): the graph is
        differentiated twice, which `torch.compile`'s AOT autograd does not support."""
        for call in self.source.calls:
            if (self.source.qualname(call.node.func, call.scope) or "") not in _GRAD_FUNCTIONS:
                continue
            for arg in call.node.args:
                if (
                    arg.keyword is not None
                    and arg.keyword.value == "create_graph"
                    and not is_false_constant(arg.value)
                ):
                    return True
        return False

    # -- the wrapper a compile site compiles ----------------------------------------------------------

    def wrapper_compiled(self, site: CompileSite) -> str | None:
        """The distributed wrapper (`DistributedDataParallel`, `FullyShardedDataParallel`) that `site`
        compiles, as the code names it: `torch.compile(DDP(model))`, or `model = DDP(model)` as the last
        assignment of `model` before `torch.compile(model)` / `model.compile()`."""
        source = self.source
        compiled, call = site.compiled, site.call
        if compiled is None or call is None:
            return None
        if isinstance(compiled, cst.Call):
            if source.qualname(compiled.func, call.scope) in _DISTRIBUTED_WRAPPERS:
                return source.code(compiled.func)
            return None
        if not isinstance(compiled, (cst.Name, cst.Attribute)):
            return None
        # Only assignments in the same function: another method's (`def ddp(self)` and `def compile(self)`)
        # may run in either order.
        assigned = [a for a in source.assigned_values(compiled, call.scope) if a.scope is call.scope]
        if not any(
            isinstance(a.value, cst.Call) and source.qualname(a.value.func, a.scope) in _DISTRIBUTED_WRAPPERS
            for a in assigned
        ):
            return None  # decided without positions (they cost a metadata pass over the module)
        at = source.span(site.node)[0]
        before = [a for a in assigned if source.span(a.value)[0] < at]
        if not before:
            return None
        last = max(before, key=lambda a: source.span(a.value)[0])
        value = last.value
        if isinstance(value, cst.Call) and source.qualname(value.func, last.scope) in _DISTRIBUTED_WRAPPERS:
            return source.code(value.func)
        return None


_DISTRIBUTED_WRAPPERS = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
}

_SEQUENTIAL = "torch.nn.Sequential"
_RPC_OPTIMIZERS = {
    "torch.distributed.optim.DistributedOptimizer",
    "torch.distributed.optim.optimizer.DistributedOptimizer",
}
_MODULE_CLASSES = {"torch.nn.Module", "torch.nn.modules.module.Module"}
# Calls given the model that do not run it: they pickle or copy it (TL101 says so when it matters).
_NOT_RUNNING = {"torch.save", "copy.deepcopy", "copy.copy"}
_GRAD_FUNCTIONS = {"torch.autograd.grad", "torch.autograd.functional.hessian", "torch.func.grad"}


# Modules removed before torch 2.0 (no `torch.compile` where they exist): torchtext.legacy went with
# torchtext 0.12 (torch 1.11), torch._six with torch 2.0, torch.utils.ffi with torch 1.0.
_REMOVED_BEFORE_COMPILE = ("torchtext.legacy", "torch._six", "torch.utils.ffi")


def _imported_names(statement: cst.BaseSmallStatement) -> list[str]:
    """The absolute dotted names an import statement binds or reads (`from torch import _six` ->
    `torch._six`); none for a relative import."""
    if isinstance(statement, cst.Import):
        return [name for alias in statement.names if (name := dotted(alias.name))]
    if isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None:
        module = dotted(statement.module) or ""
        if isinstance(statement.names, cst.ImportStar):
            return [module]
        return [
            module,
            *(
                f"{module}.{alias.name.value}"
                for alias in statement.names
                if isinstance(alias.name, cst.Name)
            ),
        ]
    return []


# Bases that are surely not a `torch.nn.Module` (nor make one).
_PLAIN_BASES = {
    "object", "abc.ABC", "typing.Generic", "typing.Protocol", "typing.NamedTuple",
    "typing_extensions.Protocol", "enum.Enum", "enum.IntEnum", "dict", "list", "tuple", "Exception",
}  # fmt: skip
# Methods that hand attribute lookups on to another object (the module a holder keeps): it acts as one.
_DELEGATING = ("__getattr__", "__getattribute__")


def classes_built(home: SourceModule, call: cst.BaseExpression, scope: Scope) -> list[_Class] | None:
    """The project classes whose instances `call` may return (None: unknown): a class built, or what a
    project factory returns (see `_classes_built`)."""
    return _classes_built(home, call, scope, 0)


def _classes_built(
    home: SourceModule, call: cst.BaseExpression, scope: Scope, depth: int
) -> list[_Class] | None:
    """The project classes whose instances `call` may return (None: unknown): `Holder(...)`, a project
    function or method annotated to return one (`def wrap_model(...) -> WrappedModel`), also a method of an
    object whose class is known so (`strategy.wrap_model(...)` with `strategy = make_strategy(cfg)`, `->
    Strategy`), or a project factory without an annotation, through what it returns (`return holder` with
    `holder = WrappedModel(model=ddp)`; `holder = configure(holder)` is the same object again)."""
    call = unplaced(call)
    if depth > MAX_DEPTH or not isinstance(call, cst.Call):
        return None
    found = home.resolve_class(call.func, scope)
    if found is not None:
        return [found]
    target = home.callee_of_call(call, scope)
    func = call.func
    if target is None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        assigned = home.assigned_values(func.value, scope)
        if len(assigned) != 1 or assigned[0].index is not None:
            return None
        owners = _classes_built(home, assigned[0].value, assigned[0].scope, depth + 1)
        if owners is None or len(owners) != 1:
            return None
        target = method_of(owners[0], func.attr.value)
    if target is None:
        return None
    annotated = _annotated_class(*target)
    if annotated is not None:
        return [annotated]
    return _classes_returned(*target, depth + 1)


def _classes_returned(home: SourceModule, function: FunctionRecord, depth: int) -> list[_Class] | None:
    """The project classes a factory's `return` statements build, directly or through a name of its own."""
    if not function.returns:
        return None
    found: list[_Class] = []
    for returned in function.returns:
        values = [returned]
        if isinstance(returned, cst.Name):
            assigned = home.assigned_values(returned, function.scope)
            if any(a.index is not None for a in assigned):
                return None  # `model, optimizer = ...`
            rebinds = home.analysis(ModelAnalysis).rebinds
            values = [a.value for a in assigned if not rebinds(returned, a.value)]
        if not values:
            return None
        for value in values:
            classes = _classes_built(home, value, function.scope, depth + 1)
            if classes is None:
                return None
            found.extend(classes)
    return found


def _binds_only(source: SourceModule, statement: cst.CSTNode, name: str) -> bool:
    """`statement` assigns only to `name` (`model = DDP(model)`), or to a tuple holding it (`model,
    optimizer = accelerator.prepare(model, optimizer)`)."""
    if not isinstance(statement, cst.Assign):
        return False
    for target in statement.targets:
        node = target.target
        elements = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else [node]
        if not any(source.code(element) == name for element in elements):
            return False
    return True


def _defines_forward(cls: _Class, depth: int = 0) -> bool | None:
    """The project class (or a project base) defines `forward`: True; none does and its bases end in
    `torch.nn.Module`: False; a base torchlint cannot read, or its own `__call__`: None."""
    home, record = cls
    if "forward" in record.methods:
        return True
    if "__call__" in record.methods or depth > MAX_DEPTH:
        return None
    results: list[bool | None] = []
    for base in record.node.bases:
        if base.keyword is not None:
            continue
        if (home.qualname(base.value, record.scope) or "") in _MODULE_CLASSES:
            results.append(False)
            continue
        found = home.resolve_class(base.value, record.scope)
        results.append(_defines_forward(found, depth + 1) if found is not None else None)
    if True in results:
        return True
    if None in results or not results:
        return None
    return False


def _annotated_class(home: SourceModule, function: FunctionRecord) -> _Class | None:
    """The project class a function's return annotation names (`-> WrappedModel`)."""
    returns = function.node.returns
    if returns is None or not isinstance(returns.annotation, (cst.Name, cst.Attribute)):
        return None
    return home.resolve_class(returns.annotation, function.scope)


def _all_surely_not_modules(classes: list[_Class] | None) -> bool:
    return bool(classes) and all(_surely_not_a_module(cls) for cls in classes or ())


def _surely_not_a_module(cls: _Class | None, depth: int = 0) -> bool:
    """A project class none of whose bases is (or may be) a `torch.nn.Module`: no bases, `object`, `ABC`,
    `Generic[T]`, or project classes that are surely not one in turn. A base from a library is unknown."""
    if cls is None or depth > MAX_DEPTH:
        return False
    home, record = cls
    if any(name in record.methods for name in _DELEGATING):
        return False
    for base in record.node.bases:
        if base.keyword is not None:
            continue  # `metaclass=ABCMeta`
        value = base.value.value if isinstance(base.value, cst.Subscript) else base.value
        if (home.qualname(value, record.scope) or "") in _PLAIN_BASES:
            continue
        if not _surely_not_a_module(home.resolve_class(value, record.scope), depth + 1):
            return False
    return True


def _receiving_parameter(call: CallRecord, function: FunctionRecord, given: cst.BaseExpression) -> str | None:
    """The parameter of `function` that `call` hands `given` to, if any."""
    names = [p.name.value for p in _all_parameters(function)]
    return next((name for name in names if argument_for(call.node, function, name) is given), None)


def _all_parameters(function: FunctionRecord) -> list[cst.Param]:
    params = function.node.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _head(code: str) -> str:
    """A callee's code for a message: its first line."""
    return code.splitlines()[0] if code else code
