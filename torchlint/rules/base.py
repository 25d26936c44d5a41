"""The shape every rule has: identity, policy, and `check(facts)`.

A rule is a small class in its family's module. Defining it registers it (no list to keep in sync); its doc
lives in `rules/<code>.md` and a test fails if either exists without the other.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from torchlint._lazy import cst
from torchlint.diagnostics import Diagnostic, Fix, Severity

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts
    from torchlint.workspace.settings import Settings

FAMILIES = {
    "0": "errors",
    "1": "compile",
    "2": "data loading",
    "3": "mixed precision",
    "4": "checkpointing",
    "5": "tuning guide",
    "6": "distributed",
}


class FixAvailability(enum.Enum):
    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NONE = "none"


_REGISTRY: dict[str, type[Rule]] = {}


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    # Per-rule options accepted in [tool.torchlint.rule-options.<code>]: name -> (type, default).
    options: ClassVar[dict[str, tuple[type, object]]] = {}
    # False for rules whose doc cannot show a Python example (an unreadable file).
    has_doc_examples: ClassVar[bool] = True
    # The prefilter: a rule can only fire on a file whose text contains one of these (None: any file).
    # It must be sound (never hide a finding); a test compares findings with and without it.
    needs_text: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return
        if code in _REGISTRY:
            raise RuntimeError(f"rule code {code} registered twice")
        _REGISTRY[code] = cls

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        configured = settings.rule_options.get(self.code, {})
        self.option_values = {k: configured.get(k, default) for k, (_, default) in self.options.items()}

    @classmethod
    def could_fire(cls, text: str) -> bool:
        """The cheap test on raw text that lets a run skip the LibCST parse of most library files."""
        return cls.needs_text is None or any(token in text for token in cls.needs_text)

    @classmethod
    def family(cls) -> str:
        return FAMILIES.get(cls.code[2], "other")

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        raise NotImplementedError

    def torch_supports(self, version: tuple[int, int]) -> bool:
        """Whether every torch the project supports (the `torch-version` setting) has this API."""
        oldest = self.settings.torch_version
        return oldest is None or oldest >= version

    def finding(
        self, facts: ModuleFacts, node: cst.CSTNode, message: str, fix: Fix | None = None
    ) -> Diagnostic:
        start, end = facts.span(node)
        return Diagnostic(self.code, self.name, message, self.severity, facts.path, start, end, fix)


def registered_rules() -> dict[str, type[Rule]]:
    from torchlint import rules  # noqa: F401  (importing the package registers every family)

    return dict(sorted(_REGISTRY.items()))
