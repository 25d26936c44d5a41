"""TL0xx, torchlint's own: files it could not analyse, and its `# noqa` comments that suppress nothing.

These are reported like findings, so they are counted and never lost, but no rule here reads facts: the
linter raises TL001 and TL002 itself (CPython's parser, the file reader), and TL003 after suppression (a
directive's use is known only once every rule ran: `torchlint.linter._finish`, the policy in
`torchlint.noqa.unused_noqa`). The classes give each its code, name, selection and doc.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.noqa import HYGIENE_CODE, HYGIENE_NAME
from torchlint.rules.base import FixAvailability, Rule

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


class SyntaxErrorRule(Rule):
    """Raised by the linter itself from CPython's parser, before any rule runs."""

    code = "TL001"
    name = "syntax-error"
    severity = Severity.ERROR

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        return iter(())


class IoErrorRule(Rule):
    """Raised when a file cannot be read or decoded (PEP 263), or is not a file at all."""

    code = "TL002"
    name = "io-error"
    severity = Severity.ERROR
    has_doc_examples = False

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        return iter(())


class UnusedNoqa(Rule):
    """`# noqa` naming torchlint codes that suppress nothing (ruff's RUF100 and RUF102): once the code it was
    written for is gone, a stale suppression hides the next finding of that rule on its line."""

    code = HYGIENE_CODE
    name = HYGIENE_NAME
    fix_availability = FixAvailability.ALWAYS

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        return iter(())
