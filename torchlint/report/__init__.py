"""Output formats. A reporter turns diagnostics into text; it knows nothing about rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.report.concise import write_concise
from torchlint.report.full import write_full
from torchlint.report.github import write_github
from torchlint.report.json import write_json

Reporter = Callable[[list[Diagnostic], dict[str, LineIndex], TextIO], None]

REPORTERS: dict[str, Reporter] = {
    "full": write_full,
    "concise": write_concise,
    "json": write_json,
    "github": write_github,
}

__all__ = ["REPORTERS", "Reporter"]
