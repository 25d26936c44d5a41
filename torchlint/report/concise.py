"""`path:line:col: CODE message`, one line per finding (what editors and grep expect)."""

from __future__ import annotations

from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.shown import shown, shown_path


def write_concise(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        out.write(
            f"{shown_path(d.path)}:{d.location.line}:{d.location.column}: {d.code} {shown(d.message)}\n"
        )
