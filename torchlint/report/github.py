"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request's diff."""

from __future__ import annotations

from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex, Severity
from torchlint.report.shown import shown


def _escape_data(text: str) -> str:
    return shown(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(diagnostics: list[Diagnostic], sources: dict[str, LineIndex], out: TextIO) -> None:
    for d in diagnostics:
        level = {Severity.ERROR: "error", Severity.INFO: "notice"}.get(d.severity, "warning")
        start, end, cell = d.file_region()
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("file", d.path),
                ("line", start.line),
                ("col", start.column),
                ("endLine", end.line),
                ("endColumn", end.column),
                ("title", f"torchlint ({d.code})"),
            )
        )
        out.write(f"::{level} {properties}::{_escape_data(f'{cell}{d.code} {d.message}')}\n")
