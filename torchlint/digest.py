"""What torchlint's cached answers are keyed by (content hashes, the digest of its own code) and where they
are kept."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

CACHE_FOLDER = ".torchlint_cache"  # at the project root; never walked, never part of an answer


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
