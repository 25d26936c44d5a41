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
    # A project class whose `__getitem__` only indexes tensors it holds (`return self.x[i], self.y[i]`):
    # loaded up front, like a TensorDataset.
    IN_MEMORY = "in memory: `__getitem__` only indexes what the dataset holds"
    # `range(n)`, `torch.arange(n)`, `torch.randperm(n)`, a list of ints: the loader batches indices that
    # the loop uses to slice tensors it already holds (often on the GPU); workers would collate integers.
    INDICES = "integer indices only (the loop slices its own tensors with them)"
    # `load_dataset(...)` as loaded: a Hugging Face table whose rows may be decoded as they are read.
    HF_ROWS = "a Hugging Face `datasets` table as loaded (rows may be decoded as they are read)"
    # What `.map(tokenize)` makes of one (and `["train"]`, `.shuffle()` of that): rows prepared up front in a
    # memory-mapped Arrow table; a batch is a few KB of token ids, collated by padding.
    HF_TABLE = "a Hugging Face `datasets` table, prepared up front by `.map(...)`"
    UNKNOWN = "unknown"


# APIs whose unconditional use proves the torch a module runs on has them (the first torch that does).
NEWER_TORCH_APIS: dict[str, tuple[int, int]] = {
    "torch.compile": (2, 0),
    "torch.nn.functional.scaled_dot_product_attention": (2, 0),
    "torch.func.functional_call": (2, 0),
    "torch.amp.GradScaler": (2, 3),
}

BACKWARD_METHODS = frozenset({"backward", "manual_backward"})  # a tensor's, an engine's, Lightning's
# What code calls an optimizer it hands to a helper (`loss_scaler(loss, optimizer)`)
OPTIMIZER_NAMES = frozenset({"optimizer", "opt", "optim", "optimiser"})
