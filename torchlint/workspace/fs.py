"""The file system as a check run sees it: one object that every read of the run goes through.

A `FileSystem` answers the questions the readers ask — a file's bytes, a folder's listing, what kind of thing
a path is (following symlinks or not), and which paths are the same file — straight from the OS. The run
over paths (`torchlint.api.run`) creates one and hands it down: to the `Linter` (and through it to each
`Project` and `project_root`), to the `SettingsResolver` and `discover` (settings files, .gitignore files,
the walk), to `SourceFile.read` and to the per-file result cache. Nothing else in a check run touches
the project on disk, resolving paths aside (tests/test_filesystem.py keeps it so). A replayable run gets
the subclass `torchlint.cache.fs.RecordingFileSystem` instead, which also keeps every question with its
answer.

Library callers that build a `Linter`, a `Project` or read a `SourceFile` themselves get a plain
`FileSystem()` by default. This module must stay light (no torchlint.cache, no pathspec, no config): a
replayed run uses it.
"""

from __future__ import annotations

import os
import stat as stat_module
from pathlib import Path

CACHE_FOLDER = ".torchlint_cache"  # written by the run itself: never listed, never part of an answer


def kind_of(path: str, follow_symlinks: bool = True) -> str | None:
    """ "file", "dir", "link" (only when not following symlinks), "other", or None where nothing is."""
    try:
        mode = os.stat(path, follow_symlinks=follow_symlinks).st_mode
    except (OSError, ValueError):
        return None
    return kind_of_mode(mode)


def kind_of_mode(mode: int) -> str:
    if stat_module.S_ISLNK(mode):
        return "link"
    if stat_module.S_ISDIR(mode):
        return "dir"
    return "file" if stat_module.S_ISREG(mode) else "other"


def entry_link_kind(entry: os.DirEntry) -> str:
    """The entry itself, not what a symlink points at: from the listing's own data (no syscall on Linux)."""
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def identity_of(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) through symlinks, or None where nothing is."""
    try:
        result = os.stat(path)
    except (OSError, ValueError):
        return None
    return (result.st_dev, result.st_ino)


def listing(path: str) -> list[os.DirEntry]:
    """The folder's entries sorted by name, the cache folder left out (OSError as usual)."""
    with os.scandir(path) as entries:
        return sorted((e for e in entries if e.name != CACHE_FOLDER), key=lambda e: e.name)


class FileSystem:
    """The real file system, asked directly. Paths are `Path` or `str`."""

    def kind(self, path: Path | str) -> str | None:
        """ "file", "dir", "other" or None (missing), following symlinks like Path.is_file()."""
        return kind_of(os.fspath(path))

    def link_kind(self, path: Path | str) -> str | None:
        """Like `kind`, but a symlink is "link" (what Path.is_symlink() asks)."""
        return kind_of(os.fspath(path), follow_symlinks=False)

    def is_file(self, path: Path | str) -> bool:
        return self.kind(path) == "file"

    def is_dir(self, path: Path | str) -> bool:
        return self.kind(path) == "dir"

    def exists(self, path: Path | str) -> bool:
        return self.kind(path) is not None

    def is_symlink(self, path: Path | str) -> bool:
        return self.link_kind(path) == "link"

    def identity(self, path: Path | str) -> tuple[int, int] | None:
        """Which file or folder `path` is, through symlinks: (st_dev, st_ino), or None where nothing is.
        Discovery checks a file reached twice once, and stops at a folder it walked already (a loop)."""
        return identity_of(os.fspath(path))

    def stamp(self, path: Path | str) -> tuple[int, int] | None:
        """When the file last changed and its size ((st_mtime_ns, st_size)), or None where nothing is:
        what `--watch` compares between two looks."""
        try:
            status = os.stat(os.fspath(path))
        except (OSError, ValueError):
            return None
        return status.st_mtime_ns, status.st_size

    def read_bytes(self, path: Path | str) -> bytes:
        """The file's bytes (OSError as usual)."""
        with open(os.fspath(path), "rb") as handle:
            return handle.read()

    def read_text(self, path: Path | str, errors: str = "strict") -> str:
        return self.read_bytes(path).decode("utf-8", errors=errors)

    def scandir(self, path: Path | str) -> list[os.DirEntry]:
        """The folder's entries sorted by name (OSError as usual), the run's own cache folder left out."""
        return listing(os.fspath(path))

    def entry_kind(self, entry: os.DirEntry, follow_symlinks: bool = True) -> str | None:
        """What an entry of `scandir` is ("file", "dir", "link" when not following symlinks, "other"; None
        for a dangling symlink). Ask here, never the entry: a symlink's target is a question of its own."""
        if follow_symlinks and entry.is_symlink():
            return self.kind(entry.path)
        return entry_link_kind(entry)
