"""Text rules for the fixer's mechanics: each reports every occurrence of a string and offers to replace it.

Not part of `torchlint.rules`: a test that wants them in the CLI adds this module to `RULE_PACKAGES`.
"""

from __future__ import annotations

import re

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.fix.model import Applicability, Edit, Fix
from torchlint.rules.base import Rule

SAFE, UNSAFE, DISPLAY = Applicability.SAFE, Applicability.UNSAFE, Applicability.DISPLAY_ONLY


def text_rule(code: str, old: str, new: str, applicability: Applicability = SAFE) -> type[Rule]:
    """A rule that reports every `old` in the text and offers to replace it with `new` (a rule only where a
    discovered module binds it, or a `Linter(rule_classes=...)` is given it)."""

    def check(self, facts):
        for match in re.finditer(re.escape(old), facts.text):
            edit = Edit(match.start(), match.end(), new)
            fix = Fix(f"Replace with `{new}`", applicability, (edit,))
            yield Diagnostic(
                self.code, self.name, f"`{old}` is slow", Severity.WARNING, facts.path, *match.span(), fix
            )

    cls = type(f"TextRule{code}", (Rule,), {"check": check})
    cls.code, cls.name = code, f"test-{code.lower()}"
    return cls


SlowToFast = text_rule("TL991", "slow", "fast", SAFE)
RiskyToBold = text_rule("TL992", "risky", "bold", UNSAFE)
HintToUpper = text_rule("TL993", "hint", "HINT", DISPLAY)
BreaksTheFile = text_rule("TL994", "total = ", "total = = ")
NeverConverges = text_rule("TL995", "x", "xx")
