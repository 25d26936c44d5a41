"""Cache entries are sealed with a key kept outside every project, so that an entry the user's own runs did
not write is never believed.

A repository can commit `.torchlint_cache/` (or a cloned project can carry one): a replay record that says
"nothing changed, no findings", or a result entry with the checked file's content hash and no diagnostics,
would make torchlint print "All checks passed!" for code it never read. Each entry therefore carries an
HMAC of its body under a random key in the user's cache folder (`$XDG_CACHE_HOME/torchlint/cache-key`,
else `~/.cache/torchlint/cache-key`, mode 0600); an entry whose seal does not verify is a cache miss.

The key is only as private as its folder. CI setups often point XDG_CACHE_HOME into the workspace (to keep
it between jobs); then a pull request could carry the key and a cache sealed with it (reliability N14). So a
key is refused where the checkout could hold it: inside the project whose cache it seals, inside that cache
folder, or anywhere below a folder with a `.git`, `.hg` or `pyproject.toml` (a checkout, whichever project
of it is checked). A refused place is neither read nor written; the key then lives in a folder of this
user's own in the temp folder (`torchlint-<uid>`, mode 0700, checked), under the same rules. Where no key
can be stored or believed, a key of the process's own is used: its entries are then never reused (nothing
is replayed), which is slower but never wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from functools import lru_cache
from pathlib import Path

from torchlint.workspace.fs import CACHE_FOLDER

_FIELD = "seal"
MARKERS = (".git", ".hg", "pyproject.toml")  # a folder holding one is a checkout: no key below it


def sealed(entry: dict, project: Path, cache: Path) -> dict:
    """`entry` with its seal, for the cache folder `cache` of the project at `project`."""
    return {**entry, _FIELD: _mac(entry, project, cache)}


def opened(entry: object, project: Path, cache: Path) -> dict | None:
    """The body of a sealed entry, or None when it is not one this user's runs wrote."""
    if not isinstance(entry, dict):
        return None
    body = dict(entry)
    seal = body.pop(_FIELD, None)
    if not isinstance(seal, str) or not hmac.compare_digest(seal, _mac(body, project, cache)):
        return None
    return body


def _mac(body: dict, project: Path, cache: Path) -> str:
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = _key(os.fspath(project), os.fspath(cache))
    return hmac.new(key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def key_file() -> Path:
    """Where the key is kept when that place is allowed."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchlint" / "cache-key"


def fallback_key_file() -> Path:
    """Where it is kept otherwise: a folder of this user's own in the temp folder."""
    import tempfile  # only here: a replayed run must stay light

    owner = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"torchlint-{owner}" / "cache-key"


def _guarded(project: str, cache: str) -> list[Path]:
    """The folders a key must not be in: the project, its cache folder, and the folder holding
    `.torchlint_cache` (the project root, also for an index root below it)."""
    folders = [Path(os.path.realpath(project)), Path(os.path.realpath(cache))]
    if Path(cache).name == CACHE_FOLDER:
        folders.append(Path(os.path.realpath(Path(cache).parent)))
    return folders


@lru_cache(maxsize=1)
def _process_key() -> bytes:
    return secrets.token_bytes(32)


@lru_cache(maxsize=16)
def _key(project: str, cache: str) -> bytes:
    """The key that seals the entries of the cache folder `cache` of the project at `project`: the first
    allowed place's (`key_file`, then `fallback_key_file`), stored there when new; else this process's."""
    guarded = _guarded(project, cache)

    def allowed(folder: Path) -> bool:
        if any(folder == base or base in folder.parents for base in guarded):
            return False
        return not any(
            os.path.lexists(above / marker) for above in (folder, *folder.parents) for marker in MARKERS
        )

    def private(folder: Path) -> bool:
        """`folder` is this user's, a real folder (not a link) nobody else can write: made so if missing."""
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
        try:
            info = os.lstat(folder)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False
        return os.name == "nt" or (info.st_uid == os.getuid() and info.st_mode & 0o077 == 0)

    def stored(path: Path) -> bytes | None:
        try:
            existing = path.read_bytes()
            if len(existing) >= 32:
                return existing
        except OSError:
            pass
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
            os.replace(temp, path)
            return path.read_bytes()  # another process may have stored its key first: use the one stored
        except OSError:
            return None

    for place in (key_file, fallback_key_file):
        path = place()
        folder = Path(os.path.realpath(path.parent))
        if not allowed(folder):
            continue
        if place is fallback_key_file and not private(path.parent):
            continue  # the folder itself, not where a link planted there leads
        key = stored(folder / path.name)
        if key is not None:
            return key
    return _process_key()
