"""`torchlint verify --tune workers`: the training DataLoader's `num_workers`, then its `prefetch_factor`,
chosen by measuring them, not by a rule of thumb.

The loader tuned is the one the original's timed steps waited on most (`target`), identified by the line
of the project that built it; every candidate run builds it there with other options (`hooks.with_options`,
at run time: no file is patched, so a count the user controls from the command line is tuned too). A helper
that builds several loaders on one line has them all set alike.

Candidates: no workers, 1, 2, 4, 8, ... up to the CPUs the runs may use, that CPU count, and the script's
own value (the original itself). They are compared by successive halving: every candidate runs once, the
faster half runs again, and so on until one is left or the time budget would be spent (a round is started
only when its runs, at the mean wall time of the runs so far, fit in what is left; the first always runs).
The original runs in every round, so that the winner is compared with runs of the script as it is taken
on the same machine minutes apart, not only with the first. A winner with workers then meets the same
count with twice the prefetching (`prefetch_factor`, default 2), twice each; more prefetching is chosen
only when it is faster beyond noise.

The winner is recommended only when its verdict against the original is `faster` (the verifier's verdict:
beyond noise, on a quiet machine or over several runs, with agreeing losses; the loss check is the loose one,
since random augmentations draw other numbers in worker processes). With `--keep` it is written to the
line that builds the loader, with the safe writer of `--fix`, where that line sets the option to a literal
or not at all; a value that comes from elsewhere (`args.workers`, a config) is the user's to set: it is
named, with the value to give it, and nothing is written.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from torchlint.fix.apply import apply
from torchlint.fix.build import set_keyword
from torchlint.fix.model import Applicability, Fix
from torchlint.fix.write import WriteRefused, write_source
from torchlint.linter import Linter, _compiles
from torchlint.verify import compare
from torchlint.verify.patches import Variant, shown
from torchlint.workspace.source import SourceError, SourceFile

TUNABLE = ("workers",)
DEFAULT_PREFETCH = 2  # torch's, with workers
UNUSABLE = ("broke the script", "changed losses", "failed", "not run")


class Measured(Protocol):
    """A measured variant, as the verifier's `ArmResult` holds it."""

    variant: Variant
    verdict: str
    failure: str | None
    stats: list[compare.RunStats]
    speed: compare.Speed | None


@dataclass(frozen=True)
class Loader:
    """The loader tuned: where it is built, and the options the original built it with."""

    filename: str
    line: int
    num_workers: int
    prefetch_factor: int | None

    @property
    def where(self) -> str:
        return f"{shown(self.filename)}:{self.line}"

    def own(self) -> dict[str, int]:
        """The options the script builds the loader with."""
        return self.options(Variant("original", "original"))

    def changes(self, options: dict[str, int]) -> dict[str, int]:
        """What differs from the script's own options (torch's default prefetching is not written)."""
        own = self.own()
        return {
            key: value
            for key, value in options.items()
            if value != own.get(key, DEFAULT_PREFETCH if key == "prefetch_factor" else None)
        }

    def options(self, variant: Variant) -> dict[str, int]:
        """What a variant sets (the original: the script's own values)."""
        override = variant.loader_override["options"] if variant.loader_override else {}
        workers = override.get("num_workers", self.num_workers)
        options = {"num_workers": workers}
        if workers:
            prefetch = self.prefetch_factor or DEFAULT_PREFETCH
            options["prefetch_factor"] = override.get("prefetch_factor", prefetch)
        return options


@dataclass
class Outcome:
    """What `--tune` found and did."""

    loader: Loader | None = None
    rounds: int = 0
    finalists: list[Any] = field(default_factory=list)  # the arms left by the halving
    prefetch: tuple[Any, Any] | None = None  # (twice the prefetching, the winner it was measured against)
    best: dict[str, int] | None = None  # the options chosen, when they beat the script's own
    chosen: str | None = None  # the name of the variant that measured them
    message: str = ""
    advice: str = ""  # where the user sets the value, when it is theirs to set
    written: list[str] = field(default_factory=list)


# -- what to tune ------------------------------------------------------------------------------------------


def target(raw: dict[str, Any], project: Path) -> Loader | str:
    """The loader the original's timed steps waited on most, built in the project; else why there is none."""
    loaders = raw.get("loaders") or []
    waits = {int(index): seconds for index, seconds in (raw.get("loader_wait") or {}).items()}
    fed = [index for index in sorted(waits, key=waits.__getitem__, reverse=True) if index < len(loaders)]
    if not fed:
        return "no DataLoader fed the timed steps of the original run: nothing to tune"
    found = loaders[fed[0]]
    filename = found.get("filename")
    if not filename or not Path(os.path.realpath(filename)).is_relative_to(project):
        return f"the DataLoader the steps waited on was built outside the project ({filename}): not tuned"
    workers = found.get("num_workers")
    return Loader(filename, int(found["line"]), int(workers or 0), found.get("prefetch_factor"))


def worker_counts(current: int, cpus: int) -> list[int]:
    """No workers, powers of two below the CPU count, the CPU count, and the script's own count."""
    counts = {0, cpus, current}
    power = 1
    while power < cpus:
        counts.add(power)
        power *= 2
    return sorted(counts)


def candidates(loader: Loader, cpus: int) -> list[Variant]:
    """The variants of the first round, the script's own count left out (the original runs it)."""
    return [
        variant(loader, {"num_workers": count})
        for count in worker_counts(loader.num_workers, cpus)
        if count != loader.num_workers
    ]


def variant(loader: Loader, options: dict[str, int]) -> Variant:
    name = ", ".join(f"{key}={value}" for key, value in options.items())
    override = {"filename": loader.filename, "line": loader.line, "options": options}
    return Variant(name, "tune", loader_override=override)


def more_prefetching(loader: Loader, winner: Measured) -> Variant | None:
    """The winner's worker count with twice its prefetching; None when the winner has no workers."""
    options = loader.options(winner.variant)
    if not options["num_workers"]:
        return None
    return variant(loader, options | {"prefetch_factor": options["prefetch_factor"] * 2})


# -- successive halving ---------------------------------------------------------------------------------


def step_time(arm: Measured) -> float:
    """The mean step time over all of an arm's runs (infinite when unusable)."""
    if arm.failure or not arm.stats:
        return math.inf
    return compare.mean([t for stats in arm.stats for t in stats.step_times]) or math.inf


def halve(arms: Sequence[Measured]) -> list[Measured]:
    """The faster half (rounded up) of the arms that measured steps."""
    usable = sorted((arm for arm in arms if step_time(arm) < math.inf), key=step_time)
    return usable[: math.ceil(len(usable) / 2)]


def round_fits(seconds_left: float, runs: int, done: Sequence[Any]) -> bool:
    """`runs` more runs fit in what is left of the budget, at the mean wall time of the runs `done`."""
    walls = [run.wall for run in done]
    return not walls or runs * sum(walls) / len(walls) <= seconds_left


# -- the choice ---------------------------------------------------------------------------------------------


def choose(outcome: Outcome, finalists: Sequence[Measured], original: Measured) -> Measured | None:
    """The finalist to recommend: the fastest usable one, when its verdict against the original is
    `faster`; else None, with the reason in `outcome.message`."""
    loader = outcome.loader
    assert loader is not None
    usable = [arm for arm in finalists if arm.verdict not in UNUSABLE and step_time(arm) < math.inf]
    best = min(usable, key=step_time, default=None)
    own = _setting(loader.own())
    if best is None or best is original:
        outcome.message = f"the script's own {own} measured best: nothing to change"
        return None
    figure = _figure(best)
    if best.verdict != "faster":
        why = {"no change": "within noise of", "inconclusive": "inconclusive against"}.get(
            best.verdict, f"{best.verdict} against"
        )
        outcome.message = f"the best candidate, {best.variant.name} ({figure}), is {why} the script's {own}"
        return None
    outcome.best = loader.options(best.variant)
    outcome.chosen = best.variant.name
    outcome.message = f"best: {best.variant.name}, {figure} faster than the script's {own}"
    return best


def better_prefetching(challenger: Measured, winner: Measured) -> bool:
    """Twice the prefetching pays only beyond noise, against the winner's own runs."""
    if challenger.verdict in UNUSABLE or not challenger.stats or not winner.stats:
        return False
    return compare.compare_speed(winner.stats, challenger.stats).verdict == "faster"


def _setting(options: dict[str, int]) -> str:
    return ", ".join(f"{key}={value}" for key, value in options.items())


def _figure(arm: Measured) -> str:
    return f"{arm.speed.speedup:.2f}x" if arm.speed and arm.speed.speedup else "-"


# -- writing the winner -------------------------------------------------------------------------------------


def write(outcome: Outcome, project: Path) -> str | None:
    """`--keep`: the chosen options written to the line that builds the loader, when each is a literal
    there or absent; else the advice of where to set them. The error when a write was refused."""
    loader, best = outcome.loader, outcome.best
    assert loader is not None and best is not None
    path = Path(loader.filename)
    if not Path(os.path.realpath(path)).is_relative_to(project):
        outcome.advice = f"{loader.where} is outside the project: set {_setting(best)} there yourself"
        return None
    try:
        source = SourceFile.read(path)
    except SourceError as error:
        return f"--tune: {shown(loader.filename)}: {error}; nothing written"
    changes = loader.changes(best)
    try:
        text, theirs = _edited(source, loader, changes)
    except Exception as error:  # noqa: BLE001 - a parse error: the file changed since the runs read it
        return f"--tune: {shown(loader.filename)}: cannot be read as Python now ({error}); nothing written"
    if theirs:
        outcome.advice = f"set {_setting(changes)} where the script takes it ({theirs}); nothing written"
        return None
    if text is None or not _compiles(text, shown(loader.filename)):
        outcome.advice = f"no DataLoader call found at {loader.where}: set {_setting(changes)} there yourself"
        return None
    try:
        write_source(source, text)
    except WriteRefused as refused:
        return f"--tune: {shown(loader.filename)}: not written: {refused}"
    outcome.written = [loader.filename]
    return None


def _edited(source: SourceFile, loader: Loader, changes: dict[str, int]) -> tuple[str | None, str]:
    """The file's text with the options set in the loader call at its line, one at a time (two new
    keywords would be two overlapping edits of one call), or (None, where the user sets one) when it comes
    from elsewhere; (None, "") when no loader call is found there."""
    text = source.text
    for name, value in changes.items():
        facts = _facts(text, loader.filename)
        call = next((found for found in facts.loaders if facts.line_of(found.callee) == loader.line), None)
        if call is None:
            return None, ""
        argument = call.option(name)
        literal = argument is not None and argument.constant()[0]
        if argument is not None and not literal:
            node = argument.expression if argument.expression is not None else argument.node
            return None, f"`{facts.code(node)}`" if node is not None else f"`{name}`"
        if argument is None and not call.arguments.complete:
            return None, " or ".join(f"`**{spread}`" for spread in call.arguments.spread) or loader.where
        edit = set_keyword(facts.source, call.arguments, name, str(value))
        if edit is None:
            return None, f"the `{name}` argument at {loader.where}"
        text = apply(text, [Fix(f"Set {name}", Applicability.SAFE, (edit,))]).text
    return text, ""


def _facts(text: str, filename: str) -> Any:
    from torchlint._lazy import cst

    return Linter().facts_of(shown(filename), text, cst.parse_module(text), None)


# -- what is shown ------------------------------------------------------------------------------------------


def curve(outcome: Outcome, arms: Sequence[Measured]) -> list[dict[str, Any]]:
    """Each setting measured, the fastest first: its options, runs, mean step time, speed-up, verdict."""
    loader = outcome.loader
    if loader is None:
        return []
    points = []
    for arm in sorted(arms, key=step_time):
        if arm.variant.kind not in ("original", "tune"):
            continue
        mean_step = step_time(arm)
        points.append(
            {
                "variant": arm.variant.name,
                "options": loader.options(arm.variant),
                "runs": len(arm.stats) if not arm.failure else 0,
                "mean_step_ms": mean_step * 1000 if mean_step < math.inf else None,
                "speedup": arm.speed.speedup if arm.speed else None,
                "verdict": arm.verdict,
                "chosen": arm.variant.name == outcome.chosen,
            }
        )
    return points


def to_json(outcome: Outcome | None, arms: Sequence[Measured]) -> dict[str, Any] | None:
    """The report's top-level `tune` (null without `--tune`)."""
    if outcome is None:
        return None
    loader = outcome.loader
    return {
        "parameter": "workers",
        "loader": None
        if loader is None
        else {"filename": shown(loader.filename), "row": loader.line, "options": loader.own()},
        "rounds": outcome.rounds,
        "curve": curve(outcome, arms),
        "best": outcome.best,
        "message": outcome.message,
        "advice": outcome.advice or None,
        "written": [shown(path) for path in outcome.written],
    }


def summary(outcome: Outcome | None, arms: Sequence[Measured]) -> str:
    """The lines the table ends with: the curve, the choice, and what was written or where to set it."""
    if outcome is None:
        return ""
    lines = []
    if outcome.loader is not None:
        lines.append(f"tuned the DataLoader built at {outcome.loader.where} ({outcome.rounds} rounds):")
        for point in curve(outcome, arms):
            speed = f"{point['speedup']:.2f}x" if point["speedup"] else "-"
            step = f"{point['mean_step_ms']:.1f} ms" if point["mean_step_ms"] is not None else "-"
            runs = f"{point['runs']} run{'s' if point['runs'] != 1 else ''}"
            chosen = "  <- chosen" if point["chosen"] else ""
            setting = _setting(point["options"])
            lines.append(f"  {setting:<36} {step:>10}  {speed:>6}  {runs:<7} {point['verdict']}{chosen}")
    lines.append(outcome.message)
    if outcome.advice:
        lines.append(outcome.advice)
    if outcome.written:
        lines.append(f"wrote {', '.join(shown(path) for path in outcome.written)}")
    elif outcome.best is not None and not outcome.advice:
        lines.append("rerun with --keep to write it")
    return "\n" + "".join(f"{line}\n" for line in lines if line)
