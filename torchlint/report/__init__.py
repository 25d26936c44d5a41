"""Output formats. A reporter turns diagnostics into text; it knows nothing about rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.azure import write_azure
from torchlint.report.concise import write_concise
from torchlint.report.full import write_full
from torchlint.report.github import write_github
from torchlint.report.gitlab import write_gitlab
from torchlint.report.grouped import write_grouped
from torchlint.report.json import write_json
from torchlint.report.json_lines import write_json_lines
from torchlint.report.junit import write_junit
from torchlint.report.pylint import write_pylint
from torchlint.report.sarif import write_sarif

Reporter = Callable[[list[Diagnostic], dict[str, LineIndex], TextIO], None]

REPORTERS: dict[str, Reporter] = {
    "full": write_full,
    "concise": write_concise,
    "grouped": write_grouped,
    "json": write_json,
    "json-lines": write_json_lines,
    "github": write_github,
    "gitlab": write_gitlab,
    "junit": write_junit,
    "pylint": write_pylint,
    "azure": write_azure,
    "sarif": write_sarif,
}

# Formats for machines: the report is the whole output (no "Found N findings." summary after it).
MACHINE_FORMATS = frozenset({"json", "json-lines", "github", "gitlab", "junit", "pylint", "azure", "sarif"})
# Formats for people: they take a `style=` (colour on a terminal) and are followed by the summary.
STYLED_FORMATS = frozenset({"full", "concise", "grouped"})

__all__ = ["MACHINE_FORMATS", "REPORTERS", "STYLED_FORMATS", "Reporter"]
