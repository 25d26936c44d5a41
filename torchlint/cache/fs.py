"""The file system of a replayable run: every question asked, kept with its answer, so a repeated run can
tell whether its outcome still holds.

`RecordingFileSystem` is the `torchlint.workspace.fs.FileSystem` that `torchlint.api.run` hands to every
reader of a clean check run (one per run, and one per worker process, whose share comes back with its
outcome: `drain`, then `absorb` in the parent). Since every read of a check run goes through that object
(tests/test_filesystem.py), its `record` is everything the outcome depends on: a file's content (sources,
configs, .gitignore files, other project files), a folder's listing with the kind of each entry (the walk,
the project scan), what kind of thing a path is (pyproject.toml and .git on the way up, module candidates,
a symlink's target) and which paths are the same file (discovery's dedup and symlink-loop check).
`torchlint.cache.replay` stores the record next to the run's findings; `still_holds` asks it all again.

A file or folder is trusted unchanged when its stat signature (size, mtime, ctime, inode) is the one
recorded and its mtime and ctime are older by RACY_NS than the moment it was read (the clock is read before
the stat, the stat before the content). A later edit then lands in a later timestamp tick, whatever the file
system's granularity (up to FAT's 2 s), so it changes the signature. Otherwise ("racy", as git's index
entries) an edit in the same tick, made after the read, keeps size and timestamps (reliability N13: a run
that outlasts the tick would replay what it read before the edit), so such an entry is compared by content,
and the re-read, which records its own moment, is written back: a later replay can trust the signature.
A changed signature is compared by content too, so `touch` alone costs a re-read, not a re-check.
Identities are compared as a partition (the same paths are still the same files, the others still not), so
an editor's atomic save, which gives a file a new inode, does not spoil a replay.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from torchlint.cache.digest import content_hash
from torchlint.workspace.fs import FileSystem, entry_link_kind, identity_of, kind_of, kind_of_mode, listing

RACY_NS = 2_000_000_000  # the coarsest timestamp granularity assumed (FAT's)

# "question\0absolute path" -> [answer, signature or None, when it was read (ns) or None]
Record = dict[str, list]


def _signature(result: os.stat_result) -> list[int]:
    return [result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_ino]


def _listing_digest(entries: list[os.DirEntry]) -> str:
    """Names and what each entry itself is: a file replaced by a folder of the same name is a change."""
    return content_hash(
        "\0".join(f"{entry.name}\1{entry_link_kind(entry)}" for entry in entries).encode(
            "utf-8", "surrogateescape"
        )
    )


class RecordingFileSystem(FileSystem):
    """The real file system, with every question and its answer kept in `record` (first answer wins)."""

    def __init__(self) -> None:
        self.record: Record = {}

    def drain(self) -> Record:
        """What was recorded so far (a worker's share of a parallel run), leaving an empty record."""
        recorded, self.record = self.record, {}
        return recorded

    def absorb(self, recorded: Record) -> None:
        """Add another process's record; where both asked the same question, the earlier answer stays."""
        for key, value in recorded.items():
            self.record.setdefault(key, value)

    def _note(self, question: str, path: str, answer, signature=None, seen: int | None = None) -> None:
        """Keep the first answer (the earliest signature) when a path is asked about twice in one run."""
        self.record.setdefault(f"{question}\0{os.path.abspath(path)}", [answer, signature, seen])

    # -- the questions ------------------------------------------------------------------------------------

    def kind(self, path: Path | str) -> str | None:
        text = os.fspath(path)
        answer = kind_of(text)
        self._note("kind", text, answer)
        return answer

    def link_kind(self, path: Path | str) -> str | None:
        text = os.fspath(path)
        answer = kind_of(text, follow_symlinks=False)
        self._note("link", text, answer)
        return answer

    def identity(self, path: Path | str) -> tuple[int, int] | None:
        text = os.fspath(path)
        answer = identity_of(text)
        self._note("identity", text, list(answer) if answer is not None else None)
        return answer

    def read_bytes(self, path: Path | str) -> bytes:
        """The file's bytes (OSError as usual), recorded with the signature taken before reading, and the
        moment taken before that."""
        text = os.fspath(path)
        with open(text, "rb") as handle:
            seen = time.time_ns()
            signature = _signature(os.fstat(handle.fileno()))
            data = handle.read()
        self._note("content", text, content_hash(data), signature, seen)
        return data

    def scandir(self, path: Path | str) -> list[os.DirEntry]:
        text = os.fspath(path)
        seen = time.time_ns()
        signature = _signature(os.stat(text))
        entries = listing(text)
        self._note("listing", text, _listing_digest(entries), signature, seen)
        return entries

    # `entry_kind` needs nothing of its own: an entry's own kind is part of its folder's listing, and a
    # symlink's target is asked through `kind`.

    # -- asking again -------------------------------------------------------------------------------------

    @staticmethod
    def still_holds(recorded: Record) -> tuple[bool, Record | None]:
        """Whether every recorded answer is still the same; and, when some had to be re-derived by content,
        the record with those entries' fresh signatures and moments (taken before re-reading), worth
        writing back."""
        stats: dict[str, tuple[int, os.stat_result | None]] = {}  # one stat per path, whatever asked

        def stat(path: str) -> tuple[int, os.stat_result | None]:
            """The moment before the stat, and the stat."""
            if path not in stats:
                seen = time.time_ns()
                try:
                    stats[path] = seen, os.stat(path)
                except (OSError, ValueError):
                    stats[path] = seen, None
            return stats[path]

        fresh: Record | None = None
        then: dict[tuple[int, int], set[str]] = {}
        now: dict[tuple[int, int], set[str]] = {}
        for key, (answer, signature, seen) in recorded.items():
            question, _, path = key.partition("\0")
            if question == "link":
                if kind_of(path, follow_symlinks=False) != answer:
                    return False, None
                continue
            moment, result = stat(path)
            if question == "kind":
                if (kind_of_mode(result.st_mode) if result is not None else None) != answer:
                    return False, None
                continue
            if question == "identity":
                if (result is None) != (answer is None):
                    return False, None
                if result is not None:
                    then.setdefault(tuple(answer), set()).add(path)
                    now.setdefault((result.st_dev, result.st_ino), set()).add(path)
                continue
            if result is None:
                return False, None
            current = _signature(result)
            if current == signature and settled(current, seen):
                continue
            try:
                if question == "content":
                    with open(path, "rb") as handle:
                        moment = time.time_ns()
                        current = _signature(os.fstat(handle.fileno()))
                        again = content_hash(handle.read())
                elif question == "listing":
                    again = _listing_digest(listing(path))
                else:
                    return False, None  # a question this version does not know
            except OSError:
                return False, None
            if again != answer:
                return False, None
            if fresh is None:
                fresh = dict(recorded)
            fresh[key] = [answer, current, moment]
        if sorted(map(sorted, then.values())) != sorted(map(sorted, now.values())):
            return False, None  # files that were one are not any more, or the other way round
        return True, fresh


def settled(signature: list[int], seen: int | None) -> bool:
    """Whether `signature` proves its file unchanged: its mtime and ctime are a whole RACY_NS older than the
    moment it was read, so an edit after that read could not have kept them (reliability N13)."""
    return isinstance(seen, int) and max(signature[1], signature[2]) < seen - RACY_NS
