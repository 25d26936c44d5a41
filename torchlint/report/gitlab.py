"""`gitlab`: GitLab's code quality report (a JSON array in the Code Climate issue format), shown in merge
requests when a job uploads it as `artifacts: reports: codequality`.

GitLab matches issues between the base and the head pipeline by `fingerprint`, so it must not change when
unrelated lines move: it hashes the path, the code and the message (not the line), plus the finding's rank
among identical ones in its file, so two identical findings in one file stay distinct.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.report.shown import shown

# Code Climate severities are info, minor, major, critical, blocker.
SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def fingerprint(d: Diagnostic, rank: int) -> str:
    key = "\0".join((d.path, d.code, d.message, str(rank)))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def to_gitlab(d: Diagnostic, rank: int) -> dict:
    start, end, cell = d.file_region()
    return {
        "description": f"{cell}{d.code} {d.message}",
        "check_name": d.code,
        "fingerprint": fingerprint(d, rank),
        "severity": SEVERITIES[d.severity],
        "location": {
            "path": shown(d.path),
            "lines": {"begin": start.line, "end": end.line},
        },
    }


def write_gitlab(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    seen: Counter[tuple[str, str, str]] = Counter()
    issues = []
    for d in diagnostics:
        key = (d.path, d.code, d.message)
        issues.append(to_gitlab(d, seen[key]))
        seen[key] += 1
    json.dump(issues, out, indent=2, ensure_ascii=False)
    out.write("\n")
