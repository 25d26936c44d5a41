"""Cache entries are sealed with a key kept outside every project, so that an entry the user's own runs did
not write is never believed.

A repository can commit `.torchlint_cache/` (or a cloned project can carry one): a replay record that says
"nothing changed, no findings", or a result entry with the checked file's content hash and no diagnostics,
would make torchlint print "All checks passed!" for code it never read. Each entry therefore carries an
HMAC of its body under a random key in the user's cache folder (`$XDG_CACHE_HOME/torchlint/cache-key`,
else `~/.cache/torchlint/cache-key`, mode 0600); an entry whose seal does not verify is a cache miss. Where no
key can be stored, a key of the process's own is used: its entries are then never reused, which is slower
but never wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from functools import lru_cache
from pathlib import Path

_FIELD = "seal"


def sealed(entry: dict) -> dict:
    """`entry` with its seal."""
    return {**entry, _FIELD: _mac(entry)}


def opened(entry: object) -> dict | None:
    """The body of a sealed entry, or None when it is not one this user's runs wrote."""
    if not isinstance(entry, dict):
        return None
    body = dict(entry)
    seal = body.pop(_FIELD, None)
    if not isinstance(seal, str) or not hmac.compare_digest(seal, _mac(body)):
        return None
    return body


def _mac(body: dict) -> str:
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(_key(), payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def key_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchlint" / "cache-key"


@lru_cache(maxsize=1)
def _key() -> bytes:
    path = key_file()
    try:
        existing = path.read_bytes()
        if len(existing) >= 32:
            return existing
    except OSError:
        pass
    fresh = secrets.token_bytes(32)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(fresh)
        os.replace(temp, path)
        return path.read_bytes()  # another process may have stored its key first: use the one stored
    except OSError:
        return fresh
