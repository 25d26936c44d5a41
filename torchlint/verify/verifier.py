"""`torchlint verify`: plan the variants, run them interleaved, compare, decide.

Runs go original, variant 1, ..., all fixes, and again in the same order for each repeat (A B A B), so
that a drift in the machine's load touches every arm alike. The original runs first: when it fails
(crashes, exits with an error, never steps an optimizer, times out) nothing can be verified and the other
runs are skipped, unless it crashed midway after the warm-up: then the variants run too, and the steps
before the crash are compared (the exit status is still 2). Exit codes: 0 verified (nothing got worse, or
nothing to fix), 1 a fix made training slower beyond noise, changed the losses, or broke the script, 2
usage errors and a failing original run.

With `--keep` (torchlint.verify.keep) the runs go original and each fix alone, without `all`; then the fixes
that paid run together as the variant `kept` (after the others, compared with the same original runs;
when several do not clearly beat the best of them alone, that set is `all that paid` and the best one runs
again alone as `kept`), and that set is written into the project's files when it paid too. The exit codes
stay the same; a kept set that cannot be written (a file changed on disk meanwhile, or is read-only) is an
error: exit 2, nothing written.

Told to stop by a signal while the runs go (SIGINT, SIGTERM, SIGHUP: `stopping`), it ends the run under
way (its whole process group), removes its scratch folder (unless --keep-logs) and raises `Stopped`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint.verify import compare, keep, patches, tune
from torchlint.verify.runner import RunConfig, RunResult, run_once
from torchlint.verify.stopping import StopFlag, Stopped, stop_on_signals
from torchlint.workspace.fs import FileSystem


@dataclass
class VerifyOptions:
    script: Path
    args: list[str] = field(default_factory=list)
    steps: int = 20
    warmup: int = 5
    device: str = "auto"
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    each: bool = False
    timeout: float = 300.0
    trace_dir: Path | None = None
    torchrun: int | None = None
    repeat: int = 1
    threads: int | None = None  # None: auto (half the CPUs this process may use, at least 1)
    seed: int = 0
    profile_steps: int = 3
    config_file: Path | None = None
    keep_logs: bool = False
    keep: bool = False  # measure each fix, then write the ones that paid (torchlint.verify.keep)
    tune: str | None = None  # "workers": search the training DataLoader's options (torchlint.verify.tune)
    tune_budget: float = 600.0  # seconds of runs the search may start


# What torch says when a script that expects torchrun's environment is started on its own.
DISTRIBUTED_WORDS = (
    "MASTER_ADDR",
    "environment variable RANK",
    "environment variable WORLD_SIZE",
    "LOCAL_RANK",
)


class UsageError(Exception):
    """Bad options or configuration (exit 2 before anything runs)."""


@dataclass
class ArmResult:
    variant: patches.Variant
    runs: list[RunResult] = field(default_factory=list)
    stats: list[compare.RunStats] = field(default_factory=list)
    speed: compare.Speed | None = None
    losses: compare.Losses | None = None
    memory: compare.Memory | None = None
    verdict: str = ""
    failure: str | None = None
    findings: list[compare.RuntimeFinding] = field(default_factory=list)
    compile: dict[str, Any] | None = None  # what torch.compile did in its first run (None: nothing compiled)


@dataclass
class VerifyReport:
    options: VerifyOptions
    threads: int
    cpus: int
    arms: list[ArmResult]
    runs: list[RunResult]
    findings: list[tuple[Any, str]]  # static findings (Diagnostic, absolute path)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    workdir: Path | None = None
    keep: keep.Outcome | None = None  # with --keep: what was kept, dropped and written
    tune: tune.Outcome | None = None  # with --tune: the loader searched, the choice, what was written

    @property
    def busy(self) -> bool:
        """Other work kept the CPUs busy before the runs started (their own load is not counted)."""
        return self.load_before[0] > self.cpus

    @property
    def exit_code(self) -> int:
        if not self.arms or self.arms[0].failure:
            return 2
        # A --tune candidate slower than the script is a point of its curve, not a fix gone wrong.
        fixes = [arm for arm in self.arms[1:] if arm.variant.kind != "tune"]
        if any(arm.verdict in ("slower", "changed losses") or arm.failure for arm in fixes):
            return 1
        return 2 if self.errors else 0

    @property
    def verdict(self) -> str:
        return {0: "verified", 1: "worse", 2: "failed"}[self.exit_code]

    @property
    def device(self) -> str:
        for arm in self.arms:
            for stats in arm.stats:
                return stats.device
        return "cpu" if self.options.device == "cpu" else "unknown"


def torch_installed() -> bool:
    """Whether the interpreter that runs the script (this one) can import torch, asked without importing
    it: the parent side never does."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def available_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


ProgressFactory = Callable[[str, int, int], Callable[[int, int, float], None] | None]


def verify(
    options: VerifyOptions,
    on_start: ProgressFactory | None = None,
    on_end: Callable[[RunResult], None] | None = None,
) -> VerifyReport:
    """Plan, run and compare. `on_start(label, index, count)` may return a progress callback for the run."""
    script = options.script
    fs = FileSystem()
    if not fs.is_file(script):
        raise UsageError(f"{script}: no such file")
    if script.name.endswith(".ipynb"):
        raise UsageError(
            f"{script}: verify runs scripts, not notebooks: export it first "
            f"(`jupyter nbconvert --to script {script}`) and verify the script"
        )
    unstartable = _cannot_start(script, fs)
    if unstartable:
        raise UsageError(unstartable)
    if options.steps < 1 or options.warmup < 0 or options.repeat < 1:
        raise UsageError("--steps and --repeat must be at least 1, --warmup at least 0")
    if options.tune is not None and options.tune not in tune.TUNABLE:
        raise UsageError(f"--tune {options.tune}: what can be tuned is {', '.join(tune.TUNABLE)}")
    if options.tune and options.each:
        raise UsageError(
            "--tune measures the script as it is with one DataLoader's options changed per run, not its "
            "fixes: run --each (or --keep) without --tune to measure the fixes"
        )
    if not torch_installed():
        raise UsageError(
            f"torch is not installed in {sys.executable}, which runs the script: install it there "
            "(`pip install 'torchlint[verify]'` or `pip install torch`), then run verify again"
        )
    try:
        planned = patches.plan(
            script,
            options.select,
            options.ignore,
            options.unsafe_fixes,
            options.each or options.keep,
            options.config_file,
            every_single=options.keep,
        )
    except patches.PatchError as error:
        raise UsageError(str(error)) from error
    cpus = available_cpus()
    threads = options.threads or max(1, cpus // 2)
    config = RunConfig(
        script=script.resolve(),
        args=list(options.args),
        cwd=Path.cwd(),
        steps=options.steps,
        warmup=options.warmup,
        threads=threads,
        device=options.device,
        timeout=options.timeout,
        seed=options.seed,
        profile_steps=options.profile_steps,
        torchrun=options.torchrun,
    )
    arms = [ArmResult(variant) for variant in planned.variants]
    report = VerifyReport(options, threads, cpus, arms, [], planned.findings, list(planned.warnings))
    if options.tune:
        report.arms = arms = arms[:1]  # the candidates come from the original's run
        report.tune = tune.Outcome()
    elif options.keep:
        variants, unmeasured = keep.alone_only(planned.variants)
        report.arms = arms = [ArmResult(variant) for variant in variants]
        report.keep = keep.Outcome(unmeasured)
    if len(arms) == 1 and not options.tune:
        report.notes.append("nothing to fix with the selected rules: only the original was measured")
    if options.trace_dir is not None:
        options.trace_dir.mkdir(parents=True, exist_ok=True)
    with stop_on_signals() as stop:
        workdir = Path(tempfile.mkdtemp(prefix="torchlint-verify-"))
        report.workdir = workdir
        try:
            _run_all(options, config, report, on_start, on_end, stop)
            if report.tune is not None:
                _tune(options, config, report, on_start, on_end, stop)
            _decide(report)
            if report.tune is not None:
                _choose_tuned(report, report.tune)
            if report.keep is not None:
                _measure_kept(options, config, report, on_start, on_end, stop)
        except Stopped as stopped:
            _drop_workdir(stopped, workdir, options.keep_logs)
            raise
    if stop.signum is not None:  # came as the last run ended: nothing is left to end
        stopped = Stopped(stop.signum)
        _drop_workdir(stopped, workdir, options.keep_logs)
        raise stopped
    busiest = max(report.load_before[0], report.load_after[0])
    if busiest > cpus + 0.5:
        report.warnings.append(
            f"the machine was busy (load {busiest:.1f} on {cpus} CPUs, the runs' own included): step times "
            "include waiting for a CPU; rerun on a quiet machine, or with --repeat"
            + (" (a slowdown seen in one run each is reported as inconclusive)" if report.busy else "")
        )
    if not options.keep_logs and not report.errors:
        shutil.rmtree(workdir, ignore_errors=True)
        report.workdir = None
    if report.keep is not None:  # last: a signal before it ended the runs with nothing written
        _write_kept(report, report.keep)
    if report.tune is not None and report.tune.best is not None and options.keep:
        error = tune.write(report.tune, patches.project_folder(options.script))
        if error:
            report.errors.append(error)
    return report


def _cannot_start(script: Path, fs: FileSystem) -> str | None:
    """Why Python could not even start the script (unreadable, undecodable, not Python), in one line naming
    the file and line: said before any run, not as a crash of the original after seconds."""
    import ast

    from torchlint.workspace.source import SourceError, SourceFile

    try:
        text = SourceFile.read(script, fs).text
    except SourceError as error:
        return f"{script}: cannot run: {error}"
    try:
        ast.parse(text, str(script))
    except SyntaxError as error:
        return f"{script}:{error.lineno or 1}:{error.offset or 1}: cannot run: SyntaxError: {error.msg}"
    except ValueError as error:  # NUL bytes and the like
        return f"{script}: cannot run: {error}"
    return None


def _drop_workdir(stopped: Stopped, workdir: Path, keep_logs: bool) -> None:
    """A stopped verify leaves no scratch folder behind, unless asked to keep it (then it is named)."""
    if keep_logs:
        stopped.workdir = str(workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_all(
    options: VerifyOptions,
    config: RunConfig,
    report: VerifyReport,
    on_start: ProgressFactory | None,
    on_end: Callable[[RunResult], None] | None,
    stop: StopFlag,
    only: list[ArmResult] | None = None,
    times: int | None = None,
) -> None:
    """Every run of `only` (default: every arm), `times` each (default: --repeat), interleaved (A B A B),
    into `report`; `Stopped` when a signal comes. `--keep` adds the kept set once the others are decided,
    `--tune` its candidates round after round."""
    arms = report.arms
    chosen = arms if only is None else only
    times = options.repeat if times is None else times
    workdir = report.workdir
    assert workdir is not None
    if not report.runs:
        report.load_before = os.getloadavg()
    index = len(report.runs)
    count = index + len(chosen) * times
    try:
        for _ in range(times):
            for arm in chosen:
                number = arms.index(arm)
                if arm.failure or (number and arms[0].failure and not arms[0].stats):
                    continue
                repeat = len(arm.runs)
                several = options.repeat > 1 or repeat or times > 1 or report.tune is not None
                label = f"{arm.variant.name} #{repeat + 1}" if several else arm.variant.name
                trace = None
                if options.trace_dir is not None:
                    trace = (
                        options.trace_dir / f"{number:02d}-{_slug(arm.variant.name)}-{repeat + 1}.json"
                    ).resolve()
                if stop.signum is not None:  # between two runs
                    raise Stopped(stop.signum)
                progress = on_start(label, index, count) if on_start else None
                result = run_once(
                    config,
                    arm.variant.patched,
                    workdir,
                    label,
                    index,
                    trace,
                    progress,
                    stop,
                    arm.variant.loader_override,
                )
                index += 1
                report.runs.append(result)
                arm.runs.append(result)
                if on_end:
                    on_end(result)
                if result.leftover:
                    report.warnings.append(f"run {label!r}: processes {result.leftover} survived SIGKILL")
                failure = _failure(result, options)
                if failure:
                    arm.failure = failure
                    if arm.variant.kind == "tune":  # a candidate that fails is a point of the curve
                        report.notes.append(failure.splitlines()[0])
                    else:
                        report.errors.append(failure)
                    if result.status == "crashed" and result.raw and result.steps > options.warmup:
                        # Crashed midway: what it measured before the crash is still compared.
                        arm.stats.append(compare.run_stats(result.raw, options.warmup))
                    continue
                assert result.raw is not None
                arm.stats.append(compare.run_stats(result.raw, options.warmup))
                if result.steps < options.warmup + options.steps:
                    asked = options.warmup + options.steps
                    ended = (
                        f"the script ended after {result.steps} of {asked} steps ({options.warmup} warm-up): "
                        "measured what it did"
                    )
                    if not any(note.endswith(ended) for note in report.notes):  # said once, not per run
                        report.notes.append(f"run {label!r}: {ended}")
    finally:
        report.load_after = os.getloadavg()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-") or "run"


def _failure(result: RunResult, options: VerifyOptions) -> str | None:
    """What went wrong in a run, said plainly; None when it measured steps."""
    where = f"run {result.label!r}"
    if result.status == "timeout":
        steps = result.steps
        return (
            f"{where} timed out after {options.timeout:g} s ({steps} steps done); its whole process group "
            f"was killed ({result.stray_killed} processes left after the main one)"
        )
    if result.status == "no-device":
        return f"{where}: --device cuda, but CUDA is not available to {sys.executable}"
    if result.status == "crashed":
        trace = (result.raw or {}).get("traceback") or ""
        hint = ""
        if not options.torchrun and any(word in trace for word in DISTRIBUTED_WORDS):
            hint = "\nhint: a distributed script started without a launcher: try --torchrun N"
        return f"{where}: the script crashed after {result.steps} steps:\n{trace.rstrip()}{hint}"
    if result.status == "exited":
        code = (result.raw or {}).get("exit_code")
        tail = result.log_tail(15)
        return f"{where}: the script exited with status {code} after {result.steps} steps\n{tail}".rstrip()
    if result.status == "no-result":
        tail = result.log_tail(20)
        return f"{where}: the run ended (exit status {result.returncode}) without a result:\n{tail}".rstrip()
    batches = (result.raw or {}).get("no_step_after_batches")
    if result.steps == 0 and batches:
        return (
            f"{where}: stopped after its DataLoaders yielded {batches} batches without an optimizer step "
            "(no `optimizer.step()` nor `scaler.step(optimizer)` ran), so there is nothing to time: does it "
            "update its weights by hand, or through an optimizer torchlint does not see?"
        )
    if result.steps == 0:
        return (
            f"{where}: the script finished without ever stepping an optimizer (no `optimizer.step()` nor "
            "`scaler.step(optimizer)` ran), so there is nothing to time; check its arguments "
            "(e.g. a dataset or an epoch count of 0) or that it trains at all"
        )
    return None


def _decide(report: VerifyReport, first: int = 0) -> None:
    """The verdicts of the arms from `first` on, each against the original (`--keep` decides its kept set
    after the others)."""
    original = report.arms[0]
    static: dict[tuple[str, int], list[str]] = {}
    for diagnostic, path in report.findings:
        static.setdefault((os.path.realpath(path), diagnostic.location.line), []).append(diagnostic.code)

    def static_at(filename: str, line: int) -> list[str]:
        return sorted(set(static.get((os.path.realpath(filename), line), [])))

    for arm in report.arms[first:]:
        if arm.runs and arm.stats and arm.runs[0].raw is not None:
            arm.findings = compare.runtime_findings(arm.runs[0].raw, arm.stats[0], static_at)
        if arm.runs and arm.runs[0].raw is not None:
            arm.compile = compare.compile_summary(arm.runs[0].raw, static_at)
    if not original.stats:
        original.verdict = "failed" if original.failure else "not run"
        for arm in report.arms[1:]:
            arm.verdict = "not run"
        return
    crashed = original.failure is not None  # midway: the steps before the crash are compared
    original.verdict = "baseline (crashed)" if crashed else "baseline"
    for arm in report.arms[max(first, 1) :]:
        if arm.failure and not (crashed and arm.stats):
            arm.verdict = "broke the script"
            continue
        if not arm.stats:
            arm.verdict = "not run"
            continue
        arm.speed = compare.compare_speed(original.stats, arm.stats)
        arm.memory = compare.compare_memory(original.stats, arm.stats)
        if arm.variant.kind == "tune":
            why = "worker processes draw other random numbers for augmentations"
            arm.losses = compare.compare_losses(original.stats[0], arm.stats[0], True, why)
        else:
            loose = compare.loose_losses(arm.variant.codes, arm.variant.applicabilities)
            arm.losses = compare.compare_losses(original.stats[0], arm.stats[0], loose)
        if arm.losses.verdict == "differ":
            arm.verdict = "changed losses"
        elif compare.trades_time_for_memory(arm.variant.codes) and arm.memory.verdict == "less":
            # What checkpointing is for; its cost in time is in the speed column.
            arm.verdict = "less memory"
        elif compare.trades_time_for_memory(arm.variant.codes) and arm.memory.verdict == "unknown":
            # Its time is not the question, and what it saves was not measured.
            arm.verdict = "inconclusive"
            report.notes.append(
                f"{arm.variant.name}: a checkpointing fix, but no step was profiled in both runs to measure "
                "its step memory: give the script enough steps for --warmup + 3, or lower --warmup"
            )
        elif compare.not_measurable_here(arm.variant.codes, report.device):
            # Pinned memory, non_blocking without CUDA: any difference measured is the machine's noise.
            arm.verdict = "not measurable here"
        elif arm.speed.verdict in ("slower", "faster") and report.busy and _one_run(arm, original):
            # One run each on a machine busy with other work: a drift of its load looks like a change.
            arm.verdict = "inconclusive"
        else:
            arm.verdict = arm.speed.verdict


def _one_run(arm: ArmResult, original: ArmResult) -> bool:
    """Either arm ran once (`--tune`'s finalists run in several rounds, whatever --repeat says)."""
    return min(len(arm.runs), len(original.runs)) < 2


def _measure_kept(
    options: VerifyOptions,
    config: RunConfig,
    report: VerifyReport,
    on_start: ProgressFactory | None,
    on_end: Callable[[RunResult], None] | None,
    stop: StopFlag,
) -> None:
    """`--keep`: choose the fixes that paid alone, combine them, and run and decide that set (`kept`)."""
    outcome = report.keep
    assert outcome is not None
    project = patches.project_folder(options.script)
    outcome.choices = keep.choose(report.arms, outcome.unmeasured, project, report.device)
    if report.arms[0].failure:
        outcome.message = "the original run failed: no fix kept, no file written"
        outcome.choices = [keep.Choice(choice.fix, False, "not measured") for choice in outcome.choices]
        return
    if not outcome.kept:
        outcome.message = "nothing paid: no fix kept, no file written"
        return
    together = _run_kept(options, config, report, outcome.kept, on_start, on_end, stop)
    best = keep.fall_back(outcome, together, report.arms) if together is not None else None
    if together is not None and best is not None:
        together.variant.name, together.variant.kind = "all that paid", "together"
        _run_kept(options, config, report, [best], on_start, on_end, stop)


def _tune(
    options: VerifyOptions,
    config: RunConfig,
    report: VerifyReport,
    on_start: ProgressFactory | None,
    on_end: Callable[[RunResult], None] | None,
    stop: StopFlag,
) -> None:
    """`--tune workers`: successive halving over the loader's worker counts (the original runs in every
    round), then the winner against twice its prefetching; the choice is made once all is decided."""
    outcome = report.tune
    assert outcome is not None
    original = report.arms[0]
    raw = original.runs[0].raw if original.runs else None
    if original.failure or not original.stats or raw is None:
        outcome.message = "the original run failed: nothing tuned, no file written"
        return
    found = tune.target(raw, patches.project_folder(options.script))
    if isinstance(found, str):
        outcome.message = found
        return
    outcome.loader = found
    candidates = [ArmResult(variant) for variant in tune.candidates(found, report.cpus)]
    report.arms.extend(candidates)
    started = time.monotonic()
    running: list[ArmResult] = candidates
    field = [original, *candidates]
    while True:
        _run_all(options, config, report, on_start, on_end, stop, only=running)
        outcome.rounds += 1
        field = tune.halve(field)
        if len(field) <= 1:
            break
        running = field if original in field else [original, *field]
        left = options.tune_budget - (time.monotonic() - started)
        if not tune.round_fits(left, len(running) * options.repeat, report.runs):
            report.notes.append(
                f"--tune: the time budget ({options.tune_budget:g} s) ended the search after "
                f"{outcome.rounds} round(s), {len(field)} candidates left: the fastest of them is chosen"
            )
            break
    outcome.finalists = list(field)
    winner = min(field, key=tune.step_time, default=None)
    challenger = tune.more_prefetching(found, winner) if winner is not None else None
    left = options.tune_budget - (time.monotonic() - started)
    if winner is None or challenger is None:
        return
    if not tune.round_fits(left, 4 * options.repeat, report.runs):
        report.notes.append("--tune: no time left in the budget to try more prefetching")
        return
    extra = ArmResult(challenger)
    report.arms.append(extra)
    _run_all(options, config, report, on_start, on_end, stop, only=[extra, winner], times=2 * options.repeat)
    outcome.prefetch = (extra, winner)


def _choose_tuned(report: VerifyReport, outcome: tune.Outcome) -> None:
    """`--tune`: once every candidate is decided against the original, the one to recommend."""
    if outcome.loader is None:
        return
    finalists = list(outcome.finalists)
    challenger, base = outcome.prefetch or (None, None)
    if challenger is not None and tune.better_prefetching(challenger, base):
        finalists.append(challenger)
    tune.choose(outcome, finalists, report.arms[0])


def _run_kept(
    options: VerifyOptions,
    config: RunConfig,
    report: VerifyReport,
    fixes: list[patches.AppliedFix],
    on_start: ProgressFactory | None,
    on_end: Callable[[RunResult], None] | None,
    stop: StopFlag,
) -> ArmResult | None:
    """Combine `fixes` in the files, run them as the variant `kept` and decide it; None, with the reason in
    the outcome, when there is nothing to run."""
    outcome = report.keep
    assert outcome is not None
    outcome.variant = None
    try:
        combined = keep.combine(
            fixes, report.arms, options.select, options.ignore, options.unsafe_fixes, options.config_file
        )
    except keep.KeepError as error:
        report.errors.append(f"--keep: {error}; nothing written")
        outcome.message = "nothing written (see the error above)"
        return None
    for fix in combined.left_out:
        outcome.drop(fix, "its edits overlap another kept fix's and it was not found again after them")
    if not combined.variant.fixes:
        outcome.message = "nothing paid: no fix kept, no file written"
        return None
    outcome.variant, outcome.sources = combined.variant, combined.sources
    arm = ArmResult(combined.variant)
    report.arms.append(arm)
    _run_all(options, config, report, on_start, on_end, stop, only=[arm])
    _decide(report, first=len(report.arms) - 1)
    return arm


def _write_kept(report: VerifyReport, outcome: keep.Outcome) -> None:
    """Write the kept set when it paid together too (its arm is the last); a refused write is an error."""
    if outcome.variant is not None:
        error = keep.finish(outcome, report.arms[-1])
        if error:
            report.errors.append(error)
