"""`--statistics`: one line per rule with its count, as ruff prints it."""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from torchlint.diagnostics import Applicability, Diagnostic


def write_statistics(diagnostics: list[Diagnostic], out: TextIO) -> None:
    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    fixable = {d.code for d in diagnostics if d.fix and d.fix.applicability is Applicability.SAFE}
    width = len(str(max(counts.values(), default=0)))
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*]" if code in fixable else "[ ]"
        out.write(f"{count:>{width}}\t{code}\t{marker} {names[code]}\n")
