"""Replaying a run: the same check over unchanged files answers from a record, checking nothing again.

The per-file result cache (`torchlint.cache.results`) already spares LibCST for unchanged files, but a run
that uses it still imports the linter, reads the configs, walks and matches .gitignore patterns and reads
every file: 0.16-0.26 s on the benchmark trees (bench/lint_speed.py, "warm per-file"), for an answer that is
almost always the one from last time (pre-commit re-runs, an editor saving twice, CI retrying). So every
clean check run (not --fix, not --diff, the cache enabled) also stores its whole outcome, together with every
file-system question it asked: `torchlint.api.run` gives such a run a `RecordingFileSystem`
(`torchlint.cache.fs`) that every reader of the run asks — file contents, folder listings and the kind of
each entry, the existence of each pyproject.toml, .git and module candidate it looked for, which paths are
the same file. The next run with the same command line in the same folder asks those questions again, by
stat signature (and by content where that is not conclusive); if every answer holds, it prints the stored
outcome. Anything else, and it runs as usual.

Runs that reported errors, or files that could not be read, are never recorded: they are checked again.
The record lives at `.torchlint_cache/runs/` in the project root of the first path given.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from torchlint import __version__
from torchlint.cache.digest import code_digest, content_hash
from torchlint.cache.folder import cache_folder, linked, prepare, write_entry
from torchlint.cache.fs import RecordingFileSystem
from torchlint.cache.signing import opened
from torchlint.diagnostics import Diagnostic
from torchlint.outcome import Outcome, RunOptions
from torchlint.positions import CellLines, lines_of
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.roots import project_root

FORMAT = 4  # 2: listings with the kind of each entry, symlink and identity questions; 3: when each was read;
# 4: the cells of notebooks
MAX_RECORDS = 64  # pre-commit names other files on every commit: keep the most recent records only


def replayable(options: RunOptions) -> bool:
    return options.cache and not (options.fix or options.diff or options.add_noqa)


def replay(options: RunOptions) -> Outcome | None:
    """The recorded outcome of this very run when nothing it depends on has changed, else None."""
    if not replayable(options):
        return None
    root, path = _record_path(options)
    if linked(path.parent):
        return None  # a symlinked cache is not ours to read
    try:
        record = opened(json.loads(path.read_text(encoding="utf-8")), root, path.parent.parent)
        if record is None or record["format"] != FORMAT:
            return None
        holds, refreshed = RecordingFileSystem.still_holds(record["observed"])
        if not holds:
            return None
        outcome = _outcome(record["outcome"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, stale or corrupted: check as usual (and record again)
    if refreshed is not None:  # signatures that needed a re-read: store them, next time a stat will do
        write_entry(path.parent, path.name, {**record, "observed": refreshed}, root)
    return outcome


def start_recording(options: RunOptions) -> None:
    """Before a recorded run reads anything: the record's folder is created now, not during the run, so
    that the project root's listing does not change under the run (it would make every replay in the next
    seconds re-read the root as "racy")."""
    with contextlib.suppress(OSError):
        prepare(_record_path(options)[1].parent)


def record(options: RunOptions, outcome: Outcome, observed: dict[str, list]) -> None:
    """Store a finished run's outcome with what its RecordingFileSystem recorded (only clean runs; see the
    module doc)."""
    if not replayable(options) or outcome.errors or outcome.files_failed:
        return
    if any(d.code == "TL002" for d in outcome.diagnostics):
        return
    stored = {
        "diagnostics": [d.to_plain() for d in outcome.diagnostics],
        "texts": {display: index.text for display, index in outcome.sources.items()},
        "cells": {
            display: list(index.cells)
            for display, index in outcome.sources.items()
            if isinstance(index, CellLines)
        },
        "warnings": outcome.warnings,
        "files_checked": outcome.files_checked,
        "fixable": outcome.fixable,
        "applicable": sorted(outcome.applicable),
        "hidden_fixes": outcome.hidden_fixes,
        "blocking": outcome.blocking,
        "trade_off_fixes": outcome.trade_off_fixes,
    }
    entry = {"format": FORMAT, "observed": observed, "outcome": stored}
    root, path = _record_path(options)
    write_entry(path.parent, path.name, entry, root)
    _prune(path.parent)


def _outcome(stored: dict) -> Outcome:
    files = stored["files_checked"]
    return Outcome(
        diagnostics=[Diagnostic.from_plain(item) for item in stored["diagnostics"]],
        sources={
            display: lines_of(text, tuple(stored["cells"][display]) if display in stored["cells"] else None)
            for display, text in stored["texts"].items()
        },
        warnings=list(stored["warnings"]),
        files_checked=files,
        fixable=stored["fixable"],
        applicable={tuple(key) for key in stored["applicable"]},
        hidden_fixes=stored["hidden_fixes"],
        blocking=stored["blocking"],
        trade_off_fixes=dict(stored["trade_off_fixes"]),
        from_cache=files,
        replayed=True,
    )


def _key(options: RunOptions) -> str:
    """Everything about the command that can change its outcome (not how it is printed, nor --jobs)."""
    config = os.path.abspath(options.config_file) if options.config_file is not None else None
    settings = repr(options.overrides)
    relevant = (
        os.getcwd(),
        [os.path.abspath(path) for path in options.paths],
        settings,
        config,
        options.isolated,
        options.force_exclude,
        options.prefilter,
        code_digest(),
        __version__,
        sys.version,
    )
    return content_hash(repr(relevant).encode())


def _record_path(options: RunOptions) -> tuple[Path, Path]:
    """The project root of the first path, and where the record lives: not part of the run's answer, so
    the root is looked up unrecorded."""
    root = project_root(Path(os.path.abspath(options.paths[0])), FileSystem())
    return root, cache_folder(root, options.cache_dir) / "runs" / f"{_key(options)}.json"


def _prune(folder: Path) -> None:
    """Remove all but the MAX_RECORDS most recently written records (a replay rewrites nothing else)."""
    if linked(folder):
        return  # never delete through a symlink (reliability repro D2)
    try:
        records = sorted(folder.glob("*.json"), key=lambda record: record.stat().st_mtime_ns, reverse=True)
        for stale in records[MAX_RECORDS:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass  # another run pruned first
