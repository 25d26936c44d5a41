"""The file-system questions a run asks, recorded so that a repeated run can tell if its answer holds.

Every read that can change a check's result goes through here: a file's content (sources, configs,
.gitignore files, other project files), a folder's listing (the walk, the project scan) and whether a path
exists (pyproject.toml and .git on the way up, module candidates). While recording, each question is kept with
its answer; `still_holds` asks it again. `torchlint.cache.replay` stores the record next to the run's findings.

A file or folder is trusted unchanged when its stat signature (size, mtime, ctime, inode) is the one
recorded, unless it was modified within RACY_NS of when the record was written: file systems with coarse
timestamps could hide a later edit behind the same mtime (git's "racy" entries), so those are compared by
content. A changed signature is compared by content too, so `touch` alone costs a re-read, not a re-check.
The stat is taken before the read, so an edit made during a run shows up as a changed signature next time.
"""

from __future__ import annotations

import os
import stat as stat_module
from pathlib import Path

from torchlint.cache.digest import content_hash
from torchlint.cache.folder import CACHE_FOLDER

RACY_NS = 2_000_000_000
IGNORED_NAMES = frozenset({CACHE_FOLDER})  # written by the run itself; never part of its answer

_record: dict[str, list] | None = None  # "kind\0path" -> [answer, signature]


def start() -> None:
    global _record
    _record = {}


def stop() -> dict[str, list]:
    global _record
    recorded, _record = _record or {}, None
    return recorded


def drain() -> dict[str, list]:
    """What this process recorded so far (a worker's share of a parallel run), then an empty record."""
    global _record
    if _record is None:
        return {}
    recorded, _record = _record, {}
    return recorded


def absorb(recorded: dict[str, list]) -> None:
    if _record is not None:
        for key, value in recorded.items():
            _record.setdefault(key, value)


def _note(kind: str, path: str, answer, signature) -> None:
    """Keep the first answer (the earliest signature) when a path is asked about twice in one run."""
    assert _record is not None
    _record.setdefault(f"{kind}\0{os.path.abspath(path)}", [answer, signature])


def _signature(result: os.stat_result) -> list[int]:
    return [result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_ino]


def _kind_of(path: str) -> str | None:
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return "dir" if stat_module.S_ISDIR(mode) else "file" if stat_module.S_ISREG(mode) else "other"


# -- the questions ------------------------------------------------------------------------------------------


def kind(path: Path | str) -> str | None:
    """ "file", "dir", "other" or None (missing), following symlinks like Path.is_file()."""
    text = os.fspath(path)
    answer = _kind_of(text)
    if _record is not None:
        _note("kind", text, answer, None)
    return answer


def is_file(path: Path | str) -> bool:
    return kind(path) == "file"


def is_dir(path: Path | str) -> bool:
    return kind(path) == "dir"


def exists(path: Path | str) -> bool:
    return kind(path) is not None


def read_bytes(path: Path | str) -> bytes:
    """The file's bytes (OSError as usual), recorded with the signature taken before reading."""
    text = os.fspath(path)
    if _record is None:  # not recording (--fix, the library): no extra stat, no hashing
        with open(text, "rb") as handle:
            return handle.read()
    with open(text, "rb") as handle:
        signature = _signature(os.fstat(handle.fileno()))
        data = handle.read()
    _note("content", text, content_hash(data), signature)
    return data


def read_text(path: Path | str, errors: str = "strict") -> str:
    return read_bytes(path).decode("utf-8", errors=errors)


def _listing(path: str) -> list[os.DirEntry]:
    return sorted((e for e in os.scandir(path) if e.name not in IGNORED_NAMES), key=lambda e: e.name)


def _names_digest(entries: list[os.DirEntry]) -> str:
    return content_hash("\0".join(entry.name for entry in entries).encode())


def scandir(path: Path | str) -> list[os.DirEntry]:
    """The folder's entries sorted by name (OSError as usual), the run's own cache folder left out."""
    text = os.fspath(path)
    if _record is None:
        return _listing(text)
    signature = _signature(os.stat(text))
    entries = _listing(text)
    _note("listing", text, _names_digest(entries), signature)
    return entries


# -- asking again -------------------------------------------------------------------------------------------


def still_holds(recorded: dict[str, list], written_ns: int) -> tuple[bool, dict[str, list] | None]:
    """Whether every recorded answer is still the same; and, when some had to be re-derived by content,
    the record with those entries' fresh signatures (taken before re-reading), worth writing back."""
    fresh: dict[str, list] | None = None
    for key, (answer, signature) in recorded.items():
        kind_name, _, path = key.partition("\0")
        if kind_name == "kind":
            if _kind_of(path) != answer:
                return False, None
            continue
        try:
            now = _signature(os.stat(path))
        except (OSError, ValueError):
            return False, None
        if now == signature and max(now[1], now[2]) < written_ns - RACY_NS:
            continue
        try:
            if kind_name == "content":
                with open(path, "rb") as handle:
                    now = _signature(os.fstat(handle.fileno()))
                    again = content_hash(handle.read())
            else:
                again = _names_digest(_listing(path))
        except OSError:
            return False, None
        if again != answer:
            return False, None
        if fresh is None:
            fresh = dict(recorded)
        fresh[key] = [answer, now]
    return True, fresh
