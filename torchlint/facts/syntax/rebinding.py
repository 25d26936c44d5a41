"""Whether a fix's change of a name can be observed beyond what the fix means to change.

A fix that writes `name = ...`, adds an import of `name`, or removes the statement that binds `name` changes
what every reader of that binding sees: in every scope that resolves `name` there, and in every file that
imports it. Each question here answers why the change would reach further than intended ("" when it would
not), so that a rule withholds its fix and can say why:

- `rebinding_clash`: `name = ...` written in a function where `name` is bound outside it makes `name` local to
  the function (Python decides that from the whole body), so its earlier reads raise UnboundLocalError.
- `insertion_clash`: a new import or variable must not take a name that something else binds or may bind:
  the code's own bindings, a star import (`from utils import *`: the project module is read, its `__all__`
  honoured; one that cannot be read may bind any name), or a read of the name that nothing in the file
  binds (a builtin, a global injected from elsewhere).
- `existing_binding_clash`: a binding a fix reuses (`torch` after `import torch`) that a later star import
  may bind to something else.
- `removal_observers`: a binding a fix removes that other code may still read: other project files that
  import the module, `__all__`, `globals()` / `vars()` / `locals()`, a class attribute.

Unknown is a clash: a fix that cannot show its change stays local is withheld.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol

from torchlint._lazy import cst
from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind, dotted

# Builtins that read or write a namespace by name: a binding may be observed (or made) through them.
_NAMESPACE_BUILTINS = ("globals", "vars", "locals", "exec", "eval")


class Module(Protocol):
    """What these questions need of a module (`SourceModule` provides it)."""

    path: str
    text: str
    module: cst.Module
    file: Path | None

    @property
    def project(self): ...  # a ProjectIndex, or None
    @property
    def module_scope(self) -> Scope: ...
    @property
    def references(self) -> list[Reference]: ...
    @property
    def star_imports(self) -> list[cst.ImportFrom]: ...
    def analysis(self, kind: type) -> NameChanges: ...
    def top_level_statement(self, node: cst.CSTNode) -> cst.CSTNode: ...


@dataclass(frozen=True)
class StarBinding:
    """A star import that binds (or may bind) a name: what it binds it to (qualified names of imports; None
    for any other binding), or None when that cannot be known, and why."""

    statement: str  # `from utils import *`
    node: cst.ImportFrom
    meanings: frozenset[str | None] | None
    why: str = ""

    def clash(self, name: str, meaning: str | None) -> str:
        """Why this star import's binding of `name` clashes with binding it to `meaning` ("": it does not)."""
        if self.meanings is None:
            return f"`{self.statement}` may bind `{name}`" + (f" ({self.why})" if self.why else "")
        if meaning is None or self.meanings != {meaning}:
            return f"`{self.statement}` binds `{name}`"
        return ""


class NameChanges:
    """The questions above for one module (an analysis: made once per module, `module.analysis(...)`)."""

    def __init__(self, source: Module) -> None:
        self.source = source
        self._asking: set[str] = set()  # names asked of this module's star imports now (a cycle of them)

    # -- rebinding -------------------------------------------------------------------------------------

    def rebinding_clash(self, name: str, scope: Scope) -> str:
        """Why `name = ...` written in `scope` would not simply rebind the `name` the code there reads."""
        if name in scope.globals:
            return ""  # `global name`: the assignment rebinds the module's name, as intended
        deciding = scope.deciding_scope(name)
        if deciding is scope:
            return ""
        if deciding is None:
            return f"nothing in this file binds `{name}`"
        where = "at module level" if deciding.kind is ScopeKind.MODULE else f"in `{_scope_name(deciding)}`"
        inside = _scope_name(scope)
        if scope.kind is ScopeKind.CLASS:
            return f"`{name}` is bound {where}: assigning it in `{inside}`'s body binds a class attribute"
        local = f"a local variable of `{inside}`"
        return f"`{name}` is bound {where}: assigning it inside `{inside}` would make it {local}"

    # -- inserting a name ------------------------------------------------------------------------------

    def insertion_clash(
        self, name: str, scope: Scope, meaning: str | None = None, local: bool = False
    ) -> str:
        """Why a new binding of `name` (to the qualified name `meaning`, for an import) at module level or in
        `scope` would change what other code means by `name`. `local`: the binding goes into the function
        `scope` itself, whose every read of `name` then reads it (earlier ones raise UnboundLocalError)."""
        if scope.lookup(name) or name in self.source.module_scope.bindings:
            return f"the name `{name}` means something else here"
        for star in self.star_bindings(name):
            clash = star.clash(name, meaning)
            if clash:
                return clash
        if meaning is None and name in self._unbound_reads:
            return f"`{name}` is read where nothing in this file binds it"
        if local and any(ref.name == name and _inside(ref.scope, scope) for ref in self._unbound_refs):
            return f"`{name}` is read in `{_scope_name(scope)}`, where a new `{name}` would be local"
        return ""

    def existing_binding_clash(self, binding: Binding) -> str:
        """Why reusing `binding` (an import a fix names) could mean something else at run time: a star import
        after it at module level may bind its name to something else."""
        if binding.scope.kind is not ScopeKind.MODULE or binding.node is None:
            return ""  # a function's own binding: module-level star imports have run before it
        stars = self.star_bindings(binding.name)
        if not stars:
            return ""
        body = list(self.source.module.body)
        at = _index(body, self.source.top_level_statement(binding.node))
        for star in stars:
            if at is not None and (_index(body, self.source.top_level_statement(star.node)) or 0) < at:
                continue  # the star import runs first; the binding the fix reuses wins
            clash = star.clash(binding.name, binding.qualname)
            if clash:
                return clash
        return ""

    # -- removing a name -------------------------------------------------------------------------------

    def removal_observers(self, name: str, scope: Scope) -> str:
        """Who may still read `name` once a fix removes its binding in `scope`, besides the references this
        file's analysis sees ("": nobody)."""
        source = self.source
        if scope.kind is ScopeKind.CLASS:
            return f"`{name}` is an attribute of `{_scope_name(scope)}`"
        dynamic = [ref for ref in self._namespace_reads if _within(ref.scope, scope)]
        if scope.kind is not ScopeKind.MODULE:
            return f"`{_scope_name(scope)}` reads its names through `{dynamic[0].name}()`" if dynamic else ""
        listed = self._dunder_all
        if listed is None:
            return "the module's `__all__` cannot be read"
        if listed is not _ABSENT and name in listed:
            return f"`__all__` exports `{name}`"
        if dynamic:
            return f"the module reads its names through `{dynamic[0].name}()`"
        project, file = source.project, source.file
        if project is None or file is None:
            return ""
        for importer in project.importers_of(file):
            if project.may_name(importer, (name,), file):
                return f"{_relative(importer, file)} may import `{name}`"
        return ""

    # -- star imports ----------------------------------------------------------------------------------

    def star_bindings(self, name: str) -> list[StarBinding]:
        """The module's star imports that bind or may bind `name`."""
        found = []
        for node in self.source.star_imports:
            statement = _star_statement(node)
            if name in self._asking:
                found.append(StarBinding(statement, node, None, "star imports that import each other"))
                continue
            self._asking.add(name)
            try:
                meanings, why = self._star_meanings(node, name)
            finally:
                self._asking.discard(name)
            if meanings is None or meanings:
                found.append(StarBinding(statement, node, meanings, why))
        return found

    def _star_meanings(self, node: cst.ImportFrom, name: str) -> tuple[frozenset[str | None] | None, str]:
        project, file = self.source.project, self.source.file
        module = "." * len(node.relative) + (dotted(node.module) or "" if node.module is not None else "")
        path = project.module_file(file, module) if project is not None and file is not None else None
        other = project.facts_for(path, file) if path is not None else None
        if other is None:
            return None, "its module cannot be read"
        return other.analysis(NameChanges).exports(name)

    def exports(self, name: str) -> tuple[frozenset[str | None] | None, str]:
        """What `from <this module> import *` binds `name` to (empty: nothing; None: unknown, and why)."""
        source = self.source
        listed = self._dunder_all
        if listed is None:
            return None, "its `__all__` cannot be read"
        if listed is _ABSENT and name.startswith("_"):
            return frozenset(), ""
        if listed is not _ABSENT and name not in listed:
            return frozenset(), ""
        if self._namespace_reads:
            return None, f"it uses `{self._namespace_reads[0].name}()`"
        bindings = source.module_scope.bindings.get(name, [])
        meanings: set[str | None] = {b.qualname if b.kind is BindingKind.IMPORT else None for b in bindings}
        for star in self.star_bindings(name):
            if star.meanings is None:
                return None, f"through its `{star.statement}`"
            meanings |= star.meanings
        project, file = source.project, source.file
        if file is not None and file.name == "__init__.py" and project is not None:
            if project.module_file(file, f".{name}") is not None:
                meanings.add(None)  # a submodule of the package, bound once imported
        if listed is not _ABSENT and not meanings:
            meanings.add(None)  # listed but bound nowhere here: a submodule that `*` imports
        return frozenset(meanings), ""

    # -- what the module reads and lists ---------------------------------------------------------------

    @cached_property
    def _unbound_refs(self) -> list[Reference]:
        """Reads of names that nothing in the module binds (builtins, star imports, injected globals)."""
        return [ref for ref in self.source.references if not ref.bindings]

    @cached_property
    def _unbound_reads(self) -> frozenset[str]:
        return frozenset(ref.name for ref in self._unbound_refs)

    @cached_property
    def _namespace_reads(self) -> list[Reference]:
        """Uses of `globals()`, `vars()`, `locals()`, `exec`, `eval` (unshadowed) and `sys.modules`; not
        `vars(args)`, which reads an object's attributes."""
        found = []
        for ref in self.source.references:
            if ref.name in _NAMESPACE_BUILTINS and not ref.bindings and not ref.attrs:
                if ref.call is None or ref.name in ("exec", "eval") or not ref.call.args:
                    found.append(ref)
            elif ref.qualname is not None and ref.qualname.startswith("sys.modules"):
                found.append(ref)
        return found

    @cached_property
    def _dunder_all(self) -> frozenset[str] | None:
        """The names `__all__` lists (`_ABSENT`: the module has none; None: it cannot be read: built from
        something other than string literals, or extended with something else)."""
        source = self.source
        bindings = source.module_scope.bindings.get("__all__", [])
        uses = [ref for ref in source.references if ref.name == "__all__" and ref.attrs]
        if not bindings and not uses:
            return _ABSENT
        names: set[str] = set()
        for binding in bindings:
            node = binding.node
            value = None
            if isinstance(node, (cst.Assign, cst.AnnAssign)):
                value = node.value
            elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
                value = node.value
            listed = _strings(value)
            if listed is None:
                return None
            names |= listed
        for ref in uses:
            method = ref.attrs[0]
            if method in ("remove", "pop", "sort", "index", "count", "copy", "clear", "reverse"):
                continue  # takes names away or reads: what `*` binds is a subset of what is listed
            if ref.call is None or method not in ("append", "insert", "extend") or not ref.call.args:
                return None
            last = ref.call.args[-1].value
            listed = _strings(last) if method == "extend" else _strings(cst.List([cst.Element(last)]))
            if listed is None:
                return None
            names |= listed
        return frozenset(names)


_ABSENT: frozenset[str] = frozenset({"\0absent"})  # a module without `__all__` (compared by identity)


def _strings(value: cst.BaseExpression | None) -> set[str] | None:
    """The strings of a literal list, tuple or set of strings (also `a + b` of such); None otherwise."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        left, right = _strings(value.left), _strings(value.right)
        return left | right if left is not None and right is not None else None
    if not isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        return None
    found = set()
    for element in value.elements:
        item = element.value
        if not isinstance(element, cst.Element) or not isinstance(item, cst.SimpleString):
            return None
        text = item.evaluated_value
        if not isinstance(text, str):
            return None
        found.add(text)
    return found


def _star_statement(node: cst.ImportFrom) -> str:
    module = dotted(node.module) if node.module is not None else ""
    return f"from {'.' * len(node.relative)}{module} import *"


def _scope_name(scope: Scope) -> str:
    node = scope.node
    name = getattr(node, "name", None)
    return name.value if isinstance(name, cst.Name) else "a lambda"


def _within(inner: Scope | None, outer: Scope) -> bool:
    """`inner` is `outer`, or a comprehension in it (comprehensions see the enclosing function's locals)."""
    while inner is not None:
        if inner is outer:
            return True
        if inner.kind is not ScopeKind.COMPREHENSION and outer.kind is not ScopeKind.MODULE:
            return False
        inner = inner.parent
    return False


def _inside(inner: Scope | None, outer: Scope) -> bool:
    """`inner` is `outer` or a scope nested in it."""
    while inner is not None:
        if inner is outer:
            return True
        inner = inner.parent
    return False


def _index(body: list[cst.CSTNode], statement: cst.CSTNode) -> int | None:
    return next((i for i, s in enumerate(body) if s is statement), None)


def _relative(path: Path, seen_from: Path) -> str:
    try:
        return path.relative_to(seen_from.parent).as_posix()
    except ValueError:
        return path.as_posix()
