"""The result cache in `.torchlint_cache/` at the project root: a warm run re-checks only what changed.

A file's results are stored under a key of its content, the settings, the enabled rules and torchlint's
version, together with the content hashes of every other project file its analysis consulted (engine.py
for train.py's `train_one_epoch`, and — when the file asked who imports it — every file's imports). A hit
needs all of those to be unchanged, so editing `model.py` re-checks `train.py`.

The files an entry depends on are read through the run's FileSystem (`torchlint.workspace.fs`), so a
replayed run's record covers them; the entries themselves are the cache's own files, read directly.
Writes are atomic (temp file, then rename), so concurrent runs never see half an entry; an entry that does
not parse is ignored and rebuilt, never fatal. The folder carries a CACHEDIR.TAG and ignores itself in git.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

from torchlint import __version__
from torchlint.cache.digest import code_digest, content_hash
from torchlint.cache.folder import cache_folder, linked, write_entry
from torchlint.cache.signing import opened
from torchlint.diagnostics import Diagnostic
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.settings import Settings


def settings_digest(settings: Settings, enabled: list[str]) -> str:
    return _settings_digest(settings, tuple(enabled))


@functools.lru_cache(maxsize=256)
def _settings_digest(settings: Settings, enabled: tuple[str, ...]) -> str:
    relevant = (
        code_digest(),
        settings.device,
        settings.torch_version,
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
        self.folder = cache_folder(root, cache_dir) / "results"
        self.fs = fs  # the run's: the project files an entry depends on are read through it
        self._hashes: dict[Path, str | None] = {}

    def file_hash(self, path: Path) -> str | None:
        if path not in self._hashes:
            try:
                self._hashes[path] = content_hash(self.fs.read_bytes(path))
            except OSError:
                self._hashes[path] = None
        return self._hashes[path]

    @staticmethod
    def key(display: str, raw: bytes, digest: str) -> str:
        return content_hash(b"\0".join((display.encode("utf-8", "surrogateescape"), raw, digest.encode())))

    def load(self, key: str, file_list: Callable[[], str]) -> list[Diagnostic] | None:
        """The entry's findings if every file it consulted is unchanged; `file_list` gives the project's
        file-list digest, asked only of entries whose analysis depended on it."""
        if linked(self.folder):
            return None  # a symlinked cache is not ours to read (nor to write: see `prepare`)
        try:
            entry = opened(json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8")))
            if entry is None:
                return None  # not written by this user's runs (a cache committed to the repository)
            for path, expected in entry["consulted"].items():
                if self.file_hash(Path(path)) != expected:
                    return None
            if entry.get("file_list") is not None and entry["file_list"] != file_list():
                return None
            return [Diagnostic.from_plain(item) for item in entry["diagnostics"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # missing, stale or corrupted (any shape JSON can take): rebuild

    def store(
        self, key: str, diagnostics: list[Diagnostic], consulted: set[Path], file_list: str | None = None
    ) -> None:
        entry = {
            "consulted": {str(path): self.file_hash(path) for path in sorted(consulted)},
            "file_list": file_list,
            "diagnostics": [d.to_plain() for d in diagnostics],
        }
        write_entry(self.folder, f"{key}.json", entry)
