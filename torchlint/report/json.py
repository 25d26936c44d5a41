"""A JSON array with ruff's field names, so tools that read ruff's JSON read ours.

`to_json` (one finding) and `location` (an offset as `{row, column}`) are shared with json-lines and sarif.
"""

from __future__ import annotations

import json
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex


def location(lines: LineIndex | None, offset: int) -> dict[str, int]:
    if lines is None:
        return {"row": 1, "column": 1}
    position = lines.position(offset)
    return {"row": position.line, "column": position.column}


def to_json(d: Diagnostic, lines: LineIndex | None) -> dict:
    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability.value,
            "message": d.fix.title,
            "edits": [
                {
                    "content": e.content,
                    "location": location(lines, e.start),
                    "end_location": location(lines, e.end),
                }
                for e in d.fix.standalone_edits(lines.text if lines else "")
            ],
        }
    return {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "note": d.note,
        "severity": d.severity.value,
        "filename": d.path,
        "cell": d.location.cell,
        "location": {"row": d.location.line, "column": d.location.column},
        "end_location": {"row": d.end_location.line, "column": d.end_location.column},
        "noqa_row": d.location.line,
        "fix": fix,
        "url": d.url,
    }


def write_json(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    json.dump([to_json(d, sources.get(d.path)) for d in diagnostics], out, indent=2)
    out.write("\n")
