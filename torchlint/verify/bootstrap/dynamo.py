"""What `torch.compile` did in the measured process: graphs per compiled frame, each graph break with its
reason and source line, recompiles with the guard that failed, and the seconds spent compiling.

Read from what Dynamo records anyway, without compiling anything again (`torch._dynamo.explain` would
trace every frame a second time, in a process whose steps are being timed):

- Dynamo's compilation metrics (`torch._dynamo.utils.get_compilation_metrics()`): one record per compiled
  frame, with its code's name, file and first line, the ops in its graph, its duration and, for a
  recompile, the guard failures that caused it. A graph break ends a graph and resumes in a
  `torch_dynamo_resume_in_<function>_at_<line>` frame, so the graphs of one function are its frame's and
  its resume frames'. The record's start time places it among the optimizer steps.
- Dynamo's `graph_breaks` log (`torch._logging`'s artifact loggers): the only place that says where a
  graph broke (`Graph break in user code at FILE:LINE`, with the reason and the user's traceback). Its
  loggers are switched on for a handler of ours only: nothing more is printed than the script prints,
  unless the user asked for these logs (`TORCH_LOGS=graph_breaks`), which then still print.

Installed on the first `torch.compile` (or `Module.compile`) call: importing Dynamo costs a second or two,
which a run that never compiles must not pay. Only the standard library is imported at the top (the
parsers are tested without torch); torch is imported inside the functions that need it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")
BREAK_AT = re.compile(
    r"^Graph break(?: \(user stack suppressed due to duplicate graph break\))? in user code at "
    r"(?P<filename>.+):(?P<row>\d+)$"
)
SKIPPED_FRAME = "Graph break: torch.compile cannot properly resume from this graph break"
TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<filename>[^"]+)", line (?P<row>\d+), in (?P<function>.+)$')
GUARD_FAILURE = re.compile(r"^\s*-?\s*\d+/\d+: (?P<guard>.*)$")
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
)
METRICS_LIMIT = 100_000  # Dynamo keeps the last 64 records by default: a run that recompiles keeps them all
REASON_WIDTH = 300


def original_function(code_name: str) -> str:
    """`forward` for `forward` and for its resume frames (`torch_dynamo_resume_in_forward_at_12`)."""
    while (match := RESUME.match(code_name)) is not None:
        code_name = match["function"]
    return code_name


def parse_graph_break(message: str, is_library: Callable[[str], bool]) -> dict[str, Any] | None:
    """One graph-break log record: `{reason, hint, filename, row, at}` (`at`: Dynamo's own location, the
    innermost frame it traced), or None for a record that is not a graph break at a known place.

    The location is the innermost frame of the user's traceback outside torch (`is_library`): a break
    inside a torch function that the user's line called is that line's."""
    lines = message.splitlines()
    if not lines:
        return None
    first = BREAK_AT.match(lines[0])
    if first is not None:
        at = (first["filename"], int(first["row"]))
        reason, hint = _reason_and_hint(lines[1:])
    elif lines[0].startswith(SKIPPED_FRAME):
        at = None
        reason = lines[1].strip() if len(lines) > 1 else lines[0]
        hint = None
    else:
        return None
    frames = [
        (m["filename"], int(m["row"])) for line in lines if (m := TRACEBACK_FRAME.match(line)) is not None
    ]
    user = [frame for frame in frames if not is_library(frame[0])]
    where = user[-1] if user else at
    if where is None:
        return None
    return {"reason": reason, "hint": hint, "filename": where[0], "row": where[1], "at": at}


def _reason_and_hint(lines: list[str]) -> tuple[str, str | None]:
    """The reason's first line: Dynamo wraps a call's failure in "Encountered graph break when attempting
    to trace CALL: ...:", the reason proper being the next line; and the first of its `Hint:` lines."""
    reason = ""
    rest: list[str] = []
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason: "):
            reason = line[len("Graph Break Reason: ") :].strip()
            rest = lines[index + 1 :]
            break
    if reason.endswith(":"):
        following = next((line.strip() for line in rest if line.strip()), "")
        if following and not following.startswith(("Explanation:", "Hint:")):
            reason = following
    hint = next((line.strip()[len("Hint: ") :] for line in rest if line.strip().startswith("Hint: ")), None)
    return reason[:REASON_WIDTH], hint[:REASON_WIDTH] if hint else None


def guard_failures(recompile_reason: str) -> str:
    """`tensor 'x' size mismatch at index 0. expected 4, actual 5; scale == 0.2288` from Dynamo's
    recompile reason: each failed guard, without its cache-entry number and its source comment."""
    guards = []
    for line in recompile_reason.splitlines():
        match = GUARD_FAILURE.match(line)
        if match is not None:
            guard = match["guard"].split("  #", 1)[0].strip()
            if guard and guard not in guards:
                guards.append(guard)
    text = "; ".join(guards) if guards else (recompile_reason.strip().splitlines() or [""])[0].strip()
    return text[:REASON_WIDTH]


class GraphBreakHandler(logging.Handler):
    """Keeps Dynamo's graph-break records, parsed, in the order they came."""

    def __init__(self, is_library: Callable[[str], bool], steps_done: Callable[[], int]) -> None:
        super().__init__(logging.DEBUG)
        self.is_library = is_library
        self.steps_done = steps_done
        self.breaks: list[dict[str, Any]] = []
        self.where: dict[tuple[str, int], tuple[str, int]] = {}  # Dynamo's location -> the user's

    def emit(self, record: logging.LogRecord) -> None:
        try:
            parsed = parse_graph_break(record.getMessage(), self.is_library)
        except Exception:  # noqa: BLE001 - a record we cannot read is left out, never raised in Dynamo
            return
        if parsed is None:
            return
        at = parsed.pop("at")
        if at is not None:
            # A repeated break is logged without its traceback: its user line is the first one's.
            known = self.where.setdefault(at, (parsed["filename"], parsed["row"]))
            parsed["filename"], parsed["row"] = known
        parsed["step"] = self.steps_done()
        self.breaks.append(parsed)


class CompileWatch:
    """Installed once, on the first compile; `summary` is the run's `compile` result (None: no compile)."""

    def __init__(self, is_library: Callable[[str], bool], steps_done: Callable[[], int]) -> None:
        self.handler = GraphBreakHandler(is_library, steps_done)
        self.installed = False
        self.epoch_offset = time.time() - time.perf_counter()  # Dynamo's records carry Unix times

    def install(self) -> None:
        if self.installed:
            return
        self.installed = True
        try:
            import torch._dynamo.utils as dynamo_utils

            dynamo_utils.set_compilation_metrics_limit(METRICS_LIMIT)
        except Exception:  # noqa: BLE001 - without it, the last 64 compiles are reported
            pass
        for name in _graph_break_logger_names():
            logger = logging.getLogger(name)
            if not logger.isEnabledFor(logging.DEBUG):
                # Not asked for by the user: on for our handler, printed nowhere.
                logger.setLevel(logging.DEBUG)
                logger.propagate = False
            logger.addHandler(self.handler)

    def summary(self, step_ends: list[float], warmup: int) -> dict[str, Any] | None:
        """`step_ends`: each step's end (`time.perf_counter()`). A script that compiled through
        `torch._dynamo.optimize` rather than `torch.compile` still has its graphs, recompiles and compile
        time reported, without the graph breaks' lines."""
        dynamo_utils = sys.modules.get("torch._dynamo.utils")
        if dynamo_utils is None:
            return None
        try:
            metrics = [_metric(m) for m in dynamo_utils.get_compilation_metrics()]
        except Exception:  # noqa: BLE001 - a torch without these metrics: graph breaks only
            metrics = []
        if not self.installed and not metrics:
            return None
        ends = [self.epoch_offset + end for end in step_ends]
        return summarise(metrics, self.handler.breaks, ends, warmup)


def _graph_break_logger_names() -> list[str]:
    try:
        from torch._logging._internal import log_registry

        names = [n for n in log_registry.get_artifact_log_qnames() if n.endswith(".__graph_breaks")]
    except Exception:  # noqa: BLE001 - torch's private registry moved: the loggers known to 2.13
        names = []
    return sorted(set(names) | set(GRAPH_BREAK_LOGGERS))


def _metric(record: Any) -> dict[str, Any]:
    """The fields of one `CompilationMetrics` record that the summary reads."""
    start_us = getattr(record, "start_time_us", None)
    duration_us = getattr(record, "duration_us", None)
    if duration_us is None and getattr(record, "entire_frame_compile_time_s", None) is not None:
        duration_us = record.entire_frame_compile_time_s * 1e6
    return {
        "co_name": getattr(record, "co_name", None),
        "co_filename": getattr(record, "co_filename", None),
        "co_firstlineno": getattr(record, "co_firstlineno", None),
        "graph_op_count": getattr(record, "graph_op_count", None) or 0,
        "recompile_reason": getattr(record, "recompile_reason", None),
        "fail_type": getattr(record, "fail_type", None),
        "fail_reason": getattr(record, "fail_reason", None),
        "start": start_us / 1e6 if start_us is not None else getattr(record, "start_time", None),
        "seconds": (duration_us or 0) / 1e6,
    }


def summarise(
    metrics: list[dict[str, Any]], breaks: list[dict[str, Any]], step_ends: list[float], warmup: int
) -> dict[str, Any]:
    """The run's `compile` result from Dynamo's records (`_metric`'s dicts), the parsed graph breaks and
    the steps' ends (Unix times): which step each compile came in is the number of steps ended before it.
    """
    frames: dict[tuple[str, str], dict[str, Any]] = {}
    recompiles = []
    failures = []
    seconds = after_warmup = 0.0
    for metric in metrics:
        step = sum(1 for end in step_ends if metric["start"] is not None and end < metric["start"])
        seconds += metric["seconds"]
        if step >= warmup:
            after_warmup += metric["seconds"]
        name, filename = metric["co_name"], metric["co_filename"]
        if not name or not filename:  # a backward compiled lazily, autotuning: time only
            continue
        function = original_function(name)
        frame = frames.setdefault(
            (filename, function),
            {"function": function, "filename": filename, "row": None, "graphs": set(), "compiles": 0},
        )
        frame["compiles"] += 1
        if function == name:
            frame["row"] = metric["co_firstlineno"]
        if metric["graph_op_count"]:
            frame["graphs"].add((name, metric["co_firstlineno"]))
        if metric["recompile_reason"]:
            recompiles.append(
                {
                    "reason": guard_failures(metric["recompile_reason"]),
                    "function": function,
                    "filename": filename,
                    "row": metric["co_firstlineno"],
                    "step": step,
                    "after_warmup": step >= warmup,
                }
            )
        if metric["fail_type"]:
            failures.append({"function": function, "filename": filename, "reason": _failure(metric)})
    compiled = [
        {**frame, "graphs": len(frame["graphs"]), "row": frame["row"] or _first_row(frame, metrics)}
        for frame in frames.values()
        if frame["graphs"]
    ]
    return {
        "graphs": sum(frame["graphs"] for frame in compiled),
        "frames": compiled,
        "graph_breaks": unique_breaks(breaks),
        "recompiles": recompiles,
        "failures": failures,
        "compile_s": seconds,
        "compile_s_after_warmup": after_warmup,
    }


def _failure(metric: dict[str, Any]) -> str:
    """`Unsupported: ...`: a frame Dynamo gave up on (it runs eagerly), from the record's first line."""
    detail = (metric["fail_reason"] or "").strip().splitlines()
    return f"{metric['fail_type']}: {detail[0] if detail else ''}".rstrip(": ")[:REASON_WIDTH]


def _first_row(frame: dict[str, Any], metrics: list[dict[str, Any]]) -> int | None:
    """Only resume frames were compiled (the function's own frame was not): the first of their lines."""
    rows = [
        m["co_firstlineno"]
        for m in metrics
        if m["co_filename"] == frame["filename"]
        and m["co_name"]
        and original_function(m["co_name"]) == frame["function"]
        and m["co_firstlineno"] is not None
    ]
    return min(rows) if rows else None


def unique_breaks(breaks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per place and reason, in the order they first came: a frame recompiled meets its breaks
    again. `count` is how many compiles met it, `step` the step it first came in."""
    unique: dict[tuple[str, int, str], dict[str, Any]] = {}
    for item in breaks:
        key = (item["filename"], item["row"], item["reason"])
        if key in unique:
            unique[key]["count"] += 1
        else:
            unique[key] = {**item, "filename": os.path.abspath(item["filename"]), "count": 1}
    return list(unique.values())
