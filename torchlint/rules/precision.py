"""Mixed precision (TL3xx): autocast and GradScaler used the way current PyTorch expects.

TL303/TL304: the device-specific `torch.cuda.amp.*` / `torch.cpu.amp.*` entry points are deprecated since
torch 2.4 (each use emits a FutureWarning) in favour of the device-generic `torch.amp.*` ones, which take the
device type as their first argument. The table below is the whole knowledge of these two rules; the rewrite
keeps every argument's meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.diagnostics import Applicability, Diagnostic, Edit, Fix
from torchlint.facts.syntax.names import BindingKind
from torchlint.fix.build import (
    EditError,
    drop_import,
    insert_argument,
    keyword_argument,
    module_in_scope,
    replace_node,
)
from torchlint.rules.base import FixAvailability, Rule

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts, Reference


@dataclass(frozen=True)
class Deprecated:
    """One deprecated entry point and how its replacement is called."""

    device: str  # "cuda" or "cpu"
    replacement: str  # attribute of torch.amp
    since: tuple[int, int]  # the oldest torch that has the replacement with this calling convention
    # The old signature's positional parameters, when the new one orders them differently (then positional
    # arguments must become keywords); None when the new signature is the old one after the device.
    old_positional: tuple[str, ...] | None = None
    device_keyword: str | None = None  # the replacement takes the device only as this keyword


_AUTOCAST_OLD = ("enabled", "dtype", "cache_enabled")


def _table() -> dict[str, Deprecated]:
    table: dict[str, Deprecated] = {}
    for device in ("cuda", "cpu"):
        autocast = Deprecated(device, "autocast", (2, 0), old_positional=_AUTOCAST_OLD)
        scaler = Deprecated(device, "GradScaler", (2, 3))
        for path in ("amp.autocast", "amp.autocast_mode.autocast"):
            table[f"torch.{device}.{path}"] = autocast
        for path in ("amp.GradScaler", "amp.grad_scaler.GradScaler"):
            table[f"torch.{device}.{path}"] = scaler
    for name in ("custom_fwd", "custom_bwd"):
        decorator = Deprecated("cuda", name, (2, 4), device_keyword="device_type")
        for path in (f"amp.{name}", f"amp.autocast_mode.{name}"):
            table[f"torch.cuda.{path}"] = decorator
    return table


DEPRECATED = _table()
_DEPRECATED_MODULES = ("torch.cuda.amp", "torch.cpu.amp")
_AMP_WORD = re.compile(r"\bamp\b")


class _DeprecatedAmpRule(Rule):
    """Shared detection and rewrite; the two rules differ only in which entry points they own."""

    replacements: frozenset[str] = frozenset()
    fix_availability = FixAvailability.SOMETIMES

    @classmethod
    def could_fire(cls, text: str) -> bool:
        # Every spelling of torch.cuda.amp / torch.cpu.amp names the module as a word ("example" does not).
        return "amp" in text and _AMP_WORD.search(text) is not None

    def check(self, facts: ModuleFacts) -> Iterator[Diagnostic]:
        owned = {q: d for q, d in DEPRECATED.items() if d.replacement in self.replacements}
        for ref in facts.references_to(owned):
            old = ref.qualname
            assert old is not None
            new = owned[old]
            if not self.torch_supports(new.since):
                continue
            shown_old = ".".join(old.split(".")[:3] + [old.rsplit(".", 1)[1]])
            message, fix = self.rewrite(facts, ref, shown_old, new)
            yield self.finding(facts, ref.expr, message, fix)

    def rewrite(
        self, facts: ModuleFacts, ref: Reference, old: str, new: Deprecated
    ) -> tuple[str, Fix | None]:
        target = f"torch.amp.{new.replacement}"
        device = f'"{new.device}"'
        if new.device_keyword:
            call_hint = f"{target}(..., {new.device_keyword}={device})"
        else:
            call_hint = f"{target}({device}, ...)"
        message = f"`{old}` is deprecated since torch 2.4: use `{call_hint}`"

        torch = module_in_scope(facts, "torch", ref.scope)
        if torch is None:
            return message, None
        torch_name, edits = torch
        callee = cst.parse_expression(f"{torch_name}.amp.{new.replacement}")

        replacement = self._replacement(ref, callee, new)
        if replacement is None:
            return message + f" ({self._why_no_fix(ref)})", None
        old_node, new_node = replacement
        try:
            edits.insert(0, replace_node(facts, old_node, new_node))
        except EditError:
            return message, None
        drop = self._drop_deprecated_import(facts, ref)
        if drop is not None:
            edits.append(drop)
        title = f"Replace with `{torch_name}.amp.{new.replacement}`"
        return message, Fix(title, Applicability.SAFE, tuple(edits))

    def _replacement(
        self, ref: Reference, callee: cst.BaseExpression, new: Deprecated
    ) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        device = cst.SimpleString(f'"{new.device}"')
        if ref.call is not None:
            args = _rewrite_arguments(ref.call, device, new)
            if args is None:
                return None
            return ref.call, ref.call.with_changes(func=callee, args=args)
        if ref.decorator is not None and new.device_keyword:
            # `@torch.cuda.amp.custom_fwd` becomes `@torch.amp.custom_fwd(device_type="cuda")`
            call = cst.Call(callee, args=[keyword_argument(new.device_keyword, device)])
            return ref.expr, call
        if ref.in_annotation:
            return ref.expr, callee  # a type is a type: `torch.amp.GradScaler` is its base class
        return None

    @staticmethod
    def _why_no_fix(ref: Reference) -> str:
        if ref.call is not None:
            return "no automatic fix: `*args` cannot be mapped onto the new signature"
        return "no automatic fix: it is referenced, not called, and the new API takes the device first"

    @staticmethod
    def _drop_deprecated_import(facts: ModuleFacts, ref: Reference) -> Edit | None:
        """The `from torch.cuda.amp import autocast` that only served the rewritten uses goes with them."""
        bindings = ref.bindings
        if len(bindings) != 1 or bindings[0].kind is not BindingKind.IMPORT:
            return None
        qualname = bindings[0].qualname or ""
        if not any(qualname == m or qualname.startswith(m + ".") for m in _DEPRECATED_MODULES):
            return None
        return drop_import(facts, bindings[0])


def _rewrite_arguments(call: cst.Call, device: cst.SimpleString, new: Deprecated) -> Sequence[cst.Arg] | None:
    """The new argument list, with each argument keeping its meaning; None when that cannot be known."""
    args = list(call.args)
    if new.device_keyword:
        positional = [a for a in args if a.keyword is None and not a.star]
        at = len(positional)
        if any(a.star == "*" for a in args):
            return None
        return insert_argument(call, args, at, keyword_argument(new.device_keyword, device))
    if new.old_positional is not None:
        converted = []
        for index, arg in enumerate(args):
            if arg.star == "*":
                return None
            if arg.keyword is None and not arg.star:
                if index >= len(new.old_positional):
                    return None
                arg = keyword_argument(new.old_positional[index], arg.value).with_changes(comma=arg.comma)
            converted.append(arg)
        args = converted
    return insert_argument(call, args, 0, cst.Arg(device))


class DeprecatedAmpAutocast(_DeprecatedAmpRule):
    """`torch.cuda.amp.autocast` and friends: deprecated, one FutureWarning per use."""

    code = "TL303"
    name = "deprecated-amp-autocast"
    replacements = frozenset({"autocast", "custom_fwd", "custom_bwd"})


class DeprecatedGradScaler(_DeprecatedAmpRule):
    """`torch.cuda.amp.GradScaler`: deprecated; `torch.amp.GradScaler` takes the device first."""

    code = "TL304"
    name = "deprecated-grad-scaler"
    replacements = frozenset({"GradScaler"})
