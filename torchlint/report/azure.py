"""`azure`: Azure Pipelines logging commands, one `##vso[task.logissue ...]` per finding (ruff's `azure`), so
findings show up as warnings and errors on the pipeline run. `sourcepath` is absolute, as ruff writes it.

The agent unescapes the properties and the message alike (`%3B`, `%0D`, `%0A`, `%5D`, and `%AZP25` for `%`),
and messages quote user code (`mode="%0A"`): both are escaped, `%` first, so that what the annotation shows
is what the code says."""

from __future__ import annotations

import os
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.report.shown import shown


def _message(text: str) -> str:
    """The message (after the `]`): `%` and line breaks escaped, other control characters shown as `\\xNN`."""
    return shown(text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A"))


def _property(text: str) -> str:
    """A property value cannot hold `;` or `]` (they end it): escaped as Azure's `%3B` and `%5D`."""
    return shown(text).replace("%", "%AZP25").replace(";", "%3B").replace("]", "%5D")


def write_azure(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        kind = "error" if d.severity is Severity.ERROR else "warning"
        path = os.path.abspath(d.path) if d.path != "-" else d.path
        start, _, cell = d.file_region()
        properties = (
            f"type={kind};sourcepath={_property(path)};linenumber={start.line};"
            f"columnnumber={start.column};code={d.code};"
        )
        out.write(f"##vso[task.logissue {properties}]{_message(cell + d.message)}\n")
