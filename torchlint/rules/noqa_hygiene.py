"""TL003: `# noqa` comments that name torchlint codes which suppress nothing (ruff's RUF100 and RUF102).

A stale suppression is a hole waiting for a finding: once the code it was written for is gone, it hides the
next finding of that rule on its line. Whether a directive suppressed anything is known only after every
rule ran and suppression was applied, so this is a step of the linter (`torchlint.linter._finish`, the
policy in `torchlint.noqa.unused_noqa`), not a query over facts. The class here gives the rule its code,
name, selection and doc, like TL001.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.noqa import HYGIENE_CODE, HYGIENE_NAME
from torchlint.rules.base import FixAvailability, Rule

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


class UnusedNoqa(Rule):
    """Reported by the linter after suppression, from every finding of the file (see the module doc)."""

    code = HYGIENE_CODE
    name = HYGIENE_NAME
    fix_availability = FixAvailability.ALWAYS

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        return iter(())
