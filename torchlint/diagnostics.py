"""What a rule reports: a `Diagnostic` (ruff's shape), which may carry one `Fix` (`torchlint.fix.model`).

Offsets are indices into the decoded text (a Python `str`), never bytes, so that every consumer (the fixer,
`--diff`, the reporters, and the coming Language Server and verifier) shares one coordinate system; lines and
columns are derived at the edges (`LineIndex`), only for files that have findings.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Protocol

from torchlint.fix.model import AddImport, Applicability, DropImportIfUnused, Edit, Fix
from torchlint.positions import LineIndex, Position

__all__ = ["Applicability", "Diagnostic", "Edit", "Fix", "LineIndex", "Position", "Severity", "fix_applies"]


class Severity(enum.Enum):
    ERROR = "error"  # the code is wrong or raises (e.g. invalid DataLoader options, a syntax error)
    WARNING = "warning"  # the code works but is slower or deprecated
    INFO = "info"  # a trade-off worth knowing about, not a defect (e.g. activation checkpointing)


class FixPolicy(Protocol):
    """What decides, beyond applicability, whether `--fix` applies a fix: a file's settings."""

    @property
    def explicit_codes(self) -> frozenset[str]: ...

    def may_fix(self, code: str) -> bool: ...


def fix_applies(diagnostic: Diagnostic, unsafe: bool, policy: FixPolicy | None = None) -> bool:
    """Whether `--fix` applies the diagnostic's fix: its applicability allows it (`unsafe`: unsafe fixes
    were asked for); the settings let its rule be fixed (`fixable` / `unfixable`, as ruff's); and, for a
    trade-off (`Severity.INFO`), its rule was selected by its full code: a blanket
    `--fix --unsafe-fixes` never trades speed for memory on the user's behalf."""
    fix = diagnostic.fix
    if fix is None or not fix.applicability.allowed(unsafe):
        return False
    if policy is not None and not policy.may_fix(diagnostic.code):
        return False
    explicit = policy.explicit_codes if policy is not None else frozenset()
    return diagnostic.severity is not Severity.INFO or diagnostic.code in explicit


@dataclass
class Diagnostic:
    code: str
    name: str
    message: str
    severity: Severity
    path: str
    start: int
    end: int
    fix: Fix | None = None
    # What the message does not say, most often why no fix is offered: apart, so the message stays stable.
    note: str | None = None
    # Filled by LineIndex.locate when the diagnostic is reported.
    location: Position = field(default=Position(1, 1))
    end_location: Position = field(default=Position(1, 1))

    @property
    def url(self) -> str:
        from torchlint.docs import rule_url

        return rule_url(self.code)

    def sort_key(self) -> tuple:
        return (self.path, self.location.cell or 0, self.location.line, self.location.column, self.code)

    def file_region(self) -> tuple[Position, Position, str]:
        """Where the formats that annotate a file's lines (GitHub, GitLab, Azure, SARIF, JUnit) put this
        finding, and what to say before its message. A notebook's lines are those of its JSON, which mean
        nothing to a reader: its findings go on the first line and say their cell position (as ruff's)."""
        if self.location.cell is None:
            return self.location, self.end_location, ""
        return Position(1, 1), Position(1, 1), self.location.shown() + ": "

    def to_plain(self) -> dict:
        """JSON-ready, for the caches; `from_plain` gives it back."""
        data = asdict(self)
        data["severity"] = self.severity.value
        if self.fix is not None:
            data["fix"]["applicability"] = self.fix.applicability.value
        return data

    @classmethod
    def from_plain(cls, data: dict) -> Diagnostic:
        fix = data["fix"]
        return cls(
            data["code"],
            data["name"],
            data["message"],
            Severity(data["severity"]),
            data["path"],
            data["start"],
            data["end"],
            _fix_from_plain(fix) if fix else None,
            data.get("note"),
            Position(**data["location"]),
            Position(**data["end_location"]),
        )


def _fix_from_plain(fix: dict) -> Fix:
    return Fix(
        fix["title"],
        Applicability(fix["applicability"]),
        tuple(Edit(**e) for e in fix["edits"]),
        tuple(AddImport(**i) for i in fix.get("imports", ())),
        tuple(DropImportIfUnused(**d) for d in fix.get("drops", ())),
    )
