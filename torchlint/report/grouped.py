"""`grouped`: the findings under their file's name, `line:col CODE message`, lines and columns aligned (ruff's
`grouped`). `[*]` marks what `--fix` would apply with the run's options, as in `full`."""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex, fix_applies
from torchlint.report.shown import info_label, shown, shown_path
from torchlint.report.style import PLAIN, Style


def write_grouped(
    diagnostics: list[Diagnostic],
    sources: dict[str, LineIndex],
    out: TextIO,
    style: Style = PLAIN,
    applies: Callable[[Diagnostic], bool] | None = None,
) -> None:
    applies = applies or (lambda d: fix_applies(d, unsafe=False))
    for path, group in groupby(diagnostics, key=lambda d: d.path):
        found = list(group)
        rows = max(len(d.location.row()) for d in found)
        columns = max(len(str(d.location.column)) for d in found)
        out.write(f"{style.path(shown_path(path))}:\n")
        for d in found:
            marker = " " + style.fixable("[*]") if applies(d) else ""
            where = f"{d.location.row():>{rows}}:{d.location.column:<{columns}}"
            out.write(f"  {where} {style.code(d.code)}{marker}{info_label(d.severity)} {shown(d.message)}\n")
        out.write("\n")
