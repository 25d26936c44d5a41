"""`json-lines`: one JSON object per finding and per line (the json format's fields), for tools that stream.

A clean run prints nothing, where the json format prints `[]`: an empty stream is an empty list of findings.
"""

from __future__ import annotations

import json
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.json import to_json


def write_json_lines(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        out.write(json.dumps(to_json(d, sources.get(d.path)), ensure_ascii=False) + "\n")
