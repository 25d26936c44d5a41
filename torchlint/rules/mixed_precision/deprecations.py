"""What TL303 and TL304 know: the device-specific `torch.cuda.amp.*` / `torch.cpu.amp.*` entry points are
deprecated since torch 2.4 (each use emits a FutureWarning) in favour of the device-generic `torch.amp.*`
ones, which take the device type as their first argument. The table below is the whole knowledge of these
two rules; the rewrite keeps every argument's meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


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
DEPRECATED_MODULES = ("torch.cuda.amp", "torch.cpu.amp")
AMP_WORD = re.compile(r"\bamp\b")
