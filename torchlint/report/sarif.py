"""`sarif`: SARIF 2.1.0, the format GitHub code scanning (`github/codeql-action/upload-sarif`) and other
result viewers read.

One run; `tool.driver.rules` describes each rule that has results (its doc's first sentence, its *What it
does*, the whole doc as help, its URL), and each result points at its rule by `ruleIndex`. Regions are
1-based with an exclusive end column, counted in code points (`columnKind: unicodeCodePoints`), as the
other formats count; a finding with a fix carries it as a SARIF `fix` (one replacement per edit). Paths
relative to the working directory are relative URIs against `%SRCROOT%` (the repository root in CI, where
torchlint runs); others are absolute `file://` URIs.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import TextIO
from urllib.parse import quote

from torchlint import __version__
from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.docs import rule_summary
from torchlint.report.json import location

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _artifact(path: str) -> dict:
    if PurePosixPath(path).is_absolute():
        return {"uri": PurePosixPath(path).as_uri()}
    return {"uri": quote(path, errors="surrogateescape"), "uriBaseId": "%SRCROOT%"}


def _region(start: dict, end: dict) -> dict:
    return {
        "startLine": start["row"],
        "startColumn": start["column"],
        "endLine": end["row"],
        "endColumn": end["column"],
    }


def _rule(d: Diagnostic) -> dict:
    rule = {"id": d.code, "name": d.name, "helpUri": d.url, "properties": {"severity": d.severity.value}}
    summary = rule_summary(d.code)
    if summary is not None:
        rule["shortDescription"] = {"text": summary.short}
        rule["fullDescription"] = {"text": summary.full}
        rule["help"] = {"text": summary.markdown, "markdown": summary.markdown}
    return rule


def _fix(d: Diagnostic, lines: LineIndex | None) -> dict:
    assert d.fix is not None
    replacements = [
        {
            "deletedRegion": _region(location(lines, e.start), location(lines, e.end)),
            "insertedContent": {"text": e.content},
        }
        for e in d.fix.standalone_edits(lines.text if lines else "")
    ]
    return {
        "description": {"text": d.fix.title},
        "artifactChanges": [{"artifactLocation": _artifact(d.path), "replacements": replacements}],
        "properties": {"applicability": d.fix.applicability.value},
    }


def _result(d: Diagnostic, rule_index: int, lines: LineIndex | None) -> dict:
    first, last, cell = d.file_region()
    start = {"row": first.line, "column": first.column}
    end = {"row": last.line, "column": last.column}
    result = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": LEVELS[d.severity],
        "message": {"text": cell + d.message},
        "locations": [
            {"physicalLocation": {"artifactLocation": _artifact(d.path), "region": _region(start, end)}}
        ],
    }
    if d.fix is not None and d.location.cell is None:  # a notebook's edits are not lines of its JSON file
        result["fixes"] = [_fix(d, lines)]
    return result


def to_sarif(diagnostics: list[Diagnostic], sources: dict[str, LineIndex]) -> dict:
    rules: list[dict] = []
    index: dict[str, int] = {}
    for d in sorted(diagnostics, key=lambda d: d.code):
        if d.code not in index:
            index[d.code] = len(rules)
            rules.append(_rule(d))
    driver = {
        "name": "torchlint",
        "version": __version__,
        "semanticVersion": __version__,
        "rules": rules,
    }
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": [_result(d, index[d.code], sources.get(d.path)) for d in diagnostics],
            }
        ],
    }


def write_sarif(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    json.dump(to_sarif(diagnostics, sources), out, indent=2, ensure_ascii=False)
    out.write("\n")
