"""`torchlint debug facts FILE`: what the semantic model knows, with lines — the first tool for triage.

The shared facts first (`torchlint.facts.debug`), then each family's own section, from the family's
`describe.py` when it has one: a family describes what it alone detects.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from torchlint.facts.debug import describe as describe_shared
from torchlint.rules.base import family_folders

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> str:
    out = describe_shared(facts)
    for family in family_folders():
        if importlib.util.find_spec(f"{family}.describe") is not None:
            out += importlib.import_module(f"{family}.describe").describe(facts)
    return "\n".join(out) + "\n"
