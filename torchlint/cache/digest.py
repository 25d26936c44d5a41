"""Content hashes, and the digest of torchlint's own code that every cached answer is keyed by."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@functools.cache
def code_digest() -> str:
    """torchlint's own code: an edited checkout (same version number) must not reuse old results."""
    package = Path(__file__).resolve().parent
    stats = sorted(
        (str(path.relative_to(package)), path.stat().st_size, path.stat().st_mtime_ns)
        for path in package.rglob("*.py")
    )
    return content_hash(repr(stats).encode())
