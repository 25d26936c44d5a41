"""TL0xx: files torchlint could not analyse. Reported like findings, so they are counted and never lost."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.rules.base import Rule

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
