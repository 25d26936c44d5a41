"""What each project file exports (torchlint.facts.torch.exports: what it imports, defines and calls),
remembered between runs by content hash (the project index's `ast` scan).

Answering "who imports this file?" parses every file of the project with `ast` — most of a one-file check
after an edit, in a project of hundreds of files. A file's export depends on its bytes alone, so exports
are kept here, one sealed entry per project (`index/imports-<root>.json`), keyed
by the hash of each file's content and by torchlint's own code. An entry holds only the current contents of
the project's files: edits never make it grow. Resolving the names to files is not cached (it depends on
which files exist).

One writer per run: the entry is written once, at the end (and every so many new exports in a long run in
one process), never after each question: it holds the whole project's exports, and a one-file check wrote it
up to 13 times (yolov5's `models/common.py` after an edit). Worker processes write none: each hands what it
found to the run's parent (`handover`, `receive`), which writes one entry with all of it (each worker writing
its own, the last one kept only what it had read and found: the others' exports were parsed again next run).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from torchlint.cache.digest import code_digest, content_hash
from torchlint.cache.folder import linked, write_entry
from torchlint.cache.signing import opened
from torchlint.facts.torch.exports import Export


class ImportsCache:
    """The `ImportSummaries` of torchlint.index.project, stored in the cache folder `folder`."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.cache, self.root = folder, root
        self.folder = folder / "index"
        self.name = f"imports-{content_hash(str(root).encode('utf-8', 'surrogateescape'))}.json"
        self._stored: dict[str, Export] | None = None
        self._used: dict[str, Export] = {}
        self._changed = False
        self._new: dict[str, Export] = {}  # found since the last `handover`
        self.hands_over = False  # in a worker process: what it finds goes to the parent, which writes

    def get(self, data: bytes) -> Export | None:
        key = content_hash(data)
        found = self._entries().get(key)
        if found is not None:
            self._used[key] = found
        return found

    def put(self, data: bytes, summary: Export) -> None:
        key = content_hash(data)
        self._used[key] = summary
        if self.hands_over:
            self._new[key] = summary
        self._changed = True

    def save(self, present: Iterable[bytes]) -> None:
        """Write what earlier runs and this one found, for the files whose bytes are `present` (a scan
        parses only the files that could answer its question: what it did not use is kept while its file
        is unchanged, and dropped once it is not), when anything was new or dropped. In a worker process
        nothing: its parent writes what it hands over."""
        if self.hands_over:
            return
        live = {content_hash(data) for data in present}
        kept = {key: value for key, value in {**self._entries(), **self._used}.items() if key in live}
        if self._changed or len(kept) != len(self._entries()):
            files = {key: export.to_json() for key, export in kept.items()}
            write_entry(self.folder, self.name, {"code": code_digest(), "files": files}, self.root)
            self._stored, self._changed = kept, False

    def handover(self) -> dict[str, Export]:
        """What this worker's store found since its last handover, for the parent's `receive`."""
        found, self._new = self._new, {}
        return found

    def receive(self, found: dict[str, Export]) -> None:
        """A worker's `handover`: written with this store's next `save`."""
        self._used.update(found)
        self._changed = True

    def _entries(self) -> dict[str, Export]:
        if self._stored is None:
            self._stored = self._load()
        return self._stored

    def _load(self) -> dict[str, Export]:
        if linked(self.folder):
            return {}
        try:
            entry = opened(
                json.loads((self.folder / self.name).read_text(encoding="utf-8")), self.root, self.cache
            )
            if entry is None or entry.get("code") != code_digest():
                return {}
            exports = {key: Export.from_json(value) for key, value in entry["files"].items()}
            return {key: export for key, export in exports.items() if export is not None}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # missing or corrupted: scan again
