"""`path:line:col: CODE message`, one line per finding (what editors and grep expect)."""

from __future__ import annotations

from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.shown import info_label, shown, shown_path
from torchlint.report.style import PLAIN, Style


def write_concise(
    diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO, style: Style = PLAIN
) -> None:
    for d in diagnostics:
        where = f"{style.path(shown_path(d.path))}:{d.location.shown()}"
        out.write(f"{where}: {style.code(d.code)}{info_label(d.severity)} {shown(d.message)}\n")
