"""`torchlint verify --html FILE`: the report as one page people look at, made from its JSON (SCHEMA.md).

A pure function of the JSON, so that a saved report can be rendered again and the page tested without a run.
The page is self-contained and inert: the style is inline, the charts are inline SVG drawn here, there is no
script, and a Content-Security-Policy forbids every load, so it opens offline, from an e-mail or a CI
artifact, exactly as it was written. Everything that comes from the run (script names, arguments, messages,
diffs) is escaped: a file called `<script>.py` shows as text.

Fields added to the schema after this page (compile, kept, dropped) are shown when present and skipped
when not, so a report of any version-1 writer renders.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torchlint.verify.report import table_header, variant_label

# Okabe-Ito: told apart by colour-blind readers too; the original is drawn in grey.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
ORIGINAL_COLOUR = "#7f7f7f"
GOOD = {"faster", "less memory", "verified", "agree", "kept"}
BAD = {"slower", "changed losses", "broke the script", "failed", "worse", "differ"}
CHART_WIDTH, CHART_HEIGHT = 560, 230
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 14, 34

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;margin:24px auto;
  max-width:1180px;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
  padding-bottom:4px}
.meta{color:#555;margin:2px 0}code,pre{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12.5px;
  background:#e8e8ea;color:#333}
.good{background:#dff3e4;color:#14632b}.bad{background:#fbe1df;color:#8a1c12}
table{border-collapse:collapse;width:100%;margin:6px 0;font-size:13px}th,td{padding:4px 6px;
  text-align:right;border-bottom:1px solid #eee;white-space:nowrap}
th{background:#f6f6f7;font-weight:600;font-size:12px;white-space:normal;vertical-align:bottom}
td:first-child,th:first-child{text-align:left}td:first-child,td.wrap{white-space:normal;text-align:left}
.scroll{overflow-x:auto}small.under{display:block;color:#666}
.charts{display:flex;flex-wrap:wrap;gap:18px}.chart{flex:1 1 540px}
.chart h3{font-size:14px;margin:4px 0}.legend{font-size:12.5px;color:#333}
.legend span{display:inline-block;margin-right:14px}.swatch{display:inline-block;width:14px;height:3px;
  vertical-align:middle;margin-right:5px}
svg text{font:11px system-ui,sans-serif;fill:#555}
pre{background:#f8f8f9;border:1px solid #e4e4e6;border-radius:4px;padding:8px;overflow-x:auto}
.diff{white-space:pre-wrap}.diff .add{color:#14632b;background:#e6f6ea}
.diff .del{color:#8a1c12;background:#fdecea}.diff .hunk{color:#6a3fa0}.diff .file{font-weight:600}
.error{border-color:#e7b3ae;background:#fdf3f2}ul{margin:4px 0;padding-left:22px}li{margin:3px 0}
details{margin:6px 0}summary{cursor:pointer;color:#333}footer{color:#888;font-size:12px;margin-top:32px}
"""

# No loads of any kind: what the page needs is in it.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def render_html(report: dict[str, Any]) -> str:
    """The whole page for one report (`report.to_json`'s object)."""
    sections = [
        _header(report),
        _errors(report),
        _variants_table(report),
        _kept(report),
        _tuned(report),
        _charts(report),
        _compile(report),
        _runtime_findings(report),
        _fixes(report),
        _top_operators(report),
        _messages(report),
    ]
    title = f"torchlint verify {report.get('script') or ''}"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "".join(section for section in sections if section)
        + f"<footer>{_e(report.get('schema', ''))} · written by torchlint verify</footer>\n"
        "</body>\n</html>\n"
    )


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(text: str) -> str:
    tone = "good" if text in GOOD else "bad" if text in BAD else ""
    return f'<span class="badge {tone}">{_e(text)}</span>'


# -- the summary ---------------------------------------------------------------------------------------------


def _header(report: dict[str, Any]) -> str:
    settings = report.get("settings") or {}
    machine = report.get("machine") or {}
    args = report.get("args") or []
    command = " ".join([str(report.get("script") or "")] + (["--", *map(str, args)] if args else []))
    device = report.get("device")
    load = " ".join(f"{x:.2f}" for x in machine.get("load_before") or [])
    repeat = settings.get("repeat") or 1
    runs = f"{repeat} repeats, interleaved" if repeat > 1 else "1 run each"
    lines = [
        f"device {'cpu (no GPU: CPU timings)' if device == 'cpu' else device}; "
        f"{_count(settings.get('threads'), 'intra-op thread')} in every run; {machine.get('cpus')} CPUs, "
        f"load {load} at the start",
        f"{settings.get('steps')} timed steps after {settings.get('warmup')} warm-up steps, {runs}",
        f"torch {machine.get('torch')}, Python {machine.get('python')}, {machine.get('platform')}",
    ]
    return (
        f"<h1>torchlint verify <code>{_e(command)}</code></h1>\n"
        f"<p>{_badge(str(report.get('verdict', '')))} exit {_e(report.get('exit_code'))}</p>\n"
        + "".join(f'<p class="meta">{_e(line)}</p>\n' for line in lines)
    )


def _count(number: Any, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _errors(report: dict[str, Any]) -> str:
    errors = report.get("errors") or []
    if not errors:
        return ""
    return "<h2>Errors</h2>\n" + "".join(f'<pre class="error">{_e(error)}</pre>\n' for error in errors)


def _number(value: float | None, form: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{form}}{suffix}"


def _mebibytes(value: float | None) -> str:
    if not value:
        return "-"
    if value < 2**20:
        return f"{value / 2**10:.0f} KiB"
    return f"{value / 2**20:.1f} MiB" if value < 10 * 2**20 else f"{value / 2**20:.0f} MiB"


def _variants_table(report: dict[str, Any]) -> str:
    variants = report.get("variants") or []
    if not variants:
        return ""
    header = table_header(variants)
    rows = "".join(_variant_row(variant, number) for number, variant in enumerate(variants))
    tolerances = sorted({str((v.get("losses") or {}).get("tolerance")) for v in variants if v.get("losses")})
    details = [
        f"losses of {variant_label(v)}: {v['losses']['detail']}"
        for v in variants
        if (v.get("losses") or {}).get("detail")
    ]
    notes = "".join(
        f'<p class="meta">{_e(line)}</p>\n' for line in [*(f"losses: {t}" for t in tolerances), *details]
    )
    return (
        '<h2>Variants</h2>\n<div class="scroll"><table>\n<tr>'
        + "".join(f"<th>{_e(cell)}</th>" for cell in header)
        + f"</tr>\n{rows}</table></div>\n{notes}"
    )


def _variant_row(variant: dict[str, Any], number: int) -> str:
    stats = variant.get("stats") or {}
    speed = variant.get("speed") or {}
    losses = variant.get("losses") or {}
    iqr = stats.get("iqr_step_ms")
    interval = speed.get("interval95") or speed.get("repeats_range")
    peak = _mebibytes(stats.get("peak_memory_bytes"))
    if stats.get("peak_memory_above_start_bytes"):
        peak += f" (+{stats['peak_memory_above_start_bytes'] / 2**20:.0f})"
    working = _mebibytes(stats.get("working_memory_bytes"))
    change = (variant.get("working_memory") or {}).get("change")
    if change and working != "-":
        working += f" ({change:.2f}x)"
    compared = losses.get("steps_compared")
    loss_cell = _badge(losses["verdict"]) if losses.get("verdict") else "-"
    if compared:
        loss_cell += f'<small class="under">{_e(compared)} steps</small>'
    swatch = f'<span class="swatch" style="background:{_colour(variant, number)}"></span>'
    cells = [
        swatch + _e(variant_label(variant)),
        _e(_number(stats.get("mean_step_ms"), ".1f")),
        _e(f"{stats['median_step_ms']:.1f} ({iqr[0]:.1f}-{iqr[1]:.1f})" if iqr else "-"),
        _e(_number(stats.get("first_step_s"), ".2f", " s")),
        _e(_number(stats.get("samples_per_second"), ".0f")),
        _e(_number(speed.get("speedup"), ".2f", "x")),
        _e(f"{interval[0]:.2f}-{interval[1]:.2f}x" if interval else "-"),
        _e(peak),
        _e(working),
        _e(_number(stats.get("data_wait_share"), ".0%")),
        loss_cell,
        _badge(str(variant.get("verdict", ""))),
    ]
    failure = variant.get("failure")
    title = f' title="{_e(failure)}"' if failure else ""
    return f"<tr{title}>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>\n"


def _colour(variant: dict[str, Any], number: int) -> str:
    if variant.get("kind") == "original":
        return ORIGINAL_COLOUR
    return PALETTE[(number - 1) % len(PALETTE)]


def _plain(value: Any) -> str:
    """A field whose shape this page does not know in detail, said as text."""
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_plain(item)}" for key, item in value.items() if item is not None)
    if isinstance(value, list):
        return "; ".join(_plain(item) for item in value)
    return str(value)


def _kept(report: dict[str, Any]) -> str:
    """`--keep`'s decision: each fix kept or dropped, with why, and the files written (null without it)."""
    if report.get("kept") is None and report.get("dropped") is None:
        return ""
    items = [
        f"<li>{_badge(word)} {_e(_fix_line(choice))}"
        + (f": {_e(choice.get('reason'))}" if isinstance(choice, dict) and choice.get("reason") else "")
        + "</li>"
        for word, key in (("kept", "kept"), ("dropped", "dropped"))
        for choice in report.get(key) or []
    ]
    items += [f"<li>written: <code>{_e(path)}</code></li>" for path in report.get("written") or []]
    return f"<h2>Kept fixes</h2>\n<ul>{''.join(items) or '<li>nothing to keep</li>'}</ul>\n"


def _tuned(report: dict[str, Any]) -> str:
    """`--tune`'s curve, fastest first, the choice marked, then the decision and what was written."""
    tuned = report.get("tune")
    if not isinstance(tuned, dict):
        return ""
    loader = tuned.get("loader") or {}
    where = f" built at <code>{_e(loader.get('filename'))}:{_e(loader.get('row'))}</code>" if loader else ""
    rows = "".join(
        f"<tr><td>{_e(_setting(point.get('options')))}</td>"
        f"<td>{_number(point.get('mean_step_ms'), '.1f', ' ms')}</td>"
        f"<td>{_number(point.get('speedup'), '.2f', 'x')}</td><td>{_e(point.get('runs'))}</td>"
        f"<td>{_badge(str(point.get('verdict')))}{' (chosen)' if point.get('chosen') else ''}</td></tr>"
        for point in tuned.get("curve") or []
        if isinstance(point, dict)
    )
    table = (
        "<table><tr><th>options</th><th>step</th><th>speed-up</th><th>runs</th><th>verdict</th></tr>"
        f"{rows}</table>\n"
        if rows
        else ""
    )
    lines = [tuned.get("message"), tuned.get("advice")]
    lines += [f"written: {path}" for path in tuned.get("written") or []]
    items = "".join(f"<li>{_e(line)}</li>" for line in lines if line)
    return f"<h2>Tuned DataLoader{where}</h2>\n{table}<ul>{items}</ul>\n"


def _setting(options: Any) -> str:
    if not isinstance(options, dict):
        return _plain(options)
    return ", ".join(f"{key}={value}" for key, value in options.items())


def _fix_line(fix: Any) -> str:
    if not isinstance(fix, dict):
        return str(fix)
    location = fix.get("location") or {}
    where = ":".join(str(x) for x in (fix.get("filename"), location.get("row"), location.get("column")) if x)
    parts = [str(fix.get("code", "")), where]
    if fix.get("applicability"):
        parts.append(f"[{fix['applicability']}]")
    if fix.get("title"):
        parts.append(str(fix["title"]))
    return " ".join(part for part in parts if part)


# -- the charts ----------------------------------------------------------------------------------------------


@dataclass
class Series:
    """One run's values over its steps (step 1 first; None where nothing was measured)."""

    label: str
    colour: str
    values: list[float | None]
    repeat: int  # 0 for a variant's first run: later ones are drawn lighter


def _charts(report: dict[str, Any]) -> str:
    variants = report.get("variants") or []
    runs = report.get("runs") or []
    colours = {v.get("name"): (variant_label(v), _colour(v, n)) for n, v in enumerate(variants)}
    warmup = int((report.get("settings") or {}).get("warmup") or 0)
    times = _series(runs, colours, "step_ms", 1.0)
    memory = _series(runs, colours, "step_memory_bytes", 1 / 2**20)
    losses = [
        Series(*colours[v.get("name")], [_finite(x) for x in v["stats"]["losses"]], 0)
        for v in variants
        if (v.get("stats") or {}).get("losses")
    ]
    on_cuda = report.get("device") == "cuda"
    charts = [
        _chart("Step time", "ms", times, warmup, clip=True),
        _chart(
            "Memory at each step's end",
            "MiB",
            memory,
            warmup,
            clip=False,
            note="CUDA allocated" if on_cuda else "RSS of the main process",
        ),
        _chart("Loss per step (first run)", "", losses, warmup, clip=False),
    ]
    shown = [chart for chart in charts if chart]
    if not shown:
        return ""
    legend = "".join(
        f'<span><span class="swatch" style="background:{colour}"></span>{_e(label)}</span>'
        for label, colour in colours.values()
    )
    return (
        '<h2>Over the steps</h2>\n<p class="legend">'
        + legend
        + " · the shaded steps are the warm-up; later repeats are dashed</p>\n"
        + '<div class="charts">'
        + "".join(shown)
        + "</div>\n"
    )


def _series(
    runs: list[dict[str, Any]], colours: dict[Any, tuple[str, str]], key: str, scale: float
) -> list[Series]:
    found: list[Series] = []
    repeats: dict[Any, int] = {}
    for run in runs:
        values = run.get(key)
        name = run.get("variant")
        if not values or name not in colours:
            continue
        label, colour = colours[name]
        repeat = repeats.get(name, 0)
        repeats[name] = repeat + 1
        found.append(Series(label, colour, [_finite(v, scale) for v in values], repeat))
    return found


def _finite(value: float | None, scale: float = 1.0) -> float | None:
    """A value to draw; None (a gap in the line) for a missing, NaN or infinite one (a diverged loss)."""
    return value * scale if isinstance(value, (int, float)) and math.isfinite(value) else None


@dataclass(frozen=True)
class Frame:
    """Where a step and a value land in the chart's SVG coordinates."""

    steps: int
    top: float
    low: float = 0.0  # below zero only for values below it (a log-likelihood loss)

    def x(self, step: int) -> float:
        inner = CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        return MARGIN_LEFT + inner * (step - 0.5) / self.steps

    def y(self, value: float) -> float:
        inner = CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
        shown = min(max(value, self.low), self.top)
        return MARGIN_TOP + inner * (1 - (shown - self.low) / (self.top - self.low))


def _chart(title: str, unit: str, series: list[Series], warmup: int, clip: bool, note: str = "") -> str:
    """A line chart of `series` over the steps, from zero (or below). With `clip`, the scale is set by the
    steps after the warm-up, and warm-up steps above it (a compile, the workers' start) are drawn as a mark
    on the top edge and listed under the chart: a 40 s first step would flatten the others to the axis."""
    values = [v for s in series for v in s.values if v is not None]
    if not values:
        return ""
    steady = [v for s in series for v in s.values[warmup:] if v is not None] if clip else []
    top = _nice_ceiling(max(steady or values) * 1.08)
    low = -_nice_ceiling(-min(values) * 1.08) if min(values) < 0 else 0.0
    frame = Frame(max(len(s.values) for s in series), top, low)
    parts = [_axes(frame, unit, warmup)]
    for one in sorted(series, key=lambda s: -s.repeat):  # first repeats on top
        parts.append(_line(one, frame, unit))
    caption = f"{title}{f' ({note})' if note else ''}"
    above = [
        f"{s.label}{f' #{s.repeat + 1}' if s.repeat else ''} step {step}: {_value_label(v)} {unit}".rstrip()
        for s in series
        for step, v in enumerate(s.values, 1)
        if v is not None and v > top
    ]
    listed = f'<p class="meta">above the scale: {_e("; ".join(above))}</p>' if above else ""
    return (
        f'<div class="chart"><h3>{_e(caption)}</h3>'
        f'<svg width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" aria-label="{_e(caption)}">'
        + "".join(parts)
        + f"</svg>{listed}</div>"
    )


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 or 10 times a power of ten that is at least `value` (an axis's top)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(power * m for m in (1, 2, 2.5, 5, 10) if power * m >= value * (1 - 1e-9))


def _axes(frame: Frame, unit: str, warmup: int) -> str:
    left, right = MARGIN_LEFT, CHART_WIDTH - MARGIN_RIGHT
    bottom = CHART_HEIGHT - MARGIN_BOTTOM
    parts = []
    if warmup:
        end = frame.x(min(warmup, frame.steps)) + (frame.x(2) - frame.x(1)) / 2
        parts.append(
            f'<rect x="{left}" y="{MARGIN_TOP}" width="{end - left:.1f}" height="{bottom - MARGIN_TOP}" '
            'fill="#f1f1f3"/>'
        )
    for tick in _ticks(frame.low, frame.top):
        y = frame.y(tick)
        parts.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(_tick_label(tick))}</text>')
    for step in _step_ticks(frame.steps):
        x = frame.x(step)
        parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{step}</text>')
    parts.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#999"/>')
    parts.append(
        f'<text x="{(left + right) / 2:.0f}" y="{CHART_HEIGHT - 4}" text-anchor="middle">step</text>'
    )
    if unit:
        parts.append(f'<text x="4" y="{MARGIN_TOP - 2}">{_e(unit)}</text>')
    return "".join(parts)


def _ticks(low: float, top: float) -> list[float]:
    step = _nice_ceiling((top - low) / 5)
    first = math.ceil(low / step - 1e-9)
    return [step * i for i in range(first, int(top / step + 1e-9) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}" if value >= 1 or value == 0 else f"{value:.2g}"


def _step_ticks(steps: int) -> list[int]:
    every = max(1, int(_nice_ceiling(steps / 10)))
    first = [1] if every >= 4 else []  # step 1 beside step 2 would crowd the axis
    return first + list(range(every, steps + 1, every))


def _line(series: Series, frame: Frame, unit: str) -> str:
    """The series' line; for a first repeat also a dot per step, whose tooltip says the value, and a
    triangle on the top edge for a value above the scale."""
    dash = ' stroke-dasharray="5 3" stroke-opacity="0.6"' if series.repeat else ""
    parts = []
    for segment in _segments(series.values):
        points = " ".join(f"{frame.x(step):.1f},{frame.y(value):.1f}" for step, value in segment)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{series.colour}" stroke-width="1.8"{dash}/>'
        )
    if series.repeat:
        return "".join(parts)
    for step, value in enumerate(series.values, 1):
        if value is None:
            continue
        x, y = frame.x(step), frame.y(value)
        tip = f"<title>{_e(f'{series.label}, step {step}: {_value_label(value)} {unit}'.rstrip())}</title>"
        if value > frame.top:
            triangle = f"{x - 5:.1f},{y + 7:.1f} {x + 5:.1f},{y + 7:.1f} {x:.1f},{y - 2:.1f}"
            parts.append(f'<polygon points="{triangle}" fill="{series.colour}">{tip}</polygon>')
        else:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="{series.colour}">{tip}</circle>')
    return "".join(parts)


def _value_label(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _segments(values: list[float | None]) -> Iterable[list[tuple[int, float]]]:
    """Runs of measured values (a step without one breaks the line)."""
    segment: list[tuple[int, float]] = []
    for step, value in enumerate(values, 1):
        if value is None:
            if segment:
                yield segment
            segment = []
        else:
            segment.append((step, value))
    if segment:
        yield segment


# -- what the runs found -------------------------------------------------------------------------------------


def _compile(report: dict[str, Any]) -> str:
    """What compile did, per variant that compiles (graphs, breaks with their lines, recompiles, time)."""
    rows = []
    for variant in report.get("variants") or []:
        compiled = variant.get("compile")
        if not isinstance(compiled, dict):
            continue
        breaks = compiled.get("graph_breaks") or []
        recompiles = compiled.get("recompiles") or []
        items = [
            f"<li>graph break at <code>{_e(item.get('filename'))}:{_e(item.get('row'))}</code>: "
            f"{_e(item.get('reason'))}</li>"
            if isinstance(item, dict)
            else f"<li>graph break: {_e(item)}</li>"
            for item in breaks
        ]
        items += [f"<li>recompile: {_e(_plain(item))}</li>" for item in recompiles]
        summary = (
            f"{_e(compiled.get('graphs', '-'))} graphs, {len(breaks)} graph breaks, "
            f"{len(recompiles)} recompiles, compile {_e(_number(compiled.get('compile_s'), '.1f', ' s'))}"
        )
        rows.append(
            f"<h3>{_e(variant_label(variant))}: {summary}</h3>\n"
            + (f"<ul>{''.join(items)}</ul>\n" if items else "")
        )
    return "<h2>What compile did</h2>\n" + "".join(rows) if rows else ""


def _runtime_findings(report: dict[str, Any]) -> str:
    blocks = []
    for variant in report.get("variants") or []:
        findings = variant.get("runtime_findings") or []
        if not findings:
            continue
        items = "".join(_finding_item(finding) for finding in findings)
        blocks.append(f"<h3>{_e(variant_label(variant))}</h3>\n<ul>{items}</ul>\n")
    return "<h2>Runtime findings</h2>\n" + "".join(blocks) if blocks else ""


def _finding_item(finding: dict[str, Any]) -> str:
    codes = ", ".join(f"<code>{_e(code)}</code>" for code in finding.get("codes") or [])
    static = finding.get("static_findings_there") or []
    there = f" (static findings there: {', '.join(_e(code) for code in static)})" if static else ""
    fixed_by = f" → {codes}" if codes else ""
    return f"<li>{_e(finding.get('message'))}{fixed_by}{there}</li>"


def _fixes(report: dict[str, Any]) -> str:
    """The fixes and their diff: the kept set's when `--keep` chose one, else all of them together; each
    single fix's diff folded below."""
    variants = [v for v in report.get("variants") or [] if v.get("kind") != "original"]
    if not variants:
        return ""
    main = next((v for v in variants if v.get("kind") == "kept"), None)
    main = main or next((v for v in variants if v.get("kind") == "all"), variants[0])
    fixes = "".join(f"<li><code>{_e(_fix_line(fix))}</code></li>" for fix in main.get("fixes") or [])
    parts = [f"<h2>Fixes in {_e(variant_label(main))}</h2>\n"]
    if fixes:
        parts.append(f"<ul>{fixes}</ul>\n")
    parts.append(_diff_block(main.get("diff")))
    for variant in variants:
        if variant is not main and variant.get("diff"):
            parts.append(
                f"<details><summary>diff of {_e(variant_label(variant))}</summary>"
                f"{_diff_block(variant['diff'])}</details>\n"
            )
    return "".join(parts)


def _diff_block(diff: str | None) -> str:
    if not diff:
        return '<p class="meta">no diff in this report</p>\n'
    lines = []
    for line in diff.splitlines():
        kind = ""
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        lines.append(f'<span class="{kind}">{_e(line)}</span>' if kind else _e(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>\n"


def _top_operators(report: dict[str, Any]) -> str:
    blocks = []
    on_gpu = report.get("device") == "cuda"
    for variant in report.get("variants") or []:
        ops = variant.get("top_ops") or []
        if not ops or variant.get("kind") not in ("original", "all", "kept"):
            continue
        header = (
            "<tr><th>operator</th>"
            + ("<th>GPU ms</th>" if on_gpu else "")
            + "<th>CPU ms</th><th>calls</th></tr>"
        )
        rows = "".join(
            f'<tr><td class="wrap"><code>{_e(op.get("name"))}</code></td>'
            + (f"<td>{_e(_number(op.get('self_device_ms'), '.3f'))}</td>" if on_gpu else "")
            + f"<td>{_e(_number(op.get('self_cpu_ms'), '.3f'))}</td><td>{_e(op.get('count'))}</td></tr>"
            for op in ops[:8]
        )
        blocks.append(
            f"<details><summary>top operators of {_e(variant_label(variant))} (profiled steps, by "
            f"{'GPU ' if on_gpu else ''}self time)</summary><table>{header}{rows}</table></details>\n"
        )
    return "<h2>Top operators</h2>\n" + "".join(blocks) if blocks else ""


def _messages(report: dict[str, Any]) -> str:
    items = [f"<li>note: {_e(message)}</li>" for message in report.get("notes") or []]
    items += [f"<li>warning: {_e(message)}</li>" for message in report.get("warnings") or []]
    return f"<h2>Notes</h2>\n<ul>{''.join(items)}</ul>\n" if items else ""
