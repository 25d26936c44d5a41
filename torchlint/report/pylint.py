"""`pylint`: `path:line: [CODE] message`, the line format of pylint's parseable output (and ruff's `pylint`),
which editors' problem matchers and CI log parsers already understand."""

from __future__ import annotations

from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.shown import info_label, shown, shown_path


def write_pylint(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        out.write(
            f"{shown_path(d.path)}:{d.location.row()}: "
            f"[{d.code}]{info_label(d.severity)} {shown(d.message)}\n"
        )
