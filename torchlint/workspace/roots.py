"""Where a project starts: the folder its cross-file index, its settings defaults and its cache belong to.

Kept apart from file discovery so that a replayed run (torchlint.cache.replay) can find its record without
loading pathspec or the config machinery. The questions are asked of the FileSystem passed in.
"""

from __future__ import annotations

from pathlib import Path

from torchlint.workspace.fs import FileSystem


def project_root(directory: Path, fs: FileSystem, memo: dict[Path, Path] | None = None) -> Path:
    """The nearest folder with a pyproject.toml or a .git above `directory`, else the working directory,
    asked of `fs` (the run's FileSystem).

    `memo` (one per run, never per process: a long-lived process must see a new pyproject.toml) shares the
    walk up between sibling folders.
    """
    if memo is not None and directory in memo:
        return memo[directory]
    if fs.is_file(directory / "pyproject.toml") or fs.exists(directory / ".git"):
        root = directory
    elif directory.parent == directory:
        root = Path.cwd().resolve()
    else:
        root = project_root(directory.parent, fs, memo)
    if memo is not None:
        memo[directory] = root
    return root


def index_root(directory: Path, fs: FileSystem, memo: dict[Path, Path] | None = None) -> Path:
    """The folder whose files the cross-file index reads for a module in `directory`: its project root;
    but for a folder outside the working directory with no pyproject.toml or .git above it (a script
    checked or verified from elsewhere: `torchlint verify /tmp/job/train.py`), the folder itself. Python
    finds that script's imports there, and the working directory holds none of them: its files would be
    scanned for importers that cannot exist. Settings defaults and the cache stay at `project_root`."""
    root = project_root(directory, fs, memo)
    if (root != directory and root not in directory.parents) or too_wide(root):
        return directory
    return root


def too_wide(folder: Path) -> bool:
    """A folder no cross-file index may walk: the file system's root (a container's `/train.py`, an editor
    buffer `file:///train.py`: the walk would read /proc, /sys and other users' files) or the user's home
    folder (a dotfiles `~/.git`). A file directly in one is checked on its own; one below it in a folder of
    its own is indexed with that folder (`index_root`)."""
    if folder.parent == folder:
        return True
    try:
        return folder == Path.home().resolve()
    except (RuntimeError, KeyError, OSError):  # no home folder to compare with
        return False
