"""Mixed precision (TL3xx): autocast and GradScaler used the way current PyTorch expects.

TL303/TL304: the device-specific `torch.cuda.amp.*` / `torch.cpu.amp.*` entry points are deprecated since
torch 2.4 (each use emits a FutureWarning) in favour of the device-generic `torch.amp.*` ones, which take the
device type as their first argument. The table below is the whole knowledge of these two rules; the rewrite
keeps every argument's meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchlint.diagnostics import Diagnostic
from torchlint.fix import build
from torchlint.fix.model import Applicability, Fix
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
            if facts.source.is_fallback_for(ref.expr, "torch.amp"):
                continue  # the old API where the new one is missing (old torch): it must stay
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

        from_import = ref.bindings[0] if ref.imported_from(_DEPRECATED_MODULES) else None
        torch = build.name_module(facts.source, "torch", ref.scope, beside=from_import)
        if torch is None:
            return message, None
        torch_name, imports = torch
        callee = f"{torch_name}.amp.{new.replacement}"
        try:
            edit = self._rewrite(facts, ref, callee, new)
        except build.EditError:
            return message, None  # the rewrite cannot be mapped onto the text as written
        if edit is None:
            return message + f" ({self._why_no_fix(ref)})", None
        drops = ()
        if ref.imported_from(_DEPRECATED_MODULES):
            drop = build.drop_import_if_unused(facts.source, ref.bindings[0])
            drops = (drop,) if drop is not None else ()
        return message, Fix(f"Replace with `{callee}`", Applicability.SAFE, (edit,), imports, drops)

    @staticmethod
    def _rewrite(facts: ModuleFacts, ref: Reference, callee: str, new: Deprecated):
        device = f'"{new.device}"'
        if ref.call is not None and new.device_keyword:
            return build.call_with_keyword_after_positional(
                facts.source, ref.call, callee, new.device_keyword, device
            )
        if ref.call is not None:
            return build.call_with_first_argument(facts.source, ref.call, callee, device, new.old_positional)
        if ref.decorator is not None and new.device_keyword:
            # `@torch.cuda.amp.custom_fwd` becomes `@torch.amp.custom_fwd(device_type="cuda")`
            return build.call_of(facts.source, ref.expr, callee, new.device_keyword, device)
        if ref.in_annotation:
            return build.replace_expression(
                facts.source, ref.expr, callee
            )  # `torch.amp.GradScaler` is its base
        return None

    @staticmethod
    def _why_no_fix(ref: Reference) -> str:
        if ref.call is not None:
            return "no automatic fix: `*args` cannot be mapped onto the new signature"
        return "no automatic fix: it is referenced, not called, and the new API takes the device first"


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
