"""`.torchlint_cache/` at a project root: its name, how an entry gets into it, and how entries leave it.

Light on purpose (no config, no tempfile): a replayed run writes its refreshed record through here.

Result entries (`results/`, one per checked file and settings: an edit replaces its file's entry) would
still pile up for files deleted or renamed, settings used once, and every project of a shared `--cache-dir`
(reliability N7). So they are pruned, least recently used first: a hit marks its entry used (its mtime,
at most once a day: access times are unreliable), and after a run that wrote an entry, at most once a day
per folder (its `.pruned` stamp), entries unused for MAX_IDLE_NS are removed, then, above MAX_ENTRIES, the
least recently used — never one used within the last day, so a tree larger than the cap keeps its own.
Only finished entries are removed, and temp files older than a day (their writer died): a run never loses
an entry another is writing, and an entry removed under a reader is just a miss.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from torchlint.workspace.fs import CACHE_FOLDER  # never walked, never part of an answer

__all__ = [
    "CACHE_FOLDER",
    "cache_folder",
    "is_torchlint_cache",
    "mark_used",
    "prepare",
    "prune",
    "write_entry",
]
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is torchlint's cache; see https://bford.info/cachedir/\n"


def cache_folder(root: Path, cache_dir: Path | None = None) -> Path:
    """The cache of the project at `root`: `--cache-dir` (or TORCHLINT_CACHE_DIR) for every project when
    given, else `.torchlint_cache/` in the project root."""
    return Path(os.path.abspath(cache_dir)) if cache_dir is not None else root / CACHE_FOLDER


def is_torchlint_cache(folder: Path) -> bool:
    """Whether `folder` is a cache torchlint made (its CACHEDIR.TAG is ours): `torchlint clean` removes no
    other folder, whatever `--cache-dir` names."""
    try:
        return (folder / "CACHEDIR.TAG").read_text() == _TAG and not linked(folder / "results")
    except (OSError, UnicodeDecodeError):
        return False


def linked(folder: Path) -> bool:
    """`folder` or the cache above it is a symlink: a repository can commit one that points anywhere (its
    own root, the user's home), and the cache writes, prunes and tags what it finds there."""
    return os.path.islink(folder) or os.path.islink(folder.parent)


def prepare(folder: Path) -> None:
    """Create `folder` inside the cache, and the cache with a CACHEDIR.TAG (backup tools skip it) and a
    .gitignore (whatever the project's own says). OSError where nothing can be written, and where the cache
    is a symlink (then the run goes without a cache)."""
    if linked(folder):
        raise OSError(f"{folder}: the cache folder is a symlink; not following it")
    folder.mkdir(parents=True, exist_ok=True)
    top = folder.parent
    if linked(folder):  # made a symlink while we looked
        raise OSError(f"{folder}: the cache folder is a symlink; not following it")
    tag = top / "CACHEDIR.TAG"
    if not tag.exists() or tag.read_text(errors="replace") != _TAG:
        # The .gitignore first, the tag last and whole: a full disk leaves no tag, and the next run retries.
        (top / ".gitignore").write_text("*\n")
        temp = top / f".CACHEDIR.TAG.{os.getpid()}.tmp"
        temp.write_text(_TAG)
        os.replace(temp, tag)


DAY_NS = 86_400 * 1_000_000_000
MAX_IDLE_NS = 30 * DAY_NS  # an entry no run used for this long is removed
MAX_ENTRIES = 20_000  # above this, the least recently used entries are removed (not those used today)


def write_entry(folder: Path, name: str, entry: dict, project: Path) -> None:
    """Store `entry` as `folder/name` (folder: a subfolder of the cache of the project at `project`)
    atomically (a temp file of this process, then a rename: concurrent runs never see half an entry).
    Where nothing can be written (a read-only checkout) the run simply goes without a cache."""
    from torchlint.cache.signing import sealed

    temp = folder / f".{name}.{os.getpid()}.tmp"
    try:
        prepare(folder)
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(sealed(entry, project, folder.parent), handle)
        os.replace(temp, folder / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def mark_used(entry: Path, modified_ns: int) -> None:
    """A hit on `entry`, last modified at `modified_ns`: its mtime becomes now when it is more than a day
    old, so that pruning sees the entry used (to within a day, for one write a day at most)."""
    if time.time_ns() - modified_ns > DAY_NS:
        with contextlib.suppress(OSError):
            os.utime(entry)


def prune(folder: Path) -> None:
    """Remove the entries of `folder` unused for MAX_IDLE_NS, then the least recently used above
    MAX_ENTRIES (but none used within a day), and temp files older than a day; at most once a day (the
    `.pruned` stamp: concurrent runs may both prune, which only removes a file twice)."""
    if linked(folder):
        return  # never delete through a symlink
    stamp = folder / ".pruned"
    now = time.time_ns()
    try:
        if now - os.stat(stamp).st_mtime_ns < DAY_NS:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        with open(stamp, "a"):
            pass
        os.utime(stamp)
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return  # not ours to prune now (read-only, removed): the next run tries again
    kept: list[tuple[int, str]] = []
    for entry in entries:
        try:
            name, modified = entry.name, entry.stat(follow_symlinks=False).st_mtime_ns
        except OSError:
            continue  # removed meanwhile
        if name.endswith(".tmp") and now - modified > DAY_NS:
            _remove(folder / name)
        elif name.endswith(".json"):
            if now - modified > MAX_IDLE_NS:
                _remove(folder / name)
            else:
                kept.append((modified, name))
    kept.sort()
    for modified, name in kept[: max(0, len(kept) - MAX_ENTRIES)]:
        if now - modified < DAY_NS:
            break  # used today, like everything after it
        _remove(folder / name)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
