"""Whether a module's code (or one of its calls) can run a backward pass or a step, followed through the
exports of the files it calls into, without building any module's facts.

`ModelAnalysis.trains` (and with it every model a module trains) needs a training loop, here or in a
function the module runs, or training handed to a trainer object; a training loop needs a backward pass
among the calls it runs. Questions like "which modules train this class?" ask it of every importer of a
file, up to three levels: most answer no, and building their facts to learn it (a LibCST parse and the
analyses it raises) was most of a one-file check. Here the answer is read from the exports
(`torchlint.facts.torch.exports`): a scope's calls are followed to the scopes they may run, as the analysis
resolves them, but wider — a name through the file's imports, re-exports and star imports; `x.m()` to the
methods of that name of the classes the file constructs and their project bases; `self.m()` in a method to
its class's, its bases' and its subclasses' in the files that import it. A file without an export (CPython
does not parse it) may run anything. So "no" is certain, and "yes" means "build the facts and ask".

What an answer read is recorded as a dependency of the file whose code read it (`project.export_of(path,
reader)`): the file that called, the module a re-export leads through. A requester depends on the file it
asked about, and through it, transitively (`Project.dependencies`), on everything that answer read: also
when the answer was worked out earlier in the run for another requester.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.facts.torch.exports import Export, ExportIndex

Node = tuple[Path, str]  # a file and the name of one of its scopes
MAX_REEXPORTS = 8  # `from .a import f` in a chain of packages, at most (deeper: unknown)


def may_run_backward(project: ExportIndex, path: Path, requester: Path) -> bool:
    """Whether a scope of the module at `path` may run a backward pass, itself or through what it calls.
    `requester`'s answers depend on every export read from now on."""
    if not project.asks_exports:
        return True
    graph = _Graph(project, steps=False)
    table = graph.table(path, requester)
    if table is None:
        return True
    return any(graph.reaches((graph.real(path), name)) for name in table.scopes)


def call_may_run(project: ExportIndex, path: Path, symbol: str, requester: Path, *, steps: bool) -> bool:
    """Whether a call of file `path` naming `symbol` (as exports write it: `f`, `a.b.f`, `.m`) may run a
    backward pass (or, with `steps`, a step) in what it calls."""
    if not project.asks_exports:
        return True
    graph = _Graph(project, steps)
    known: dict[tuple[Path, str, bool], bool] = project.memo("call runs")
    key = (graph.real(path), symbol, steps)
    table = graph.table(path, requester)
    if key not in known:
        nodes = graph.resolve(path, table, symbol) if table is not None else None
        known[key] = nodes is None or any(graph.reaches(node) for node in nodes)
    return known[key]


class _Graph:
    """The scopes of the project's exports and the calls between them, read lazily; what is known not to
    reach a backward pass is kept for the run (`project.memo`)."""

    def __init__(self, project: ExportIndex, steps: bool) -> None:
        self.project = project
        self.steps = steps  # a step counts as much as a backward pass
        self.known: dict[Node, bool] = project.memo(
            "backward or step: reaches" if steps else "backward: reaches"
        )
        self.methods: dict[tuple[Path, bool], frozenset[Path] | None] = project.memo("backward: method files")
        self.paths: dict[Path, Path] = project.memo("backward: real paths")
        self.tables: dict[Path, _Table | None] = project.memo("backward: tables")
        self.found_methods: dict[tuple[Path, bool], dict[str, list[Node]] | None] = project.memo(
            "backward: methods"
        )
        self.read: dict[tuple[Path, Path], bool] = project.memo("backward: read")  # (reader, file) recorded

    def real(self, path: Path) -> Path:
        found = self.paths.get(path)
        if found is None:
            found = self.paths[path] = path.resolve()
        return found

    def table(self, path: Path, reader: Path) -> _Table | None:
        """`path`'s export, indexed; `reader`'s answers depend on it from now on."""
        real = self.real(path)
        if (reader, real) not in self.read:
            self.read[reader, real] = True
            export = self.project.export_of(real, reader)
            if real not in self.tables:
                self.tables[real] = _Table(export) if export is not None else None
        return self.tables[real]

    def reaches(self, start: Node) -> bool:
        known = self.known.get(start)
        if known is not None:
            return known
        seen = {start}
        todo = [start]
        while todo:
            node = todo.pop()
            following = self._following(node)
            if following is None or any(self.known.get(other) for other in following):
                self.known[start] = True
                return True
            for other in following:
                if other not in seen and other not in self.known:
                    seen.add(other)
                    todo.append(other)
        self.known.update(dict.fromkeys(seen, False))  # every scope they run was followed: none runs one
        return False

    def _following(self, node: Node) -> list[Node] | None:
        """The scopes a scope's calls may run; None where one may run a backward pass, or anything."""
        path, name = node
        table = self.tables.get(path)  # read by whoever reached the node
        scope = table.scopes.get(name) if table is not None else None
        if table is None or scope is None or scope.backward or (self.steps and scope.steps):
            return None
        found: list[Node] = []
        for symbol in scope.symbols:
            nodes = self.resolve(path, table, symbol)
            if nodes is None:
                return None
            found += nodes
        return found

    def resolve(self, path: Path, table: _Table, symbol: str) -> list[Node] | None:
        """The scopes a call naming `symbol` in file `path` may run (None: anything)."""
        if symbol.startswith("."):
            return self._methods(path, symbol[1:], on_self=False)
        root, _, rest = symbol.partition(".")
        if rest:
            if root == "self" and "." not in rest and root not in table.bindings:  # a method's own object
                return self._methods(path, rest, on_self=True)
            if root in table.bindings:
                found: list[Node] = []
                for dotted in table.bindings[root]:
                    nodes = self._resolve_dotted(path, f"{dotted}.{rest}", 0)
                    if nodes is None:
                        return None
                    found += nodes
                return found
            return self._methods(path, rest.rpartition(".")[2], on_self=False)  # `x.m()`, `Class.m()`
        return self._named(path, table, symbol, 0)

    def _named(self, path: Path, table: _Table, name: str, depth: int) -> list[Node] | None:
        """What a name of file `path` may run when called: its function, its class's methods (and its
        bases'), or what an import binds it to."""
        found: list[Node] = []
        if name in table.scopes and "." not in name:
            found.append((self.real(path), name))
        if name in table.classes:
            classes = self._class(path, table, name, depth)
            if classes is None:
                return None
            found += classes
        for dotted in table.bindings.get(name, ()):
            nodes = self._resolve_dotted(path, dotted, depth + 1)
            if nodes is None:
                return None
            found += nodes
        return found

    def _class(self, path: Path, table: _Table, name: str, depth: int) -> list[Node] | None:
        """Every method of class `name` of file `path`, and of its project bases."""
        if depth > MAX_REEXPORTS:
            return None
        real = self.real(path)
        found = [(real, scope) for scope in table.methods_of.get(name, ())]
        for base in table.bases.get(name, ()):
            if base == name:
                continue
            if "." in base:
                nodes = self.resolve(path, table, base)
            else:
                nodes = self._named(path, table, base, depth + 1)
            if nodes is None:
                return None
            found += nodes
        return found

    def _resolve_dotted(self, path: Path, dotted: str, depth: int) -> list[Node] | None:
        """`models.yolo.Model` as file `path` imports it: the scopes of that module's function or class,
        following re-exports (`from .model import Model` in a package) and star imports."""
        if depth > MAX_REEXPORTS:
            return None
        body = dotted.lstrip(".")
        level = dotted[: len(dotted) - len(body)]
        module, _, name = body.rpartition(".")
        if not name:
            return []
        module = level + module
        if not module:
            return []  # `import torch` ... `torch(...)`: a module is not called
        target = self.project.module_file(path, module)
        if target is None:
            return []  # a library's: not this project's code
        table = self.table(target, self.real(path))
        if table is None:
            return None
        found = self._named(target, table, name, depth)
        if found is None:
            return None
        if not found:
            for imported in table.star_imports:  # `from .layers import *`
                nodes = self._resolve_dotted(target, f"{imported[:-2]}.{name}", depth + 1)
                if nodes is None:
                    return None
                found += nodes
        return found

    def _methods(self, path: Path, method: str, on_self: bool) -> list[Node] | None:
        """Every method named `method` of the classes whose objects code of file `path` may hold (`self`'s,
        in a method: `on_self`)."""
        real = self.real(path)
        key = (real, on_self)
        if key not in self.found_methods:
            files = self._method_files(*key)
            index: dict[str, list[Node]] | None = {} if files is not None else None
            for file in sorted(files or ()):
                table = self.table(file, real)
                if table is None or index is None:
                    index = None
                    break
                for name, scopes in table.methods_named.items():
                    index.setdefault(name, []).extend((file, scope) for scope in scopes)
            self.found_methods[key] = index
        index = self.found_methods[key]
        return index.get(method, []) if index is not None else None

    def _method_files(self, real: Path, on_self: bool) -> frozenset[Path] | None:
        """The files whose classes' methods a call of file `real` may run, as the analysis finds them
        (`TrainingAnalysis.targets`): for `x.m()`, the class of `x` is one the file constructs (`x = Net()`,
        `self.x = models.Net()`, or a caller here passing one: its own classes, or another module's,
        followed through re-exports); for `self.m()` in a method, its own class, and the classes deriving
        from it in the files that import it (an override). Either way the project bases they inherit
        methods from."""
        key = (real, on_self)
        if key not in self.methods:
            self.methods[key] = self._find_method_files(real, on_self)
        return self.methods[key]

    def _find_method_files(self, real: Path, on_self: bool) -> frozenset[Path] | None:
        table = self.tables.get(real)
        if table is None:
            return None
        files = {real}
        if on_self:
            todo = [real]
            while todo:  # the subclasses, and theirs
                for added in set(self.project.subclassed_in(todo.pop(), real)) - files:
                    files.add(added)
                    todo.append(added)
        else:  # the classes this file's calls construct (`Net()`, `models.Net()`): where it gets objects from
            for symbol in table.symbols:
                root, _, rest = symbol.partition(".")
                for dotted in table.bindings.get(root, ()):
                    homes = self.project.homes(real, f"{dotted}.{rest}" if rest else dotted, "class")
                    if homes is None:
                        return None
                    files |= homes
        todo = list(files)
        while todo:  # the bases, and theirs
            file = todo.pop()
            other = self.table(file, real)
            if other is None:
                return None
            for bases in other.bases.values():
                for base in bases:
                    homes = self._base_files(file, other, base)
                    if homes is None:
                        return None
                    for added in homes - files:
                        files.add(added)
                        todo.append(added)
        return frozenset(files)

    def _base_files(self, path: Path, table: _Table, base: str) -> set[Path] | None:
        """The files a base written in file `path` may be a class of (its own file for a class it defines;
        None: unknown)."""
        root, _, rest = base.partition(".")
        if base in table.classes:
            return {self.real(path)}
        found: set[Path] = set()
        for dotted in table.bindings.get(root, ()):
            homes = self.project.homes(path, f"{dotted}.{rest}" if rest else dotted, "class")
            if homes is None:
                return None
            found |= homes
        return found


class _Table:
    """One export, indexed for the questions above."""

    def __init__(self, export: Export) -> None:
        self.scopes = {scope.name: scope for scope in export.scopes}
        self.classes = set(export.classes)
        self.bindings: dict[str, list[str]] = {}
        for name, dotted in export.bindings:
            self.bindings.setdefault(name, []).append(dotted)
        self.bases: dict[str, list[str]] = {}
        for cls, *bases in export.bases:
            self.bases.setdefault(cls, []).extend(bases)
        self.methods_of: dict[str, list[str]] = {}  # class -> the names of its method scopes
        self.methods_named: dict[str, list[str]] = {}  # method -> the names of the scopes of that method
        for name in self.scopes:
            cls, dot, method = name.rpartition(".")
            if dot:
                self.methods_of.setdefault(cls, []).append(name)
                self.methods_named.setdefault(method, []).append(name)
        self.star_imports = [name for name in export.imports if name.endswith(".*")]
        self.symbols = {symbol for scope in export.scopes or () for symbol in scope.symbols}
