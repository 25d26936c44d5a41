"""The result cache in `.torchlint_cache/` at the project root: a warm run re-checks only what changed.

A file's results are stored under a key of its content, the settings, the enabled rules and torchlint's
version, together with the content hashes of every other project file its analysis consulted (engine.py
for train.py's `train_one_epoch`, and — when the file asked who imports it — every file's imports). A hit
needs all of those to be unchanged, so editing `model.py` re-checks `train.py`.

Writes are atomic (temp file, then rename), so concurrent runs never see half an entry; an entry that does
not parse is ignored and rebuilt, never fatal. The folder carries a CACHEDIR.TAG and ignores itself in git.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from torchlint import __version__
from torchlint.config import Settings
from torchlint.diagnostics import Applicability, Diagnostic, Edit, Fix, Position, Severity

FOLDER = ".torchlint_cache"
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is torchlint's cache; see https://bford.info/cachedir/\n"


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@functools.cache
def _code_digest() -> str:
    """torchlint's own code: an edited checkout (same version number) must not reuse old results."""
    package = Path(__file__).resolve().parent
    stats = sorted(
        (str(path.relative_to(package)), path.stat().st_size, path.stat().st_mtime_ns)
        for path in package.rglob("*.py")
    )
    return content_hash(repr(stats).encode())


@functools.lru_cache(maxsize=256)
def _digest(settings: Settings, enabled: tuple[str, ...]) -> str:
    return _settings_digest(settings, list(enabled))


def settings_digest(settings: Settings, enabled: list[str]) -> str:
    return _digest(settings, tuple(enabled))


def _settings_digest(settings: Settings, enabled: list[str]) -> str:
    relevant = (
        _code_digest(),
        settings.device,
        settings.torch_version,
        sorted(enabled),
        sorted((code, sorted(options.items())) for code, options in settings.rule_options.items()),
        __version__,
    )
    return content_hash(repr(relevant).encode())


class ResultCache:
    def __init__(self, root: Path) -> None:
        self.folder = root / FOLDER / "results"
        self._hashes: dict[Path, str | None] = {}

    def _ready(self) -> bool:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            top = self.folder.parent
            if not (top / "CACHEDIR.TAG").exists():
                (top / "CACHEDIR.TAG").write_text(_TAG)
                (top / ".gitignore").write_text("*\n")
            return True
        except OSError:
            return False  # a read-only checkout: run without a cache

    def file_hash(self, path: Path) -> str | None:
        if path not in self._hashes:
            try:
                self._hashes[path] = content_hash(path.read_bytes())
            except OSError:
                self._hashes[path] = None
        return self._hashes[path]

    @staticmethod
    def key(display: str, raw: bytes, digest: str) -> str:
        return content_hash(b"\0".join((display.encode(), raw, digest.encode())))

    def load(self, key: str) -> list[Diagnostic] | None:
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            for path, expected in entry["consulted"].items():
                if self.file_hash(Path(path)) != expected:
                    return None
            return [_diagnostic(item) for item in entry["diagnostics"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing, stale or corrupted: rebuild

    def store(self, key: str, diagnostics: list[Diagnostic], consulted: set[Path]) -> None:
        if not self._ready():
            return
        entry = {
            "consulted": {str(path): self.file_hash(path) for path in sorted(consulted)},
            "diagnostics": [_plain(d) for d in diagnostics],
        }
        try:
            fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".entry-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(entry, handle)
            os.replace(temp, self.folder / f"{key}.json")
        except OSError:
            pass


def _plain(d: Diagnostic) -> dict:
    data = asdict(d)
    data["severity"] = d.severity.value
    if d.fix is not None:
        data["fix"]["applicability"] = d.fix.applicability.value
    return data


def _diagnostic(data: dict) -> Diagnostic:
    fix = data["fix"]
    return Diagnostic(
        data["code"],
        data["name"],
        data["message"],
        Severity(data["severity"]),
        data["path"],
        data["start"],
        data["end"],
        Fix(fix["title"], Applicability(fix["applicability"]), tuple(Edit(**e) for e in fix["edits"]))
        if fix
        else None,
        Position(**data["location"]),
        Position(**data["end_location"]),
    )
