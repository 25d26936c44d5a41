"""The shape every rule has: identity, policy, and `check(facts)`; and how rules and families are found.

A family is a folder under `torchlint/rules/` named after it (`FAMILIES`: `compile`, `data_loading`, ...):
its `rules.py` holds its rule classes, and its other modules the detection only it uses, loaded when a rule
first asks. Rules are discovered by importing each family's `rules.py` (as Fixit walks its packages): every
`Rule` subclass that declares a `code` in its own class body is a rule. Nothing registers itself on import,
so a class made in a test is a rule only where the test says so (`Linter(rule_classes=...)`, or a module
added to `RULE_PACKAGES`). Each rule's doc lives in `rules/<code>.md`; a test fails if either exists without
the other.
"""

from __future__ import annotations

import enum
import functools
import importlib
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

from torchlint.diagnostics import Diagnostic, Fix, Severity
from torchlint.fix.model import AddImport, Applicability, DropImportIfUnused, Edit
from torchlint.workspace.settings import FAMILIES

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts, Node
    from torchlint.workspace.settings import Settings


def no_fix(reason: str) -> str:
    """The note of a finding whose fix is withheld for `reason` ("" when there is none)."""
    return f"no automatic fix: {reason}" if reason else ""


class FixAvailability(enum.Enum):
    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NONE = "none"


# Where rules are discovered: packages (walked, one level) or plain modules.
RULE_PACKAGES: tuple[str, ...] = ("torchlint.rules",)


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
    # Advice on how fast or lean training runs: silent in test files (`test_*.py`, `tests/`), which train to
    # check behaviour (convergence, gradient sync, resuming) on tiny models, where speed is not the point and
    # changing numerics or the model's type would change what they test. Silent too in a toy demo: every
    # training loop trains on rows typed into the script (`TrainingAnalysis.toy_demo`).
    speed_advice: ClassVar[bool] = False
    # What the rule says, declared as ruff's `Violation` does: one message per kind of finding and one title
    # per kind of fix, `str.format` templates that `report` and `fix` fill with the finding's fields. A
    # finding's wording is then the rule's, not the call site's: every kind is listed here, next to the
    # rule's doc, and tests/test_rule_voice.py checks each is declared and reported.
    messages: ClassVar[dict[str, str]] = {}
    fix_titles: ClassVar[dict[str, str]] = {}

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

    def torch_supports(self, version: tuple[int, int], facts: ModuleFacts) -> bool:
        """Whether every torch the project supports (the `torch-version` setting) has this API, or the
        module's own code proves its torch does (`facts.torch_it_runs`)."""
        oldest = self.settings.torch_version
        if oldest is None or oldest >= version:
            return True
        proven = facts.torch_it_runs
        return proven is not None and proven >= version

    def report(
        self,
        facts: ModuleFacts,
        node: Node,
        kind: str,
        *,
        fix: Fix | None = None,
        note: str = "",
        **fields: object,
    ) -> Diagnostic:
        """A finding at `node` that says the rule's message of this `kind`, filled with `fields`. `note`
        says what the message does not, most often why no fix is offered (`no_fix(reason)`): kept apart,
        so that the message stays the same whether a fix exists."""
        start, end = facts.span(node)
        message = self.messages[kind].format(**fields)
        return Diagnostic(
            self.code, self.name, message, self.severity, facts.path, start, end, fix, note=note or None
        )

    def fix(
        self,
        kind: str,
        applicability: Applicability,
        edits: Iterable[Edit | None],
        imports: Iterable[AddImport] = (),
        drops: Iterable[DropImportIfUnused] = (),
        **fields: object,
    ) -> Fix | None:
        """A fix titled with the rule's fix title of this `kind`, filled with `fields`; None when one of its
        edits could not be built (a builder's None): a fix is whole or not offered."""
        made = tuple(edits)
        if any(edit is None for edit in made):
            return None
        title = self.fix_titles[kind].format(**fields)
        return Fix(title, applicability, made, tuple(imports), tuple(drops))  # type: ignore[arg-type]


def registered_rules() -> dict[str, type[Rule]]:
    """Every rule of `RULE_PACKAGES`, by code, sorted."""
    return dict(_discover(RULE_PACKAGES))


@functools.cache
def _discover(packages: tuple[str, ...]) -> tuple[tuple[str, type[Rule]], ...]:
    found: dict[str, type[Rule]] = {}
    for module in (m for package in packages for m in _modules(package)):
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, Rule) and "code" in value.__dict__):
                continue
            if value.__module__ != module.__name__:
                continue  # imported from elsewhere: found where it is defined
            if found.setdefault(value.code, value) is not value:
                raise RuntimeError(f"rule code {value.code} is defined twice")
    return tuple(sorted(found.items()))


def family_folders() -> list[str]:
    """The family packages of `torchlint.rules` that exist (a family's codes are reserved before its
    folder is made), in the order of their codes, TL0xx first."""
    here = os.path.dirname(__file__)
    names = [name.replace(" ", "_") for _, name in sorted(FAMILIES.items())]
    return [f"torchlint.rules.{name}" for name in names if os.path.isdir(os.path.join(here, name))]


def _modules(name: str) -> list:
    """The module `name`, or the `rules` module of each family folder of a package (listed, not walked
    with `pkgutil`, which costs more to import than this listing takes)."""
    module = importlib.import_module(name)
    if not hasattr(module, "__path__"):
        return [module]
    families = sorted(
        {
            entry
            for folder in module.__path__
            for entry in os.listdir(folder)
            if os.path.isfile(os.path.join(folder, entry, "rules.py"))
        }
    )
    return [importlib.import_module(f"{name}.{family}.rules") for family in families]
