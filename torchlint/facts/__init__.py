"""The semantic model of one module. Rules read facts; only this package reads the tree raw."""

from torchlint.facts.module import ModuleFacts
from torchlint.facts.names import Binding, BindingKind, Reference, Scope, ScopeKind

__all__ = ["Binding", "BindingKind", "ModuleFacts", "Reference", "Scope", "ScopeKind"]
