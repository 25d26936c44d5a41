"""`torchlint verify --keep`: keep the fixes that paid, measure them together, write them.

Each fix is first measured alone (as `--each`; `all` is not run, the kept set takes its place). A fix is
kept when its verdict is `faster`, or `less memory` for checkpointing (TL4xx), and its losses agree; every
other one is dropped with its reason and figure. `no change` is dropped too: a fix that does not pay on
this machine is not worth a change in the user's code. A fix that applies only on top of another (TL203's
`persistent_workers` after TL201's workers) was never measured alone, so it is dropped, with the advice to
run `--keep` again once the other is in. On a CPU, a fix that acts only with a GPU is dropped whatever it
measured (`GPU_ONLY`).

The kept fixes are combined in the files as they are now, the way the fixer combines fixes (`fix.apply`;
one whose edits overlap another's waits for a later pass, where it is found again by its code near its
line), after checking that each fix still makes exactly the text that was measured. That set runs as the
variant `kept`; when several fixes together do not clearly beat the best of them alone, that set becomes
`all that paid` and the best one runs again alone as `kept` (`fall_back`). The kept set is written only
when it paid too, with the safe writer (the guarantees of `--fix`:
encodings kept, atomic, refused when a file changed on disk since it was read), and only inside the
project: every file of the set, or none.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from torchlint.diagnostics import Diagnostic
from torchlint.fix.apply import apply
from torchlint.fix.write import WriteRefused, signals_held, write_source
from torchlint.linter import MAX_FIX_PASSES, Linter, _compiles
from torchlint.verify import compare
from torchlint.verify.patches import AppliedFix, Variant, shown
from torchlint.workspace.discovery import SettingsResolver, Target, discover
from torchlint.workspace.settings import CliOverrides, ConfigError
from torchlint.workspace.source import SourceError, SourceFile

PAID = ("faster", "less memory")
NOT_ALONE = (
    "not measured alone: it applies only together with another fix; run --keep again once that one is in"
)
GPU_ONLY = compare.GPU_ONLY  # dropped on a CPU whatever they measured (their verdict: not measurable here)


class KeepError(Exception):
    """The kept fixes cannot be combined as they were measured (a file changed since): nothing is written."""


class Measured(Protocol):
    """A measured variant, as the verifier's `ArmResult` holds it."""

    variant: Variant
    verdict: str
    failure: str | None
    speed: compare.Speed | None
    losses: compare.Losses | None
    memory: compare.Memory | None


@dataclass(frozen=True)
class Choice:
    fix: AppliedFix
    kept: bool
    reason: str  # why, with its figure: "1.92x faster, losses agree", "no change (1.01x)"

    def to_json(self) -> dict[str, Any]:
        fix = self.fix.to_json(Path.cwd())
        return {key: fix[key] for key in ("code", "filename", "location")} | {"reason": self.reason}


@dataclass
class Outcome:
    """What `--keep` decided and did; `variant` is the kept set once it was combined."""

    unmeasured: list[AppliedFix] = field(default_factory=list)  # fixes that applied only with others
    choices: list[Choice] = field(default_factory=list)
    variant: Variant | None = None
    sources: dict[str, SourceFile] = field(default_factory=dict)  # what the kept texts were computed from
    written: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def kept(self) -> list[AppliedFix]:
        return [choice.fix for choice in self.choices if choice.kept]

    def drop(self, fix: AppliedFix, reason: str) -> None:
        self.choices = [Choice(c.fix, False, reason) if c.fix == fix else c for c in self.choices]


# -- what to measure and what paid ---------------------------------------------------------------------------


def alone_only(variants: list[Variant]) -> tuple[list[Variant], list[AppliedFix]]:
    """The variants `--keep` runs (the original and each fix alone) and the fixes that none of them
    measures alone (`all` lists them: fixes of a later pass, or whose edits apply only with another's)."""
    alone = [v for v in variants if v.kind != "all"]
    every = next((v.fixes for v in variants if v.kind == "all"), [])
    left = [fix for v in alone for fix in v.fixes]
    unmeasured = []
    for fix in every:
        twin = next((f for f in left if (f.code, f.path) == (fix.code, fix.path)), None)
        if twin is None:
            unmeasured.append(fix)
        else:
            left.remove(twin)
    return alone, unmeasured


def choose(
    measured: Sequence[Measured], unmeasured: list[AppliedFix], project: Path, device: str
) -> list[Choice]:
    """Kept or dropped, with the reason, for each fix measured alone (on `device`, `cpu` or `cuda`), then
    for those that were not."""
    choices = []
    for arm in measured:
        if arm.variant.kind != "each":
            continue
        fix = arm.variant.fixes[0]
        if not Path(os.path.realpath(fix.path)).is_relative_to(project):
            choices.append(Choice(fix, False, f"outside the project ({project}): never written"))
        elif device != "cuda" and fix.code in GPU_ONLY:
            choices.append(Choice(fix, False, f"not measurable on a CPU: {GPU_ONLY[fix.code]}"))
        else:
            choices.append(Choice(fix, *judge(arm)))
    choices.extend(Choice(fix, False, NOT_ALONE) for fix in unmeasured)
    return choices


def judge(arm: Measured) -> tuple[bool, str]:
    """Whether a measured variant paid, and the reason with its figure."""
    speed = _ratio(arm.speed.speedup if arm.speed else None)
    losses = arm.losses.verdict if arm.losses else "not compared"
    if arm.verdict in PAID and losses != "agree":
        detail = arm.losses.detail if arm.losses and arm.losses.detail else "no loss was recorded"
        return False, f"{arm.verdict} ({speed}), but its losses were not compared: {detail}"
    if arm.verdict == "faster":
        return True, f"{speed} faster, losses agree"
    if arm.verdict == "less memory":
        memory = _ratio(arm.memory.working_change if arm.memory else None)
        return True, f"{memory} the step memory at {speed} the speed, losses agree"
    return False, _why_not(arm, speed)


def _why_not(arm: Measured, speed: str) -> str:
    if arm.verdict in ("no change", "slower"):
        return f"{arm.verdict} ({speed})"
    if arm.verdict == "changed losses":
        return f"changed the losses ({arm.losses.detail if arm.losses else 'see the table'})"
    if arm.verdict == "broke the script":
        return f"broke the script ({(arm.failure or '').splitlines()[0].rstrip(':')})"
    if arm.verdict == "inconclusive" and compare.trades_time_for_memory(arm.variant.codes):
        return "inconclusive: its step memory was not measured"
    if arm.verdict == "inconclusive":
        return f"inconclusive ({speed} in one run on a busy machine: rerun with --repeat)"
    return arm.verdict or "not run"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fall_back(outcome: Outcome, together: Measured, measured: Sequence[Measured]) -> AppliedFix | None:
    """The one fix to measure again alone as `kept` when several paid alone but together did not clearly
    beat the best of them alone, else None; the others are then dropped, saying so.

    A fix can pay alone and add nothing, or cost, beside another: on a 2-core CPU, compiling measured
    1.05x alone on a loader-bound script, and 2.00x with workers, which were 2.05x alone (the steps wait
    for data either way); elsewhere workers went from 1.58x alone to 1.28x with compiling (the compiled
    steps and the workers share the cores). "Clearly": by more than NOISE, since a fix that adds less is
    not worth its change to the code. A set with a checkpointing fix is judged on its memory, not against a
    speed-up: it falls back only when it did not pay at all."""
    kept = outcome.kept
    alone = {arm.variant.fixes[0]: arm for arm in measured if arm.variant.kind == "each"}
    faster = [fix for fix in kept if alone[fix].verdict == "faster" and alone[fix].speed is not None]
    if len(kept) < 2 or not faster:
        return None
    best = max(faster, key=lambda fix: _speedup(alone[fix]))
    paid, _ = judge(together)
    beats_best = _speedup(together) >= _speedup(alone[best]) * (1 + compare.NOISE)
    if paid and (beats_best or len(faster) < len(kept)):
        return None
    measured_together = (
        f"the {len(kept)} that paid measured {_ratio(_speedup(together))} together "
        f"({best.code}: {_ratio(_speedup(alone[best]))} alone)"
    )
    figures = {choice.fix: choice.reason.removesuffix(", losses agree") for choice in outcome.choices}
    for fix in kept:
        if fix != best:
            outcome.drop(fix, f"paid alone ({figures[fix]}), but {measured_together}")
    return best


def _speedup(arm: Measured) -> float:
    return arm.speed.speedup if arm.speed and arm.speed.speedup else 0.0


# -- the kept set, combined ----------------------------------------------------------------------------------


@dataclass
class Combined:
    variant: Variant
    sources: dict[str, SourceFile]  # absolute path -> the file as read, which the write checks against
    left_out: list[AppliedFix]  # kept fixes that could not be combined with the others


def combine(
    kept: list[AppliedFix],
    measured: Sequence[Measured],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    unsafe_fixes: bool,
    config_file: Path | None,
) -> Combined:
    """The kept fixes applied together to each file as it is now (the variant `kept`)."""
    alone = {arm.variant.fixes[0]: arm.variant.patched for arm in measured if arm.variant.kind == "each"}
    linter = Linter()
    targets = _targets(
        linter, sorted({Path(fix.path) for fix in kept}), select, ignore, unsafe_fixes, config_file
    )
    variant = Variant("kept", "kept")
    sources: dict[str, SourceFile] = {}
    for target in targets:
        path = str(target.path.resolve())
        source = _read(target, linter)
        mine = [fix for fix in kept if fix.path == path]
        found = [(fix, _measured_fix(linter, target, source.text, fix, alone[fix][path])) for fix in mine]
        text, applied = _apply_together(linter, target, source.text, found)
        if not _compiles(text, target.display):
            raise KeepError(f"{target.display}: the kept fixes together do not compile (a torchlint bug)")
        if applied:
            variant.fixes.extend(applied)
            variant.patched[path], variant.originals[path], sources[path] = text, source.text, source
    return Combined(variant, sources, [fix for fix in kept if fix not in variant.fixes])


def _targets(
    linter: Linter,
    paths: list[Path],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    unsafe_fixes: bool,
    config_file: Path | None,
) -> list[Target]:
    """The files with their settings, resolved as `patches.plan` resolved them (the same diagnostics)."""
    codes = list(linter.rule_classes)
    options_by_rule = {code: rule.options for code, rule in linter.rule_classes.items()}
    try:
        resolver = SettingsResolver(
            codes, options_by_rule, config_file, CliOverrides(select, (), ignore, unsafe_fixes), fs=linter.fs
        )
        return discover(paths, resolver, force_exclude=False)
    except ConfigError as error:
        raise KeepError(str(error)) from error


def _read(target: Target, linter: Linter) -> SourceFile:
    try:
        return SourceFile.read(target.path, linter.fs)
    except SourceError as error:
        raise KeepError(f"{target.display}: {error}") from error


def _measured_fix(linter: Linter, target: Target, text: str, fix: AppliedFix, measured: str) -> Diagnostic:
    """The finding whose fix was measured, found again in the file as it is now; KeepError when the file
    changed so that the fix would no longer make the text that was measured."""
    for diagnostic in linter.check_text(target.display, text, target.settings):
        location = diagnostic.location
        if (diagnostic.code, location.line, location.column) == (fix.code, fix.line, fix.column):
            if diagnostic.fix is not None and apply(text, [diagnostic.fix]).text == measured:
                return diagnostic
    raise KeepError(
        f"{target.display} changed since {fix.code}'s fix was measured: run `torchlint verify --keep` again"
    )


def _apply_together(
    linter: Linter, target: Target, text: str, found: list[tuple[AppliedFix, Diagnostic]]
) -> tuple[str, list[AppliedFix]]:
    """The fixes applied in passes, as `Linter.fix_text` applies them, but only these: a fix that
    overlaps another waits for the next pass, found again there after re-checking."""
    applied: list[AppliedFix] = []
    for _ in range(MAX_FIX_PASSES):
        if not found:
            break
        result = apply(text, [diagnostic.fix for _, diagnostic in found if diagnostic.fix is not None])
        applied.extend(found[i][0] for i in result.applied)
        waiting = [found[i][0] for i in result.skipped]
        before, text = text, result.text
        if not waiting:
            break
        fresh = linter.check_text(target.display, text, target.settings)
        found = [(fix, again) for fix in waiting if (again := _found_again(fix, fresh, before, text))]
    return text, applied


def _found_again(fix: AppliedFix, fresh: list[Diagnostic], before: str, after: str) -> Diagnostic | None:
    """The finding of `fix` in the text after a pass: the same code, with a fix, on the line its line moved
    to (or the next one); None when it is gone."""
    line = moved_line(before, after, fix.line)
    near = [d for d in fresh if d.code == fix.code and d.fix is not None and abs(d.location.line - line) <= 1]
    return min(
        near, key=lambda d: (abs(d.location.line - line), abs(d.location.column - fix.column)), default=None
    )


def moved_line(before: str, after: str, line: int) -> int:
    """Where a line of `before` (1-based) is in `after`: the same line when it is unchanged or rewritten in
    a block of as many lines, else the first line of the block that replaced it."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if i1 <= line - 1 < i2:
            same_size = tag == "equal" or i2 - i1 == j2 - j1
            return j1 + (line - 1 - i1) + 1 if same_size else j1 + 1
    return line


# -- writing ------------------------------------------------------------------------------------------------


def finish(outcome: Outcome, arm: Measured) -> str | None:
    """Write the kept set (measured as `arm`) when it paid together too, and say in `outcome.message` what
    was written or why nothing was; the error when a write was refused."""
    assert outcome.variant is not None
    paid, figure = judge(arm)
    fixes = len(outcome.variant.fixes)
    together = f"the {fixes} kept fixes together: {figure}" if fixes > 1 else f"the kept fix again: {figure}"
    if not paid:
        outcome.message = f"{together}: no file written"
        return None
    try:
        outcome.written = write(outcome.variant, outcome.sources)
    except WriteRefused as refused:
        outcome.message = f"{together}: no file written (see the error above)"
        return f"--keep: {refused}; no file written"
    outcome.message = f"{together}: wrote {', '.join(shown(path) for path in outcome.written)}"
    return None


def write(variant: Variant, sources: dict[str, SourceFile]) -> list[str]:
    """Every file of the kept set, or none: a refused write puts back the files written before it, and the
    signals that arrive meanwhile wait until the set is written or put back. Raises WriteRefused naming
    the file."""
    written: list[str] = []
    with signals_held():
        for path in sorted(variant.patched):
            try:
                write_source(sources[path], variant.patched[path])
            except WriteRefused as refused:
                _put_back(written, sources)
                raise WriteRefused(f"{shown(path)}: not written: {refused}") from None
            written.append(path)
    return written


def _put_back(written: list[str], sources: dict[str, SourceFile]) -> None:
    for path in written:
        try:
            write_source(SourceFile.read(Path(path)), sources[path].text)
        except (WriteRefused, SourceError):
            continue  # said by the caller's error: the set could not be written whole


# -- what is shown ------------------------------------------------------------------------------------------


def to_json(outcome: Outcome | None) -> dict[str, Any]:
    """The report's top-level `kept`, `dropped` and `written` (null without `--keep`)."""
    if outcome is None:
        return {"kept": None, "dropped": None, "written": None}
    return {
        "kept": [choice.to_json() for choice in outcome.choices if choice.kept],
        "dropped": [choice.to_json() for choice in outcome.choices if not choice.kept],
        "written": [shown(path) for path in outcome.written],
    }


def summary(outcome: Outcome | None) -> str:
    """The lines the table ends with: each fix kept or dropped, with why, then what was written."""
    if outcome is None:
        return ""
    lines = []
    for choice in sorted(outcome.choices, key=lambda c: not c.kept):
        where = f"{shown(choice.fix.path)}:{choice.fix.line}"
        if choice.kept:
            lines.append(f"kept {choice.fix.code} {where} ({choice.reason})")
        else:
            lines.append(f"dropped {choice.fix.code} {where}: {choice.reason}")
    lines.append(outcome.message)
    return "\n" + "".join(f"{line}\n" for line in lines if line)
