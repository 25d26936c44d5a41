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

from torchlint.fix.apply import unified_diff
from torchlint.verify import compare, keep, tune
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
            "compile": _compile_json(arm.compile),
            "diff": _diff(arm),
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
    measured = {run.index: arm.variant.name for arm in report.arms for run in arm.runs}
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
            "keep": options.keep,
            "tune": options.tune,
            "tune_budget_s": options.tune_budget if options.tune else None,
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
        "runs": [_run_json(run, measured.get(run.index)) for run in report.runs],
        **keep.to_json(report.keep),
        "tune": tune.to_json(report.tune, report.arms),
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


def _run_json(run: RunResult, variant: str | None) -> dict[str, Any]:
    raw = run.raw or {}
    return {
        "index": run.index,
        "label": run.label,
        "variant": variant,
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
        "step_ms": [1000 * step["time"] for step in raw.get("steps", [])],
        "step_memory_bytes": [step.get("memory") for step in raw.get("steps", [])],
    }


def _diff(arm: ArmResult) -> str | None:
    """The variant's patched files against their text before the fixes, as `--diff` prints them (the HTML
    report shows it). The text before comes from the plan, not from the disk: `--keep` may have written it."""
    before = arm.variant.originals
    chunks = [
        unified_diff(_shown(path) or path, before[path], patched)
        for path, patched in sorted(arm.variant.patched.items())
        if path in before
    ]
    return "".join(chunks) or None


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


def table_header(variants: list[dict[str, Any]]) -> list[str]:
    """The variants table's columns, in the text table and the HTML page alike (`variants`: the JSON's)."""
    on_cpu = all((v.get("stats") or {}).get("memory_kind") != "cuda_peak_allocated" for v in variants)
    memory = "peak RSS (+script)" if on_cpu else "peak memory"
    return [
        "variant",
        "step ms",
        "median (IQR) ms",
        "first step",
        "samples/s",
        "speed-up",
        "95% interval",
        memory,
        "step memory",
        "data wait",
        "losses",
        "verdict",
    ]


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
    if report.tune is not None:
        runs = "--tune: the faster half of the candidates runs again, round after round, with the original"
    torchrun = f"; torchrun with {options.torchrun} processes (rank 0 reported)" if options.torchrun else ""
    out.write(f"{options.steps} timed steps after {options.warmup} warm-up steps, {runs}{torchrun}\n\n")
    rows = [table_header(data["variants"])]
    for variant in data["variants"]:
        stats = variant["stats"] or {}
        speed = variant["speed"] or {}
        iqr = stats.get("iqr_step_ms")
        interval = speed.get("interval95") or speed.get("repeats_range")
        rows.append(
            [
                variant_label(variant),
                _ms(stats.get("mean_step_ms")),
                f"{stats['median_step_ms']:.1f} ({iqr[0]:.1f}-{iqr[1]:.1f})" if iqr else "-",
                f"{stats['first_step_s']:.2f} s" if stats.get("first_step_s") is not None else "-",
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
    _add_compile_column(rows, data["variants"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
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
    if any((v["stats"] or {}).get("first_step_s") is not None for v in data["variants"]):
        out.write("first step: from the script's start to the end of its first step (start-up, compile)\n")
    for variant in data["variants"]:  # the per-fix variants' findings are in the JSON
        if variant["runtime_findings"] and variant["kind"] in ("original", "all", "kept"):
            out.write(f"\nruntime findings ({variant['name']}):\n")
            for finding in variant["runtime_findings"]:
                static = finding["static_findings_there"]
                there = f" (static findings there: {', '.join(static)})" if static else ""
                fixed_by = f" -> {', '.join(finding['codes'])}" if finding["codes"] else ""
                out.write(f"  {finding['message']}{fixed_by}{there}\n")
    _write_compile(data, out)
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
    out.write(keep.summary(report.keep))
    out.write(tune.summary(report.tune, report.arms))
    verdict = {
        "verified": "verified: no fix made training worse or changed its losses",
        "worse": "worse: a fix made training slower, changed the losses or broke the script (see above)",
        "failed": "failed: nothing could be verified (see the errors above)",
    }[data["verdict"]]
    if report.tune is not None and data["verdict"] == "verified":
        verdict = "verified: " + (report.tune.message if report.tune.loader is None else "tuned (see above)")
    if data["verdict"] == "failed" and data["errors"]:
        verdict = f"failed: {data['errors'][0].splitlines()[0].rstrip(':')} (details above)"
    out.write(f"\n{verdict}\n")


def _compile_json(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """What compile did, its paths shown as the rest of the report shows them."""
    if summary is None:
        return None

    def shown(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**item, "filename": _shown(item.get("filename"))} for item in items]

    return {
        "graphs": summary.get("graphs", 0),
        "frames": shown(summary.get("frames", [])),
        "graph_breaks": shown(summary.get("graph_breaks", [])),
        "recompiles": shown(summary.get("recompiles", [])),
        "failures": shown(summary.get("failures", [])),
        "compile_s": summary.get("compile_s"),
        "compile_s_after_warmup": summary.get("compile_s_after_warmup"),
    }


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def compile_cell(summary: dict[str, Any] | None) -> str:
    """`3 graphs, 2 breaks` (and the recompiles after the warm-up, which the timed steps paid for)."""
    if summary is None:
        return "-"
    cell = f"{_plural(summary['graphs'], 'graph')}, {_plural(len(summary['graph_breaks']), 'break')}"
    late = sum(1 for item in summary["recompiles"] if item["after_warmup"])
    return cell + (f", {_plural(late, 'recompile')}" if late else "")


def _add_compile_column(rows: list[list[str]], variants: list[dict[str, Any]]) -> None:
    """A `compile` column before `losses`, when a variant compiled (a table without one stays as it was)."""
    if not any(variant["compile"] for variant in variants):
        return
    at = rows[0].index("losses")
    rows[0].insert(at, "compile")
    for row, variant in zip(rows[1:], variants, strict=True):
        row.insert(at, compile_cell(variant["compile"]))


def _write_compile(data: dict[str, Any], out: TextIO) -> None:
    """What compile did: the original's and all fixes' (a per-fix variant's too when the original did not
    compile: that fix is what compiles), each graph break at its line with Dynamo's reason and first hint,
    the recompiles after the warm-up with the guard that failed, and the seconds spent compiling."""
    original_compiled = bool(data["variants"][0]["compile"])
    for variant in data["variants"]:
        summary = variant["compile"]
        if summary is None or (variant["kind"] == "each" and original_compiled):
            continue
        functions = _plural(len(summary["frames"]), "compiled function")
        seconds = summary["compile_s"] or 0.0
        late_seconds = summary["compile_s_after_warmup"] or 0.0
        after = f", {late_seconds:.2f} s of it after the warm-up" if late_seconds >= 0.005 else ""
        out.write(
            f"\nwhat compile did ({variant['name']}): {_plural(summary['graphs'], 'graph')} in {functions}, "
            f"{_plural(len(summary['graph_breaks']), 'graph break')}, {seconds:.2f} s compiling{after}\n"
        )
        for item in summary["graph_breaks"]:
            static = item.get("static_findings_there") or []
            there = f" (static findings there: {', '.join(static)})" if static else ""
            out.write(f"  graph break at {item['filename']}:{item['row']}: {item['reason']}{there}\n")
            if item.get("hint"):  # the JSON has it whole
                hint = item["hint"] if len(item["hint"]) <= 100 else item["hint"][:99] + "…"
                out.write(f"    hint: {hint}\n")
        early = [item for item in summary["recompiles"] if not item["after_warmup"]]
        late = [item for item in summary["recompiles"] if item["after_warmup"]]
        if early:
            out.write(f"  {_plural(len(early), 'recompile')} during the warm-up\n")
        for item in late[:5]:
            where = f"{item['function']} ({item['filename']}:{item['row']})"
            out.write(f"  recompiled {where} in step {item['step'] + 1}: guard failed: {item['reason']}\n")
        if len(late) > 5:
            out.write(f"  ... {len(late) - 5} more recompiles after the warm-up (in the JSON)\n")
        for item in summary["failures"]:
            out.write(f"  not compiled: {item['function']} ({item['filename']}): {item['reason']}\n")


def variant_label(variant: dict[str, Any]) -> str:
    """A variant as the table names it (the text table's and the HTML page's)."""
    sets = {"all": "all fixes", "kept": "kept fixes", "together": "all that paid"}  # --keep: kept, together
    if variant["kind"] in sets:
        return f"{sets[variant['kind']]} ({len(variant['fixes'])})"
    return variant["name"]


def _write_top_ops(data: dict[str, Any], out: TextIO) -> None:
    """On CUDA the runs rank operators by their time on the GPU, which comes first; a CPU run has only the
    CPU's. Kernel names are shortened (the JSON keeps them whole): a templated CUDA kernel's full
    signature runs to hundreds of characters."""
    shown = [v for v in data["variants"] if v["top_ops"] and v["kind"] in ("original", "all", "kept")]
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
