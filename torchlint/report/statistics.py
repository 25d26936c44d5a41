"""`--statistics`: one entry per rule with its count, as ruff prints it (text lines, or with
`--output-format json` a JSON array of `{code, name, count, fixable, fixable_count}`, ruff's fields)."""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from torchlint.diagnostics import Applicability, Diagnostic


def statistics(diagnostics: list[Diagnostic]) -> list[dict]:
    """Per rule, most frequent first: its count, and how many of its findings `--fix` fixes."""
    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    fixable = Counter(d.code for d in diagnostics if d.fix and d.fix.applicability is Applicability.SAFE)
    return [
        {
            "code": code,
            "name": names[code],
            "count": count,
            "fixable": fixable[code] == count,
            "fixable_count": fixable[code],
        }
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def write_statistics(diagnostics: list[Diagnostic], out: TextIO) -> None:
    rows = statistics(diagnostics)
    width = len(str(max((row["count"] for row in rows), default=0)))
    for row in rows:
        marker = "[*]" if row["fixable_count"] else "[ ]"
        out.write(f"{row['count']:>{width}}\t{row['code']}\t{marker} {row['name']}\n")


def write_statistics_json(diagnostics: list[Diagnostic], out: TextIO) -> None:
    json.dump(statistics(diagnostics), out, indent=2)
    out.write("\n")
