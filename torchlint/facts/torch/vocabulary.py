"""The words the torch analyses answer in: the device a module trains on (a claim with its evidence) and the
kind of dataset a loader loads. Kept apart from the analyses so that they (devices and the framework
adapters) can share them without importing each other, and so that rules can import them for free."""

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


class DatasetKind(enum.Enum):
    MAP = "map-style"
    ITERABLE = "iterable, not sharded across workers"
    ITERABLE_SHARDED = "iterable, sharded by get_worker_info()"
    TENSOR = "in-memory TensorDataset"
    UNKNOWN = "unknown"
