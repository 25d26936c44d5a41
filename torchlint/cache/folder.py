"""`.torchlint_cache/` at a project root: its name, and how an entry gets into it.

Light on purpose (no config, no tempfile): a replayed run writes its refreshed record through here.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from torchlint.workspace.fs import CACHE_FOLDER  # never walked, never part of an answer

__all__ = ["CACHE_FOLDER", "cache_folder", "is_torchlint_cache", "prepare", "write_entry"]
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


def write_entry(folder: Path, name: str, entry: dict) -> None:
    """Store `entry` as `folder/name` atomically (a temp file of this process, then a rename: concurrent
    runs never see half an entry). Where nothing can be written (a read-only checkout) the run simply goes
    without a cache."""
    from torchlint.cache.signing import sealed

    temp = folder / f".{name}.{os.getpid()}.tmp"
    try:
        prepare(folder)
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(sealed(entry), handle)
        os.replace(temp, folder / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
