"""The one walk over a module's LibCST tree that every fact is built from.

A `CSTVisitor` pays a dispatch per node per visit method (as much as the parse itself, measured on torch's own
sources), so this is a hand-written recursive walk: a handler for the node types that bind names or open
scopes, and a generic descent for the rest that skips whitespace and punctuation fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from torchlint._lazy import cst
from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind

_SKIPPED_FIELDS = frozenset(
    {
        "leading_lines",
        "lines_after_decorators",
        "lpar",
        "rpar",
        "header",
        "footer",
        "comma",
        "semicolon",
        "equal",
        "colon",
        "star",
        "whitespace",
        "operator",
        "dot",
        "trailing_whitespace",
        "empty_lines",
    }
)
_child_fields: dict[type, tuple[str, ...]] = {}


_IS_NODE: dict[type, bool] = {}


def is_node(value: object) -> bool:
    """`isinstance(value, cst.CSTNode)`, decided once per type. LibCST's node classes are abstract-base
    classes: each `isinstance` with one of them that fails runs `ABCMeta.__instancecheck__`, a cost the
    walks pay hundreds of thousands of times per check. No concrete node class has subclasses, so a
    node's exact type says what it is (`type(node) is cst.Call`)."""
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = isinstance(value, cst.CSTNode)
    return known


def _fields_of(node_type: type) -> tuple[str, ...]:
    names = _child_fields.get(node_type)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
        _child_fields[node_type] = names
    return names


@dataclasses.dataclass(eq=False, slots=True)
class FunctionRecord:
    node: cst.FunctionDef
    scope: Scope  # the function's own scope
    params: list[str]
    owner: ClassRecord | None  # the class when this is a method
    calls: list[CallRecord] = dataclasses.field(default_factory=list)
    loops: list[LoopRecord] = dataclasses.field(default_factory=list)
    returns: list[cst.BaseExpression] = dataclasses.field(default_factory=list)
    # A generator: what it iterates to yield (`yield from x`, `for b in x: yield b`), and whether it does so
    # forever (inside `while True:`), i.e. iterates `x` once per pass.
    yields_from: list[cst.BaseExpression] = dataclasses.field(default_factory=list)
    yields_forever: bool = False

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def outputs(self) -> list[cst.BaseExpression]:
        """What a call of it hands back to be iterated: its return values, or what it yields from."""
        return [*self.returns, *self.yields_from]


@dataclasses.dataclass(eq=False, slots=True)
class ClassRecord:
    node: cst.ClassDef
    scope: Scope  # the scope the class is defined in
    methods: dict[str, FunctionRecord] = dataclasses.field(default_factory=dict)
    # `self.<attr> = value` in any method: attr -> [(value, the method's scope)]
    attributes: dict[str, list[tuple[cst.BaseExpression, Scope]]] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name.value


@dataclasses.dataclass(eq=False, slots=True)
class LoopRecord:
    node: cst.For | cst.While
    scope: Scope
    parent: LoopRecord | None
    function: FunctionRecord | None
    calls: list[CallRecord] = dataclasses.field(default_factory=list)  # directly in this loop
    children: list[LoopRecord] = dataclasses.field(default_factory=list)

    def all_calls(self):
        yield from self.calls
        for child in self.children:
            yield from child.all_calls()


@dataclasses.dataclass(eq=False, slots=True)
class CallRecord:
    node: cst.Call
    scope: Scope
    loop: LoopRecord | None  # the innermost loop around the call, within the same function
    function: FunctionRecord | None
    conditional: bool  # under an `if` (within its function)
    # The `if` tests around the call within its function, innermost last, with the branch it is in
    # (True: the body, False: the `else`): `if is_training: ... else: loader = DataLoader(...)`.
    guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()


@dataclasses.dataclass
class Collected:
    module_scope: Scope
    references: list[Reference]
    calls: list[CallRecord]
    functions: list[FunctionRecord]
    classes: list[ClassRecord]
    loops: list[LoopRecord]
    # `name["key"] = value`: (scope, name) -> [(key, value, conditional)]
    item_assignments: dict[tuple[int, str], list[tuple[str, cst.BaseExpression, bool]]]
    has_main_guard: bool
    # Statement suites (module body, function bodies, ...) by the id of each statement in them, so that a
    # fix can tell whether removing a statement would leave a block empty.
    suite_sizes: dict[int, int]
    # `from module import *` statements: the names they bind are unknown here (`facts/syntax/rebinding.py`
    # asks the module when a fix needs to know).
    star_imports: list[cst.ImportFrom] = dataclasses.field(default_factory=list)


class Collector:
    def __init__(self) -> None:
        self.references: list[Reference] = []
        self.calls: list[CallRecord] = []
        self.functions: list[FunctionRecord] = []
        self.classes: list[ClassRecord] = []
        self.loops: list[LoopRecord] = []
        self.item_assignments: dict[tuple[int, str], list[tuple[str, cst.BaseExpression, bool]]] = {}
        self.has_main_guard = False
        self.star_imports: list[cst.ImportFrom] = []
        self._in_loop: LoopRecord | None = None
        self._in_function: FunctionRecord | None = None
        self._in_class: ClassRecord | None = None
        self._conditional = 0
        self._guards: tuple[tuple[cst.BaseExpression, bool], ...] = ()
        self.suite_sizes: dict[int, int] = {}
        self._in_annotation = False
        self._handlers: dict[type, Callable[[cst.CSTNode, Scope], None]] = {
            cst.Name: self._name,
            cst.Attribute: self._attribute,
            cst.Call: self._call,
            cst.Decorator: self._decorator,
            cst.WithItem: self._with_item,
            cst.Import: self._import,
            cst.ImportFrom: self._import_from,
            cst.FunctionDef: self._function,
            cst.ClassDef: self._class,
            cst.Lambda: self._lambda,
            cst.Assign: self._assign,
            cst.AnnAssign: self._ann_assign,
            cst.AugAssign: self._aug_assign,
            cst.For: self._for,
            cst.While: self._while,
            cst.If: self._if,
            cst.Return: self._return,
            cst.Yield: self._yield,
            cst.NamedExpr: self._named_expr,
            cst.ExceptHandler: self._except_handler,
            cst.Global: self._global,
            cst.Nonlocal: self._skip,
            cst.Del: self._del,
            cst.ListComp: self._comprehension,
            cst.SetComp: self._comprehension,
            cst.GeneratorExp: self._comprehension,
            cst.DictComp: self._comprehension,
            cst.Annotation: self._annotation,
            cst.IndentedBlock: self._suite,
            cst.SimpleStatementSuite: self._suite,
        }

    def collect(self, module: cst.Module) -> Collected:
        scope = Scope(ScopeKind.MODULE, None, module)
        self._record_suite(module.body)
        for statement in module.body:
            self.walk(statement, scope)
        return Collected(
            scope,
            self.references,
            self.calls,
            self.functions,
            self.classes,
            self.loops,
            self.item_assignments,
            self.has_main_guard,
            self.suite_sizes,
            self.star_imports,
        )

    # -- the walk ---------------------------------------------------------------------------------------

    def walk(self, node: cst.CSTNode, scope: Scope) -> None:
        handler = self._handlers.get(type(node))
        if handler is not None:
            handler(node, scope)
        else:
            self.descend(node, scope)

    def descend(self, node: cst.CSTNode, scope: Scope) -> None:
        walk = self.walk
        for name in _fields_of(type(node)):
            value = getattr(node, name)
            if is_node(value):
                walk(value, scope)
            elif isinstance(value, (tuple, list)):
                for item in value:
                    if is_node(item):
                        walk(item, scope)

    def _annotation(self, node: cst.CSTNode, scope: Scope) -> None:
        outer, self._in_annotation = self._in_annotation, True
        self.walk(node.annotation, scope)  # type: ignore[attr-defined]
        self._in_annotation = outer

    def _skip(self, node: cst.CSTNode, scope: Scope) -> None:
        pass

    def _record_suite(self, body: tuple[cst.CSTNode, ...] | list) -> None:
        size = len(body)
        for statement in body:
            self.suite_sizes[id(statement)] = size
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self.suite_sizes[id(small)] = size * len(statement.body)

    def _suite(self, node: cst.CSTNode, scope: Scope) -> None:
        body = node.body  # type: ignore[attr-defined]
        if isinstance(node, cst.SimpleStatementSuite):
            for small in body:
                self.suite_sizes[id(small)] = len(body)
        else:
            self._record_suite(body)
        outer = self._guards
        for statement in body:
            self.walk(statement, scope)
            if _returns_early(statement):  # `if split == "train": return a` ... `return b`
                self._guards = (*self._guards, (statement.test, False))  # type: ignore[attr-defined]
        self._guards = outer

    # -- references -------------------------------------------------------------------------------------

    def _reference(self, expr: cst.BaseExpression, scope: Scope, **role: object) -> Reference | None:
        attrs: list[str] = []
        node = expr
        while type(node) is cst.Attribute:  # exact types: see `is_node`
            attrs.append(node.attr.value)
            node = node.value
        if type(node) is not cst.Name:
            self.walk(node, scope)
            return None
        ref = Reference(expr, node, tuple(reversed(attrs)), scope, in_annotation=self._in_annotation, **role)  # type: ignore[arg-type]
        self.references.append(ref)
        return ref

    def _name(self, node: cst.CSTNode, scope: Scope) -> None:
        self._reference(node, scope)  # type: ignore[arg-type]

    def _attribute(self, node: cst.CSTNode, scope: Scope) -> None:
        self._reference(node, scope)  # type: ignore[arg-type]

    def _call(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Call)
        record = CallRecord(
            node, scope, self._in_loop, self._in_function, self._conditional > 0, self._guards
        )
        self.calls.append(record)
        if self._in_loop is not None:
            self._in_loop.calls.append(record)
        if self._in_function is not None:
            self._in_function.calls.append(record)
        func = node.func
        if isinstance(func, (cst.Name, cst.Attribute)):
            self._reference(func, scope, call=node)
        else:
            self.walk(func, scope)
        for arg in node.args:
            self.walk(arg.value, scope)

    def _decorator(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Decorator)
        if isinstance(node.decorator, (cst.Name, cst.Attribute)):
            self._reference(node.decorator, scope, decorator=node)
        else:
            self.walk(node.decorator, scope)

    def _with_item(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.WithItem)
        self.walk(node.item, scope)
        if node.asname is not None:
            self._bind_target(node.asname.name, scope, BindingKind.OTHER, node)

    # -- bindings ---------------------------------------------------------------------------------------

    def _bind_target(
        self,
        target: cst.BaseExpression,
        scope: Scope,
        kind: BindingKind,
        node: cst.CSTNode,
        value: cst.BaseExpression | None = None,
        index: int | None = None,
    ) -> None:
        if isinstance(target, cst.Name):
            scope.bind(Binding(target.value, kind, scope, node, value=value, index=index))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                self._bind_target(element.value, scope, kind, node, value, position)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, scope, kind, node)
        else:  # attribute or subscript targets load their base
            self.walk(target, scope)
            if value is not None and index is None:
                self._record_store(target, scope, value)

    def _record_store(self, target: cst.BaseExpression, scope: Scope, value: cst.BaseExpression) -> None:
        """`self.x = value` in a method, and `kwargs["key"] = value`: what later reads of them see."""
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            function = self._in_function
            if function is not None and function.owner is not None and function.params:
                if target.value.value == function.params[0]:
                    function.owner.attributes.setdefault(target.attr.value, []).append((value, scope))
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                key = target.slice[0].slice.value
                if isinstance(key, cst.SimpleString):
                    entry = (str(key.evaluated_value), value, self._conditional > 0)
                    self.item_assignments.setdefault((id(scope), target.value.value), []).append(entry)

    def _import(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Import)
        for alias in node.names:
            full = _dotted_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                name, qualname = alias.asname.name.value, full
            else:  # `import torch.cuda.amp` binds `torch`
                name = qualname = full.split(".", 1)[0]
            scope.bind(Binding(name, BindingKind.IMPORT, scope, node, qualname=qualname, alias=alias))

    def _import_from(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.ImportFrom)
        if isinstance(node.names, cst.ImportStar):
            self.star_imports.append(node)
            return  # the names it binds are unknown: uses of them resolve to nothing
        base = "." * len(node.relative) + (_dotted_name(node.module) if node.module else "")
        for alias in node.names:
            imported = _dotted_name(alias.name)
            qualname = f"{base}.{imported}" if not base.endswith(".") else base + imported
            name = (
                alias.asname.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                else imported
            )
            scope.bind(Binding(name, BindingKind.IMPORT, scope, node, qualname=qualname, alias=alias))

    def _function(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.FunctionDef)
        for decorator in node.decorators:
            self.walk(decorator, scope)
        inner = Scope(ScopeKind.FUNCTION, scope, node)
        self._parameters(node.params, scope, inner)
        if node.returns is not None:
            self.walk(node.returns, scope)
        scope.bind(Binding(node.name.value, BindingKind.DEF, scope, node))
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        owner = self._in_class if scope.kind is ScopeKind.CLASS else None
        record = FunctionRecord(node, inner, params, owner)
        self.functions.append(record)
        if owner is not None:
            owner.methods[record.name] = record
        saved = (self._in_function, self._in_loop, self._conditional, self._guards)
        self._in_function, self._in_loop, self._conditional, self._guards = record, None, 0, ()
        self.walk(node.body, inner)
        self._in_function, self._in_loop, self._conditional, self._guards = saved

    def _parameters(self, params: cst.Parameters, outer: Scope, inner: Scope) -> None:
        everything = [*params.posonly_params, *params.params, *params.kwonly_params]
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                everything.append(star)
        for param in everything:
            if param.default is not None:
                self.walk(param.default, outer)
            if param.annotation is not None:
                self.walk(param.annotation, outer)
            inner.bind(Binding(param.name.value, BindingKind.PARAM, inner, param))

    def _class(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.ClassDef)
        for decorator in node.decorators:
            self.walk(decorator, scope)
        for arg in (*node.bases, *node.keywords):
            self.walk(arg.value, scope)
        inner = Scope(ScopeKind.CLASS, scope, node)
        scope.bind(Binding(node.name.value, BindingKind.CLASS, scope, node))
        record = ClassRecord(node, scope)
        self.classes.append(record)
        saved, self._in_class = self._in_class, record
        self.walk(node.body, inner)
        self._in_class = saved

    def _lambda(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Lambda)
        inner = Scope(ScopeKind.FUNCTION, scope, node)
        self._parameters(node.params, scope, inner)
        self.walk(node.body, inner)

    def _comprehension(self, node: cst.CSTNode, scope: Scope) -> None:
        inner = Scope(ScopeKind.COMPREHENSION, scope, node)
        clause: cst.CompFor | None = node.for_in  # type: ignore[attr-defined]
        first = True
        while clause is not None:
            self.walk(clause.iter, scope if first else inner)
            first = False
            self._bind_target(clause.target, inner, BindingKind.OTHER, node, clause.iter)
            for condition in clause.ifs:
                self.walk(condition.test, inner)
            clause = clause.inner_for_in
        if isinstance(node, cst.DictComp):
            self.walk(node.key, inner)
            self.walk(node.value, inner)
        else:
            self.walk(node.elt, inner)  # type: ignore[attr-defined]

    def _assign(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Assign)
        self.walk(node.value, scope)
        simple = len(node.targets) == 1
        for target in node.targets:
            self._bind_target(target.target, scope, BindingKind.ASSIGN, node, node.value if simple else None)

    def _ann_assign(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.AnnAssign)
        self.walk(node.annotation, scope)
        if node.value is not None:
            self.walk(node.value, scope)
            self._bind_target(node.target, scope, BindingKind.ASSIGN, node, node.value)
        elif not isinstance(node.target, cst.Name):
            self.walk(node.target, scope)

    def _aug_assign(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.AugAssign)
        self.walk(node.value, scope)
        self.walk(node.target, scope)  # `x += 1` reads x
        self._bind_target(node.target, scope, BindingKind.OTHER, node)

    def _for(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.For)
        self.walk(node.iter, scope)
        self._bind_target(node.target, scope, BindingKind.OTHER, node, node.iter)
        self._loop_body(node, scope, node.body)
        if node.orelse is not None:
            self.walk(node.orelse, scope)

    def _while(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.While)
        self.walk(node.test, scope)
        self._loop_body(node, scope, node.body)
        if node.orelse is not None:
            self.walk(node.orelse, scope)

    def _loop_body(self, node: cst.For | cst.While, scope: Scope, body: cst.BaseSuite) -> None:
        record = LoopRecord(node, scope, self._in_loop, self._in_function)
        self.loops.append(record)
        if self._in_loop is not None:
            self._in_loop.children.append(record)
        if self._in_function is not None:
            self._in_function.loops.append(record)
        saved, self._in_loop = self._in_loop, record
        self.walk(body, scope)
        self._in_loop = saved

    def _if(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.If)
        self.walk(node.test, scope)
        if scope.kind is ScopeKind.MODULE and is_main_guard(node.test):
            self.has_main_guard = True
            self.walk(node.body, scope)  # the script's entry point: as unconditional as module code
        else:
            outer = self._guards
            self._conditional += 1
            self._guards = (*outer, (node.test, True))
            self.walk(node.body, scope)
            self._guards = outer
            self._conditional -= 1
        if node.orelse is not None:
            outer = self._guards
            self._conditional += 1
            self._guards = (*outer, (node.test, False))
            self.walk(node.orelse, scope)
            self._guards = outer
            self._conditional -= 1

    def _return(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Return)
        if node.value is not None:
            self.walk(node.value, scope)
            if self._in_function is not None:
                self._in_function.returns.append(node.value)

    def _yield(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Yield)
        value = node.value
        if isinstance(value, cst.From):
            self.walk(value.item, scope)
        elif value is not None:
            self.walk(value, scope)
        function = self._in_function
        if function is None:
            return
        source = value.item if isinstance(value, cst.From) else None
        loop = self._in_loop
        while loop is not None:
            if source is None and isinstance(loop.node, cst.For):
                source = loop.node.iter  # `for batch in loader: yield batch`
            if isinstance(loop.node, cst.While) and _is_forever(loop.node.test):
                function.yields_forever = True
            loop = loop.parent
        if source is not None:
            function.yields_from.append(source)

    def _named_expr(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.NamedExpr)
        self.walk(node.value, scope)
        target_scope = scope
        while target_scope.kind is ScopeKind.COMPREHENSION and target_scope.parent is not None:
            target_scope = target_scope.parent
        self._bind_target(node.target, target_scope, BindingKind.ASSIGN, node, node.value)

    def _except_handler(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.ExceptHandler)
        if node.type is not None:
            self.walk(node.type, scope)
        if node.name is not None:
            self._bind_target(node.name.name, scope, BindingKind.OTHER, node)
        self.walk(node.body, scope)

    def _global(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Global)
        for item in node.names:
            scope.globals.add(item.name.value)

    def _del(self, node: cst.CSTNode, scope: Scope) -> None:
        assert isinstance(node, cst.Del)
        self._bind_target(node.target, scope, BindingKind.OTHER, node)


def _returns_early(statement: cst.CSTNode) -> bool:
    """`if test: ... return x` without an `else`: what follows it in its block runs only when `test` is
    false."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    body = statement.body.body
    last = body[-1] if body else None
    if isinstance(statement.body, cst.SimpleStatementSuite):
        return bool(body) and isinstance(body[-1], cst.Return)
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(x, cst.Return) for x in last.body)


def _is_forever(test: cst.BaseExpression) -> bool:
    """`while True:` / `while 1:`."""
    return (isinstance(test, cst.Name) and test.value == "True") or (
        isinstance(test, cst.Integer) and test.value != "0"
    )


def is_main_guard(test: cst.BaseExpression) -> bool:
    """`if __name__ == "__main__":` (either operand order)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = {type(test.left), type(test.comparisons[0].comparator)}
    names = [x for x in (test.left, test.comparisons[0].comparator) if isinstance(x, cst.Name)]
    strings = [x for x in (test.left, test.comparisons[0].comparator) if isinstance(x, cst.SimpleString)]
    return (
        sides == {cst.Name, cst.SimpleString}
        and names[0].value == "__name__"
        and strings[0].evaluated_value == "__main__"
    )


def _dotted_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr.value}"
    raise TypeError(f"not a dotted name: {node!r}")
