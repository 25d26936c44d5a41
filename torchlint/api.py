"""A whole run over paths: discover, check (and fix) every file, collect what the reporters need.

Failures are per file: an unreadable file becomes a TL002 finding; a crash in a rule, a refused fix or a
refused write an error naming the file (exit 2), which is then left as it was; the other files are still
checked and fixed.

Every file-system question of a run goes through one `torchlint.workspace.fs.FileSystem`, created here and
handed to every reader: a `torchlint.cache.fs.RecordingFileSystem` for a run that `torchlint.cache.replay`
records (each worker process has its own, whose record comes back with its outcome), the plain one
otherwise.

This module is imported by a replayed run (`replay`), so it stays light at the top: the linter, LibCST,
pathspec and the config machinery are imported by the functions that run a check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.outcome import Outcome, RunOptions
from torchlint.positions import Position
from torchlint.workspace.fs import FileSystem

if TYPE_CHECKING:
    from collections.abc import Callable

    from torchlint.cache.results import ResultCache
    from torchlint.linter import Linter
    from torchlint.verify.runner import RunResult
    from torchlint.verify.verifier import ProgressFactory, VerifyOptions, VerifyReport
    from torchlint.workspace.discovery import Target
    from torchlint.workspace.source import SourceFile

__all__ = ["Outcome", "RunOptions", "available_cpus", "choose_jobs", "discovered", "replay", "run", "verify"]

# The default number of processes is chosen by the work a run has, not by its number of files: each worker
# pays LibCST's and the rules' import (about half a second) and builds its own copy of the project's
# cross-file facts, which the files it checks consult (on yolov5, whose files all reach the same models,
# nearly the whole run again). So a run stays in one process until the source that needs the LibCST
# analysis (the files the prefilter passes, about 70-100 KB per CPU-second) amounts to WORK_PER_PROCESS
# bytes per process, about two seconds of work, and never starts more processes than there are idle CPUs
# (`_load`): on a busy machine a second process only competes with the first. Measured on an idle 2-core
# machine: two processes took pytorch/examples from 4.2 to 2.2 s, timm from 29.9 to 19.6 s, and left
# yolov5 where it was (docs/speed-and-cache.md); the small trees (DiT, minGPT, detr) stay in one.
WORK_PER_PROCESS = 150_000
# A run analysing this many files is a tree's: every file's facts are built for its own check, so
# cross-file questions build other files' rather than ask their exports first (`Linter.ask_exports`).
TREE = 8


def replay(options: RunOptions) -> Outcome | None:
    """The stored outcome of this very run when nothing it read has changed, else None (then `run` it).
    Light: it imports neither the linter, LibCST, pathspec nor the config machinery."""
    from torchlint.cache import replay as replays

    return replays.replay(options)


def run(options: RunOptions, linter: Linter | None = None) -> Outcome:
    """Check (or fix) every file; a clean check run is recorded for `torchlint.cache.replay`.

    Only a run with a fresh linter is recorded: a linter passed in may already know files (its projects'
    facts) without this run having observed them. Such a run reads through the linter's FileSystem.
    """
    from torchlint.cache import replay as replays
    from torchlint.cache.fs import RecordingFileSystem
    from torchlint.linter import Linter

    recording = linter is None and replays.replayable(options)
    if linter is not None:
        fs = getattr(linter, "fs", None) or FileSystem()
    else:
        fs = RecordingFileSystem() if recording else FileSystem()
        linter = Linter(prefilter=options.prefilter, fs=fs)
    if recording:
        replays.start_recording(options)
    outcome = _run(options, linter, fs)
    if recording:
        assert isinstance(fs, RecordingFileSystem)
        fs.absorb(outcome.observed)  # what worker processes read
        replays.record(options, outcome, fs.record)
    return outcome


def verify(
    options: VerifyOptions,
    on_start: ProgressFactory | None = None,
    on_end: Callable[[RunResult], None] | None = None,
) -> VerifyReport:
    """`torchlint verify`: run the script before and after its fixes (torchlint.verify.verifier); this
    process never imports torch. `on_start(label, index, count)` may return a per-run progress callback;
    `on_end(run)` sees each finished run."""
    from torchlint.verify.verifier import verify as run_verify

    return run_verify(options, on_start, on_end)


def discovered(options: RunOptions, linter: Linter | None = None) -> tuple[list[Target], Outcome]:
    """The files a run would check, each with its settings, and what discovery said (`--show-files`,
    `--show-settings`): the run's own discovery, nothing checked."""
    from torchlint.linter import Linter

    linter = linter or Linter(prefilter=options.prefilter)
    outcome = Outcome()
    return _discover(options, linter, linter.fs, outcome), outcome


def _discover(options: RunOptions, linter: Linter, fs: FileSystem, outcome: Outcome) -> list[Target]:
    """Empty, with the error in `outcome`, when the configuration is wrong."""
    from torchlint.workspace.discovery import Notes, SettingsResolver, discover
    from torchlint.workspace.settings import ConfigError

    codes = list(linter.rule_classes)
    options_by_rule = {code: rule.options for code, rule in linter.rule_classes.items()}
    try:
        options.overrides.validate(codes)
        resolver = SettingsResolver(
            codes, options_by_rule, options.config_file, options.overrides, fs=fs, isolated=options.isolated
        )
        notes = Notes(outcome.warnings, outcome.errors)
        return discover(options.paths, resolver, options.force_exclude, notes)
    except ConfigError as error:
        outcome.errors.append(str(error))
        return []


def _run(options: RunOptions, linter: Linter, fs: FileSystem) -> Outcome:
    outcome = Outcome()
    targets = _discover(options, linter, fs, outcome)
    if not targets and outcome.errors:
        return outcome

    if targets and not any(linter.rules_for(target.settings, target.display) for target in targets):
        selection = "see --select, --ignore and the configuration"
        outcome.errors.append(f"no rule is enabled for any file ({selection}): nothing was checked")
        return outcome

    worker = _Worker(linter, options, fs)
    # Cache hits are answered here; only the files that need checking go to other processes.
    results: list[Outcome | None] = [worker.check(target, cached_only=True) for target in targets]
    pending = [index for index, result in enumerate(results) if result is None]
    forced = os.environ.get("TORCHLINT_ASK_EXPORTS", "")  # "1" or "0": the benchmarks' and checks' switch
    asks_exports = forced == "1" if forced in ("0", "1") else len(pending) < TREE
    linter.ask_exports(asks_exports)
    lets_go = len(pending) >= TREE  # a whole tree: each file's facts are let go after its check
    linter.let_go(lets_go)
    jobs = options.jobs or choose_jobs(sum(worker.work.values()), available_cpus(), _load())
    if jobs > 1 and len(pending) > 1:
        checked = _in_parallel([targets[index] for index in pending], options, jobs, asks_exports, lets_go)
        outcome.processes = jobs
        for result in checked:  # the workers' exports: this process writes the store, once
            linter.receive(result.exports)
            result.exports = {}
    else:
        checked = [worker.check(targets[index]) for index in pending]
    linter.flush()
    for index, result in zip(pending, checked, strict=True):
        results[index] = result
    for result in results:  # in discovery order, whatever the number of processes
        assert result is not None
        outcome.merge(result)
    outcome.diagnostics.sort(key=Diagnostic.sort_key)
    return outcome


def choose_jobs(work: int, cpus: int, load: float | None) -> int:
    """The default `--jobs`: one process per WORK_PER_PROCESS bytes to analyse, at most the idle CPUs (`cpus`
    less the load, where the OS gives one: `_load`)."""
    idle = cpus if load is None else cpus - int(load)
    return max(1, min(cpus, idle, work // WORK_PER_PROCESS))


def _load() -> float | None:
    """How many CPUs other work keeps busy: the 1-minute load average, or, where Linux tells it, the tasks
    runnable right now besides this one when they are fewer. The average lags: just after a previous run
    (the last commit's hook, the benchmark's previous command) it still counts that run as busy for a
    minute, and a run deciding by it alone stayed in one process on an idle machine (timm: 33.6 s instead
    of 23.7 s with two)."""
    try:
        average = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        return None
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            running = int(handle.read().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return average
    return float(min(average, max(running, 0)))


def available_cpus() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _in_parallel(
    targets: list[Target], options: RunOptions, jobs: int, asks_exports: bool, lets_go: bool
) -> list[Outcome]:
    """The targets checked by `jobs` worker processes, in order.

    Stopping is the parent's: workers ignore SIGINT (Ctrl-C reaches the whole process group), and when the
    parent is interrupted or fails it raises `stop`, which each worker checks before every file, so no file
    is started after that (one being written is finished: writes are atomic). A worker whose parent died
    (SIGKILL, the OOM killer, a CI timeout) stops the same way, seeing that its parent is no longer the one
    that started it.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context()
    stop = context.Event()
    chunk = max(1, len(targets) // (jobs * 4))
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_start_worker,
        initargs=(options, stop, os.getpid(), asks_exports, lets_go),
    )
    try:
        return list(pool.map(_check_in_worker, targets, chunksize=chunk))
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


_process_worker: _Worker | None = None
_process_stop = None  # the parent's stop event, in a worker process
_process_parent = 0  # the pid of the parent that started this worker


def _start_worker(options: RunOptions, stop, parent: int, asks_exports: bool, lets_go: bool) -> None:
    """A worker process's own FileSystem (recording when the parent records) and linter."""
    import signal

    from torchlint.cache import replay as replays
    from torchlint.cache.fs import RecordingFileSystem
    from torchlint.linter import Linter

    global _process_worker, _process_stop, _process_parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _process_stop, _process_parent = stop, parent
    fs = RecordingFileSystem() if replays.replayable(options) else FileSystem()
    linter = Linter(prefilter=options.prefilter, fs=fs)
    linter.ask_exports(asks_exports)
    linter.let_go(lets_go)
    _process_worker = _Worker(linter, options, fs, hands_over=True)


def _check_in_worker(target: Target) -> Outcome:
    """One file in a worker process; what it read comes back with the outcome, for the parent's record."""
    from torchlint.cache.fs import RecordingFileSystem

    if os.getppid() != _process_parent:
        os._exit(1)  # orphaned: nobody will read the result, and no file may be written any more
    if _process_stop is not None and _process_stop.is_set():
        return Outcome()  # the parent stopped the run; it does not read this
    assert _process_worker is not None
    outcome = _process_worker.check(target)
    assert outcome is not None
    fs = _process_worker.fs
    outcome.observed = fs.drain() if isinstance(fs, RecordingFileSystem) else {}
    outcome.exports = _process_worker.linter.handover()
    return outcome


class _Worker:
    """Checks (and fixes) one file at a time; one per process, with its linter, projects and caches."""

    def __init__(self, linter: Linter, options: RunOptions, fs: FileSystem, hands_over: bool = False) -> None:
        self.linter = linter
        self.options = options
        self.fs = fs
        self.hands_over = hands_over  # a worker process: the exports it computes go to the parent
        self._caches: dict[Path, ResultCache] = {}
        if options.cache:  # the project index's import scan remembers files by content, in the same folder
            linter.import_summaries = self._import_summaries
        # The files the cache could not answer, and the bytes each has to analyse (for choose_jobs).
        self.work: dict[Path, int] = {}

    def _import_summaries(self, root: Path):
        from torchlint.cache.folder import cache_folder
        from torchlint.cache.imports import ImportsCache

        # In the project's cache folder (`root` itself, unless it is a folder outside the working directory
        # with no project of its own: that one's summaries are kept where its results are).
        store = ImportsCache(cache_folder(self.linter.root_of(root), self.options.cache_dir), root)
        store.hands_over = self.hands_over
        return store

    def _cache_for(self, target: Target) -> ResultCache | None:
        from torchlint.cache.results import ResultCache

        if not self.options.cache or self.options.fix or self.options.diff or self.options.add_noqa:
            return None
        root = self.linter.root_of(target.path.parent.resolve())
        if root not in self._caches:
            self._caches[root] = ResultCache(root, self.fs, self.options.cache_dir)
        return self._caches[root]

    def check(self, target: Target, cached_only: bool = False) -> Outcome | None:
        """The outcome for one file; with `cached_only`, None unless the cache can answer."""
        from torchlint.linter import InternalError, io_error
        from torchlint.workspace.settings import enabled_codes
        from torchlint.workspace.source import SourceError, SourceFile

        outcome = Outcome(files_checked=1)
        linter, options = self.linter, self.options
        settings = target.settings
        try:
            source = SourceFile.read(target.path, self.fs)
        except SourceError as error:
            if cached_only:
                return None
            if "TL002" in enabled_codes(settings, ["TL002"]):
                diagnostic = io_error(target.display, f"{target.display}: {error}")
                LineIndex("").locate(diagnostic)
                diagnostic.location = diagnostic.end_location = Position(error.line, 1)
                outcome.diagnostics.append(diagnostic)
                outcome.blocking += 1
            return outcome
        unsafe = options.unsafe_fixes or settings.unsafe_fixes
        parsed_before, cached_before = linter.parsed, linter.from_cache
        try:
            if cached_only:
                found = self._from_cache(target, source)
                if found is None:
                    self.work[target.path] = self._work(target, source)
                    return None
                text, diagnostics = source.text, found
            elif options.add_noqa:
                text, diagnostics = source.text, []
                _add_noqa_one(linter, target, source, outcome, options.noqa_reason)
            elif options.fix or options.diff:
                text, diagnostics = _fix_one(linter, target, source, options, unsafe, outcome)
            else:
                text = source.text
                diagnostics = self._check_cached(target, source)
        except InternalError as error:
            outcome.errors.append(f"internal error: {error}")
            outcome.files_failed.append(target.display)
            return outcome
        except Exception as error:  # noqa: BLE001 - one file failing must not stop the others
            outcome.errors.append(f"internal error: {target.display}: {error!r}")
            outcome.files_failed.append(target.display)
            return outcome
        outcome.parsed = 1 if linter.parsed > parsed_before else 0
        outcome.from_cache = 1 if linter.from_cache > cached_before else 0
        outcome.add_findings(target.display, text, diagnostics, unsafe, settings, source.cells)
        return outcome

    def _work(self, target: Target, source: SourceFile) -> int:
        """What checking this file costs, in bytes of source: all of it when the LibCST analysis runs, next
        to nothing when the prefilter lets only the syntax check run."""
        rules = self.linter.rules_for(target.settings, target.display)
        if not self.linter.prefilter or any(r.could_fire(source.text) for r in rules if r.code[2] != "0"):
            return len(source.raw)
        return len(source.raw) // 50

    def _key(self, cache: ResultCache, target: Target, source: SourceFile) -> str:
        enabled = [rule.code for rule in self.linter.rules_for(target.settings, target.display)]
        return cache.key_for(target.display, source.raw, target.settings, enabled)

    def _from_cache(self, target: Target, source: SourceFile) -> list[Diagnostic] | None:
        from torchlint.cache.results import file_list_digest

        cache = self._cache_for(target)
        if cache is None:
            return None
        cached = cache.load(
            self._key(cache, target, source),
            lambda: file_list_digest(self.linter.project_for(target.path).python_files()),
        )
        if cached is not None:
            self.linter.from_cache += 1
        return cached

    def _check_cached(self, target: Target, source: SourceFile) -> list[Diagnostic]:
        cache = self._cache_for(target)
        settings = target.settings
        if cache is None:
            return self.linter.check_text(target.display, source.text, settings)
        key = self._key(cache, target, source)
        diagnostics = self.linter.check_text(target.display, source.text, settings)
        project = self.linter.project_for(target.path) if self.fs.is_file(target.path) else None
        cache.store_checked(key, diagnostics, project, target.path)
        return diagnostics


def _fix_one(
    linter: Linter,
    target: Target,
    source: SourceFile,
    options: RunOptions,
    unsafe: bool,
    outcome: Outcome,
) -> tuple[str, list[Diagnostic]]:
    """Fix one file (write it, or record its diff); the text and the findings to report for it.

    A refused result (InternalError from the fixer) or a refused write leaves the file as it was: it is
    reported as an error and its findings are those of the original text.
    """
    from torchlint.fix.write import WriteRefused, write_source
    from torchlint.linter import InternalError

    try:
        result = linter.fix_text(target.display, source.text, target.settings, unsafe)
    except InternalError as error:
        outcome.errors.append(f"internal error: {error}")
        outcome.files_failed.append(target.display)
        return source.text, linter.check_text(target.display, source.text, target.settings)
    outcome.warnings.extend(result.warnings)
    if result.text == source.text:
        return result.text, result.diagnostics
    if options.diff:
        outcome.diffs.extend(source.diffs(target.display, result.text))
    else:
        try:
            write_source(source, result.text)
        except WriteRefused as refused:
            outcome.errors.append(f"{target.display}: not written: {refused}")
            outcome.files_failed.append(target.display)
            outcome.files_unwritten.append(target.display)
            return source.text, result.initial
    outcome.fixed += result.fixed
    outcome.fixed_codes[target.display] = dict(result.fixed_codes)
    outcome.files_fixed.append(target.display)
    return result.text, result.diagnostics


def _add_noqa_one(
    linter: Linter, target: Target, source: SourceFile, outcome: Outcome, reason: str = ""
) -> None:
    """`--add-noqa[=REASON]`: write `# noqa: CODES [REASON]` on the line of each finding of this file
    (merged into the line's `# noqa: ...`); TL0xx findings (a syntax error, an unreadable file, a stale
    noqa) get none."""
    from torchlint.fix.write import WriteRefused, write_source
    from torchlint.noqa import add_noqa

    codes_by_line: dict[int, set[str]] = {}
    for d in linter.check_text(target.display, source.text, target.settings):
        if d.code[2] != "0":
            codes_by_line.setdefault(d.location.line, set()).add(d.code)
    if not codes_by_line:
        return
    text, added = add_noqa(source.text, codes_by_line, reason)
    if not added:
        return
    try:
        write_source(source, text)
    except WriteRefused as refused:
        outcome.errors.append(f"{target.display}: not written: {refused}")
        outcome.files_failed.append(target.display)
        outcome.files_unwritten.append(target.display)
        return
    outcome.noqa_added += added
    outcome.files_fixed.append(target.display)
