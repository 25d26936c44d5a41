"""What one file tells the others, read from its bytes alone: its export.

Cross-file questions ("who imports this file?", "does this module bind a class of that name?", "can this
script's code run a backward pass?") are asked of many files to learn that most of them do not matter. An
export answers them from one `ast` pass (CPython's parser: a tenth of LibCST's time, and none of the
analysis a module's facts then raise), and depends on the file's content only: it is computed once per
content hash and kept between runs by the cache (`torchlint.cache.imports`), so that a file's facts are
built only where a question needs its code. Names are kept as the file writes them: resolving them to
files depends on which files exist, and is the index's work (`torchlint.facts.torch.reach` follows them).

The code of a file is exported per scope: the module's own statements (`""`), each function (`"train"`) and
each method (`"Trainer.fit"`, nested classes by their own name); functions, lambdas and comprehensions
defined inside one belong to it. A scope lists what its calls name (`symbols`) and whether one of its
calls may run a backward pass by itself. `torchlint debug exports FILE` prints one.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from torchlint.facts.torch.vocabulary import BACKWARD_METHODS, OPTIMIZER_NAMES
from torchlint.pyast import kept_ast

if TYPE_CHECKING:
    from collections.abc import Collection


class ScopeExport(NamedTuple):
    """The calls of one scope: what each names (`f`, `a.b.f`, `.method` for a method of an object the
    code computes), the names handed to a call (a function given to a helper that runs it), and whether
    one of them may run a backward pass itself (`loss.backward()`, `self.manual_backward(loss)`, or a
    helper handed the loss and the optimizer: `loss_scaler(loss, optimizer)`) or a step (`x.step()`), and
    whether its code names a compiler (`compiles`)."""

    name: str
    backward: bool
    steps: bool  # `x.step()`: an optimizer's step, maybe
    symbols: list[str]  # what its calls name, and the defs of this file handed to a call
    # An attribute named like a compiler (`torch.compile`, `@torch.compile`, `model.compile()`,
    # `torch._dynamo.optimize`; not `re.compile`): a compile site may be here, nowhere else but where an
    # import binds a compiler's name (`may_compile`).
    compiles: bool = False


class Export(NamedTuple):
    """One file's export. Names in the order the file writes them, symbols sorted (equal scopes give equal
    exports, and the cache's JSON is stable)."""

    imports: list[str]  # the module names its imports write (`from a import b`: `a` and `a.b`)
    aliases: list[list[str]]  # the [name, asname] pairs its imports rename
    classes: list[str]  # the name of every class statement, at any depth
    functions: list[str]  # the names every def statement and every import binds, at any depth
    imported: list[str]  # the names import statements bind (a package re-exporting a class), at any depth
    bases: list[list[str]]  # [class, each of its bases as written (`nn.Module`)] for every class statement
    bindings: list[list[str]]  # [name, dotted path] for every name an import binds (`from .a import b as c`)
    scopes: list[ScopeExport] | None  # None: the code was not read (`export_of_bytes(code=False)`)

    def to_json(self) -> list:
        return [*self[:-1], [list(scope) for scope in self.scopes] if self.scopes is not None else None]

    @classmethod
    def from_json(cls, value: object) -> Export | None:
        """The export a cache entry holds; None for anything else (an older or corrupted entry)."""
        if not isinstance(value, list) or len(value) != len(cls._fields):
            return None
        imports, aliases, classes, functions, imported, bases, bindings, scopes = value
        if not all(_names(field) for field in (imports, classes, functions, imported)):
            return None
        if not all(
            isinstance(pair, list) and len(pair) == 2 and _names(pair) for pair in (*aliases, *bindings)
        ):
            return None
        if not isinstance(bases, list) or not all(isinstance(b, list) and b and _names(b) for b in bases):
            return None
        if scopes is not None and (not isinstance(scopes, list) or not all(map(_is_scope, scopes))):
            return None
        return cls(
            list(imports),
            [list(pair) for pair in aliases],
            list(classes),
            list(functions),
            list(imported),
            [list(names) for names in bases],
            [list(pair) for pair in bindings],
            [ScopeExport(name, back, step, list(symbols), comp) for name, back, step, symbols, comp in scopes]
            if scopes is not None
            else None,
        )


class ExportIndex(Protocol):
    """What the project index answers from exports (torchlint.index.project implements it)."""

    asks_exports: bool  # False: no export is read (`export_of` answers None): a run that builds every file

    def export_of(self, path: Path, requester: Path | None = None) -> Export | None:
        """`path`'s export (None: not known to parse); `requester`'s answers depend on it from now on."""
        ...

    def module_file(self, importer: Path, dotted: str) -> Path | None:
        """The file a module name means when imported by `importer` (None: not in the project)."""
        ...

    def subclassed_in(self, path: Path, requester: Path) -> list[Path]:
        """The importers of `path` that derive a class from one named like one of its classes."""
        ...

    def exports_naming(
        self, path: Path, names: Collection[str], requester: Path
    ) -> dict[Path, Export] | None:
        """The code exports of the other project files whose text writes one of `names` (or an alias of
        one) as a word (None: unknown)."""
        ...

    def names_for(self, name: str) -> set[str]:
        """`name` and every name the project's imports give it, through re-exports."""
        ...

    def memo(self, name: str) -> dict:
        """A dictionary kept for the run."""
        ...


def describe_export(export: Export) -> str:
    """An export as `torchlint debug exports` prints it."""
    lines = [f"imports: {', '.join(export.imports) or '(none)'}", "bindings:"]
    lines += [f"  {name} = {dotted}" for name, dotted in export.bindings] or ["  (none)"]
    lines.append("classes:")
    lines += [f"  {name}({', '.join(bases)})" for name, *bases in export.bases] or ["  (none)"]
    lines.append("scopes:")
    for scope in export.scopes:
        runs = [what for what, flag in (("a backward pass", scope.backward), ("a step", scope.steps)) if flag]
        itself = f" (may run {' and '.join(runs)} itself)" if runs else ""
        itself += " (names a compiler)" if scope.compiles else ""
        lines.append(f"  {scope.name or '<module>'}{itself}: {', '.join(scope.symbols) or '(no calls)'}")
    if not export.scopes:
        lines.append("  (none)")
    return "\n".join(lines) + "\n"


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_scope(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 5
        and isinstance(value[0], str)
        and isinstance(value[1], bool)
        and isinstance(value[2], bool)
        and _names(value[3])
        and isinstance(value[4], bool)
    )


def export_of_bytes(data: bytes, code: bool = True) -> Export | None:
    """The file's export; None when CPython does not parse it. Without `code`, what its statements say
    (imports, classes, functions) and no scopes (`scopes` is None): the import scan reads many files whose
    code no question asks about, and walking every expression is most of an export's time."""
    try:
        tree = kept_ast(data)
        if tree is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data)
        exporter = _Exporter(data)
        return exporter.export(tree) if code else exporter.statements(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def code_exports_agree(before: bytes, after: bytes) -> bool | None:
    """Whether two versions of a file have the same export (`export_of_bytes`), found by walking only the
    top-level statements whose lines differ, old and new: the other statements add the same to both, and a
    file's export is its statements' parts put together. True is certain; False may be a difference that
    the rest hides (a name assigned in a function that no call hands over: 15% of random one-line edits of
    yolov5 and pytorch/examples), so the whole exports decide then; None where this cannot tell without
    parsing (neither text's tree is kept) or where a node's lines are not its own (a lone carriage return).
    The editor asks it at each keystroke, where the changed buffer's own export is otherwise never needed
    (13 ms of yolov5's `models/common.py`, walked whole)."""
    old_tree, new_tree = kept_ast(before), kept_ast(after)
    if old_tree is None or new_tree is None or _LONE_CR.search(before) or _LONE_CR.search(after):
        return None
    old_texts, new_texts = _statement_lines(before, old_tree), _statement_lines(after, new_tree)
    if old_texts is None or new_texts is None:
        return None
    start = 0
    while start < min(len(old_texts), len(new_texts)) and old_texts[start] == new_texts[start]:
        start += 1
    end = 0
    while end < min(len(old_texts), len(new_texts)) - start and old_texts[-1 - end] == new_texts[-1 - end]:
        end += 1
    old_part, new_part = _Exporter(before), _Exporter(after)
    old_part.walk(old_tree.body[start : len(old_texts) - end])
    new_part.walk(new_tree.body[start : len(new_texts) - end])
    return old_part.found() == new_part.found()


def _statement_lines(data: bytes, tree: ast.Module) -> list[bytes] | None:
    """Each top-level statement's lines (its decorators' too; a line two statements share, in both)."""
    lines = data.splitlines(keepends=True)
    found = []
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", ())
        first = min([statement.lineno, *(decorator.lineno for decorator in decorators)])
        last = statement.end_lineno
        if last is None or not 1 <= first <= last <= len(lines):
            return None
        found.append(b"".join(lines[first - 1 : last]))
    return found


_LONE_CR = re.compile(rb"\r(?!\n)")
_OWN_NAMES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)  # a scope of their own
_FIELDS: dict[type, tuple[str, ...]] = {}  # node type -> the fields that may hold nodes
_NEWLINE = re.compile(rb"\n")


class _Where(NamedTuple):
    """Where a node is: the scope its calls belong to, the class whose body holds it directly (its defs are
    methods), whether it is in a function, whether the names it binds are the scope's own, and the name of
    the method's own object there."""

    scope: str
    owner: str | None
    in_function: bool
    binds: bool
    self_name: str | None = None  # a method's first parameter (`self`, `cls`), in its scope


class _Exporter:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.lines: list[int] | None = None  # where each line starts, once a call's text is needed
        self.export_ = Export([], [], [], [], [], [], [], [])
        self.scopes: dict[str, tuple[list[bool], set[str]]] = {}
        self.handed: dict[str, set[str]] = {}  # scope -> the names its calls are handed (`run(step)`)
        self.local: dict[str, set[str]] = {}  # scope -> the names it assigns or takes as parameters
        self.defs: set[str] = set()  # the name of every def statement
        self.optimize_receivers: list[tuple[str, str]] = []  # (scope, the name before `.optimize`)

    def export(self, tree: ast.Module) -> Export:
        self.walk(tree.body)
        return self.assembled()

    def walk(self, statements: list[ast.stmt]) -> None:
        """Add what these top-level statements tell to what was found: each statement adds to the lists in
        the text's order and to the sets, so a file's export is its statements' parts put together."""
        root = _Where("", None, False, True)
        todo: list[tuple[ast.AST, _Where]] = [(statement, root) for statement in reversed(statements)]
        while todo:
            node, where = todo.pop()
            if isinstance(node, ast.ClassDef):
                self._class(node)
                body = where._replace(owner=node.name, binds=False)  # class attributes: not the scope's names
                todo += [(child, body) for child in reversed(node.body)]  # popped in the text's order
                todo += [
                    (child, where) for child in reversed((*node.decorator_list, *node.bases, *node.keywords))
                ]
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.export_.functions.append(node.name)
                self.defs.add(node.name)
                if where.owner is not None:  # a method, also of a class defined in a function
                    positional = [*node.args.posonlyargs, *node.args.args]
                    own = positional[0].arg if positional else None
                    inner = _Where(f"{where.owner}.{node.name}", None, True, True, own)
                elif not where.in_function:
                    inner = _Where(node.name, None, True, True)
                else:  # a function defined in one belongs to it (what it binds is its own)
                    inner = where._replace(binds=False)
                self._scope(inner.scope)
                todo += [(child, inner) for child in reversed(list(ast.iter_child_nodes(node)))]
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._import(node)
                continue
            kind = type(node)
            if kind is ast.Name:
                if where.binds and type(node.ctx) is ast.Store:
                    self.local.setdefault(where.scope, set()).add(node.id)
                continue
            if kind is ast.Constant:
                continue
            if kind is ast.Call:
                self._call(node, where)
            elif kind is ast.Attribute and node.attr in ("compile", "optimize"):
                self._compiler(node, where.scope)
            elif kind is ast.arg and where.binds:
                self.local.setdefault(where.scope, set()).add(node.arg)
            elif kind in _OWN_NAMES:
                where = where._replace(binds=False)  # their names are their own
            fields = _FIELDS.get(kind)
            if fields is None:
                fields = _FIELDS[kind] = tuple(field for field in kind._fields if field != "ctx")
            for field in reversed(fields):  # `ast.iter_child_nodes` inlined (most of an export's time)
                value = getattr(node, field, None)
                if type(value) is list:
                    todo += [(item, where) for item in reversed(value) if isinstance(item, ast.AST)]
                elif isinstance(value, ast.AST):
                    todo.append((value, where))

    def found(self) -> tuple:
        """What the walks found, before it is put together (`code_exports_agree` compares two)."""
        scopes = {name: (tuple(flag), frozenset(symbols)) for name, (flag, symbols) in self.scopes.items()}
        return (self.export_, scopes, self.handed, self.local, self.defs, self.optimize_receivers)

    def assembled(self) -> Export:
        dynamo = {"_dynamo", *(name for name, dotted in self.export_.bindings if dotted.endswith("._dynamo"))}
        for scope, receiver in self.optimize_receivers:
            if receiver in dynamo:  # `torch._dynamo.optimize`, as `_dynamo.optimize` or under another name
                self._scope(scope)[0][2] = True
        scopes = []
        for name, (flag, symbols) in self.scopes.items():
            local = self.local.get(name, set())
            handed = {
                h
                for h in self.handed.get(name, ())
                if h.rpartition(".")[2] in self.defs and ("." in h or h not in local)
            }
            scopes.append(ScopeExport(name, flag[0], flag[1], sorted(symbols | handed), flag[2]))
        return self.export_._replace(scopes=sorted(scopes))

    def statements(self, tree: ast.Module) -> Export:
        """The export without its code: only statement lists are walked (a fifth of the nodes)."""
        todo: list[ast.AST] = [tree]
        while todo:
            node = todo.pop()
            for field in node._fields:
                value = getattr(node, field, None)
                if not isinstance(value, list):
                    continue
                for item in reversed(value):
                    if isinstance(item, (ast.Import, ast.ImportFrom)):
                        self._import(item)
                    elif isinstance(item, (ast.stmt, ast.excepthandler, ast.match_case)):
                        if isinstance(item, ast.ClassDef):
                            self._class(item)
                        elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self.export_.functions.append(item.name)
                        todo.append(item)
        return self.export_._replace(scopes=None)

    def _class(self, node: ast.ClassDef) -> None:
        self.export_.classes.append(node.name)
        self.export_.bases.append([node.name, *(n for n in map(_written_base, node.bases) if n)])

    def _scope(self, name: str) -> tuple[list[bool], set[str]]:
        found = self.scopes.get(name)
        if found is None:
            found = self.scopes[name] = ([False, False, False], set())
        return found

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        export = self.export_
        if isinstance(node, ast.Import):
            export.imports.extend(alias.name for alias in node.names)
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                export.bindings.append([bound, alias.name if alias.asname else bound])
                export.functions.append(bound)
                export.imported.append(bound)
        else:
            base = "." * node.level + (node.module or "")
            export.imports.append(base)
            for alias in node.names:
                dotted = base + alias.name if base.endswith(".") else f"{base}.{alias.name}"
                export.imports.append(dotted)
                if alias.name != "*":
                    bound = alias.asname or alias.name
                    export.bindings.append([bound, dotted])
                    export.functions.append(bound)
                    export.imported.append(bound)
        export.aliases.extend(
            [a.name.rpartition(".")[2], a.asname] for a in node.names if a.asname is not None
        )

    def _compiler(self, node: ast.Attribute, scope: str) -> None:
        """`x.compile` (`torch.compile`, a model's `.compile()`; not `re.compile`) names a compiler;
        `x.optimize` does where `x` is `torch._dynamo` (known once every import is read)."""
        receiver = node.value
        if node.attr == "compile":
            if not (isinstance(receiver, ast.Name) and receiver.id in ("re", "regex")):
                self._scope(scope)[0][2] = True
        elif isinstance(receiver, ast.Attribute) and receiver.attr == "_dynamo":
            self._scope(scope)[0][2] = True
        elif isinstance(receiver, ast.Name):
            self.optimize_receivers.append((scope, receiver.id))

    def _call(self, node: ast.Call, where: _Where) -> None:
        scope = where.scope
        flag, symbols = self._scope(scope)
        func = node.func
        written = _dotted(func)
        if written is not None and "." in written and written.partition(".")[0] in ("self", where.self_name):
            # `self.m()`: in a method, on its own object (`self.m`, whatever the parameter's name); elsewhere
            # `self` is any variable: a method of an object (`.m`), as `x.m()`
            root, _, rest = written.partition(".")
            own = where.self_name is not None and root == where.self_name and "." not in rest
            written = f"self.{rest}" if own else f".{written.rpartition('.')[2]}"
        if written is not None:
            symbols.add(written)
        elif isinstance(func, ast.Attribute):
            symbols.add(f".{func.attr}")
        if isinstance(func, ast.Attribute) and func.attr in BACKWARD_METHODS:
            flag[0] = True
        elif isinstance(func, ast.Attribute) and func.attr == "step":
            flag[1] = True
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        for argument in arguments:
            handed = _dotted(argument)
            if handed is not None and handed.count(".") <= 1:  # `timer.run(step)`, `run(self.step)`
                self.handed.setdefault(scope, set()).add(handed)
        if not flag[0] and any((_last_name(a) or "").lower() in OPTIMIZER_NAMES for a in arguments):
            flag[0] = b"loss" in self._text_of(node).lower()

    def _text_of(self, node: ast.expr) -> bytes:
        """The lines a node spans (its text and more: enough to look for a word in it). A file with a lone
        carriage return, whose lines CPython may count otherwise, gives all of its bytes."""
        if self.lines is None:
            if _LONE_CR.search(self.data):
                return self.data
            self.lines = [0, *(match.end() for match in _NEWLINE.finditer(self.data))]
        start = self.lines[node.lineno - 1] if node.lineno - 1 < len(self.lines) else 0
        end_line = node.end_lineno or len(self.lines)
        end = self.lines[end_line] if end_line < len(self.lines) else len(self.data)
        return self.data[start:end]


def may_compile(export: Export | None) -> bool:
    """Whether a file may hold a compile site (what `ModelAnalysis.compile_sites` finds: `torch.compile` and
    `torch._dynamo.optimize` called, decorating or referred to, also under a name an import or an
    assignment of the file gives them; a `.compile()` method): its code names a compiler's attribute, or an
    import binds a compiler's name. True for a file without an export."""
    if export is None or export.scopes is None:
        return True
    if any(dotted.endswith((".compile", "_dynamo.optimize")) for _, dotted in export.bindings):
        return True
    return any(scope.compiles for scope in export.scopes)


def _written_base(node: ast.expr) -> str | None:
    """A base as written (`nn.Module`), or the name it ends with (`Generic[T]`: none, `mixin()`: none)."""
    return _dotted(node) or _last_name(node)


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attributes on a name, `a` for a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _last_name(node: ast.expr) -> str | None:
    """The name an expression's code ends with, where it ends with one: `a.b` ends with `b`, `x + y` and
    `-y` with `y`'s (the operand written last), `f(x)` and `"s"` with none."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.BinOp):
            node = node.right
        elif isinstance(node, ast.BoolOp):
            node = node.values[-1]
        elif isinstance(node, ast.Compare):
            node = node.comparators[-1]
        elif isinstance(node, ast.IfExp):
            node = node.orelse
        elif isinstance(node, ast.UnaryOp):
            node = node.operand
        elif isinstance(node, (ast.Starred, ast.Await, ast.NamedExpr)):
            node = node.value
        elif isinstance(node, ast.Lambda):
            node = node.body
        elif isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
            node = node.value
        else:
            return None
