"""`azure`: Azure Pipelines logging commands, one `##vso[task.logissue ...]` per finding (ruff's `azure`), so
findings show up as warnings and errors on the pipeline run. `sourcepath` is absolute, as ruff writes it."""

from __future__ import annotations

import os
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.report.shown import shown


def _property(text: str) -> str:
    """A property value cannot hold `;` or `]` (they end it): escaped as Azure's `%3B` and `%5D`."""
    return shown(text).replace("%", "%AZP25").replace(";", "%3B").replace("]", "%5D")


def write_azure(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        kind = "error" if d.severity is Severity.ERROR else "warning"
        path = os.path.abspath(d.path) if d.path != "-" else d.path
        properties = (
            f"type={kind};sourcepath={_property(path)};linenumber={d.location.line};"
            f"columnnumber={d.location.column};code={d.code};"
        )
        message = shown(d.message).replace("\n", " ")
        out.write(f"##vso[task.logissue {properties}]{message}\n")
