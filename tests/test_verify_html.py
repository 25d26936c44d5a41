"""`torchlint verify --html FILE`: the page made from the JSON report, checked as markup (escaped, loads
nothing), as a picture (rendered by a real headless Chromium, not blank) and from a real run.

`tests/data/verify-report-loader-bound.json` is the JSON of one real run:
`torchlint verify fixtures/loader_bound/train.py --select TL2 --unsafe-fixes --each --repeat 2 --json ...
-- --train-size 1024` on a 2-core CPU kept busy by other work (load 4.3)."""

from __future__ import annotations

import copy
import json
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import REPO

from torchlint.verify.html import _nice_ceiling, render_html

RECORDED = REPO / "tests" / "data" / "verify-report-loader-bound.json"
# What the page may contain: structure, the table, inline SVG and its shapes; nothing that loads or runs.
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "span", "small", "code", "pre",
    "table", "tr", "th", "td", "ul", "li", "div", "details", "summary", "footer",
    "svg", "rect", "line", "polyline", "polygon", "circle", "text",
}  # fmt: skip


def recorded() -> dict:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


class Markup(HTMLParser):
    """Every tag and attribute of a page, and its text, as a browser's tokenizer sees them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    @property
    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}

    @property
    def all_text(self) -> str:
        return "".join(self.text)


# -- the page ------------------------------------------------------------------------------------------------


def test_the_page_shows_every_variant_with_its_verdict_findings_and_the_diff_of_all_fixes():
    report = recorded()
    markup = Markup(render_html(report))
    text = markup.all_text
    assert "torchlint verify fixtures/loader_bound/train.py -- --train-size 1024" in text
    for label in ("original", "TL201 fixtures/loader_bound/train.py:116", "all fixes (3)"):
        assert label in text
    for variant in report["variants"]:
        assert variant["verdict"] in text
    finding = report["variants"][0]["runtime_findings"][0]["message"]
    assert finding in text and "static findings there: TL201, TL202" in text
    # The diff of all the fixes is shown, its lines marked as added or removed.
    assert "Fixes in all fixes (3)" in text and "+import os" in text
    added = [attrs for tag, attrs in markup.tags if tag == "span" and attrs.get("class") == "add"]
    removed = [attrs for tag, attrs in markup.tags if tag == "span" and attrs.get("class") == "del"]
    diffs = [line for variant in report["variants"] for line in (variant["diff"] or "").splitlines()]
    assert len(added) == sum(1 for line in diffs if line.startswith("+") and not line.startswith("+++"))
    assert len(removed) == sum(1 for line in diffs if line.startswith("-") and not line.startswith("---"))
    assert text.count("diff of TL20") == 2  # each single fix's diff, folded


def test_each_run_is_one_line_in_the_step_time_and_memory_charts_and_each_variant_one_in_the_losses():
    report = recorded()
    markup = Markup(render_html(report))
    lines = [attrs for tag, attrs in markup.tags if tag == "polyline"]
    runs, variants = len(report["runs"]), len(report["variants"])
    assert len(lines) == 2 * runs + variants
    svgs = [attrs for tag, attrs in markup.tags if tag == "svg"]
    assert [svg["aria-label"] for svg in svgs] == [
        "Step time",
        "Memory at each step's end (RSS of the main process)",
        "Loss per step (first run)",
    ]
    points = report["runs"][0]["step_ms"]
    assert f"original, step 2: {points[1]:.3g} ms" in markup.all_text  # each point's tooltip


def test_warm_up_steps_above_the_steady_scale_are_marked_on_the_top_edge_and_listed():
    report = _small_report(step_ms=[[5000.0, 10.0, 11.0, 12.0, 10.0], [900.0, 5.0, 5.5, 6.0, 5.0]])
    markup = Markup(render_html(report))
    assert "above the scale: original step 1: 5000 ms; all fixes (1) step 1: 900 ms" in markup.all_text
    triangles = [attrs for tag, attrs in markup.tags if tag == "polygon"]
    assert len(triangles) == 2
    # The scale is the steady steps': 12 ms * 1.08 rounds up to 15, the top tick.
    ticks = [t for t in markup.text if t in ("15", "20", "5000")]
    assert "15" in ticks and "5000" not in ticks


def test_a_step_without_a_measurement_breaks_the_line():
    report = _small_report(step_ms=[[10.0, 11.0, 12.0, 10.0, 11.0], [5.0, 5.0, 6.0, 5.0, 5.0]])
    report["runs"][0]["step_memory_bytes"] = [2**20, 2**20, None, 2**21, 2**21]
    report["runs"][1]["step_memory_bytes"] = [None] * 5
    markup = Markup(render_html(report))
    memory = _chart_shapes(render_html(report), "Memory at each step")
    assert memory.count("<polyline") == 2 and memory.count("<circle") == 4
    assert "original, step 4: 2 MiB" in markup.all_text


def test_losses_below_zero_extend_the_axis_down_and_a_diverged_loss_leaves_a_gap():
    report = _small_report(step_ms=[[10.0] * 5, [5.0] * 5])
    report["variants"][0]["stats"]["losses"] = [-1.0, -2.0, float("nan"), -1.5, -1.2]
    report["variants"][1]["stats"]["losses"] = [-1.0, -2.0, -1.8, float("inf"), None]
    losses = _chart_shapes(render_html(report), "Loss per step")
    assert losses.count("<polyline") == 3 and losses.count("<circle") == 7
    assert "nan" not in losses and "inf" not in losses
    ticks = [text.split(">")[-1] for text in losses.split("</text>") if 'text-anchor="end"' in text]
    assert ticks == ["-2", "-1", "0", "1"]


def test_a_failed_report_without_stats_or_per_step_data_still_renders_its_error():
    report = _small_report(step_ms=[[], []])
    for variant in report["variants"]:
        variant["stats"] = None
    report["variants"][0]["verdict"], report["variants"][1]["verdict"] = "failed", "not run"
    for run in report["runs"]:
        del run["step_ms"], run["step_memory_bytes"]  # a report written before these fields
    report["errors"] = ["run 'original': the script crashed after 0 steps:\nValueError: no data"]
    report["verdict"], report["exit_code"] = "failed", 2
    page = render_html(report)
    markup = Markup(page)
    assert "<svg" not in page
    assert "ValueError: no data" in markup.all_text and "not run" in markup.all_text


def test_compile_kept_and_dropped_are_shown_when_the_report_has_them():
    report = _small_report(step_ms=[[10.0] * 5, [5.0] * 5])
    report["variants"][1]["compile"] = {
        "graphs": 3,
        "graph_breaks": [
            {"reason": "Tensor.item() call", "filename": "train.py", "row": 41},
            {"reason": "data-dependent branch", "filename": "train.py", "row": 44},
        ],
        "recompiles": [{"reason": "size of x changed", "guard": "x.size()[0] == 32"}],
        "compile_s": 12.25,
    }
    report["kept"] = [
        {
            "code": "TL201",
            "filename": "train.py",
            "location": {"row": 9, "column": 5},
            "reason": "faster 1.92x",
        }
    ]
    report["dropped"] = [
        {"code": "TL101", "filename": "train.py", "location": {"row": 30, "column": 9}, "reason": "no change"}
    ]
    report["written"] = ["train.py"]
    text = Markup(render_html(report)).all_text
    assert "all fixes (1): 3 graphs, 2 graph breaks, 1 recompiles, compile 12.2 s" in text
    assert "graph break at train.py:41: Tensor.item() call" in text
    assert "recompile: reason: size of x changed, guard: x.size()[0] == 32" in text
    assert (
        "kept TL201 train.py:9:5: faster 1.92x" in text and "dropped TL101 train.py:30:9: no change" in text
    )
    assert "written: train.py" in text


def test_a_report_without_keep_has_no_kept_section():
    report = recorded() | {"kept": None, "dropped": None, "written": None}
    assert "Kept fixes" not in render_html(report) and "Kept fixes" not in render_html(recorded())


@pytest.mark.parametrize(("value", "top"), [(7.3, 10), (212, 250), (0.042, 0.05), (20, 20), (0, 1)])
def test_an_axis_ends_on_a_round_number_at_or_above_the_largest_value(value, top):
    assert _nice_ceiling(value) == pytest.approx(top)


# -- the page is inert ---------------------------------------------------------------------------------------


def test_the_page_loads_nothing_and_runs_nothing():
    page = render_html(recorded())
    markup = Markup(page)
    assert markup.names <= ALLOWED_TAGS, markup.names - ALLOWED_TAGS
    for tag, attrs in markup.tags:
        assert not {"src", "href", "xlink:href", "action"} & set(attrs), (tag, attrs)
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
    assert "://" not in page and "url(" not in page and "@import" not in page  # no address at all
    policy = [
        attrs["content"] for tag, attrs in markup.tags if attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]


def test_script_names_arguments_messages_and_diffs_are_escaped_not_markup():
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    report = copy.deepcopy(recorded())
    report["script"] = f"{hostile}.py"
    report["args"] = [hostile]
    report["variants"][1]["name"] = hostile
    for run in report["runs"]:
        if run["variant"] == report["variants"][1]["name"]:
            run["variant"] = hostile
    report["variants"][0]["runtime_findings"][0]["message"] = f"<b>waits</b> & {hostile}"
    report["variants"][0]["runtime_findings"][0]["codes"] = [hostile]
    report["variants"][-1]["diff"] += f"+{hostile}\n"
    report["variants"][0]["top_ops"][0]["name"] = hostile
    report["notes"] = [hostile]
    report["errors"] = [f"</pre>{hostile}"]
    page = render_html(report)
    markup = Markup(page)
    assert markup.names <= ALLOWED_TAGS, markup.names - ALLOWED_TAGS
    assert not [attrs for _, attrs in markup.tags if "onerror" in attrs or "src" in attrs]
    # Shown as text, where it was put: the title, the table, the charts' legend, the finding, the diff.
    assert markup.all_text.count(hostile) >= 8
    assert "&lt;b&gt;waits&lt;/b&gt; &amp; &quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page


# -- rendered by a browser -----------------------------------------------------------------------------------


def _browser() -> str | None:
    return next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )


def screenshot(page: Path, png: Path, size: str = "1200,900") -> bytes:
    browser = _browser()
    assert browser is not None
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    command += [f"--screenshot={png}", f"--window-size={size}", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert png.is_file(), done.stderr[-2000:]
    return png.read_bytes()


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """A PNG's width, height and pixels (8-bit RGB or RGBA, not interlaced: what Chromium writes), decoded
    with zlib: the five row filters undone as the PNG specification says."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        position += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    previous = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    for row in range(height):
        start = row * (stride + 1)
        line = _unfiltered(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels)
        pixels.extend(tuple(line[i : i + 3]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels


def _unfiltered(kind: int, line: bytearray, previous: bytearray, channels: int) -> bytearray:
    if kind == 2:
        return bytearray((a + b) & 255 for a, b in zip(line, previous, strict=True))
    for i in range(len(line) if kind else 0):
        left = line[i - channels] if i >= channels else 0
        above_left = previous[i - channels] if i >= channels else 0
        if kind == 1:
            predicted = left
        elif kind == 3:
            predicted = (left + previous[i]) >> 1
        else:
            p = left + previous[i] - above_left
            pa, pb, pc = abs(p - left), abs(p - previous[i]), abs(p - above_left)
            predicted = left if pa <= pb and pa <= pc else previous[i] if pb <= pc else above_left
        line[i] = (line[i] + predicted) & 255
    return line


def looks_drawn(pixels: list[tuple[int, ...]]) -> tuple[int, float]:
    """How many colours a picture has and the share of its pixels that are not white."""
    white = sum(1 for pixel in pixels if pixel == (255, 255, 255))
    return len(set(pixels)), 1 - white / len(pixels)


@pytest.mark.skipif(_browser() is None, reason="no Chromium to render the page (apt-get install chromium)")
def test_the_page_rendered_by_headless_chromium_shows_text_table_and_coloured_charts(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(recorded()), encoding="utf-8")
    width, height, pixels = png_pixels(screenshot(page, tmp_path / "report.png"))
    assert (width, height) == (1200, 900)
    colours, drawn = looks_drawn(pixels)
    assert colours > 100 and drawn > 0.05, (colours, drawn)
    # The charts' colours are on screen: the original's grey and the first variants' blue and orange.
    present = set(pixels)
    assert {(0x7F, 0x7F, 0x7F), (0x00, 0x72, 0xB2), (0xE6, 0x9F, 0x00)} <= present
    # And the check tells a blank page from this one.
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    colours, drawn = looks_drawn(png_pixels(screenshot(blank, tmp_path / "blank.png"))[2])
    assert colours <= 2 and drawn < 0.01


# -- from a real run ---------------------------------------------------------------------------------------


def test_verify_html_writes_the_page_of_a_real_run_with_its_step_times_memory_and_diff(tmp_path):
    pytest.importorskip("torch")
    page, json_path = tmp_path / "out" / "report.html", tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchlint",
            "verify",
            "fixtures/verify_tiny/train.py",
            "--steps",
            "4",
            "--warmup",
            "2",
            "--select",
            "TL304",
            "--device",
            "cpu",
            "--html",
            str(page),
            "--json",
            str(json_path),
            "--",
            "--epochs",
            "3",
            "--batch-size",
            "32",
        ],  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    report = json.loads(json_path.read_text(encoding="utf-8"))
    assert done.returncode == report["exit_code"] in (0, 1), done.stdout + done.stderr
    assert page.read_text(encoding="utf-8") == render_html(report)
    for run in report["runs"]:
        assert len(run["step_ms"]) == len(run["step_memory_bytes"]) == 6 and min(run["step_ms"]) > 0
        assert all(isinstance(rss, int) and rss > 2**20 for rss in run["step_memory_bytes"])
    assert [run["variant"] for run in report["runs"]] == ["original", "all"], done.stdout + done.stderr
    diff = report["variants"][1]["diff"]
    assert diff.startswith(
        "--- fixtures/verify_tiny/train.py\n+++ fixtures/verify_tiny/train.py\n"
    )  # as --diff
    assert (
        "-    scaler = torch.cuda.amp.GradScaler(" in diff and "+    scaler = torch.amp.GradScaler(" in diff
    )
    assert report["variants"][0]["diff"] is None


# -- helpers -------------------------------------------------------------------------------------------------


def _small_report(step_ms: list[list[float]]) -> dict:
    """A two-variant report (the original, all fixes) with the given per-step times, one run each."""
    report = copy.deepcopy(recorded())
    original, everything = report["variants"][0], report["variants"][-1]
    everything["fixes"] = everything["fixes"][:1]
    everything["compile"] = None
    report["variants"] = [original, everything]
    report["settings"]["warmup"] = 1
    runs = []
    for number, (variant, times) in enumerate(zip(report["variants"], step_ms, strict=True)):
        run = copy.deepcopy(report["runs"][0])
        run.update(index=number, label=variant["name"], variant=variant["name"], step_ms=times)
        run["step_memory_bytes"] = [2**28] * len(times)
        runs.append(run)
    report["runs"] = runs
    for variant in report["variants"]:
        if variant["stats"]:
            variant["stats"]["losses"] = []
    return report


def _chart_shapes(page: str, title: str) -> str:
    start = page.index(f'aria-label="{title}')
    return page[start : page.index("</svg>", start)]
