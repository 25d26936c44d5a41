"""The default format: the finding, its source line with a caret under the span, and the fix's title.

`[*]` after the code marks a finding that `--fix` would fix (a safe fix), as ruff does.
"""

from __future__ import annotations

from typing import TextIO

from torchlint.diagnostics import Applicability, Diagnostic, LineIndex
from torchlint.report.shown import info_label, shown, shown_path
from torchlint.report.style import PLAIN, Style


def write_full(
    diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO, style: Style = PLAIN
) -> None:
    for d in diagnostics:
        marker = " " + style.fixable("[*]") if d.fix and d.fix.applicability is Applicability.SAFE else ""
        where = f"{style.path(shown_path(d.path))}:{d.location.line}:{d.location.column}"
        out.write(f"{where}: {style.code(d.code)}{marker}{info_label(d.severity)} {shown(d.message)}\n")
        lines = sources.get(d.path)
        if lines is not None and d.location.line <= len(lines.line_starts):
            text = lines.line_text(d.location.line)
            number = str(d.location.line)
            gutter = " " * len(number)
            start = d.location.column - 1
            if d.end_location.line == d.location.line:
                width = max(d.end_location.column - d.location.column, 1)
            else:
                width = max(len(text) - start, 1)
            # Keep tabs in the padding so the caret lines up under tab-indented code.
            padding = "".join(ch if ch == "\t" else " " for ch in text[:start])
            bar = style.gutter(f"{gutter} |")
            out.write(f"{bar}\n{style.gutter(f'{number} |')} {shown(text)}\n")
            out.write(f"{bar} {padding}{style.caret('^' * width + ' ' + d.code)}\n{bar}\n")
            if d.fix is not None:
                kind = {
                    Applicability.SAFE: "help",
                    Applicability.UNSAFE: "help (unsafe fix)",
                    Applicability.DISPLAY_ONLY: "help (suggestion)",
                }[d.fix.applicability]
                out.write(f"{gutter} {style.gutter('=')} {style.help(kind)}: {d.fix.title}\n")
        out.write("\n")
