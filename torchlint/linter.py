"""One file through the pipeline: syntax check -> one LibCST parse -> facts -> rules -> suppressions.

`check_text` is the one entry for a text (the CLI's runs call it, and so will the Language Server and the
verifier); `fix_text` repeats check + apply until nothing changes (bounded), and refuses a result that no
longer compiles.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.diagnostics import Diagnostic, LineIndex, Severity, fix_applies
from torchlint.fix.apply import apply
from torchlint.noqa import HYGIENE_CODE, may_name_torchlint, read_suppressions, unused_noqa
from torchlint.pyast import python_ast
from torchlint.rules.base import Rule, registered_rules
from torchlint.workspace.budget import over_budget
from torchlint.workspace.discovery import matches_any
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.roots import index_root, project_root, too_wide
from torchlint.workspace.settings import Settings, enabled_codes

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.facts.syntax.collect import Collected
    from torchlint.facts.torch.exports import Export
    from torchlint.index.project import ImportSummaries, Project

MAX_FIX_PASSES = 10
MEMORY_TO_KEEP = 150 * 2**20  # peak bytes below which a whole-tree run frees nothing (`Linter.let_go`)


class InternalError(Exception):
    """A bug in torchlint (a rule crashed, a fix broke the code): reported, exit 2, file left alone."""


class Linter:
    """Rules instantiated once per distinct settings, so per-rule options are read once."""

    def __init__(
        self,
        rule_classes: dict[str, type[Rule]] | None = None,
        prefilter: bool = True,
        fs: FileSystem | None = None,
        parse: Callable[[str], cst.Module] | None = None,
        parse_other: Callable[[str], cst.Module] | None = None,
        collect_other: Callable[[str, cst.Module], Collected] | None = None,
    ) -> None:
        # `rule_classes` replaces the discovered rules (tests use it for rules of their own).
        # `parse`: the checked text's LibCST parse (`cst.parse_module` by default; the Language Server
        # passes one that re-parses only the statements an edit changed, and gives the same module).
        # `parse_other`: the parse of the project's other files, which questions reach (the same default;
        # the Language Server's keeps the modules of unchanged texts from one check to the next).
        # `fs`: what the run's projects and root lookups read through (the real file system by default;
        # torchlint.api.run passes its own, recording for a replayable run).
        self.fs = fs if fs is not None else FileSystem()
        self.parse = parse
        self.parse_other = parse_other
        self.collect_other = collect_other  # their syntax records, kept with `parse_other`'s modules
        self.prefilter = prefilter
        self.parsed = 0  # files that went through LibCST (phase 2), for --statistics and the benchmark
        self.asks_exports = True  # see `ask_exports`
        self.lets_go = False  # see `let_go`
        self.from_cache = 0
        self.rule_classes = registered_rules() if rule_classes is None else dict(sorted(rule_classes.items()))
        self._instances: dict[int, tuple[Settings, list[Rule]]] = {}
        self._projects: dict[Path, Project] = {}
        self._roots: dict[Path, Path] = {}  # project_root's memo: a linter lives for one run
        self._enabled: dict[int, list[Rule]] = {}  # by id(settings), as _instances
        # A project root -> what earlier runs found its files import (None: scan every file afresh); the
        # api sets it when the run may use the cache.
        self.import_summaries: Callable[[Path], ImportSummaries | None] = lambda root: None

    def project_for(self, file: Path) -> Project:
        """One cross-file index per project root and run, shared by every file checked in it."""
        return self._project(self.index_root_of(file.resolve().parent))

    def _project(self, root: Path) -> Project:
        from torchlint.index.project import Project

        if root not in self._projects:
            summaries = self.import_summaries(root)
            self._projects[root] = Project(root, self.fs, summaries, self.parse_other, self.collect_other)
            self._projects[root].asks_exports = self.asks_exports
        return self._projects[root]

    def carry_over(self, checked: Path) -> bool:
        """Keep this linter's projects for the editor's next check, of the buffer at `checked`
        (`Project.carry_over`); False where one of them cannot be kept (a new linter then checks). Without
        the cyclic collector, as a check: it reads the changed files' statements with CPython's parser,
        whose allocations would otherwise start a full pass over every fact kept."""
        with _without_cyclic_gc():
            return all(project.carry_over(checked) for project in self._projects.values())

    def statements_of(self, text: str, data: bytes) -> object:
        """What a file of this text, held as these bytes, imports, defines and binds
        (`index.project.statements_of`): equal for two versions of a buffer whose edits stayed inside its
        statements; None where CPython does not parse it. Read from the tree of the text, which is kept for
        the syntax check that follows."""
        from torchlint.index.project import statements_of

        try:
            python_ast(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return statements_of(data)

    def flush(self) -> None:
        """At the end of a run: what the projects' indexes computed, stored for the next run."""
        for project in self._projects.values():
            project.flush(final=True)

    def handover(self) -> dict[Path, dict[str, Export]]:
        """In a worker process, after a file: the exports its projects computed since the last handover,
        by project root, for the parent (`receive`), which stores them."""
        return {root: found for root, project in self._projects.items() if (found := project.handover())}

    def receive(self, handed: dict[Path, dict[str, Export]]) -> None:
        """A worker's `handover`, stored with this linter's `flush`."""
        for root, found in handed.items():
            self._project(root).receive(found)

    def ask_exports(self, asks: bool) -> None:
        """Whether cross-file questions ask other files' exports before building their facts: worth it
        where a run checks a few files of a project (a pre-commit hook, the editor); where it checks the
        whole tree, every file's facts are built for its own check anyway, and asking first only costs."""
        self.asks_exports = asks
        for project in self._projects.values():
            project.asks_exports = asks

    def let_go(self, lets_go: bool) -> None:
        """Whether each checked file's facts are let go after its check unless another file's question
        asked for them (`Project.release`): a run over a whole tree, which would otherwise keep every file's
        syntax tree to its end. Where the cyclic collector is off (the command line's checks), a collection
        of the youngest generation follows each check once the process has held `MEMORY_TO_KEEP`: the
        collector is off because what a check keeps lives to the end of the run, and with it off every
        object stays young until such a collection, which walks what was made since the last one, once
        (about a tenth of timm's run with `-j 1`, which then peaks at 199 MB instead of 355 MB, the C heap
        trimmed too: `_trim_heap`; a tree the size of yolov5's never reaches it, and pays nothing)."""
        self.lets_go = lets_go

    def _release(self, path: str) -> None:
        file = Path(path)
        project = self._projects.get(self.index_root_of(file.resolve().parent))
        if project is not None:
            project.release(file)
        if not gc.isenabled() and _has_held(MEMORY_TO_KEEP):
            gc.collect(0)
            _trim_heap()

    def root_of(self, folder: Path) -> Path:
        return project_root(folder, self.fs, self._roots)

    def index_root_of(self, folder: Path) -> Path:
        return index_root(folder, self.fs, self._roots)

    def rules_for(self, settings: Settings, path: str) -> list[Rule]:
        key = id(settings)
        if key not in self._instances:
            self._instances[key] = (settings, [cls(settings) for cls in self.rule_classes.values()])
        rules = self._instances[key][1]
        if not settings.per_file_ignores:  # the same rules for every file: decided once
            if key not in self._enabled:
                codes = enabled_codes(settings, list(self.rule_classes))
                self._enabled[key] = [rule for rule in rules if rule.code in codes]
            return self._enabled[key]
        ignored = tuple(
            code
            for pattern, codes in settings.per_file_ignores
            if _pattern_matches(path, settings, pattern)
            for code in codes
        )
        enabled = enabled_codes(settings, list(self.rule_classes), ignored)
        return [rule for rule in rules if rule.code in enabled]

    def check_text(
        self, path: str, text: str, settings: Settings, *, in_project: bool | None = None
    ) -> list[Diagnostic]:
        """The diagnostics of `text` as the file `path`.

        `in_project` links the text to the project of `path` for cross-file facts: by default when a file is
        at `path`; True for a buffer or stdin text whose file need not exist yet, False for a text on its own.
        """
        with _room_to_recurse(), _without_cyclic_gc():
            found = self._check_text(path, text, settings, in_project, None)
        if self.lets_go and in_project is not False:
            self._release(path)
        return found

    def check_own_file(
        self,
        path: str,
        text: str,
        settings: Settings,
        *,
        in_project: bool | None = None,
        later: frozenset[str] = frozenset(),
        skip_later: bool = False,
    ) -> tuple[list[Diagnostic], frozenset[str]]:
        """The first look of the editor's two-pass check (`index.alone`): `check_text`'s findings of the
        rules whose check reads no other file's code, and the codes of the rules that would (their findings
        come with the full check; TL003's too then, as an unused noqa is known only once every finding is).
        When no code is left, the findings are the full check's. `later`: the codes an earlier first look left
        (they run last; see `_run_rules_alone`); with `skip_later`, they are not run at all and are left
        for the full check again (an edit of the same buffer inside its statements: they would most likely
        be stopped again, after most of their work on this file, which the full check then does anew)."""
        look = _FirstLook(later, skip_later)
        with _room_to_recurse(), _without_cyclic_gc():
            found = self._check_text(path, text, settings, in_project, look)
        return found, frozenset(look.deferred)

    def _check_text(
        self, path: str, text: str, settings: Settings, in_project: bool | None, look: _FirstLook | None
    ) -> list[Diagnostic]:
        # `look` (the first look): no other file's code is read, and the rules that would read one are not
        # run to the end; their codes are added to `look.deferred`.
        rules = self.rules_for(settings, path)
        enabled = {rule.code for rule in rules}
        full = not self.prefilter or any(rule.could_fire(text) for rule in rules if rule.code[2] != "0")
        too_big = over_budget(len(text), full)
        if too_big is not None:  # before any parser: CPython's alone could take gigabytes
            not_analysed = io_error(path, f"{path}: {too_big}")
            return [LineIndex(text).locate(not_analysed)] if "TL002" in enabled else []
        found: list[Diagnostic] = []
        syntax_error = None if self._scanned(path, text, in_project) else _syntax_error(path, text)
        if syntax_error is not None:
            found = [syntax_error] if "TL001" in enabled else []
        elif not full:
            pass  # no selected rule could fire on this text: the syntax check above was all it needed
        else:
            self.parsed += 1
            file = Path(path)
            if in_project is None:
                in_project = self.fs.is_file(file)
            if in_project and too_wide(self.index_root_of(file.resolve().parent)):
                in_project = False  # a file directly in / or ~: checked on its own
            facts = self._built_facts(path, text, file) if in_project and look is None else None
            if facts is None:
                try:
                    module = (self.parse or cst.parse_module)(text)
                except (cst.ParserSyntaxError, RecursionError) as error:
                    # Valid for CPython but not for LibCST: counted like a syntax error, never skipped.
                    message = f"unsupported syntax (LibCST cannot parse this file): {error}".splitlines()[0]
                    diagnostic = Diagnostic("TL001", "syntax-error", message, Severity.ERROR, path, 0, 0)
                    found = [diagnostic] if "TL001" in enabled else []
                    return _finish(found, text, None, settings.ignore_noqa)
                if look is not None and in_project:
                    fresh = partial(self.facts_of, path, text, module, file, alone=True)
                    found = self._run_rules_alone(fresh, rules, path, look)
                    return self._finished(found, text, settings, enabled, path, look)
                facts = self.facts_of(path, text, module, file if in_project else None)
            found = self._run_rules(facts, rules, path)
            if in_project:
                self.project_for(file).flush()  # the exports the rules' questions computed, for later runs
        if syntax_error is not None:
            return _finish(
                found, text, None, settings.ignore_noqa
            )  # no rule ran: every noqa would look unused
        return self._finished(found, text, settings, enabled, path, look)

    def _finished(
        self,
        found: list[Diagnostic],
        text: str,
        settings: Settings,
        enabled: set[str],
        path: str,
        look: _FirstLook | None,
    ) -> list[Diagnostic]:
        if settings.ignore_noqa:
            return _finish(found, text, None, True)  # nothing is suppressed, so no directive is unused
        if look is not None and look.deferred and HYGIENE_CODE in enabled:
            look.deferred.add(HYGIENE_CODE)  # an unused noqa is known only once every rule has reported
            return _finish(found, text, None)
        return _finish(found, text, (path, enabled, list(self.rule_classes)))

    def _run_rules(self, facts: ModuleFacts, rules: list[Rule], path: str) -> list[Diagnostic]:
        """Every rule's findings on a module."""
        found: list[Diagnostic] = []
        toy = _ToyDemo(facts)
        for rule in rules:
            if not toy.skips(rule):
                found.extend(_findings(rule, facts, path))
        return found

    def _run_rules_alone(
        self, fresh: Callable[[], ModuleFacts], rules: list[Rule], path: str, look: _FirstLook
    ) -> list[Diagnostic]:
        """The first look's findings: a rule that asks about another file's code is stopped there
        (`NeedsOtherFiles`) and its code added to `look.deferred`. What its questions had half worked out (a
        table an analysis filled midway) must not answer a later rule's: a rule that finished after one was
        stopped is run again on facts built afresh (and so on, until a round stops none). The rules in
        `look.later` (those that asked about other files in the last first look) run last, so that few rules
        run twice."""
        from torchlint.index.alone import NeedsOtherFiles

        found: list[Diagnostic] = []
        todo = sorted(rules, key=lambda rule: rule.code in look.later)
        if look.skip_later:
            look.deferred.update(rule.code for rule in todo if rule.code in look.later)
            todo = [rule for rule in todo if rule.code not in look.later]
        while todo:
            facts = fresh()
            toy = _ToyDemo(facts)
            stopped = False
            again: list[Rule] = []
            for rule in todo:
                try:  # skipped as advice on a toy demo: decided on these facts too, so run again as well
                    reported = [] if toy.skips(rule) else _findings(rule, facts, path)
                except NeedsOtherFiles:
                    look.deferred.add(rule.code)
                    stopped = True
                    continue
                if stopped:
                    again.append(rule)
                else:
                    found.extend(reported)
            todo = again
        return found

    def _scanned(self, path: str, text: str, in_project: bool | None) -> bool:
        """The project's import scan already parsed this very text with CPython's parser (it reads the files
        that may import the modules other files' questions are about): no syntax error to look for."""
        if in_project is False or not self._projects:
            return False
        file = Path(path)
        project = self._projects.get(self.index_root_of(file.resolve().parent))
        return project is not None and project.parses(file, text)

    def facts_of(
        self, path: str, text: str, module: cst.Module, file: Path | None, alone: bool = False
    ) -> ModuleFacts:
        """The facts of a checked module; with `file`, linked to its project (whose other files' questions
        about it then see this text, not the one on disk). `alone` (the first look): the facts ask the
        project through `index.alone.OwnFileOnly`, which stops short of other files' code; the module is
        registered all the same, so that its export is read from the text being checked."""
        from torchlint.facts import ModuleFacts, SourceModule
        from torchlint.index.alone import OwnFileOnly

        project = self.project_for(file) if file is not None else None
        index = OwnFileOnly(project) if alone and project is not None else project
        source = SourceModule(path, text, module, project=index, file=file)  # type: ignore[arg-type]
        if project is not None and file is not None:
            project.register(file, source)
        return ModuleFacts(source)

    def _built_facts(self, path: str, text: str, file: Path) -> ModuleFacts | None:
        """The facts of a file this run already built from disk as another file's dependency (the text
        being checked is the same): in a whole-tree run most files are asked about before their turn, and
        a second LibCST parse and analysis of them would give the same answers. Not for a parse of the
        caller's own (the Language Server's incremental one)."""
        from torchlint.facts import ModuleFacts

        if self.parse is not None:
            return None
        project = self.project_for(file)
        built = project.built_from_disk(file, path, text)
        if built is None:
            return None
        project.register(file, built)
        return ModuleFacts(built)

    def fix_text(
        self, path: str, text: str, settings: Settings, unsafe: bool, *, in_project: bool | None = None
    ) -> FixResult:
        """Check and fix until nothing changes, at most MAX_FIX_PASSES times.

        Each pass applies the fixes whose edits do not overlap (`fixer.apply`), then re-checks the result.
        A result that stops compiling (CPython's `compile()` or LibCST) while the original compiled is
        refused: InternalError naming the rule(s) and the file. When the passes run out, or a pass brings
        back a text seen before (fixes undoing each other), the loop stops and says so in `warnings`.
        `in_project` as for `check_text`. Unpacks as `(text, fixed, diagnostics)`.
        """
        original = text
        diagnostics = self.check_text(path, text, settings, in_project=in_project)
        result = FixResult(text, 0, diagnostics, initial=diagnostics)
        seen = {text}
        compiled: bool | None = None  # computed only once there is something to apply
        for _ in range(MAX_FIX_PASSES):
            fixable = [d for d in diagnostics if fix_applies(d, unsafe, settings)]
            if not fixable:
                return result
            fixes = [d.fix for d in fixable]
            try:
                applied = apply(text, fixes)  # type: ignore[arg-type]
            except Exception as error:  # noqa: BLE001 - a bug in the fixer must not take the run down
                codes = ", ".join(sorted({d.code for d in fixable}))
                raise InternalError(f"applying fixes by {codes} crashed on {path}: {error!r}") from error
            if applied.text == text:
                return result
            if compiled is None:
                compiled = _compiles(original, path)
            if compiled and not _compiles(applied.text, path):
                codes = _breaking_codes(text, path, fixable, applied.applied)
                raise InternalError(
                    f"a fix by {', '.join(codes)} would break {path} (the result does not compile); "
                    "the file was left as it was"
                )
            if applied.text in seen:
                codes = sorted({fixable[i].code for i in applied.applied})
                result.warnings.append(
                    f"{path}: fixes by {', '.join(codes)} undo each other; stopped (this is a bug in "
                    "torchlint, please report it)"
                )
                return result
            seen.add(applied.text)
            text = applied.text
            diagnostics = self.check_text(path, text, settings, in_project=in_project)
            result.text, result.diagnostics = text, diagnostics
            result.fixed += len(applied.applied)
            for i in applied.applied:
                result.fixed_codes[fixable[i].code] = result.fixed_codes.get(fixable[i].code, 0) + 1
        left = sorted({d.code for d in diagnostics if fix_applies(d, unsafe, settings)})
        if left:
            result.warnings.append(
                f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes; still fixable: "
                f"{', '.join(left)} (this is a bug in torchlint, please report it)"
            )
        return result


@dataclass
class FixResult:
    """What `Linter.fix_text` did to one text; unpacks as `(text, fixed, diagnostics)`."""

    text: str  # the fixed text (the given one when nothing applied)
    fixed: int  # fixes applied, over all passes
    diagnostics: list[Diagnostic]  # what remains in `text`
    initial: list[Diagnostic] = field(default_factory=list)  # what the given text had
    fixed_codes: dict[str, int] = field(default_factory=dict)  # fixes applied, by rule code
    warnings: list[str] = field(default_factory=list)  # a fixpoint that was not reached

    def __iter__(self) -> Iterator:
        return iter((self.text, self.fixed, self.diagnostics))


@dataclass
class _FirstLook:
    """A first look's bookkeeping (`Linter.check_own_file`)."""

    later: frozenset[str]  # the rules to run last
    skip_later: bool = False  # or not at all: left to the full check
    deferred: set[str] = field(default_factory=set)  # the rules that asked about another file's code


class _ToyDemo:
    """Which rules a module's facts leave out: advice on speed in a test module, or where every training
    loop trains on rows typed into the script (a few steps over a handful of rows: nothing to gain). Worked
    out once, when the first rule of advice asks; where that asks about another file's code (the first
    look), it is asked again by each such rule, which is then stopped in turn."""

    def __init__(self, facts: ModuleFacts) -> None:
        self.facts = facts
        self.in_tests = facts.is_test_module
        self.toy: bool | None = None

    def skips(self, rule: Rule) -> bool:
        if not rule.speed_advice:
            return False
        if self.in_tests:
            return True
        if self.toy is None:
            self.toy = self.facts.training.toy_demo
        return self.toy


def _trim_heap() -> None:
    """Hand the free pages inside the C heap back to the OS. The facts a check lets go of free many blocks
    too large for Python's own allocator (lists, dict tables, the files' texts); glibc's `free` returns
    memory from the top of its heap only, so the pages between what later checks keep stay counted: about
    30 MB of timm's peak with `-j 1`, 0.2 s over the run. Where the C library has no `malloc_trim` (macOS,
    musl, Windows), nothing."""
    global _malloc_trim
    if _malloc_trim is None:
        import ctypes

        try:
            _malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", False)
        except (OSError, TypeError):  # no C library to open by name (Windows)
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim: Callable[[int], int] | None | bool = None  # glibc's, once looked up (False: none)


def _has_held(size: int) -> bool:
    """Whether this process's peak memory has reached `size` bytes (True where the OS does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return True
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB; bytes on macOS
    return peak * (1 if sys.platform == "darwin" else 1024) >= size


def _findings(rule: Rule, facts: ModuleFacts, path: str) -> list[Diagnostic]:
    """All of a rule's findings, or none: the first look may stop a rule midway."""
    try:
        return list(rule.check(facts))
    except Exception as error:  # noqa: BLE001 - a crashing rule must not take the run down
        raise InternalError(f"{rule.code} crashed on {path}: {error!r}") from error


# The syntax tree is walked recursively (LibCST's own visitors do too): valid code such as 300 implicitly
# concatenated strings in parentheses nests deeper than CPython's default limit of 1000 frames. Python frames
# cost little C stack (none on 3.11+), so a higher limit is safe.
_RECURSION_LIMIT = 10_000


@contextlib.contextmanager
def _room_to_recurse() -> Iterator[None]:
    previous = sys.getrecursionlimit()
    if previous >= _RECURSION_LIMIT:
        yield
        return
    sys.setrecursionlimit(_RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


@contextlib.contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while a file is checked. A check allocates LibCST nodes and records by
    the hundred thousand, and most live as long as the run (the project's facts, asked by later files):
    each full pass of the collector walked all of them again and found almost nothing to free. That was 19%
    of a one-file check of yolov5's models/common.py and 22% of timm's whole tree with `-j 1`, at the same
    peak memory without it. The collector is back on between files (and in the Language Server
    between checks), where its next pass frees what one check left in cycles; a `torchlint` command that
    only checks keeps it off throughout (`cli.entry`), and then this leaves it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _breaking_codes(text: str, path: str, fixable: list[Diagnostic], applied: tuple[int, ...]) -> list[str]:
    """The rules whose fix alone breaks `text`; all of the pass's rules when only their combination does."""
    alone = sorted(
        {
            fixable[i].code
            for i in applied
            if not _compiles(apply(text, [fixable[i].fix]).text, path)  # type: ignore[list-item]
        }
    )
    return alone or sorted({fixable[i].code for i in applied})


def _finish(
    found: list[Diagnostic],
    text: str,
    hygiene: tuple[str, set[str], list[str]] | None,
    ignore_noqa: bool = False,
) -> list[Diagnostic]:
    """Positions, then the noqa hygiene check (TL003, when `hygiene` gives the path, the enabled and the
    known codes: it must see every finding before suppression), then suppression comments (none with
    `--ignore-noqa`), then the order the output uses."""
    check_noqa = hygiene is not None and HYGIENE_CODE in hygiene[1] and may_name_torchlint(text)
    if not found and not check_noqa:
        return found
    lines = LineIndex(text)
    for diagnostic in found:
        lines.locate(diagnostic)
    if check_noqa:
        assert hygiene is not None
        path, enabled, known = hygiene
        fired = [(d.code, d.location.line) for d in found]
        found.extend(lines.locate(d) for d in unused_noqa(path, text, fired, enabled, known))
    if ignore_noqa:
        kept = list(found)
    else:
        suppressions = read_suppressions(text)
        kept = [d for d in found if not suppressions.suppresses(d.code, d.location.line)]
    kept.sort(key=Diagnostic.sort_key)
    return kept


def _pattern_matches(path: str, settings: Settings, pattern: str) -> bool:
    return matches_any(Path(path), settings, pattern)


def _syntax_error(path: str, text: str) -> Diagnostic | None:
    try:
        python_ast(text)  # kept: the statement positions and the Language Server parse the same text
    except SyntaxError as error:
        lines = LineIndex(text)
        line = max(error.lineno or 1, 1)
        column = max((error.offset or 1) - 1, 0)
        start = lines.offset(line, column)
        return Diagnostic(
            "TL001", "syntax-error", f"SyntaxError: {error.msg}", Severity.ERROR, path, start, start
        )
    except (ValueError, RecursionError, MemoryError) as error:
        return Diagnostic("TL001", "syntax-error", f"SyntaxError: {error}", Severity.ERROR, path, 0, 0)
    return None


def _compiles(text: str, path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
        cst.parse_module(text)
    except (SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
        return False
    return True


def io_error(path: str, message: str) -> Diagnostic:
    return Diagnostic("TL002", "io-error", message, Severity.ERROR, path, 0, 0)
