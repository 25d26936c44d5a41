"""What `torchlint verify` shows: a table for people, JSON for machines (schema: SCHEMA.md), and the live
progress line while runs are going."""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from torchlint.verify import compare
from torchlint.verify.runner import RunResult
from torchlint.verify.verifier import ArmResult, VerifyReport

SCHEMA = "torchlint-verify/1"


def _shown(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path


def _arm_stats(arm: ArmResult) -> dict[str, Any] | None:
    if not arm.stats:
        return None
    pooled = [t for s in arm.stats for t in s.step_times]
    med = compare.median(pooled)
    average = compare.mean(pooled)
    iqr = compare.quartiles(pooled)
    first = arm.stats[0]
    batch = _batch_size(arm)
    return {
        "steps_timed": len(pooled),
        "steps_done": [s.steps_done for s in arm.stats],
        "mean_step_ms": 1000 * average if average else None,
        "median_step_ms": 1000 * med if med else None,
        "iqr_step_ms": [1000 * iqr[0], 1000 * iqr[1]] if iqr else None,
        "min_step_ms": 1000 * min(pooled) if pooled else None,
        "max_step_ms": 1000 * max(pooled) if pooled else None,
        "steps_per_second": 1 / average if average else None,
        "samples_per_second": batch / average if average and batch else None,
        "first_step_s": first.first_step,
        "warmup_s": first.warmup_seconds,
        "profiled_steps_excluded": first.excluded_profiled,
        "data_wait_share": _mean([s.data_wait_share for s in arm.stats]),
        "peak_memory_bytes": max((s.peak_memory or 0) for s in arm.stats) or None,
        "peak_memory_above_start_bytes": max((s.peak_above_start or 0) for s in arm.stats) or None,
        "memory_kind": first.memory_kind,
        "working_memory_bytes": min((s.working_peak for s in arm.stats if s.working_peak), default=None),
        "losses": first.losses,
        "first_epoch_steps": first.first_epoch,
    }


def _batch_size(arm: ArmResult) -> int | None:
    """The batch size of the loader the steps waited on most (the training loader), when it has one."""
    raw = next((run.raw for run in arm.runs if run.raw), None) or {}
    waits = {int(k): v for k, v in raw.get("loader_wait", {}).items()}
    loaders = raw.get("loaders", [])
    if not waits or not loaders:
        return None
    worst = max(waits, key=lambda k: waits[k])
    size = loaders[worst].get("batch_size") if worst < len(loaders) else None
    return size if isinstance(size, int) else None


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _finding_json(finding: compare.RuntimeFinding) -> dict[str, Any]:
    location = None
    if finding.location:
        location = {"filename": _shown(finding.location["filename"]), "row": finding.location["row"]}
    return {
        "kind": finding.kind,
        "message": _finding_message(finding),
        "codes": finding.codes,
        "location": location,
        "value": finding.value,
        "static_findings_there": finding.static,
    }


def _finding_message(finding: compare.RuntimeFinding) -> str:
    if finding.location:
        where = f"{_shown(finding.location['filename'])}:{finding.location['row']}"
        return finding.message.replace("{location}", where)
    return finding.message


def to_json(report: VerifyReport) -> dict[str, Any]:
    options = report.options
    cwd = Path.cwd()
    original = report.arms[0]
    variants = []
    for arm in report.arms:
        stats = _arm_stats(arm)
        entry: dict[str, Any] = {
            "name": arm.variant.name,
            "kind": arm.variant.kind,
            "fixes": [fix.to_json(cwd) for fix in arm.variant.fixes],
            "patched_files": sorted(_shown(p) or p for p in arm.variant.patched),
            "verdict": arm.verdict,
            "failure": arm.failure,
            "stats": stats,
            "speed": None,
            "memory_change": None,
            "working_memory": None,
            "losses": None,
            "runtime_findings": [_finding_json(f) for f in arm.findings],
            "top_ops": _top_ops(arm),
        }
        if arm.speed is not None:
            entry["speed"] = {
                "speedup": arm.speed.speedup,
                "interval95": list(arm.speed.interval) if arm.speed.interval else None,
                "repeats_range": list(arm.speed.repeats_range) if arm.speed.repeats_range else None,
                "verdict": arm.speed.verdict,
                "noise": arm.speed.noise,
            }
        before = _arm_stats(original) if arm is not original else None
        key = "peak_memory_bytes"
        if (
            stats
            and before
            and stats["peak_memory_above_start_bytes"]
            and before["peak_memory_above_start_bytes"]
        ):
            key = "peak_memory_above_start_bytes"  # on a CPU: what the training added to the process
        if stats and before and stats[key] and before[key]:
            entry["memory_change"] = stats[key] / before[key]
        if arm.memory is not None:
            entry["working_memory"] = {"change": arm.memory.working_change, "verdict": arm.memory.verdict}
        if arm.losses is not None:
            entry["losses"] = {
                "verdict": arm.losses.verdict,
                "tolerance": arm.losses.tolerance,
                "steps_compared": arm.losses.steps_compared,
                "max_abs_diff": arm.losses.max_abs_diff,
                "mean_before": arm.losses.mean_before,
                "mean_after": arm.losses.mean_after,
                "detail": arm.losses.detail,
            }
        variants.append(entry)
    torch_version = next((r.raw.get("torch") for r in report.runs if r.raw), None)
    return {
        "schema": SCHEMA,
        "script": _shown(str(options.script)),
        "args": list(options.args),
        "cwd": str(cwd),
        "settings": {
            "steps": options.steps,
            "warmup": options.warmup,
            "repeat": options.repeat,
            "device": options.device,
            "threads": report.threads,
            "timeout_s": options.timeout,
            "seed": options.seed,
            "select": list(options.select),
            "unsafe_fixes": options.unsafe_fixes,
            "each": options.each,
            "torchrun": options.torchrun,
            "profile_steps": options.profile_steps,
        },
        "machine": {
            "cpus": report.cpus,
            "load_before": list(report.load_before),
            "load_after": list(report.load_after),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch_version,
        },
        "device": report.device,
        "variants": variants,
        "runs": [_run_json(run) for run in report.runs],
        "errors": report.errors,
        "warnings": report.warnings,
        "notes": report.notes,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
    }


def _top_ops(arm: ArmResult) -> list[dict[str, Any]]:
    for run in arm.runs:
        profile = (run.raw or {}).get("profile") or {}
        if profile.get("top_ops"):
            return profile["top_ops"]
    return []


def _run_json(run: RunResult) -> dict[str, Any]:
    raw = run.raw or {}
    return {
        "index": run.index,
        "label": run.label,
        "status": run.status,
        "returncode": run.returncode,
        "wall_s": run.wall,
        "steps": run.steps,
        "load": list(run.load),
        "threads": raw.get("threads"),
        "stray_processes_killed": run.stray_killed,
        "leftover_pids": run.leftover,
        "trace": _shown(str(run.trace)) if run.trace else None,
        "traceback": raw.get("traceback"),
        "log": str(run.log),
    }


# -- the table ---------------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _bytes(value: int | None) -> str:
    if not value:
        return "-"
    return f"{value / 2**20:.0f} MiB"


def _working(stats: dict[str, Any], compared: dict[str, Any] | None) -> str:
    value = stats.get("working_memory_bytes")
    if not value:
        return "-"
    if value < 2**20:  # a few kernels' temporaries on a GPU: KiB, not "0.0 MiB"
        shown = f"{value / 2**10:.0f} KiB"
    elif value < 10 * 2**20:
        shown = f"{value / 2**20:.1f} MiB"
    else:
        shown = _bytes(value)
    change = (compared or {}).get("change")
    return f"{shown} ({change:.2f}x)" if change else shown


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def write_table(report: VerifyReport, out: TextIO) -> None:
    data = to_json(report)
    options = report.options
    load = " ".join(f"{x:.2f}" for x in report.load_before)
    device = data["device"]
    label = "cpu (no GPU: CPU timings)" if device == "cpu" else device
    out.write(f"torchlint verify {data['script']}{' -- ' + ' '.join(options.args) if options.args else ''}\n")
    out.write(
        f"device {label}; {report.threads} intra-op thread{'s' if report.threads != 1 else ''} in every run; "
        f"{report.cpus} CPUs, load {load} at the start\n"
    )
    runs = f"{options.repeat} repeats, interleaved" if options.repeat > 1 else "1 run each"
    torchrun = f"; torchrun with {options.torchrun} processes (rank 0 reported)" if options.torchrun else ""
    out.write(f"{options.steps} timed steps after {options.warmup} warm-up steps, {runs}{torchrun}\n\n")
    memory = (
        "peak RSS (+script)"
        if all((v["stats"] or {}).get("memory_kind") != "cuda_peak_allocated" for v in data["variants"])
        else "peak memory"
    )
    header = [
        "variant",
        "step ms",
        "median (IQR) ms",
        "samples/s",
        "speed-up",
        "95% interval",
        memory,
        "step memory",
        "data wait",
        "losses",
        "verdict",
    ]
    rows = [header]
    for variant in data["variants"]:
        stats = variant["stats"] or {}
        speed = variant["speed"] or {}
        iqr = stats.get("iqr_step_ms")
        interval = speed.get("interval95") or speed.get("repeats_range")
        rows.append(
            [
                variant["name"] if variant["kind"] != "all" else f"all fixes ({len(variant['fixes'])})",
                _ms(stats.get("mean_step_ms")),
                f"{stats['median_step_ms']:.1f} ({iqr[0]:.1f}-{iqr[1]:.1f})" if iqr else "-",
                f"{stats['samples_per_second']:.0f}" if stats.get("samples_per_second") else "-",
                f"{speed['speedup']:.2f}x" if speed.get("speedup") else "-",
                f"{interval[0]:.2f}-{interval[1]:.2f}x" if interval else "-",
                _bytes(stats.get("peak_memory_bytes"))
                + (
                    f" (+{stats['peak_memory_above_start_bytes'] / 2**20:.0f})"
                    if stats.get("peak_memory_above_start_bytes")
                    else ""
                ),
                _working(stats, variant["working_memory"]),
                _percent(stats.get("data_wait_share")),
                (variant["losses"] or {}).get("verdict", "-"),
                variant["verdict"],
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        out.write(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
        )
    tolerances = sorted({(v["losses"] or {}).get("tolerance") for v in data["variants"]} - {None})
    for tolerance in tolerances:
        out.write(f"losses: {tolerance}\n")
    for variant in data["variants"]:
        if variant["losses"] and variant["losses"]["detail"]:
            out.write(f"losses of {variant['name']}: {variant['losses']['detail']}\n")
    first = data["variants"][0]["stats"]
    if first and first.get("first_step_s") is not None:
        out.write(
            f"first step of the original after {first['first_step_s']:.2f} s (start-up and compile, apart)\n"
        )
    for variant in data["variants"]:  # the per-fix variants' findings are in the JSON
        if variant["runtime_findings"] and variant["kind"] in ("original", "all"):
            out.write(f"\nruntime findings ({variant['name']}):\n")
            for finding in variant["runtime_findings"]:
                static = finding["static_findings_there"]
                there = f" (static findings there: {', '.join(static)})" if static else ""
                out.write(f"  {finding['message']} -> {', '.join(finding['codes'])}{there}\n")
    fixes = [v for v in data["variants"] if v["kind"] == "all"]
    if fixes:
        out.write("\nfixes applied in 'all fixes':\n")
        for fix in fixes[0]["fixes"]:
            where = f"{fix['filename']}:{fix['location']['row']}:{fix['location']['column']}"
            out.write(f"  {fix['code']} {where} [{fix['applicability']}] {fix['title']}\n")
    _write_top_ops(data, out)
    for message in data["notes"]:
        out.write(f"note: {message}\n")
    for message in data["warnings"]:
        out.write(f"warning: {message}\n")
    traded = [
        v
        for v in data["variants"]
        if v["verdict"] == "less memory" and (v["speed"] or {}).get("verdict") == "slower"
    ]
    if traded:
        out.write(
            "note: checkpointing trades time for memory: "
            + "; ".join(
                f"{'all fixes' if v['kind'] == 'all' else v['name']}: "
                f"{1 / v['speed']['speedup']:.2f}x the step time for "
                f"{1 - v['working_memory']['change']:.0%} less step memory"
                for v in traded
            )
            + "\n"
        )
    verdict = {
        "verified": "verified: no fix made training worse or changed its losses",
        "worse": "worse: a fix made training slower, changed the losses or broke the script (see above)",
        "failed": "failed: nothing could be verified (see the errors above)",
    }[data["verdict"]]
    if data["verdict"] == "failed" and data["errors"]:
        verdict = f"failed: {data['errors'][0].splitlines()[0].rstrip(':')} (details above)"
    out.write(f"\n{verdict}\n")


def _write_top_ops(data: dict[str, Any], out: TextIO) -> None:
    """On CUDA the runs rank operators by their time on the GPU, which comes first; a CPU run has only the
    CPU's. Kernel names are shortened (the JSON keeps them whole): a templated CUDA kernel's full
    signature runs to hundreds of characters."""
    shown = [v for v in data["variants"] if v["top_ops"] and v["kind"] in ("original", "all")]
    on_gpu = data.get("device") == "cuda"
    for variant in shown:
        ranked = "GPU self time" if on_gpu else "self time"
        out.write(f"\ntop operators by {ranked} ({variant['name']}, profiled steps):\n")
        for op in variant["top_ops"][:5]:
            cpu = f"{_milliseconds(op['self_cpu_ms'])} CPU"
            gpu = f"{_milliseconds(op['self_device_ms'])} GPU"
            times = f"{gpu}  {cpu}" if on_gpu else cpu
            out.write(f"  {times}  x{op['count']:<5} {short_operator_name(op['name'])}\n")


def _milliseconds(value: float) -> str:
    return f"{value:8.1f} ms" if value >= 1 or value == 0 else f"{value:8.3f} ms"


def short_operator_name(name: str, width: int = 90) -> str:
    """`void at::native::reduce_kernel<128, 4, ...>(at::native::ReduceOp<...>)` becomes
    `at::native::reduce_kernel<…>`: a C++ kernel signature loses its return type, template arguments and
    parameters (a generic wrapper, `cutlass::Kernel2<cutlass_80_simt_sgemm_...>`, keeps the kernel it
    wraps); aten operators, cuBLAS's flat names and the profiler's own (`Memcpy HtoD (Pageable -> Device)`)
    stay as they are, cut at `width`."""
    short = name
    returned = _RETURN_TYPE.match(name)
    if returned or ("<" in name and "(" in name and " " not in name.split("<", 1)[0]):
        short = _folded(name[returned.end() :] if returned else name)
    return short if len(short) <= width else short[: width - 1] + "…"


_RETURN_TYPE = re.compile(r"void |std::enable_if<[^>]*>::type ")
_WRAPPER = re.compile(r"(?:^|::)(?:Kernel\d*|device_kernel)$")


def _folded(signature: str) -> str:
    signature = signature.replace("(anonymous namespace)::", "")
    depth = 0
    base: list[str] = []  # the name, each outermost template argument list written `<…>`
    first: list[str] = []  # the first template argument of the last outermost list
    past_first = False
    for char in signature:
        if char == "<":
            if depth == 0:
                base.append("<…>")
                first, past_first = [], False
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif depth == 0:
            if char == "(":
                break
            base.append(char)
        elif depth == 1 and char == ",":
            past_first = True
        elif depth == 1 and not past_first:
            first.append(char)
    if depth:  # unbalanced: not a signature after all
        return signature
    short = "".join(base)
    wrapped = "".join(first).strip()
    if short.endswith("<…>") and _WRAPPER.search(short[:-3]) and wrapped.isidentifier():
        return f"{short[:-3]}<{wrapped}>"
    return short


# -- progress ----------------------------------------------------------------------------------------------


class ProgressDisplay:
    """A live line per run on a terminal (which run, which step, elapsed time); one line per finished run
    otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.live = stream.isatty() and os.environ.get("TERM") != "dumb"
        self.last = 0.0

    def start(self, label: str, index: int, count: int):  # noqa: ANN201 - a progress callback
        prefix = f"[{index + 1}/{count}] {label}"
        if not self.live:
            self.stream.write(f"{prefix}: running\n")
            self.stream.flush()
            return None

        def update(done: int, total: int, elapsed: float) -> None:
            now = time.monotonic()
            if now - self.last < 0.2 and done < total:
                return
            self.last = now
            self.stream.write(f"\r\x1b[K{prefix}: step {done}/{total}, {elapsed:.1f} s")
            self.stream.flush()

        return update

    def end(self, run: RunResult) -> None:
        line = f"{run.label}: {run.status}, {run.steps} steps in {run.wall:.1f} s"
        if self.live:
            self.stream.write(f"\r\x1b[K{line}\n")
        else:
            self.stream.write(f"  {line}\n")
        self.stream.flush()
