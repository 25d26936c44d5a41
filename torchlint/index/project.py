"""The cross-file index of one run: which file a module name means, every file's export, and the facts of
other project files.

Training code is spread over files (`train_one_epoch` in engine.py, loaders built in data.py), so the facts
of the file being checked sometimes need another file's. Imports resolve like Python run from the script's
folder: relative ones by package, absolute ones from the importing file's folder and then its ancestors up to
the project root (the nearest folder with a pyproject.toml or .git). What does not resolve is unknown, never
evidence. Other files' facts are built lazily, once per run, with the same analysis as checked files; the
reverse question (who imports this file?) reads every file's bytes and parses with `ast` only the files that
could write such an import (each once per run, and remembered between runs by content hash when the run
has a cache: `ImportSummaries`). That `ast` pass is the file's export (torchlint.facts.torch.exports: its
statements; its code's scopes the first time a question follows a call into it). Building a file's facts
costs a LibCST parse and whatever its analysis asks in turn, so questions asked of many files ask their
exports (or `may_name`, a test on their text) first: one file of a big project then costs that file and the
files whose code matters, not every file that imports it or that it calls into.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Collection, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from torchlint._lazy import cst
from torchlint.facts.torch.exports import Export, code_exports_agree, export_of_bytes
from torchlint.memo import ByContent
from torchlint.pyast import may_declare_coding
from torchlint.workspace.budget import over_budget
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.roots import too_wide
from torchlint.workspace.settings import DEFAULT_EXCLUDES
from torchlint.workspace.source import SourceError, SourceFile

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import ClassRecord, Collected, FunctionRecord
    from torchlint.facts.syntax.module import SourceModule

ALL_FILES = Path("<every project file's imports>")
# What an answer read of every project file, recorded once (an answer a checked module asks of the whole
# project would otherwise record a dependency on each file, for each module: 10 MB of timm with `-j 1`).
ALL_TEXTS = Path("<every project file's text>")
ALL_EXPORTS = Path("<every project file's export>")
_EVERY = frozenset({ALL_FILES, ALL_TEXTS, ALL_EXPORTS})
MAX_REEXPORTS = 8  # a name re-exported through more modules than this may lead anywhere
SAVE_EVERY = 64  # new exports between two saves of the store during a run (`flush`)


_UNKNOWN = object()  # not asked yet (None is an answer: no file of the project)


class ImportSummaries(Protocol):
    """What earlier runs found in each file, by the file's bytes (torchlint.cache.imports keeps them; the
    index itself never writes a cache)."""

    def get(self, data: bytes) -> Export | None: ...

    def put(self, data: bytes, summary: Export) -> None: ...

    def save(self, present: Iterable[bytes]) -> None:
        """Keep what earlier runs and this one found, for the files whose bytes are `present` now."""

    def handover(self) -> dict[str, Export]:
        """What was found since the last handover (a worker process's, for its parent), by content key."""

    def receive(self, found: dict[str, Export]) -> None:
        """Another process's `handover`, kept with the next `save`."""


class Project:
    def __init__(
        self,
        root: Path,
        fs: FileSystem | None = None,
        summaries: ImportSummaries | None = None,
        parse: Callable[[str], cst.Module] | None = None,
        collect: Callable[[str, cst.Module], Collected] | None = None,
    ) -> None:
        # Every file the index reads, lists or looks for is asked of `fs` (the run's; else the real one).
        self.fs = fs if fs is not None else FileSystem()
        self.summaries = summaries  # None: every scan parses every file
        # How other files are parsed: the Language Server's keeps the modules of unchanged texts between
        # checks (each keystroke's check is a new run: without it, every module the buffer's questions
        # reach was parsed again, most of a check of timm's train.py).
        self.parse = parse  # None: `cst.parse_module` (named only when a file is built: importing LibCST
        # costs a run that parses nothing a quarter of a second)
        # `collect`: the syntax records of a text's module as `parse` gave it, kept with it (the Language
        # Server's); None: collected afresh for each file built
        self.collect = collect
        self._parsed: set[int] = set()  # ids of the modules handed out in this run
        self.root = root.resolve()
        self._facts: dict[Path, SourceModule | None] = {}
        self._checked: set[Path] = set()  # files whose facts are the checked text's (`register`)
        self._asked: set[Path] = set()  # files whose facts a question asked for (`facts_for`)
        # A checked file's facts no question asked for, let go after its check (`release`): where they
        # were checked, their text, and the facts while anything still holds them.
        self._released: dict[Path, tuple[str, str, Path | None, weakref.ref]] = {}
        self._importers: dict[Path, list[Path]] = {}  # file -> the files whose imports resolve to it
        self._bytes: dict[Path, bytes] | None = None  # every project file's bytes, once asked
        self._scanned: dict[Path, Export | None] = {}  # file -> its export's statements (None: not Python)
        self._resolved: dict[Path, set[Path]] = {}  # file -> the project files its imports resolve to
        self._aliases: dict[str, set[str]] = {}  # name -> what an `import ... as` calls it
        self._unsaved = False  # parsed and not yet handed to `summaries`
        self._new_exports = 0  # exports computed since the last save
        self._modules: dict[tuple[Path, str], Path | None] = {}
        self._modules_of: dict[tuple[Path, str], Path | None] = {}  # by importer: no `.parent` to make
        self._files: list[Path] | None = None
        self._real_paths: dict[Path, Path] = {}
        self._words: ImportWords | None = None  # what each file's import lines name, once asked
        self._depends: dict[Path, set[Path]] = {}  # file -> the files its analysis consulted
        # file -> those of them whose facts or text it read (not only their exports): `carry_over`
        self._reads_code: dict[Path, set[Path]] = {}
        self._subclassed: dict[Path, list[Path]] = {}  # file -> `subclassed_in(file)`
        self._memos: dict[str, dict] = {}
        self.asks_exports = True  # False: a run that builds every file's facts (`Linter.ask_exports`)
        self._exports: dict[Path, Export | None] = {}  # file -> `export_of(file)`
        self._homes_of: dict[tuple[Path, str, str], set[Path] | None] = {}  # `homes`, per importer

    def _real(self, path: Path) -> Path:
        """`path.resolve()`, once per path and run (questions name the same files thousands of times)."""
        found = self._real_paths.get(path)
        if found is None:
            found = self._real_paths[path] = path.resolve()
        return found

    def dependencies(self, file: Path) -> set[Path]:
        """Every file the analysis of `file` consulted, transitively (for the result cache's key)."""
        seen = self._consulted(file)
        if seen & _EVERY:
            seen -= _EVERY
            seen.update(self._python_files())
        seen.discard(self._real(file))
        return seen

    def asked_who_imports(self, file: Path) -> bool:
        """Whether the analysis of `file` (transitively) depends on the set of project files, not only on
        their contents: a new file that imports a factory changes the factory's findings."""
        return ALL_FILES in self._consulted(file)

    def python_files(self) -> list[Path]:
        """Every Python file of the project (what "who imports this file?" was answered from)."""
        return list(self._python_files())

    def _consulted(self, file: Path, edges: dict[Path, set[Path]] | None = None) -> set[Path]:
        """The files `file`'s analysis consulted, transitively (along `edges`: by default every one)."""
        edges = self._depends if edges is None else edges
        seen: set[Path] = set()
        todo = [self._real(file)]
        while todo:
            for dependency in edges.get(todo.pop(), ()):
                if dependency not in seen:
                    seen.add(dependency)
                    if dependency not in _EVERY:
                        todo.append(dependency)
        return seen

    # -- module names to files --------------------------------------------------------------------------

    def module_file(self, importer: Path, dotted: str) -> Path | None:
        known = self._modules_of.get((importer, dotted), _UNKNOWN)  # asked thousands of times in a check
        if known is _UNKNOWN:
            key = (importer.parent, dotted)  # what the answer depends on: shared by a folder's files
            if key not in self._modules:
                self._modules[key] = self._module_file(importer, dotted)
            known = self._modules_of[importer, dotted] = self._modules[key]
        return known

    def _module_file(self, importer: Path, dotted: str) -> Path | None:
        level = len(dotted) - len(dotted.lstrip("."))
        parts = [p for p in dotted.lstrip(".").split(".") if p]
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            return _find_module(base, parts, self.fs)
        folder = importer.parent
        while True:
            found = _find_module(folder, parts, self.fs)
            if found is not None:
                return found
            if folder == self.root or folder.parent == folder or self.root not in folder.parents:
                return None
            folder = folder.parent

    def resolve_function(self, importer: Path, qualname: str) -> tuple[SourceModule, FunctionRecord] | None:
        """`engine.train_one_epoch` (as imported by `importer`) -> that module-level function's facts."""
        module, _, name = qualname.rpartition(".")
        if not module or not name or module.endswith("."):
            return None
        path = self.module_file(importer, module)
        facts = self.facts_binding(path, name, "function", importer) if path is not None else None
        return facts.exported_function(name) if facts is not None else None  # also a re-exported one

    def homes(self, importer: Path, qualname: str, kind: Literal["class", "function"]) -> set[Path] | None:
        """The files whose module-level `kind` `resolve_class` / `resolve_function(importer, qualname)` may
        answer, judged from the exports of the modules the name leads through (re-exports followed) without
        building them; None where one of them is unknown. `importer` depends on those exports. A class is
        found from the statements alone (what the import scan reads of every file anyway), so it is
        answered also in a run that asks no export; a function's re-exports need its code's scopes."""
        if not self.asks_exports and kind == "function":
            return None
        key = (self._real(importer), qualname, kind)
        if key not in self._homes_of:
            found: set[Path] = set()
            self._homes_of[key] = found if self._homes(importer, qualname, kind, found, 0) else None
        known = self._homes_of[key]
        return set(known) if known is not None else None

    def _homes(self, importer: Path, qualname: str, kind: str, found: set[Path], depth: int) -> bool:
        """Add to `found` the files `qualname` may lead to; False where that is unknown."""
        module, _, name = qualname.rpartition(".")
        if not module or not name or module.endswith("."):
            return True
        path = self.module_file(importer, module)
        if path is None:
            return True
        path = self._real(path)
        self._consults(importer, path)
        export = self.export_of(path) if kind == "function" else self._header_of(path)  # classes: statements
        if export is None or depth > MAX_REEXPORTS:
            return False
        if kind == "class":
            if name in export.classes:
                found.add(path)
            elif name not in export.imported:
                return True  # binds no such class: the answer is none (`facts_binding`)
        else:
            if any(scope.name == name for scope in export.scopes):
                found.add(path)
                return True  # its own function
            if name not in export.functions:
                return True
        dotted = (dotted for bound, dotted in export.bindings if bound == name)
        return all(self._homes(path, target, kind, found, depth + 1) for target in dotted)

    def resolve_class(self, importer: Path, qualname: str) -> tuple[SourceModule, ClassRecord] | None:
        """`models.Transformer` (as imported by `importer`) -> that module-level class's facts, also where
        the module only re-exports it (a package's `__init__.py`: `from .model import Transformer`)."""
        module, _, name = qualname.rpartition(".")
        if not module or not name or module.endswith("."):
            return None
        path = self.module_file(importer, module)
        facts = self.facts_binding(path, name, "class", importer) if path is not None else None
        return facts.exported_class(name) if facts is not None else None

    # -- other files' facts -----------------------------------------------------------------------------

    def register(self, path: Path, facts: SourceModule) -> None:
        """The checked file's facts, so that other files' questions about it see the text being checked."""
        path = self._real(path)
        self._facts[path] = facts
        self._released.pop(path, None)
        self._checked.add(path)
        if path in self._exports and self._exports.pop(path) != self.export_of(path):
            # what was read from its bytes on disk is not what is checked (an editor's buffer, stdin)
            self._homes_of.clear()
            self._memos.clear()
            self._subclassed.clear()

    def built_from_disk(self, path: Path, display: str, text: str) -> SourceModule | None:
        """The facts this run already built for `path` as another file's dependency, when checking `text`
        as `display` would build the same ones: the file is then not parsed and analysed a second time."""
        path = self._real(path)
        if path in self._checked:
            return None
        built = self._facts.get(path)
        if built is None or built.text != text or built.path != display:
            return None
        return built

    def _consults(self, requester: Path, path: Path, code: bool = False) -> None:
        """`requester`'s analysis depends on `path` (resolved) from now on: on its export (what its bytes
        tell other files), or with `code` on its facts or text."""
        requester = self._real(requester)
        self._depends.setdefault(requester, set()).add(path)
        if code:
            self._reads_code.setdefault(requester, set()).add(path)

    def facts_for(self, path: Path, requester: Path | None = None) -> SourceModule | None:
        path = self._real(path)
        if requester is not None:
            self._consults(requester, path, code=True)
        self._asked.add(path)
        if path not in self._facts:
            self._facts[path] = None  # while building: a cycle of imports sees "unknown"
            released = self._released.pop(path, None)
            self._facts[path] = self._build(path) if released is None else self._revived(path, *released)
        return self._facts[path]

    def carry_over(self, checked: Path) -> bool:
        """Keep this project for the editor's next check (of the buffer at `checked`): the facts of every
        file whose analysis read no file changed since, with the answers their analyses keep, so that a
        keystroke analyses again the buffer and what depends on it, not every other file its questions
        reach. Only where the project's files are the same ones and each change left the file's statements
        as they were (its imports, classes, defs and what they bind: `_header_of`, from which the import
        graph, the re-exports and the words of imports were read); False otherwise, and then a new project
        answers. The checked buffer counts as changed (its facts are made again), and so does any file
        whose bytes differ from those this project read; what read one (`_reads_changed`) is built again
        when asked, and what was drawn from exports is drawn again where a change altered one."""
        if self._bytes is None or self._files is None:
            return False
        files, self._files = self._files, None
        if self._python_files() != files:
            return False
        changed: dict[Path, bytes] = {}
        exported: set[Path] = set()  # the changed files whose code tells other files something else
        for file in files:
            try:
                data = self.fs.read_bytes(file)
            except OSError:
                return False
            before = self._bytes.get(file, b"")
            if data != before:
                if _exports_of(data) != _exports_of(before):
                    return False  # a new import, class or def: the index's answers may change
                changed[file] = data
                if code_exports_agree(before, data):
                    continue  # what the edit touched tells the same: the whole exports are not walked
                if _code_exports_of(data) != _code_exports_of(before):
                    exported.add(file)
        stale = {*changed, self._real(checked)}
        for file in [file for file in self._facts if self._reads_changed(file, stale, exported)]:
            self._forget(file)
        self._bytes.update(changed)
        for file in stale:
            self._exports.pop(file, None)
        if exported:  # what was drawn from exports (where names lead, what calls may run) may differ
            self._homes_of.clear()
            self._memos.clear()
        return True

    def _reads_changed(self, file: Path, stale: set[Path], exported: set[Path]) -> bool:
        """Whether `file`'s facts must be made again: it is one of `stale`, or its analysis read the facts or
        text of one (directly, or through the facts of files it read), or the export of a file whose code
        export changed (`exported`; through any file). What read only a changed file's export, which the
        change left as it was, holds nothing of it: the modules around yolov5's `models/common.py` find its
        classes from its statements and follow its methods' calls in its export, so an edit inside a
        block's `forward` does not make them again (nor the scripts that read their facts)."""
        read = self._consulted(file, self._reads_code)
        if file in stale or read & stale or ALL_TEXTS in read:  # the checked buffer is always stale
            return True
        consulted = self._consulted(file)
        return bool(exported) and (ALL_EXPORTS in consulted or bool(consulted & exported))

    def _forget(self, path: Path) -> None:
        """Drop a file's facts; what it depends on stays (`_depends` also holds what other files' questions
        recorded for it, as `importers_of` does: kept, a dependency is at worst one too many)."""
        facts = self._facts.pop(path, None)
        if facts is not None:
            self._parsed.discard(id(facts.module))  # rebuilt from the same text, the kept parse is its own
        self._checked.discard(path)
        self._asked.discard(path)
        self._released.pop(path, None)

    def release(self, path: Path) -> bool:
        """Let a checked file's facts go when no question has asked for them (True: let go). A run over a
        whole tree would otherwise keep every file's syntax tree to its end, where many files are asked
        about by none (half of timm's files). Should a later question ask, it gets the same facts while
        anything still holds them, else facts built again from the text that was checked: the same answers
        either way."""
        path = self._real(path)
        facts = self._facts.get(path)
        if facts is None or path in self._asked or path not in self._checked:
            return False
        del self._facts[path]
        self._released[path] = (facts.path, facts.text, facts.file, weakref.ref(facts))
        return True

    def _revived(
        self, path: Path, display: str, text: str, file: Path | None, held: weakref.ref
    ) -> SourceModule | None:
        found = held()
        if found is not None:
            return found
        return self._facts_of(display, text, self._parsed_module(text), file)

    def _facts_of(self, display: str, text: str, module: cst.Module, file: Path | None) -> SourceModule:
        from torchlint.facts.syntax.module import SourceModule

        collected = self.collect(text, module) if self.collect is not None else None
        return SourceModule(display, text, module, project=self, file=file, collected=collected)

    def _parsed_module(self, text: str) -> cst.Module:
        module = (self.parse or cst.parse_module)(text)
        if id(module) in self._parsed:  # two files with one text: their nodes must not be shared
            module = cst.parse_module(text)
        self._parsed.add(id(module))
        return module

    def _facts_text(self, path: Path, checked_only: bool = True) -> str | None:
        """The text of `path`'s facts (with `checked_only`, only a checked text: an editor's buffer, not
        the file on disk), let go or not; None where there are none."""
        registered = self._facts.get(path) if path in self._checked or not checked_only else None
        if registered is not None:
            return registered.text
        released = self._released.get(path)
        return released[1] if released is not None else None

    def facts_binding(
        self, path: Path, name: str, kind: Literal["class", "function"], requester: Path
    ) -> SourceModule | None:
        """`facts_for(path, requester)` where `path` may bind `name` as a `kind` ("class": a class statement;
        "function": a def or an import, which may re-export one); None, without parsing `path` with LibCST,
        where its `ast` summary shows it binds no such name. Most names a call resolves to in another
        module are not what the question wants (a function where a class is asked for, a constant): such an
        answer then costs an `ast` parse (once per content and process; kept between runs with a cache),
        not the module's facts and the questions they raise. It still depends on `path`'s content
        (recorded)."""
        resolved = self._real(path)
        known = resolved in self._facts or resolved in self._released
        if not known and name.isascii():  # `ast` normalises other names (NFKC)
            summary = self._summary_of(resolved)
            if summary is not None and name not in (
                (*summary.classes, *summary.imported) if kind == "class" else summary.functions
            ):
                self._consults(requester, resolved)
                return None
        return self.facts_for(resolved, requester)

    def export_of(self, path: Path, requester: Path | None = None) -> Export | None:
        """What `path` tells other files (torchlint.facts.torch.exports), from the text being checked where
        it is the checked file; None where its bytes are not known to parse as its facts would read them.
        `requester`'s answers depend on it from now on."""
        path = self._real(path)
        if requester is not None:
            self._consults(requester, path)
        if not self.asks_exports:
            return None  # unknown: then every question builds the facts it needs
        if path in self._exports:
            return self._exports[path]
        checked = self._facts_text(path)
        if checked is not None:
            found = _code_exports_of(self._encoded(path, checked))
        else:
            data = self._readable(path)
            found = self._with_code(path, data) if data is not None else None
        self._exports[path] = found
        return found

    def exports_naming(
        self, path: Path, names: Collection[str], requester: Path
    ) -> dict[Path, Export] | None:
        """The code export of every project file but `path` whose text writes one of `names` as a word, or
        a name an import gives one (`from .common import C3 as Block`): the only files whose code can
        refer to them. None where that is not known from exports: they are not asked, a name is not ASCII
        (`ast` normalises those), or a file that writes one has no export. A file whose text writes none
        of them has none in its export either, so `requester` depends on every file's export (and the file
        list) from now on, not on their texts: an edit that makes a file call one changes its export. Kept
        for the run as other answers drawn from exports are (the editor asks at each keystroke)."""
        path = self._real(path)
        if not self.asks_exports:
            return None
        self._consults(requester, ALL_FILES)
        self._consults(requester, ALL_EXPORTS)
        known = self.memo("exports naming")
        key = (path, frozenset(names))
        if key not in known:
            known[key] = self._exports_naming(path, names)
        return known[key]

    def names_for(self, name: str) -> set[str]:
        """`name` and every name the project's imports give it (`from .common import C3 as Block`), also
        through a chain of re-exports (what `exports_naming` looked for)."""
        return self._with_aliases({name})

    def _exports_naming(self, path: Path, names: Collection[str]) -> dict[Path, Export] | None:
        wanted = self._with_aliases(set(names))
        if not all(name.isascii() for name in wanted):
            return None
        words = _words(frozenset(wanted))
        found: dict[Path, Export] = {}
        for file, data in self._project_bytes().items():
            if file == path:
                continue
            text = self._facts_text(file, checked_only=False)  # an editor's buffer, not the file on disk
            if words.search(data if text is None else text.encode("utf-8", "surrogatepass")) is None:
                continue
            export = self.export_of(file)
            if export is None or export.scopes is None:
                return None
            found[file] = export
        return found

    def subclassed_in(self, path: Path, requester: Path) -> list[Path]:
        """The project files that import `path` and derive a class from one named like one of its classes
        (by the last name of a base, also under a name an import gives it): where a method that a class of
        `path` calls on `self` may be overridden. `requester` depends on every file's imports from now on."""
        path = self._real(path)
        self._consults(requester, ALL_FILES)
        found = self._subclassed.get(path)
        if found is None:
            export = self._header_of(path)
            found = []
            if export is not None and export.classes:
                named = self._with_aliases(set(export.classes))
                everything = self._project_bytes()
                found = [  # whether one derives, first: resolving its imports costs more
                    file
                    for file in self._import_words().may_import(path, everything)
                    if file != path
                    and self._derives(file, named)
                    and path in self._imported_files(file, everything[file])
                ]
            self._subclassed[path] = found
        return list(found)

    def may_derive(self, path: Path, name: str, requester: Path) -> bool:
        """False only when no class statement of `path` derives from a base written with `name` as its last
        name, nor with a name an import gives it (`from .base import Trainer as Base`), from its export."""
        self._consults(requester, self._real(path))
        if not name.isascii():  # `ast` normalises other names (NFKC)
            return True
        return self._derives(path, self._with_aliases({name}))

    def _derives(self, path: Path, names: set[str]) -> bool:
        export = self._header_of(path)
        return export is None or any(
            base.rpartition(".")[2] in names for bases in export.bases for base in bases[1:]
        )

    def memo(self, name: str) -> dict:
        """A dictionary kept for this run, for answers an analysis draws from several files' exports."""
        return self._memos.setdefault(name, {})

    def flush(self, final: bool = False) -> None:
        """Hand the exports computed since the last save to the store: at the end of a run (`final`), else
        once enough are new (each save writes the project's whole entry, so questions never save). A save
        reads every project file, to drop what no file holds any longer: at the end of a run also with
        nothing new where this run read them anyway (the store then writes only if it dropped one)."""
        if self.summaries is None:
            return
        due = self._unsaved and (final or self._new_exports >= SAVE_EVERY)
        if due or (final and self._bytes is not None):
            self.summaries.save(self._project_bytes().values())
            self._unsaved, self._new_exports = False, 0

    def handover(self) -> dict[str, Export]:
        """The exports computed here since the last handover (a worker process's, for the run's parent:
        `receive`); none without a store."""
        return self.summaries.handover() if self.summaries is not None else {}

    def receive(self, found: dict[str, Export]) -> None:
        """Exports a worker process computed (its `handover`), saved with this project's next `flush`."""
        if self.summaries is not None and found:
            self.summaries.receive(found)
            self._unsaved = True

    def scanned(self, path: Path) -> bool:
        """Whether the import scan parsed `path` (CPython reads it as Python), as it reads its statements."""
        return self._header_of(path) is not None

    def _header_of(self, path: Path) -> Export | None:
        """What `path`'s statements say (its export, its code's scopes maybe not read): the checked text's
        for the checked file."""
        path = self._real(path)
        checked = self._facts_text(path)
        if checked is not None:
            return _exports_of(self._encoded(path, checked))
        return self._summary_of(path)

    def _encoded(self, path: Path, text: str) -> bytes:
        """A checked text's bytes: those read from disk where they are the same (the exports kept by
        content are keyed by their bytes, and a second copy of each checked file's was 1.2-1.4 MB of
        timm's peak)."""
        data = text.encode("utf-8", "surrogatepass")
        held = self._bytes.get(path) if self._bytes is not None else None
        return held if held == data else data

    def _summary_of(self, path: Path) -> Export | None:
        """The export of `path` without its code (what the import scan reads), where CPython's parser reads
        its bytes as the facts' decoding does (None: unknown)."""
        data = self._readable(path)
        return self._imports(path, data) if data is not None else None

    def _readable(self, path: Path) -> bytes | None:
        """`path`'s bytes where CPython's parser reads them as the facts' decoding does (None: unknown). A
        coding declaration is the one place they may differ: tokenize ends its first two lines at `\n`
        only, CPython also at a lone `\r` (`\r# coding: utf-7` is UTF-7 to one of them)."""
        data = self._bytes.get(path) if self._bytes is not None else None
        if data is None:
            try:
                data = self.fs.read_bytes(path)
            except OSError:
                return None
        return None if may_declare_coding(data) else data

    def _with_code(self, file: Path, data: bytes) -> Export | None:
        """A file's whole export, its code's scopes included: from the store when an earlier run read its
        code, else one more pass (the import scan reads only statements: most files it reads are never
        asked about their code)."""
        found = self.summaries.get(data) if self.summaries is not None else None
        if found is None or found.scopes is None:
            found = _code_exports_of(data)
            if found is not None and self.summaries is not None:
                self.summaries.put(data, found)
                self._unsaved = True
                self._new_exports += 1
        return found

    def _build(self, path: Path) -> SourceModule | None:
        try:
            source = SourceFile.read(path, self.fs)
            if over_budget(len(source.text)) is not None:  # its own check reports it (TL002); unknown here
                return None
            module = self._parsed_module(source.text)
        except (SourceError, cst.ParserSyntaxError, RecursionError):
            return None
        return self._facts_of(_display(path), source.text, module, path)

    # -- who imports a file -----------------------------------------------------------------------------

    def may_name(self, path: Path, names: Collection[str], requester: Path | None = None) -> bool:
        """False only when `path` cannot refer to any of `names` (functions of another module): its text
        writes none of them as a word, nor any name an import anywhere in the project gives one of them
        (`from .loaders import build as build_loader` in a package's `__init__.py`). A call resolves by the
        names written in the calling file, so this is a necessary condition, checked before building that
        file's facts (which cost a LibCST parse, and what the analysis of them asks in turn). `requester`
        depends on `path`'s text from now on (its answer may change with it)."""
        path = self._real(path)
        if requester is not None:
            self._consults(requester, path, code=True)
        wanted = self._with_aliases(set(names))
        if not all(name.isascii() for name in wanted):
            return True  # `ast` normalises other names (NFKC): the text may write them otherwise
        text = self._facts_text(path, checked_only=False)
        if text is not None:  # the text being checked (an editor's buffer), not the one on disk
            return _words(frozenset(wanted)).search(text.encode("utf-8", "surrogatepass")) is not None
        data = self._project_bytes().get(path)
        if data is None or _words(frozenset(wanted)).search(data) is not None:
            return True  # not a project file (nothing known, so it may), or it writes one
        return self._readable(path) is None  # a coding declaration: its text may not be these bytes

    def mentions(self, path: Path, words: Collection[str], requester: Path | None = None) -> bool | None:
        """Whether the text of project file `path` holds one of `words` (ASCII), as its facts' text would,
        read without building them; None where its bytes may not be what the facts read (a coding
        declaration, bytes that are not UTF-8) or it is no file of the project. `requester` depends on
        `path`'s text from now on."""
        path = self._real(path)
        if requester is not None:
            self._consults(requester, path, code=True)
        text = self._facts_text(path, checked_only=False)
        if text is not None:
            return any(word in text for word in words)
        data = self._readable(path) if path in self._project_bytes() else None
        if data is None or not data.isascii() and not _is_utf8(data):
            return None
        return any(word.encode() in data for word in words)

    def mentioned_anywhere(self, words: Collection[str], requester: Path) -> bool:
        """Whether the text of some project file holds one of `words` (ASCII), as its facts' text would (an
        editor's buffer as it is); True where a file's bytes may not be what its facts read. A question that
        follows calls into any module (what a function returns, two calls deep) is settled without building
        one where no file writes what it looks for. `requester` depends on every file's text from now on."""
        return self._anywhere(
            "mentioned", words, requester, lambda file: self.mentions(file, words) is not False
        )

    def named_anywhere(self, names: Collection[str], requester: Path) -> bool:
        """Whether some project file may refer to one of `names` (`may_name`: it writes one as a word, or a
        name an import gives one). `requester` depends on every file's text from now on."""
        return self._anywhere("named", names, requester, lambda file: self.may_name(file, names))

    def _anywhere(
        self, question: str, words: Collection[str], requester: Path, holds: Callable[[Path], bool]
    ) -> bool:
        """Whether `holds` for some project file, kept for the run as the answers drawn from exports are (an
        edit that writes such a word into code changes the file's export, which clears them; one in a
        comment does not, and cannot change what the code does)."""
        self._consults(requester, ALL_FILES)
        self._consults(requester, ALL_TEXTS, code=True)
        known = self.memo(f"{question} anywhere")
        key = frozenset(words)
        if key not in known:
            known[key] = any(holds(file) for file in self._project_bytes())
        return known[key]

    def parses(self, path: Path, text: str) -> bool:
        """Whether the import scan of this run found `text` (the file's UTF-8 bytes) to be valid Python:
        then a check of it need not ask CPython's parser again for TL001."""
        path = self._real(path)
        if self._bytes is None or self._scanned.get(path) is None:
            return False
        return self._bytes.get(path) == text.encode("utf-8", "surrogatepass")

    def importers_of(self, path: Path) -> list[Path]:
        """The project files whose imports resolve to `path`. Only the files whose bytes could write such
        an import are parsed (each once per run, and remembered between runs by content): its module's
        name, or, for a package's `__init__.py`, a bare relative `from . import`."""
        path = self._real(path)
        self._depends.setdefault(path, set()).add(ALL_FILES)
        return self._importing(path)

    def _importing(self, path: Path) -> list[Path]:
        if path not in self._importers:
            found = set()
            everything = self._project_bytes()
            for file in self._import_words().may_import(path, everything):
                if file != path and path in self._imported_files(file, everything[file]):
                    found.add(file)
            self._importers[path] = sorted(found)
        return list(self._importers[path])

    def _with_aliases(self, names: set[str]) -> set[str]:
        """`names` and every name an import gives one of them, also through a chain of re-exports."""
        todo = list(names)
        while todo:
            for alias in self._aliases_of(todo.pop()):
                if alias not in names:
                    names.add(alias)
                    todo.append(alias)
        return names

    def _aliases_of(self, name: str) -> set[str]:
        """What the project's `import ... as` statements call `name` (read from the files that could)."""
        if name not in self._aliases:
            found: set[str] = set()
            everything = self._project_bytes()
            for file in self._import_words().may_import_name(name, everything):
                data = everything[file]
                if not _AS.search(data):
                    continue
                imports = self._imports(file, data)
                if imports is not None:
                    found.update(asname for imported, asname in imports.aliases if imported == name)
            self._aliases[name] = found
        return self._aliases[name]

    def _import_words(self) -> ImportWords:
        if self._words is None:
            self._words = ImportWords(self._project_bytes())
        return self._words

    def _imported_files(self, file: Path, data: bytes) -> set[Path]:
        """The project files `file`'s imports resolve to, resolved once per run."""
        found = self._resolved.get(file)
        if found is None:
            imports = self._imports(file, data)
            names = imports.imports if imports is not None else []
            targets = (self.module_file(file, name) for name in names)
            found = self._resolved[file] = {target for target in targets if target is not None}
        return found

    def _imports(self, file: Path, data: bytes) -> Export | None:
        """A file's summary (None: CPython does not parse it), parsed once per run."""
        if file not in self._scanned:
            found = self.summaries.get(data) if self.summaries is not None else None
            if found is None:
                found = _exports_of(data)
                if found is not None and self.summaries is not None:
                    self.summaries.put(data, found)
                    self._unsaved = True
                    self._new_exports += 1
            self._scanned[file] = found
        return self._scanned[file]

    def _project_bytes(self) -> dict[Path, bytes]:
        """Every readable project file's bytes, read once per run."""
        if self._bytes is None:
            self._bytes = {}
            for file in self._python_files():
                try:
                    self._bytes[file] = self.fs.read_bytes(file)
                except OSError:
                    continue
        return self._bytes

    def _python_files(self) -> list[Path]:
        if self._files is not None:
            return self._files
        found: list[Path] = []
        # (a folder as walked, its real path): a file's real path is its folder's and its name, found
        # without resolving each file (the editor walks the project again at each keystroke)
        folders = [] if too_wide(self.root) else [(str(self.root), self.root.resolve())]  # never / or ~
        while folders:
            folder, real = folders.pop(0)
            try:
                entries = self.fs.scandir(folder)
            except OSError:
                continue
            subfolders = []
            for entry in entries:
                try:
                    kind = self.fs.entry_kind(entry, follow_symlinks=False)
                    if kind == "dir":
                        if entry.name not in DEFAULT_EXCLUDES and not entry.name.startswith("."):
                            subfolders.append((entry.path, real / entry.name))
                    elif entry.name.endswith(".py"):  # a link: where it leads
                        found.append(real / entry.name if kind == "file" else Path(entry.path).resolve())
                except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
                    continue
            folders[:0] = subfolders  # depth first, in name order
        self._files = found
        return found


_AS = re.compile(rb"[\s\\]as[\s\\]")  # `name as alias`, also across a backslash continuation
_BARE_RELATIVE = re.compile(rb"from[\s\\]*\.+[\s\\]*import")  # `from . import x` imports `__init__.py`


class ImportWords:
    """The words each project file's import statements may write, read once per run from its bytes: the
    words of every line that holds `import`, of every parenthesized name list after `import (` and of every
    line a backslash continues from a line with `import` or `from` (an import's words are on such lines).
    Who may import a module, or give one of its functions another name, is then a lookup, not a search of
    every file's bytes for each question (a run asks one per file that defines a loader or a model:
    searching was quadratic in the project's size, a quarter of a run of pytorch/examples copied eight
    times), and a file that writes `train` in a docstring beside a parenthesized import is not parsed."""

    def __init__(self, everything: dict[Path, bytes]) -> None:
        self.files: dict[bytes, list[Path]] = {}  # word -> the files whose imports may write it
        self.bare_relative: list[Path] = []  # files with a `from . import`
        for file, data in everything.items():
            if b"import" not in data:
                continue
            for word in _import_words(data):
                self.files.setdefault(word, []).append(file)
            if _BARE_RELATIVE.search(data):
                self.bare_relative.append(file)

    def may_import(self, target: Path, everything: dict[Path, bytes]) -> list[Path]:
        """The files whose imports may resolve to `target`, in the project's order: a module name that
        resolves to `x.py` or `x/__init__.py` ends in `x`; a bare relative `from . import y` resolves to
        its package's `__init__.py`."""
        package = target.name == "__init__.py"
        name = target.parent.name if package else target.stem
        return self.may_import_name(name, everything, self.bare_relative if package else ())

    def may_import_name(
        self, name: str, everything: dict[Path, bytes], also: Iterable[Path] = ()
    ) -> list[Path]:
        """The files whose imports may write `name` (`from .loaders import build as build_loader`), and
        those of `also`, in the project's order."""
        if not name.isascii():  # it may be encoded otherwise in the bytes
            return list(everything)
        found = {*self.files.get(name.encode(), ()), *also}
        return [file for file in everything if file in found]


_IMPORT_LINE = re.compile(rb"^[^\n]*import[^\n]*", re.MULTILINE)
# `from a import (`, also after a backslash that continues the line (before `\n`, `\r\n` or a lone `\r`)
_PARENTHESIZED_IMPORT = re.compile(rb"import[ \t\f]*(?:\\(?:\r\n|\r|\n)[ \t\f]*)*\(")
_WORDS = re.compile(rb"[A-Za-z0-9_]+")


def _words_of_imports(data: bytes) -> frozenset[bytes]:
    words = {word for line in _IMPORT_LINE.findall(data) for word in _WORDS.findall(line)}
    if b"\\\n" in data or b"\\\r\n" in data:
        words.update(_continued_words(data))
    last_closing = data.rfind(b")")
    for opening in _PARENTHESIZED_IMPORT.finditer(data):
        end = _closing_parenthesis(data, opening.end()) if opening.end() <= last_closing else len(data)
        words.update(_WORDS.findall(data[opening.end() : end]))
    return frozenset(words)


def _continued_words(data: bytes) -> set[bytes]:
    """The words of each line that a backslash continues from a line with `import` or `from`, the lines
    it continues included: one pass over the lines (a pattern that looked for `import` anywhere on a line
    before its backslash took seconds on one long line of prose)."""
    words: set[bytes] = set()
    continuing = False
    for line in data.split(b"\n"):
        ends = line.endswith((b"\\", b"\\\r"))
        if continuing or (ends and (b"import" in line or b"from" in line)):
            words.update(_WORDS.findall(line))
            continuing = ends
    return words


# Kept by content for the process (0.09 s of a keystroke's check in timm, for the Language Server).
_import_words: Callable[[bytes], frozenset[bytes]] = ByContent(_words_of_imports, limit=64_000_000)


def _closing_parenthesis(data: bytes, start: int) -> int:
    """Where an import's name list that opens before `start` closes: its first `)` outside a comment (the
    names hold no brackets or strings; a comment may hold anything)."""
    position = start
    while True:
        closing = data.find(b")", position)
        comment = data.find(b"#", position)
        if closing < 0:
            return len(data)
        if comment < 0 or closing < comment:
            return closing
        line_end = data.find(b"\n", comment)
        if line_end < 0:
            return len(data)
        position = line_end


def _export_within_budget(data: bytes, code: bool = False) -> Export | None:
    """A file's export (with its code's scopes: `code`); None when CPython does not parse it, or must not
    (torchlint.workspace.budget)."""
    if over_budget(len(data), full=False) is not None:
        return None
    return export_of_bytes(data, code=code)


# Kept by content for the process as `_import_words` (the cache folder keeps them between command-line runs).
_exports_of: Callable[[bytes], Export | None] = ByContent(_export_within_budget, limit=64_000_000)
_code_exports_of: Callable[[bytes], Export | None] = ByContent(
    partial(_export_within_budget, code=True), limit=64_000_000
)


def statements_of(data: bytes) -> Export | None:
    """What a file's statements import, define and bind (its export without its code's scopes; None where
    CPython does not parse it), kept by content: two texts with equal statements differ inside them only."""
    return _exports_of(data)


@functools.lru_cache(maxsize=64)
def _words(names: frozenset[str]) -> re.Pattern[bytes]:
    """Any of `names` (ASCII) written as a whole word, as a name in code always is: `compile`, not the
    `compiler` of a docstring."""
    return re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(name.encode()) for name in sorted(names)))


def _find_module(base: Path, parts: list[str], fs: FileSystem) -> Path | None:
    if not parts:
        init = base / "__init__.py"
        return init.resolve() if fs.is_file(init) else None
    candidate = base.joinpath(*parts)
    for path in (candidate.with_name(candidate.name + ".py"), candidate / "__init__.py"):
        if fs.is_file(path):
            return path.resolve()
    return None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _display(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()
