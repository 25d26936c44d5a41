"""The default format: the finding, its source line with a caret under the span, the fix's title and, for a
fix that `--fix` would apply, the diff it would make (ruff's fix diff under `help:`), then the finding's note
(`= note: no automatic fix: ...`).

`[*]` after the code, and the diff, mark a finding that `--fix` with the current options would fix, as ruff
does: a safe fix (an unsafe one with `--unsafe-fixes`) of a rule the settings let be fixed (`fixable`,
`unfixable`), and a trade-off's only when its rule is selected by its code. Only the run knows each file's
settings, so it says which (`applies`); without it, the safe fixes of findings that are not trade-offs.

In a notebook, positions and the diff's line numbers are the cell's, and a diff never leaves the cell (one
whose edits reach another cell is not shown).

The diff is ruff's: the lines around the fix's edits (those in the finding's file, the imports it adds
included), each change with one unchanged line around it, hunks at most two lines apart shown as one and the
others separated by a row of dashes. Line numbers are those of the fixed file: an unchanged line `N |`, an
added one `N +`, a removed one `  -`. An unsafe fix ends with ruff's note that it may change behaviour.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Callable
from typing import TextIO

from torchlint.diagnostics import Applicability, Diagnostic, Edit, Fix, LineIndex, fix_applies
from torchlint.report.shown import info_label, shown, shown_path
from torchlint.report.style import PLAIN, Style

WINDOW = 3  # lines around the edits that are compared (ruff's DIFF_CONTEXT_WINDOW)
CONTEXT = 1  # unchanged lines shown around each change (ruff's FIX_CONTEXT)
MERGE = 2  # hunks this many unchanged lines apart, or fewer, are shown as one (ruff's merge window)
SEPARATOR = "-" * 80  # between hunks that are further apart
UNSAFE_NOTE = "This is an unsafe fix and may change runtime behavior"
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")  # lines as Python ends them, with their ends

Hunk = list[tuple[str, int, int, int, int]]  # difflib's opcodes


def write_full(
    diagnostics: list[Diagnostic],
    sources: dict[str, LineIndex],
    out: TextIO,
    style: Style = PLAIN,
    applies: Callable[[Diagnostic], bool] | None = None,
) -> None:
    applies = applies or _safe_fix
    for d in diagnostics:
        fixable = applies(d)
        marker = " " + style.fixable("[*]") if fixable else ""
        where = f"{style.path(shown_path(d.path))}:{d.location.shown()}"
        out.write(f"{where}: {style.code(d.code)}{marker}{info_label(d.severity)} {shown(d.message)}\n")
        lines = sources.get(d.path)
        if lines is not None and lines.has_line(d.location):
            out.write(_snippet(d, lines, style))
            gutter = " " * len(str(d.location.line))
            if d.fix is not None:
                out.write(_help(d.fix, gutter, fixable, lines, style))
            if d.note:
                out.write(f"{gutter} {style.gutter('=')} {style.note('note')}: {shown(d.note)}\n")
        elif d.note:
            out.write(f"  {style.gutter('=')} {style.note('note')}: {shown(d.note)}\n")
        out.write("\n")


def _safe_fix(diagnostic: Diagnostic) -> bool:
    """What `--fix` applies when nothing else is known: safe fixes, never a trade-off's."""
    return fix_applies(diagnostic, unsafe=False)


def _snippet(d: Diagnostic, lines: LineIndex, style: Style) -> str:
    text = lines.text_at(d.location)
    number = str(d.location.line)
    start = d.location.column - 1
    if d.end_location.line == d.location.line:
        width = max(d.end_location.column - d.location.column, 1)
    else:
        width = max(len(text) - start, 1)
    # Keep tabs in the padding so the caret lines up under tab-indented code.
    padding = "".join(ch if ch == "\t" else " " for ch in text[:start])
    bar = style.gutter(f"{' ' * len(number)} |")
    return (
        f"{bar}\n{style.gutter(f'{number} |')} {shown(text)}\n"
        f"{bar} {padding}{style.caret('^' * width + ' ' + d.code)}\n{bar}\n"
    )


def _help(fix: Fix, gutter: str, fixable: bool, lines: LineIndex, style: Style) -> str:
    """The fix's title and, when `--fix` would apply it, its diff (and ruff's note for an unsafe one)."""
    kind = {
        Applicability.SAFE: "help",
        Applicability.UNSAFE: "help (unsafe fix)",
        Applicability.DISPLAY_ONLY: "help (suggestion)",
    }[fix.applicability]
    text = f"{gutter} {style.gutter('=')} {style.help(kind)}: {fix.title}\n"
    if not fixable:
        return text
    text += fix_diff(fix, lines, style)
    if fix.applicability is Applicability.UNSAFE:
        text += f"{gutter} {style.gutter('=')} {style.note('note')}: {UNSAFE_NOTE}\n"
    return text


def fix_diff(fix: Fix, lines: LineIndex, style: Style = PLAIN) -> str:
    """The diff `fix` alone makes to the text of `lines`, as ruff shows it; "" when it changes nothing."""
    edits = fix.standalone_edits(lines.text)
    if not edits:
        return ""
    first = _line_of(lines, min(e.start for e in edits))
    last = _line_of(lines, max(e.end for e in edits))
    low, high = lines.part_of(first)
    if last > high:
        return ""  # a notebook fix that edits two cells (an import in the first): not shown
    top, bottom = max(first - WINDOW, low), min(last + WINDOW, high)
    start = lines.line_starts[top - 1]
    end = lines.line_starts[bottom] if bottom < len(lines.line_starts) else len(lines.text)
    before = lines.text[start:end]
    after = _applied(before, edits, start)
    if after == before:
        return ""
    old, new = _LINE.findall(before), _LINE.findall(after)
    return _render(_hunks(old, new), old, new, top - low, style)


def _line_of(lines: LineIndex, offset: int) -> int:
    """The line of the whole text `offset` is on (a notebook's index shows lines per cell; not these)."""
    return bisect.bisect_right(lines.line_starts, offset)


def _applied(text: str, edits: list[Edit], offset: int) -> str:
    """`text` (which starts at `offset` of the file) with the edits, sorted and disjoint, made."""
    pieces, at = [], 0
    for edit in edits:
        pieces += [text[at : edit.start - offset], edit.content]
        at = edit.end - offset
    return "".join(pieces) + text[at:]


def _hunks(old: list[str], new: list[str]) -> list[Hunk]:
    """The changes, each with CONTEXT unchanged lines around it; hunks close together joined, their gap
    shown whole (ruff's merge window)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    hunks: list[Hunk] = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        previous = hunks[-1][-1] if hunks else None
        following = group[0]
        if (
            previous is not None
            and previous[0] == following[0] == "equal"
            and following[3] - previous[4] <= MERGE
        ):
            hunks[-1][-1] = ("equal", previous[1], following[2], previous[3], following[4])
            hunks[-1].extend(group[1:])
        else:
            hunks.append(list(group))
    return hunks


def _render(hunks: list[Hunk], old: list[str], new: list[str], offset: int, style: Style) -> str:
    """The rows, numbered by the fixed file's lines (`offset`: the lines above the compared ones)."""
    width = len(str(hunks[-1][-1][4] + offset))
    bar = f"{style.gutter(' ' * width)} {style.gutter('|')}\n"
    rows = [bar]
    for index, hunk in enumerate(hunks):
        if index:
            rows.append(SEPARATOR + "\n")
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                rows += [_row(f"{j + 1 + offset:<{width}}", "|", new[j], style) for j in range(j1, j2)]
                continue
            rows += [_row(" " * width, "-", old[i], style) for i in range(i1, i2)]
            rows += [_row(f"{j + 1 + offset:<{width}}", "+", new[j], style) for j in range(j1, j2)]
    rows.append(bar)
    return "".join(rows)


def _row(number: str, sign: str, line: str, style: Style) -> str:
    """One line of the diff: its number (blank for a removed line), its sign, then its text, if any."""
    paint, paint_sign = {
        "|": (str, style.gutter),
        "-": (style.deletion, style.deletion_sign),
        "+": (style.insertion, style.insertion_sign),
    }[sign]
    text = shown(line.rstrip("\r\n"))
    return f"{style.gutter(number)} {paint_sign(sign)}{' ' + paint(text) if text else ''}\n"
