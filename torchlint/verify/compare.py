"""Statistics and verdicts over the runs' raw measurements (pure Python: no torch, no NumPy).

- A run's timed steps are those after the W warm-up steps, minus the profiled ones when at least three
  others remain (the profiler's overhead is not the script's).
- An arm (the original, or one variant) pools the timed steps of its repeats; its figure is the mean step
  time (the total time over the steps: what throughput is), its spread the inter-quartile range around
  the median. Not the median: DataLoader workers deliver batches in bursts (steps of 20 ms and 200 ms in
  turn), where the median says 2x faster while as many samples a second are trained, and the median
  hides a restart of the workers at an epoch boundary, which is what TL203 removes.
- The speed-up is mean(original) / mean(variant), with a 95% bootstrap interval over the pooled steps,
  and, with repeats, the min/max of the ratios of the paired (interleaved) repeats.
- Verdict on speed: `faster` when the speed-up is at least 1 + NOISE (5%) and the interval (and, with
  repeats, the paired range) lies above 1, `slower` when it is at most 1 / (1 + SLOWER_NOISE) (10%) and
  they lie below 1, else `no change` (bursty or jittery steps widen the interval, not the threshold).
- Memory: the working memory of a profiled step (see the hooks), the smallest over the arm's repeats;
  `less` when the variant's is at most 1 / (1 + MEMORY_NOISE) of the original's, `more` when it is at least
  1 + MEMORY_NOISE times, else `same`. A fix that trades time for memory (activation checkpointing, TL4xx)
  is judged on it: less memory is what it is for, and the time it costs is reported, not held against it.
- Losses: with only safe fixes the per-step losses of every common step must agree tightly (safe fixes do
  not change what is computed, and both runs are seeded alike); so must they with checkpointing, unsafe
  as it is (the recomputed forward computes the same values, with the RNG state restored); with another
  unsafe fix (workers, autocast, compile) the mean loss over the common steps of the first epoch must agree
  within LOOSE_RTOL, since data order, augmentation RNG streams or precision may legitimately change.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

NOISE = 0.05
SLOWER_NOISE = 0.10  # "slower" exits 1 (a CI failure): it needs a larger change than "faster" does
TIGHT = {"rtol": 1e-4, "atol": 1e-6}
LOOSE_RTOL = 0.10
MEMORY_NOISE = 0.10
# A loose comparison over fewer steps than this is no epoch: a validation loader's first batch ended the
# "epoch" (the marker is any DataLoader's first iteration); then every recorded step is compared instead.
MIN_EPOCH_STEPS = 5
# Fixes that change nothing without a GPU: what one measures on a CPU is the machine's noise (a busy 2-core
# machine called pinned memory 1.41x "faster"), so on a CPU its verdict is `not measurable here`.
GPU_ONLY = {
    "TL202": "pinned memory speeds up copies to a GPU only",
    "TL205": "a `non_blocking` copy overlaps only with a GPU",
}
MEMORY_FIX_PREFIXES = ("TL4",)  # activation checkpointing: time for memory, the same values
BOOTSTRAP_SAMPLES = 1000
DATA_SHARE_LIMIT = 0.05
MEMORY_LIMIT = 0.90
COMM_LIMIT = 0.10
UTILISATION_LIMIT = 0.50
SYNC_SITES_SHOWN = 5  # host-device sync findings per run, the busiest sites first
SYNC_HOW = {
    "item()": "`.item()`",
    "tolist()": "`.tolist()`",
    "bool()": "a tensor's truth value: `if`, `while`, `and`, `bool()`",
    "float()": "`float()` of a tensor",
    "int()": "`int()` of a tensor",
    "index": "a tensor used as an index or a count",
}


@dataclass
class RunStats:
    step_times: list[float]  # the timed steps (seconds)
    steps_done: int
    first_step: float | None  # seconds from the script's start to the end of its first step
    warmup_seconds: float  # the warm-up steps (compile, worker start, caches)
    data_wait_share: float | None
    peak_memory: int | None
    memory_kind: str  # "cuda_peak_allocated" | "peak_rss"
    losses: list[float | None]
    first_epoch: int  # steps in the first epoch (same DataLoader epoch as the first step)
    excluded_profiled: int
    device: str
    peak_above_start: int | None = None  # peak RSS minus the RSS when the script started (CPU runs)
    working_peak: int | None = None  # a profiled step's working memory on the run's device (see hooks)


def run_stats(raw: dict[str, Any], warmup: int) -> RunStats:
    steps = raw.get("steps", [])
    timed = steps[warmup:] if len(steps) > warmup else steps[1:]
    unprofiled = [s for s in timed if not s.get("profiled")]
    excluded = 0
    if len(unprofiled) >= 3 and len(unprofiled) < len(timed):
        excluded = len(timed) - len(unprofiled)
        timed = unprofiled
    total = sum(s["time"] for s in timed)
    share = sum(s["data_wait"] for s in timed) / total if timed and total > 0 else None
    memory = raw.get("memory", {})
    above = None
    if "cuda_peak_allocated_bytes" in memory:
        peak, kind = memory["cuda_peak_allocated_bytes"], "cuda_peak_allocated"
    else:
        peak, kind = memory.get("peak_rss_bytes"), "peak_rss"
        if peak and memory.get("rss_at_start_bytes"):
            above = max(0, peak - memory["rss_at_start_bytes"])
    device = raw.get("device", {}).get("type", "cpu")
    working = ((raw.get("profile") or {}).get("working_memory") or {}).get(f"{device}_peak_bytes")
    first_marker = steps[0]["epoch_marker"] if steps else 0
    first_epoch = sum(1 for s in steps if s["epoch_marker"] == first_marker)
    return RunStats(
        [s["time"] for s in timed],
        len(steps),
        steps[0]["end"] if steps else None,
        sum(s["time"] for s in steps[:warmup]),
        share,
        peak,
        kind,
        [s.get("loss") for s in steps],
        first_epoch,
        excluded,
        device,
        above,
        working or None,
    )


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def quartiles(values: list[float]) -> tuple[float, float] | None:
    if len(values) < 2:
        return None
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


@dataclass
class Speed:
    speedup: float | None
    interval: tuple[float, float] | None  # 95% bootstrap interval of the speed-up
    repeats_range: tuple[float, float] | None  # min/max over the paired repeats
    verdict: str  # faster | slower | no change | unknown
    noise: float = NOISE  # the relative change below which a difference is noise


def _bootstrap(before: list[float], after: list[float], rng: random.Random) -> tuple[float, float] | None:
    if len(before) < 3 or len(after) < 3:
        return None
    ratios = []
    for _ in range(BOOTSTRAP_SAMPLES):
        a = statistics.fmean(rng.choices(before, k=len(before)))
        b = statistics.fmean(rng.choices(after, k=len(after)))
        if b > 0:
            ratios.append(a / b)
    if not ratios:
        return None
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]


def compare_speed(before: list[RunStats], after: list[RunStats]) -> Speed:
    pooled_before = [t for s in before for t in s.step_times]
    pooled_after = [t for s in after for t in s.step_times]
    a, b = mean(pooled_before), mean(pooled_after)
    if not a or not b:
        return Speed(None, None, None, "unknown")
    speedup = a / b
    interval = _bootstrap(pooled_before, pooled_after, random.Random(0))
    paired = [
        (mean(x.step_times) or 0) / (mean(y.step_times) or math.inf)
        for x, y in zip(before, after, strict=False)
        if x.step_times and y.step_times
    ]
    repeats = (min(paired), max(paired)) if len(paired) >= 2 else None
    # Both the interval over the steps and, with repeats, the range over the paired repeats (which sees a
    # drift of the machine's load between runs) must exclude 1.
    ranges = [r for r in (interval, repeats) if r is not None] or [(speedup, speedup)]
    above = all(low > 1 for low, _ in ranges)
    below = all(high < 1 for _, high in ranges)
    if speedup >= 1 + NOISE and above:
        verdict = "faster"
    elif speedup <= 1 / (1 + SLOWER_NOISE) and below:
        verdict = "slower"
    else:
        verdict = "no change"
    return Speed(speedup, interval, repeats, verdict)


@dataclass
class Memory:
    working_change: float | None  # the variant's working memory per step / the original's
    verdict: str  # less | more | same | unknown


def compare_memory(before: list[RunStats], after: list[RunStats]) -> Memory:
    a = min((s.working_peak for s in before if s.working_peak), default=None)
    b = min((s.working_peak for s in after if s.working_peak), default=None)
    if not a or not b:
        return Memory(None, "unknown")
    change = b / a
    if change <= 1 / (1 + MEMORY_NOISE):
        return Memory(change, "less")
    if change >= 1 + MEMORY_NOISE:
        return Memory(change, "more")
    return Memory(change, "same")


def trades_time_for_memory(codes: list[str]) -> bool:
    return any(code.startswith(MEMORY_FIX_PREFIXES) for code in codes)


@dataclass
class Losses:
    verdict: str  # agree | differ | not compared
    tolerance: str
    steps_compared: int
    max_abs_diff: float | None = None
    mean_before: float | None = None
    mean_after: float | None = None
    detail: str = ""


def loose_losses(codes: list[str], applicabilities: list[str]) -> bool:
    """Whether the fixes may change the computed values: an unsafe one that is not checkpointing."""
    return any(
        applicability == "unsafe" and not code.startswith(MEMORY_FIX_PREFIXES)
        for code, applicability in zip(codes, applicabilities, strict=True)
    )


def not_measurable_here(codes: list[str], device: str) -> str | None:
    """Why a variant's fixes cannot act on the measured device (each of them needs a GPU), else None."""
    if device == "cuda" or not codes or any(code not in GPU_ONLY for code in codes):
        return None
    return "; ".join(sorted({GPU_ONLY[code] for code in codes}))


def compare_losses(
    before: RunStats, after: RunStats, unsafe: bool, why: str = "an unsafe fix was applied"
) -> Losses:
    """`unsafe`: the fixes may change the computed values (see `loose_losses`; `why` says so). Then the
    mean loss is compared over the first epoch (or every recorded step when that "epoch" is shorter than
    MIN_EPOCH_STEPS), within LOOSE_RTOL or within the noise of the per-step differences (three standard
    errors of their mean): randomness a fix legitimately changes (compile's dropout masks) moves single
    steps, not the mean beyond its noise, so the verdict does not flip with the number of steps."""
    if unsafe:
        recorded = min(len(before.losses), len(after.losses))
        epoch = min(before.first_epoch, after.first_epoch, recorded)
        count = epoch if epoch >= MIN_EPOCH_STEPS else recorded
        over = "the first epoch" if epoch >= MIN_EPOCH_STEPS else "every recorded step"
        tolerance = f"loose: mean loss over {over} within rtol {LOOSE_RTOL:g} or the steps' noise ({why})"
    else:
        tolerance = (
            f"tight: every step within rtol {TIGHT['rtol']:g}, atol {TIGHT['atol']:g} "
            "(safe fixes or checkpointing: the same values computed)"
        )
        count = min(len(before.losses), len(after.losses))
    pairs = [
        (x, y)
        for x, y in zip(before.losses[:count], after.losses[:count], strict=True)
        if x is not None and y is not None
    ]
    if not pairs:
        return Losses("not compared", tolerance, 0, detail="no loss passed to backward was recorded")
    finite = all(math.isfinite(x) == math.isfinite(y) for x, y in pairs)
    diffs = [abs(x - y) for x, y in pairs if math.isfinite(x) and math.isfinite(y)]
    mean_a = statistics.fmean(x for x, _ in pairs)
    mean_b = statistics.fmean(y for _, y in pairs)
    result = Losses("agree", tolerance, len(pairs), max(diffs) if diffs else None, mean_a, mean_b)
    if not finite:
        result.verdict, result.detail = "differ", "a loss is not finite in one run only"
    elif unsafe:
        # within rtol, or within the steps' noise when that is at most twice rtol (few steps: wide noise)
        noise = min(_noise(pairs), 2 * LOOSE_RTOL * abs(mean_a))
        if not math.isclose(mean_a, mean_b, rel_tol=LOOSE_RTOL, abs_tol=max(TIGHT["atol"], noise)):
            result.verdict = "differ"
            result.detail = f"mean loss {mean_a:.6g} -> {mean_b:.6g} over {len(pairs)} steps"
    else:
        bad = [
            i
            for i, (x, y) in enumerate(pairs)
            if not math.isclose(x, y, rel_tol=TIGHT["rtol"], abs_tol=TIGHT["atol"])
        ]
        if bad:
            x, y = pairs[bad[0]]
            result.verdict = "differ"
            result.detail = (
                f"{len(bad)} of {len(pairs)} steps differ; first at step {bad[0]}: {x:.6g} vs {y:.6g}"
            )
    return result


def _noise(pairs: list[tuple[float, float]]) -> float:
    """Three standard errors of the mean per-step difference: how far the means may lie apart by chance."""
    diffs = [y - x for x, y in pairs if math.isfinite(x) and math.isfinite(y)]
    if len(diffs) < 2:
        return 0.0
    return 3 * statistics.stdev(diffs) / math.sqrt(len(diffs))


@dataclass
class RuntimeFinding:
    kind: str  # data-wait | memory | communication | utilisation | tensor-cores | sync
    message: str
    codes: list[str]
    location: dict[str, Any] | None = None
    value: float | None = None
    static: list[str] = field(default_factory=list)  # static findings at that location


def runtime_findings(raw: dict[str, Any], stats: RunStats, static_at: Any) -> list[RuntimeFinding]:
    """The checks the retired TensorBoard profiler plugin made, on what the run measured.

    `static_at(filename, line)` gives the codes of the static findings at a location."""
    found: list[RuntimeFinding] = []
    share = stats.data_wait_share
    if share is not None and share > DATA_SHARE_LIMIT:
        loaders = raw.get("loaders", [])
        waits = {int(k): v for k, v in raw.get("loader_wait", {}).items()}
        worst = max(waits, key=waits.get) if waits else None  # type: ignore[arg-type]
        loader = loaders[worst] if worst is not None and worst < len(loaders) else None
        where = ""
        location = None
        static: list[str] = []
        codes = ["TL201", "TL203"]
        if stats.device == "cuda":
            codes.append("TL202")
        if loader and loader.get("filename"):
            location = {"filename": loader["filename"], "row": loader["line"]}
            options = f"num_workers={loader.get('num_workers')}"
            if stats.device == "cuda":
                options += f", pin_memory={loader.get('pin_memory')}"
            options += f", persistent_workers={loader.get('persistent_workers')}"
            where = f" from the DataLoader at {{location}} ({options})"
            static = [c for c in static_at(loader["filename"], loader["line"]) if c.startswith("TL2")]
        found.append(
            RuntimeFinding(
                "data-wait",
                f"{share:.0%} of step time waits for data{where}",
                codes,
                location,
                share,
                static,
            )
        )
    memory = raw.get("memory", {})
    if "cuda_peak_reserved_bytes" in memory and memory.get("cuda_total_bytes"):
        used = memory["cuda_peak_reserved_bytes"] / memory["cuda_total_bytes"]
        what = "of the GPU's memory"
    elif memory.get("peak_rss_bytes") and memory.get("total_bytes"):
        used = memory["peak_rss_bytes"] / memory["total_bytes"]
        what = "of the machine's memory (peak RSS)"
    else:
        used = None
    if used is not None and used > MEMORY_LIMIT:
        found.append(
            RuntimeFinding("memory", f"peak memory is {used:.0%} {what}", ["TL4", "TL301"], value=used)
        )
    profile = raw.get("profile") or {}
    wall_ms = 1000 * float(profile.get("wall_seconds") or 0)
    if wall_ms > 0:
        comm = float(profile.get("comm_ms") or 0) / wall_ms
        if comm > COMM_LIMIT:
            found.append(
                RuntimeFinding(
                    "communication", f"{comm:.0%} of profiled time is communication", ["TL6"], value=comm
                )
            )
        thrown_away = allreduces_thrown_away(raw)
        if thrown_away is not None:
            passes, per_pass = thrown_away
            calls = f"{per_pass:g} all-reduce call{'s' if per_pass != 1 else ''} each"
            message = (
                f"the gradients are all-reduced on each of the {passes} backward passes of every optimizer "
                f"step ({calls}): all but the last are overwritten before the step"
            )
            found.append(RuntimeFinding("allreduce-per-micro-batch", message, ["TL601"], value=passes))
        if stats.device == "cuda":
            busy = float(profile.get("device_busy_ms") or 0) / wall_ms
            if busy < UTILISATION_LIMIT:
                # A run that waits for data (the finding above) idles for that; otherwise the host launches
                # kernels too small to fill the GPU, which compiling fuses into fewer.
                waiting = share is not None and share > DATA_SHARE_LIMIT
                found.append(
                    RuntimeFinding(
                        "utilisation",
                        f"the GPU is busy {busy:.0%} of profiled time",
                        ["TL2"] if waiting else ["TL101"],
                        value=busy,
                    )
                )
            capability = raw.get("device", {}).get("capability") or [0, 0]
            if (
                capability[0] >= 7
                and profile.get("device_kernels")
                and not profile.get("tensor_core_kernels")
            ):
                found.append(
                    RuntimeFinding(
                        "tensor-cores", "no kernel used tensor cores on a GPU that has them", ["TL301"]
                    )
                )
    found.extend(sync_findings(raw, static_at))
    return found


def allreduces_thrown_away(raw: dict[str, Any]) -> tuple[int, float] | None:
    """(backward passes per optimizer step, all-reduce calls per pass) when the profiled steps accumulate
    over several backward passes and every one of them all-reduced (DDP without `no_sync`: TL601); None
    otherwise. With `no_sync` only the last pass of a step all-reduces."""
    profile = raw.get("profile") or {}
    calls = int(profile.get("allreduce_calls") or 0)
    profiled = [step for step in raw.get("steps", []) if step.get("profiled")]
    if not calls or not profiled:
        return None
    passes = [int(step.get("losses") or 0) for step in profiled]
    if min(passes) < 2 or len(set(passes)) != 1:
        return None
    per_pass = calls / (len(profiled) * passes[0])
    return (passes[0], per_pass) if per_pass >= 1 else None


def sync_findings(raw: dict[str, Any], static_at: Any) -> list[RuntimeFinding]:
    """A finding per place where the script's own code waits for a tensor's value on the host in every
    step of the sync window (`loss.item()`, `if tensor:`, `.tolist()`; on CUDA any synchronising operation).

    On a CPU nothing waits, but each such read would be a host-device sync on a GPU: the message says so.
    A site read less than once a step (a log line every N steps) is not a per-step cost: left out. No
    static rule fixes these (`codes` is empty); the static findings at the line are linked (TL501 where the
    loss is read)."""
    syncs = raw.get("syncs") or {}
    on_cpu = syncs.get("source") == "tensor-reads"
    found = []
    for site in syncs.get("sites", []):
        if site["per_step"] < 1 or len(found) == SYNC_SITES_SHOWN:
            continue
        count = f"{site['per_step']:.2f}".rstrip("0").rstrip(".")
        plural = "" if count == "1" else "s"
        what = "host read" + plural + " of tensor values" if on_cpu else "host-device sync" + plural
        how = f" ({SYNC_HOW[site['what']]})" if site.get("what") in SYNC_HOW else ""
        message = f"{count} {what} per step at {{location}}{how}"
        if on_cpu:
            message += ": a host-device sync each on a GPU"
        location = {"filename": site["filename"], "row": site["row"]}
        static = static_at(site["filename"], site["row"])
        found.append(RuntimeFinding("sync", message, [], location, site["per_step"], static))
    return found


def compile_summary(raw: dict[str, Any], static_at: Any) -> dict[str, Any] | None:
    """What torch.compile did in a run (the bootstrap's `compile`), each graph break with the static
    findings at its line; None when the run compiled nothing (or its summary failed)."""
    summary = raw.get("compile")
    if not summary or "error" in summary:
        return None
    breaks = [
        {**item, "static_findings_there": static_at(item["filename"], item["row"])}
        for item in summary.get("graph_breaks", [])
    ]
    return {**summary, "graph_breaks": breaks}
