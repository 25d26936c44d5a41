"""The device a module trains on, as a claim with its evidence: the vocabulary of `devices.py` and of the
framework adapters (`frameworks.py`), kept apart so that both can speak it without importing each other."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from torchlint._lazy import cst


class Device(enum.IntEnum):
    """Ordered by strength of evidence for CUDA."""

    UNKNOWN = 0
    CPU = 1
    CUDA_WHEN_AVAILABLE = 2
    CUDA = 3

    @property
    def may_be_cuda(self) -> bool:
        return self in (Device.CUDA, Device.CUDA_WHEN_AVAILABLE)

    @property
    def label(self) -> str:
        return {
            Device.UNKNOWN: "unknown",
            Device.CPU: "cpu",
            Device.CUDA_WHEN_AVAILABLE: "cuda when available",
            Device.CUDA: "cuda",
        }[self]


@dataclass(frozen=True)
class DeviceEvidence:
    device: Device
    node: cst.CSTNode | None = None  # the strongest evidence
    reason: str = ""
