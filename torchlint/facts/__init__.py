"""The semantic model of one module. Rules read facts; only this package reads the tree raw.

The names are loaded on first use (PEP 562), so that importing a rule module, or `torchlint.facts.torch.devices`
for an enum, does not import the whole model: start-up time is a feature of a pre-commit hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.facts.module import ModuleFacts
    from torchlint.facts.syntax.names import Binding, BindingKind, Reference, Scope, ScopeKind

__all__ = ["Binding", "BindingKind", "ModuleFacts", "Reference", "Scope", "ScopeKind"]


def __getattr__(name: str):
    if name == "ModuleFacts":
        from torchlint.facts.module import ModuleFacts

        return ModuleFacts
    if name in __all__:
        from torchlint.facts import names

        return getattr(names, name)
    raise AttributeError(name)
