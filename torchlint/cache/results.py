"""The result cache in `.torchlint_cache/` at the project root: a warm run re-checks only what changed.

A file's results are stored under a key of its content, the settings, the enabled rules and torchlint's
version (`ResultCache.key`), together with the content hashes of every other project file its analysis
consulted (engine.py for train.py's `train_one_epoch`, and — when the file asked who imports it — every
file's imports). A hit
needs all of those to be unchanged, so editing `model.py` re-checks `train.py`. Each file (with given
settings) has one entry, which its next version replaces, and unused entries are pruned
(`torchlint.cache.folder`): the folder does not grow with edits.

The files an entry depends on are read through the run's FileSystem (`torchlint.workspace.fs`), so a
replayed run's record covers them; the entries themselves are the cache's own files, read directly.
Writes are atomic (temp file, then rename), so concurrent runs never see half an entry; an entry that does
not parse is ignored and rebuilt, never fatal. The folder carries a CACHEDIR.TAG and ignores itself in git.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint import __version__
from torchlint.cache.digest import code_digest, content_hash
from torchlint.cache.folder import cache_folder, linked, mark_used, prune, write_entry
from torchlint.cache.signing import opened
from torchlint.diagnostics import Diagnostic
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.settings import Settings

if TYPE_CHECKING:
    from torchlint.index.project import Project


def settings_digest(settings: Settings, enabled: list[str]) -> str:
    return _settings_digest(settings, tuple(enabled))


@functools.lru_cache(maxsize=256)
def _settings_digest(settings: Settings, enabled: tuple[str, ...]) -> str:
    relevant = (
        code_digest(),
        settings.device,
        settings.torch_version,
        settings.ignore_noqa,  # the cached findings are those left after suppression
        sorted(enabled),
        sorted((code, sorted(options.items())) for code, options in settings.rule_options.items()),
        __version__,
    )
    return content_hash(repr(relevant).encode())


def file_list_digest(files: list[Path]) -> str:
    """The project's file list, for entries whose findings depend on who imports the file."""
    return content_hash("\0".join(map(str, files)).encode("utf-8", "surrogateescape"))


class ResultCache:
    def __init__(self, root: Path, fs: FileSystem, cache_dir: Path | None = None) -> None:
        self.root = root
        self.cache = cache_folder(root, cache_dir)
        self.folder = self.cache / "results"
        self.fs = fs  # the run's: the project files an entry depends on are read through it
        self._hashes: dict[Path, str | None] = {}
        self._pruned = False  # once per run (per process), after its first write

    def file_hash(self, path: Path) -> str | None:
        if path not in self._hashes:
            try:
                self._hashes[path] = content_hash(self.fs.read_bytes(path))
            except OSError:
                self._hashes[path] = None
        return self._hashes[path]

    @staticmethod
    def key(display: str, raw: bytes, digest: str) -> str:
        """`SLOT-VERSION`. The slot is what is checked: the file (as displayed, and where) and the settings
        digest; it holds one entry, replaced by the next version's (reliability N7: one entry per content
        version piled up). The version is the content's key: an entry answers only for the one it holds."""
        name = display.encode("utf-8", "surrogateescape")
        where = os.path.abspath(display).encode("utf-8", "surrogateescape")
        slot = content_hash(b"\0".join((where, name, digest.encode())))
        version = content_hash(b"\0".join((name, raw, digest.encode())))
        return f"{slot}-{version}"

    def load(self, key: str, file_list: Callable[[], str]) -> list[Diagnostic] | None:
        """The entry's findings if every file it consulted is unchanged; `file_list` gives the project's
        file-list digest, asked only of entries whose analysis depended on it."""
        if linked(self.folder):
            return None  # a symlinked cache is not ours to read (nor to write: see `prepare`)
        slot, _, version = key.partition("-")
        path = self.folder / f"{slot}.json"
        try:
            with open(path, encoding="utf-8") as handle:
                modified = os.fstat(handle.fileno()).st_mtime_ns
                entry = opened(json.load(handle), self.root, self.cache)
            if entry is None:
                return None  # not written by this user's runs (a cache committed to the repository)
            if entry["version"] != version:
                return None  # another version of the file (or the key of another slot)
            for consulted, expected in entry["consulted"].items():
                if self.file_hash(Path(consulted)) != expected:
                    return None
            if entry.get("file_list") is not None and entry["file_list"] != file_list():
                return None
            found = [Diagnostic.from_plain(item) for item in entry["diagnostics"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # missing, stale or corrupted (any shape JSON can take): rebuild
        mark_used(path, modified)
        return found

    def key_for(self, display: str, raw: bytes, settings: Settings, enabled: list[str]) -> str:
        """The key of a file's results, as displayed, with these bytes, settings and enabled rules."""
        return self.key(display, raw, settings_digest(settings, enabled))

    def store_checked(
        self, key: str, diagnostics: list[Diagnostic], project: Project | None, file: Path
    ) -> None:
        """Store a file's findings with what its analysis consulted in `project` (None: a file outside any
        project, which consulted nothing)."""
        consulted = project.dependencies(file) if project is not None else set()
        file_list = (
            file_list_digest(project.python_files())
            if project is not None and project.asked_who_imports(file)
            else None
        )
        self.store(key, diagnostics, consulted, file_list)

    def store(
        self, key: str, diagnostics: list[Diagnostic], consulted: set[Path], file_list: str | None = None
    ) -> None:
        slot, _, version = key.partition("-")
        entry = {
            "version": version,
            "consulted": {str(path): self.file_hash(path) for path in sorted(consulted)},
            "file_list": file_list,
            "diagnostics": [d.to_plain() for d in diagnostics],
        }
        write_entry(self.folder, f"{slot}.json", entry, self.root)
        if not self._pruned:
            self._pruned = True
            prune(self.folder)
