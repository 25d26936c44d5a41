"""Where Dynamo likely breaks the graph in this module's compiled code (TL106).

Compiled code: the `forward` of an `nn.Module` class that a `torch.compile(model)` / `model.compile()` site
compiles (in this module or in a project module importing it, two imports deep), the methods it runs on
`self`, the forwards of the submodules it calls (`self.block(x)`, `for block in self.blocks:`), and the
project functions it calls, a few calls deep; and a function compiled itself (`@torch.compile`,
`step = torch.compile(step)`). The model's class must be known from how it is built (a class of the
project, also through a factory or a parameter this module's calls fill): anything unknown stays silent.

What breaks a graph in torch 2.13 (each measured with `torch._dynamo.explain` and `TORCH_LOGS=graph_breaks`;
see rules/TL106.md for the list, and what did not break):
- `print(...)`, a logging call (`logging.info`, a `logging.getLogger(...)` logger's methods),
  `warnings.warn(...)`;
- `.item()`, `.tolist()`, and `float()` / `int()` / `bool()` of a tensor (each reads a value into Python);
- an `if`, `while` or conditional expression whose test is a tensor's value (`x.sum() > 0`, `mask.any()`,
  `torch.isnan(loss).any()`, `torch.equal(a, b)`); tests on Python values (`self.training`, shapes,
  `x is None`) are decided while tracing and do not break;
- `torch._dynamo.graph_break()`.

Code that does not run under compile is left out: the branch that `torch.compiler.is_compiling()` (or
`torch.jit.is_scripting()`) rules out, the code after `if torch.compiler.is_compiling(): return`,
functions decorated with `torch.compiler.disable` / `torch._dynamo.disable` (run eagerly on purpose),
nested functions and lambdas (not followed), and blocks that only run when something goes wrong (ending in
`raise`) or behind a debugging switch (`if self.debug:`, `if verbose:`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.calls import argument_for
from torchlint.facts.syntax.names import BindingKind, ScopeKind
from torchlint.facts.syntax.walk import child_nodes, subexpressions
from torchlint.facts.torch.callers import CallerAnalysis
from torchlint.facts.torch.exports import may_compile
from torchlint.facts.torch.models import (
    MAX_DEPTH,
    MODULE_METHODS,
    ModelAnalysis,
    last_name,
    method_of,
    relative_path,
    unplaced,
)
from torchlint.rules.compile.questions import classes_built

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import ClassRecord, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

    _Class = tuple[SourceModule, ClassRecord]

_COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize"})
_DISABLERS = frozenset({"torch.compiler.disable", "torch._dynamo.disable", "torch._disable_dynamo"})
# Functions that say whether the code runs under Dynamo (by the last name: transformers'
# `is_torchdynamo_compiling()` and project helpers of the same name answer the same).
_IS_COMPILING = frozenset({"is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling"})
_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)
_GRAPH_BREAK = frozenset({"torch._dynamo.graph_break", "torch._dynamo.decorators.graph_break"})
# Tensor methods and torch functions whose result is a tensor (or a bool read from tensors: `equal`,
# `allclose`) that a test then reads: a branch on them depends on the data.
_TENSOR_METHODS = frozenset({
    "any", "all", "sum", "mean", "max", "min", "amax", "amin", "norm", "prod", "std", "var", "count_nonzero",
    "isnan", "isinf", "isfinite", "equal", "allclose",
})  # fmt: skip
_TENSOR_FUNCTIONS = frozenset(f"torch.{name}" for name in (*_TENSOR_METHODS, "is_nonzero", "linalg.norm"))
_SCALAR_BUILTINS = frozenset({"float", "int", "bool"})
# Names of a switch that turns debugging output on (`if self.debug:`, `if verbose:`), by the words of an
# identifier in the test: off in the runs that are timed, so what it guards does not run there.
_SWITCH_WORDS = frozenset({
    "debug", "dbg", "verbose", "verbosity", "log", "logging", "print", "show", "vis", "visualize", "plot",
    "profile", "profiling", "trace", "tracing",
})  # fmt: skip
# What a call is named for the needs of the first, cheap pass (a function without one of these calls has
# no likely break).
_CANDIDATE_NAMES = frozenset({
    "print", "item", "tolist", "warn", "graph_break", "getLogger", *_SCALAR_BUILTINS, *_LOG_METHODS,
    *_TENSOR_METHODS,
})  # fmt: skip


@dataclass(frozen=True)
class CompiledBody:
    """A function of this module that runs inside compiled code."""

    function: FunctionRecord
    where: str  # "the forward of `Net`", "`Net.helper` (run by the forward of `Net`)"
    what: str  # "model" or "function": what the compile site compiles
    site_home: SourceModule
    site: cst.CSTNode  # the compile call or decorator


@dataclass(frozen=True)
class LikelyBreak:
    """One construct in compiled code that makes Dynamo break the graph."""

    node: cst.CSTNode  # where the finding goes: the callee, or the test that reads a tensor
    kind: str  # print, logging, warning, item, tolist, scalar, branch, graph_break
    construct: str  # "`print(...)`", "`if x.sum() > 0`"
    where: str
    what: str
    compiled_at: str  # "at line 40", "in train.py:40"


class GraphBreakAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    # -- what runs compiled ----------------------------------------------------------------------------

    @cached_property
    def compiled_bodies(self) -> list[CompiledBody]:
        """This module's functions that compiled code runs, each once (the first way it is reached): from
        the compile sites here, then from those of the modules importing it."""
        if not self._candidates:
            return []
        found: dict[int, CompiledBody] = {}
        modules = [self.source, *self._compiling_importers()]
        for module in modules:
            for home, body in module.analysis(GraphBreakAnalysis).reached:
                if home is self.source:
                    found.setdefault(id(body.function.node), body)
        return list(found.values())

    @cached_property
    def reached(self) -> list[tuple[SourceModule, CompiledBody]]:
        """What this module's compile sites compile, followed a few calls deep into any project module:
        each function with its module (asked once per module, by every module it reaches)."""
        found: list[tuple[SourceModule, CompiledBody]] = []
        seen: set[int] = set()
        frontier = list(self._roots())
        for depth in range(MAX_DEPTH + 1):
            following = []
            for home, function, self_class, where, root in frontier:
                if id(function.node) in seen or _disabled(home, function):
                    continue
                seen.add(id(function.node))
                found.append((home, CompiledBody(function, where, root.what, root.site_home, root.site)))
                if depth < MAX_DEPTH:
                    for callee, callee_class, name in self._callees(home, function, self_class):
                        label = f"{name} (run by {root.where})"
                        following.append((*callee, callee_class, label, root))
            frontier = following
        return found

    @cached_property
    def likely_breaks(self) -> list[LikelyBreak]:
        found = []
        for body in self.compiled_bodies:
            if id(body.function.node) not in self._candidates:
                continue
            compiled_at = self._compiled_at(body)
            for node, kind, construct in _Scan(self.source, body.function).found:
                found.append(LikelyBreak(node, kind, construct, body.where, body.what, compiled_at))
        return found

    @cached_property
    def _candidates(self) -> set[int]:
        """The functions (by node) holding a call that may be a likely break: the cheap first pass."""
        return {
            id(call.function.node)
            for call in self.source.calls
            if call.function is not None and last_name(call.node.func) in _CANDIDATE_NAMES
        }

    def _compiled_at(self, body: CompiledBody) -> str:
        home = body.site_home
        line = home.lines.position(home.span(body.site)[0]).line
        if home is self.source:
            return f"at line {line}"
        return f"in {relative_path(home.path, self.source.path)}:{line}"

    # -- the compile sites and what they compile ---------------------------------------------------------

    def _compiling_importers(self) -> list[SourceModule]:
        """The project modules importing this one (two imports deep) that may compile: their text mentions
        `compile` and their export names a compiler (the others' compile sites are none)."""
        source, project = self.source, self.source.project
        if project is None or source.file is None:
            return []
        if not project.named_anywhere(("compile",), source.file):
            return []  # no file compiles anything: who imports this one need not be worked out
        importers = source.analysis(CallerAnalysis)
        compiling = (
            path
            for path in importers.importer_files()
            if project.may_name(path, ("compile",), source.file)
            and may_compile(project.export_of(path, source.file))
        )
        return list(importers.built(compiling))

    def _roots(self):
        home = self.source
        for site in home.analysis(ModelAnalysis).compile_sites:
            decorated = home.decorated_by(site.node)  # `@torch.compile` on a function
            if decorated is not None:
                owner = (home, decorated.owner) if decorated.owner is not None else None
                root = _Root(_named(decorated), "function", home, site.node)
                yield home, decorated, owner, root.where, root
                continue
            if site.compiled is None or site.call is None:
                continue
            for target in self._compiled(home, site.compiled, site.call.scope, 0):
                function_home, function, self_class, where = target
                root = _Root(where, "model" if self_class is not None else "function", home, site.node)
                yield function_home, function, self_class, where, root

    def _compiled(self, home: SourceModule, expr: cst.BaseExpression, scope: Scope, depth: int) -> list:
        """What compiling `expr` compiles: (home, function, the class `self` is, how to name it) for the
        forward of each project class it may be built from, or a function compiled itself; [] when
        unknown."""
        if depth > MAX_DEPTH:
            return []
        expr = unplaced(expr)
        if isinstance(expr, cst.Call):
            if home.qualname(expr.func, scope) in _COMPILERS:
                positional = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
                return self._compiled(home, positional[0], scope, depth + 1) if positional else []
            classes = classes_built(home, expr, scope) or _constructed_by_classmethod(home, expr, scope)
            return [forward for cls in classes if (forward := _forward(cls))]
        if isinstance(expr, cst.Attribute) and expr.attr.value == "module":
            return self._compiled(home, expr.value, scope, depth + 1)  # `model.module` of a DDP wrapper
        if isinstance(expr, cst.Name) and any(
            b.kind in (BindingKind.DEF, BindingKind.IMPORT) for b in scope.lookup(expr.value)
        ):  # a function here or imported from another project file: `torch.compile(train_step)`
            defs = [b.node for b in scope.lookup(expr.value) if b.kind is BindingKind.DEF]
            if defs:  # also where the name is rebound to the compiled function (`global step`)
                functions = [f for f in home.functions if any(f.node is node for node in defs)]
                return [(home, f, None, f"`{f.name}`") for f in functions if f.owner is None]
            target = home.callee_of_call(cst.Call(func=expr), scope)
            if target is None or target[1].owner is not None:
                return []
            return [(*target, None, f"`{target[1].name}`")]
        if home.is_self_attribute(expr, scope):  # `self._update = torch.compile(self._update)`
            owner = home.class_of_method_scope(scope)
            method = method_of((home, owner[0]), expr.attr.value) if owner is not None else None  # type: ignore[attr-defined]
            if method is not None and owner is not None:
                return [(*method, (home, owner[0]), _named(method[1]))]
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            qualname = home.qualname(expr, scope)  # `generate_base.next_token`, a module's function
            if qualname is not None and not qualname.startswith("torch."):
                target = home.callee_of_call(cst.Call(func=expr), scope)
                if target is not None and target[1].owner is None:
                    return [(*target, None, f"`{target[1].name}`")]
        if isinstance(expr, cst.Attribute) and not home.is_self_attribute(expr, scope):
            found = []  # `model.forward`, `model.encode` compiled alone
            for _, _, self_class, _ in self._compiled(home, expr.value, scope, depth + 1):
                method = method_of(self_class, expr.attr.value) if self_class is not None else None
                if method is not None:
                    found.append((*method, self_class, f"`{self_class[1].name}.{expr.attr.value}`"))
            return found
        values = home.assignments(expr, scope)
        if values is None:
            return self._passed(home, expr, scope, depth)
        rebinds = home.analysis(ModelAnalysis).rebinds
        found = []
        for assignment in values:
            if assignment.index is None and not rebinds(expr, assignment.value):
                found.extend(self._compiled(home, assignment.value, assignment.scope, depth + 1))
        return found

    def _passed(self, home: SourceModule, expr: cst.BaseExpression, scope: Scope, depth: int) -> list:
        """A parameter: what this module's calls of its function pass for it (`Trainer(model)` for
        `__init__(self, model)`)."""
        if not isinstance(expr, cst.Name):
            return []
        bindings = scope.lookup(expr.value)
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.PARAM:
            return []
        function = home.function_of_scope(bindings[0].scope)
        if function is None:
            return []
        found = []
        for call in home.callers_of(function):
            argument = argument_for(call.node, function, expr.value)
            if argument is not None:
                found.extend(self._compiled(home, argument, call.scope, depth + 1))
        return found

    # -- what compiled code calls ------------------------------------------------------------------------

    def _callees(self, home: SourceModule, function: FunctionRecord, self_class: _Class | None):
        """(function, the class its `self` is, how to name it) for what `function` runs when compiled:
        methods on `self`, the forwards of submodules it calls or iterates, project functions."""
        me = function.params[0] if function.owner is not None and function.params else None
        for call in function.calls:
            if not _runs_compiled(call.guards):
                continue
            func = call.node.func
            if me is not None and self_class is not None:
                found = list(self._self_callees(home, func, me, self_class, call.scope))
                if found:
                    yield from found
                    continue
            if _is_super_call(func) and function.owner is not None:
                for base in function.owner.node.bases:
                    cls = home.resolve_class(base.value, function.owner.scope)
                    method = method_of(cls, func.attr.value) if cls is not None else None  # type: ignore[attr-defined]
                    if method is not None:
                        yield method, self_class, f"`{method[1].name}` of `{cls[1].name}`"  # type: ignore[index]
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "apply":  # a custom autograd.Function
                cls = home.resolve_class(func.value, call.scope)
                forward = _forward(cls) if cls is not None else None
                if forward is not None:
                    yield forward[:2], None, forward[3]
                    continue
            if last_name(func) in MODULE_METHODS:
                continue
            target = home.callee(call)
            if target is None or (target[1].owner is not None and target[1].owner is function.owner):
                continue
            owner = target[1].owner
            named = f"`{owner.name}.{target[1].name}`" if owner is not None else f"`{target[1].name}`"
            yield target, ((target[0], owner) if owner is not None else None), named
        if me is None or self_class is None:
            return
        for loop in function.loops:  # `for block in self.blocks: x = block(x)`
            if isinstance(loop.node, cst.For):
                for node in subexpressions(loop.node.iter):
                    attr = _self_attribute(node, me)
                    if attr:
                        yield from self._submodule_forwards(self_class, attr)

    def _self_callees(self, home: SourceModule, func: cst.BaseExpression, me: str, self_class: _Class, scope):
        name = _self_attribute(func, me)
        if name:  # `self.helper(x)`, or a submodule's forward: `self.block(x)`
            if name in MODULE_METHODS:
                return
            method = method_of(self_class, name)
            if method is not None:
                yield method, self_class, f"`{self_class[1].name}.{name}`"
                return
            yield from self._submodule_forwards(self_class, name)
            return
        if isinstance(func, cst.Subscript):  # `self.heads[i](x)`
            name = _self_attribute(func.value, me)
            if name:
                yield from self._submodule_forwards(self_class, name)
            return
        if isinstance(func, cst.Attribute):  # `self.encoder.encode(x)`
            name = _self_attribute(func.value, me)
            method_name = func.attr.value
            if name and method_name not in MODULE_METHODS:
                for cls in self._submodule_classes(self_class, name):
                    method = method_of(cls, method_name)
                    if method is not None:
                        yield method, cls, f"`{cls[1].name}.{method_name}`"

    def _submodule_forwards(self, self_class: _Class, attr: str):
        for cls in self._submodule_classes(self_class, attr):
            forward = _forward(cls)
            if forward is not None:
                yield forward[:2], cls, forward[3]

    def _submodule_classes(self, self_class: _Class, attr: str) -> list[_Class]:
        """The project classes built in what `self.<attr>` is assigned (also inside an `nn.ModuleList`,
        an `nn.Sequential` or a comprehension)."""
        home, record = self_class
        found = []
        for value, scope in record.attributes.get(attr, []):
            for node in subexpressions(value):
                if isinstance(node, cst.Call):
                    cls = home.resolve_class(node.func, scope)
                    if cls is not None and all(cls[1] is not f[1] for f in found):
                        found.append(cls)
        return found


@dataclass(frozen=True)
class _Root:
    where: str
    what: str
    site_home: SourceModule
    site: cst.CSTNode


def _forward(cls: _Class):
    """(home, the forward, the class, "the forward of `Net`") of a project class with a `forward`."""
    method = method_of(cls, "forward")
    if method is None:
        return None
    return (*method, cls, f"the forward of `{cls[1].name}`")


def _named(function: FunctionRecord) -> str:
    """How a message names a compiled function or method: "the forward of `Net`", "`Agent._update`"."""
    owner = function.owner
    if owner is None:
        return f"`{function.name}`"
    return (
        f"the forward of `{owner.name}`" if function.name == "forward" else f"`{owner.name}.{function.name}`"
    )


def _constructed_by_classmethod(home: SourceModule, call: cst.Call, scope: Scope) -> list[_Class]:
    """`GPT.from_pretrained(...)`: a classmethod of a project class, which builds an instance of it."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return []
    cls = home.resolve_class(func.value, scope)
    method = method_of(cls, func.attr.value) if cls is not None else None
    if cls is None or method is None:
        return []
    decorators = method[1].node.decorators
    if any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod" for d in decorators):
        return [cls]
    return []


def _self_attribute(node: cst.CSTNode, me: str) -> str:
    """`attr` of `self.attr` (`me` is the name of `self`), else ""."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == me:
        return node.attr.value
    return ""


def _is_super_call(func: cst.BaseExpression) -> bool:
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name)
        and func.value.func.value == "super"
    )


def _disabled(home: SourceModule, function: FunctionRecord) -> bool:
    """Decorated to run eagerly: `@torch.compiler.disable`, `@torch._dynamo.disable(recursive=False)`."""
    for decorator in function.node.decorators:
        expr = decorator.decorator
        expr = expr.func if isinstance(expr, cst.Call) else expr
        if home.qualname(expr, function.scope.parent or function.scope) in _DISABLERS:
            return True
    return False


# -- what runs under compile -------------------------------------------------------------------------


def _compile_test(test: cst.BaseExpression) -> bool | None:
    """What `test` is under Dynamo when it only asks whether the code is compiled (True:
    `torch.compiler.is_compiling()`; False: `not is_compiling()`, `torch.jit.is_scripting()`); None when it
    depends on anything else."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _compile_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.Call) and not test.args:
        name = last_name(test.func)
        if name in _IS_COMPILING:
            return True
        if name in ("is_scripting", "is_tracing") and _dotted(test.func).startswith(("torch.jit", "jit")):
            return False
        return None
    if isinstance(test, cst.BooleanOperation):
        left, right = _compile_test(test.left), _compile_test(test.right)
        if isinstance(test.operator, cst.And) and False in (left, right):
            return False
        if isinstance(test.operator, cst.Or) and True in (left, right):
            return True
    return None


def _runs_compiled(guards) -> bool:
    """The `if` tests around a call leave it running under compile."""
    return all(_compile_test(test) in (None, branch) for test, branch in guards)


def _dotted(expr: cst.BaseExpression) -> str:
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
    return ".".join(reversed(parts))


def _switch(test: cst.BaseExpression) -> bool:
    """A test on a debugging switch (`self.debug`, `verbose`, `args.print_shapes`)."""
    for node in _names_in(test):
        words = set(node.lower().split("_"))
        if words & _SWITCH_WORDS:
            return True
    return False


def _names_in(expr: cst.CSTNode) -> list[str]:
    found = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.append(node.value)
        elif isinstance(node, cst.Attribute):
            found.append(node.attr.value)
            stack.append(node.value)
        elif isinstance(node, (cst.UnaryOperation, cst.BooleanOperation, cst.Comparison)):
            stack.extend(child_nodes(node))
        elif isinstance(node, cst.ComparisonTarget):
            stack.append(node.comparator)
    return found


def _leaves_error_path(block: cst.BaseSuite) -> bool:
    """A block that ends in `raise`: it runs only when something has gone wrong."""
    body = block.body
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(small, cst.Raise) for small in last.body)
    return isinstance(last, cst.BaseSmallStatement) and isinstance(last, cst.Raise)


class _Scan:
    """The likely breaks in one compiled function's own body (nested functions and lambdas are not run)."""

    def __init__(self, source: SourceModule, function: FunctionRecord) -> None:
        self.source = source
        self.function = function
        self.scope = function.scope
        self.found: list[tuple[cst.CSTNode, str, str]] = []
        self._block(function.node.body)

    # statements

    def _block(self, block: cst.BaseSuite) -> None:
        if isinstance(block, cst.SimpleStatementSuite):
            self._statement(block)
            return
        for statement in block.body:
            self._statement(statement)
            if (
                isinstance(statement, cst.If)
                and _compile_test(statement.test) is True
                and _leaves(statement.body)
            ):
                return  # `if torch.compiler.is_compiling(): return x`: what follows runs eagerly only

    def _statement(self, statement: cst.CSTNode) -> None:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(statement, cst.If):
            self._if(statement)
        elif isinstance(statement, cst.While):
            self._test(statement.test, "while")
            self._block(statement.body)
            if statement.orelse is not None:
                self._block(statement.orelse.body)
        elif isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                if isinstance(small, cst.Assert):
                    continue  # Dynamo traces a tensor assert without a break (measured on torch 2.13)
                self._expression(small)
        elif isinstance(statement, (cst.IndentedBlock,)):
            self._block(statement)
        else:  # for, with, try, match: their parts
            for child in child_nodes(statement):
                if isinstance(child, cst.BaseSuite):
                    self._block(child)
                elif isinstance(child, (cst.BaseStatement, cst.BaseSmallStatement)):
                    self._statement(child)
                elif isinstance(child, cst.ExceptHandler):
                    continue  # runs only when something has gone wrong
                elif isinstance(child, (cst.Else, cst.Finally)):
                    self._block(child.body)
                else:
                    self._expression(child)

    def _if(self, statement: cst.If) -> None:
        test = statement.test
        known = _compile_test(test)
        if known is None:
            self._test(test, "if")
        if known is not False and not _switch(test) and not _leaves_error_path(statement.body):
            self._block(statement.body)
        orelse = statement.orelse
        if orelse is not None and known is not True:
            if isinstance(orelse, cst.If):
                self._if(orelse)
            elif not _leaves_error_path(orelse.body):
                self._block(orelse.body)

    def _test(self, test: cst.BaseExpression, keyword: str) -> None:
        self._expression(test)
        for leaf in _truth_leaves(test):
            if self._tensor_valued(leaf, 0):
                self.found.append((leaf, "branch", f"`{keyword} {_head(self.source.code(leaf))}`"))

    # expressions

    def _expression(self, node: cst.CSTNode) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(current, cst.IfExp):
                known = _compile_test(current.test)
                if known is None:
                    self._test(current.test, "if")
                    stack.extend((current.orelse, current.body))
                else:
                    stack.append(current.body if known else current.orelse)
                continue
            if isinstance(current, cst.Call):
                self._call(current)
            stack.extend(reversed(child_nodes(current)))

    def _call(self, call: cst.Call) -> None:
        source, scope = self.source, self.scope
        func = call.func
        qualname = source.qualname(func, scope) or ""
        if qualname == "print":
            self.found.append((func, "print", "`print(...)`"))
        elif qualname == "warnings.warn":
            self.found.append((func, "warning", f"`{source.code(func)}(...)`"))
        elif qualname in _GRAPH_BREAK:
            self.found.append((func, "graph_break", f"`{source.code(func)}()`"))
        elif qualname in _SCALAR_BUILTINS:
            if len(call.args) == 1 and self._tensor_valued(call.args[0].value, 0):
                self.found.append((func, "scalar", f"`{_head(source.code(call))}`"))
        elif isinstance(func, cst.Attribute):
            name = func.attr.value
            if name in ("item", "tolist") and not call.args and not self._is_module(func.value):
                where = func.attr if "\n" in source.code(func) else func
                self.found.append((where, name, f"`.{name}()`"))
            elif name in _LOG_METHODS and self._is_logging(func.value, qualname):
                where = func.attr if "\n" in source.code(func) else func
                self.found.append((where, "logging", f"`{_head(source.code(func))}(...)`"))

    def _is_module(self, expr: cst.BaseExpression) -> bool:
        """`expr` names an imported module (`np`, `math`): not a tensor."""
        if not isinstance(expr, cst.Name):
            return False
        return any(b.kind is BindingKind.IMPORT for b in self.scope.lookup(expr.value))

    def _is_logging(self, receiver: cst.BaseExpression, qualname: str) -> bool:
        """`logging.info(...)`, or a method of a logger from `logging.getLogger(...)` (named, `self.log`, or
        called on the spot)."""
        if qualname.startswith("logging.") and qualname.count(".") == 1:
            return True
        return self._is_logger(receiver, 0)

    def _is_logger(self, expr: cst.BaseExpression, depth: int) -> bool:
        source = self.source
        if isinstance(expr, cst.Call):
            return source.qualname(expr.func, self.scope) == "logging.getLogger"
        if depth > 2 or not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        values = source.assignments(expr, self.scope)
        if not values:
            return False
        return all(
            isinstance(a.value, cst.Call)
            and (source.qualname(a.value.func, a.scope) or "") == "logging.getLogger"
            for a in values
        )

    def _tensor_valued(self, expr: cst.BaseExpression, depth: int) -> bool:
        """`expr` is a tensor (or a bool read from tensors) as far as the code shows: a reduction or test of
        a tensor (`x.sum()`, `mask.any()`, `torch.isnan(loss)`), arithmetic or a comparison on one, or a
        local name bound only to such values."""
        if isinstance(expr, cst.Call):
            func = expr.func
            if not isinstance(func, cst.Attribute):
                return (
                    False  # `any(...)`, `max(a, b)`: builtins (torch's functions are called as `torch.any`)
                )
            if (self.source.qualname(func, self.scope) or "") in _TENSOR_FUNCTIONS:
                return True
            return (
                func.attr.value in _TENSOR_METHODS
                and not self._is_module(func.value)
                and not (isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"))
            )
        if isinstance(expr, cst.Comparison):
            if any(isinstance(t.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for t in expr.comparisons):
                return False
            operands = [expr.left, *(t.comparator for t in expr.comparisons)]
            return any(self._tensor_valued(operand, depth) for operand in operands)
        if isinstance(expr, cst.BinaryOperation):
            return self._tensor_valued(expr.left, depth) or self._tensor_valued(expr.right, depth)
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            return self._tensor_valued(expr.expression, depth)
        if isinstance(expr, cst.Subscript):
            return self._tensor_valued(expr.value, depth)
        if isinstance(expr, cst.Name) and depth < 2:
            bindings = self.scope.lookup(expr.value)
            if not bindings or any(
                b.kind is not BindingKind.ASSIGN or b.value is None or b.index is not None for b in bindings
            ):
                return False
            if any(b.scope.kind is not ScopeKind.FUNCTION or b.scope is not self.scope for b in bindings):
                return False
            return all(self._tensor_valued(b.value, depth + 1) for b in bindings)  # type: ignore[arg-type]
        return False


def _truth_leaves(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The expressions whose truth a test takes: through `not`, `and` and `or`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _truth_leaves(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return [*_truth_leaves(test.left), *_truth_leaves(test.right)]
    return [test]


def _leaves(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the function (`return`, `raise`)."""
    body = block.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(small, (cst.Return, cst.Raise)) for small in last.body)
    return isinstance(last, (cst.Return, cst.Raise))


def _head(code: str) -> str:
    """An expression's code for a message: its first line, long ones cut."""
    first = code.splitlines()[0] if code else code
    if len(first) > 50 or first != code:
        return first[:47].rstrip() + "..."
    return first
