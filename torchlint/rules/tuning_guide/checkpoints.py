"""A compiled wrapper's `state_dict` saved or loaded by name: after `model = torch.compile(model)` the name
holds an `OptimizedModule`, whose state-dict keys gain an `_orig_mod.` prefix. A checkpoint saved from it does
not load into the uncompiled model (`Missing key(s) ... Unexpected key(s) "_orig_mod. ..."`), and one saved
without compiling does not load into it.

Found: a compile site that binds a name (`model = torch.compile(model)`, `compiled = torch.compile(net)`),
then `NAME.state_dict()` or `NAME.load_state_dict(...)` later in the same function (or at module level
when the compile is). Silent when the module handles the prefix anywhere (`_orig_mod` in its text:
`model._orig_mod.state_dict()`, `getattr(model, "_orig_mod", model)`, a key rewrite) or compiles in place
(`model.compile()` keeps the keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.iterations import assignments, dotted_name, mentioned_names
from torchlint.facts.syntax.walk import contains, statements
from torchlint.facts.torch.models import ModelAnalysis

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import CallRecord
    from torchlint.facts.syntax.module import SourceModule

BY_NAME = ("state_dict", "load_state_dict")


@dataclass(frozen=True)
class WrapperStateDict:
    call: cst.Call  # `model.state_dict()`: where the finding goes
    name: str  # "model"
    method: str  # "state_dict" | "load_state_dict"
    compile_site: cst.CSTNode  # the `torch.compile(...)` call that bound the name


class CheckpointAnalysis:
    def __init__(self, source: SourceModule) -> None:
        self.source = source

    @cached_property
    def wrapper_state_dicts(self) -> list[WrapperStateDict]:
        source = self.source
        if _handles_the_prefix(source):
            return []
        found: list[WrapperStateDict] = []
        for site in source.analysis(ModelAnalysis).compile_sites:
            if site.in_place or site.target is None or site.call is None or not site.target_text:
                continue
            name = site.target_text
            compiled_at = source.span(site.node)[0]
            for record in source.calls:
                func = record.node.func
                if record.function is not site.call.function or not isinstance(func, cst.Attribute):
                    continue
                if func.attr.value not in BY_NAME or dotted_name(func.value) != name:
                    continue
                if source.span(record.node)[0] <= compiled_at:
                    continue
                if not self._crosses_a_file(record, func.attr.value):
                    continue  # an in-memory copy restored into the same compiled model loads fine
                found.append(WrapperStateDict(record.node, name, func.attr.value, site.node))
        return found

    def _crosses_a_file(self, record: CallRecord, method: str) -> bool:
        """`state_dict()` that reaches `torch.save(...)` (in its arguments, or through the name a statement
        assigns it to), or `load_state_dict(...)` of what `torch.load(...)` read (directly or through a name
        assigned from it), in the same function."""
        source = self.source
        calls = [c for c in source.calls if c.function is record.function]
        if method == "state_dict":
            saves = [c for c in calls if _named(source, c, "torch.save")]
            if any(contains(save.node, record.node) for save in saves):
                return True
            names = _assigned_from(record.function.node if record.function else source.module, record.node)
            return any(names & mentioned_names(save.node) for save in saves)
        loads = [c for c in calls if _named(source, c, "torch.load")]
        argument = record.node.args[0].value if record.node.args else None
        if argument is None:
            return False
        if any(contains(argument, load.node) for load in loads):
            return True
        holder = record.function.node if record.function else source.module
        loaded: set[str] = set()
        for load in loads:
            loaded |= _assigned_from(holder, load.node)
        return bool(loaded & mentioned_names(argument))


def _handles_the_prefix(source: SourceModule) -> bool:
    """The code (not a comment or a docstring) names `_orig_mod`: an attribute (`model._orig_mod`) or a string
    a call is given (`getattr(model, "_orig_mod", model)`, `key.replace("_orig_mod.", "")`)."""
    if "_orig_mod" not in source.text:
        return False
    if "._orig_mod" in source.text:
        return True
    return any(
        isinstance(arg.value, cst.SimpleString) and "_orig_mod" in arg.value.value
        for record in source.calls
        for arg in record.node.args
    )


def _named(source: SourceModule, record: CallRecord, qualname: str) -> bool:
    return source.qualname(record.node.func, record.scope) == qualname


def _assigned_from(holder: cst.CSTNode, value: cst.CSTNode) -> set[str]:
    """The names the statement lines of `holder` assign from an expression holding `value`."""
    return {
        name
        for statement in statements(holder)
        for targets, assigned in assignments(statement)
        if contains(assigned, value)
        for name in targets
    }
