"""The cache answers only for what it can prove unchanged, stays bounded, and believes only its own key
(reliability report, turn 3: N13, N7, N14)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import tempfile
import time
from pathlib import Path

import pytest
from support import AMP, check_replayed

from torchlint.api import RunOptions, run
from torchlint.cache import folder as cache_folder_module
from torchlint.cache import fs as recording
from torchlint.cache import signing

check = check_replayed

SECOND = 1_000_000_000
DAY = 86_400 * SECOND
CLEAN = 'import torch\nscaler = "torch.cuda.amp.GradScaler()"\n'
STALE = "import torch\nscaler = (torch.cuda.amp.GradScaler())\n"  # the same size; TL304 at 2:11
TICK = 2 * SECOND  # FAT's timestamp granularity, the coarsest torchlint assumes


# -- N13: "unchanged" is decided by content whenever a timestamp cannot prove it ------------------------------


def _coarse(result: os.stat_result) -> list[int]:
    """The stat signature as a FAT-like file system gives it: one timestamp (its ctime is its mtime) in 2 s
    ticks, and a folder's size that does not move with its entries."""
    tick = result.st_mtime_ns // TICK * TICK
    size = result.st_size if stat.S_ISREG(result.st_mode) else 4096
    return [size, tick, tick, result.st_ino]


@pytest.fixture
def coarse(monkeypatch):
    monkeypatch.setattr(recording, "_signature", _coarse)


def _this_tick() -> int:
    return time.time_ns() // TICK * TICK


def _pause_the_run(monkeypatch, seconds: int = 3) -> None:
    """The rest of the run takes `seconds` longer (a big tree, a loaded machine, a SIGSTOP)."""
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + seconds * SECOND)


def test_a_same_tick_same_size_edit_after_the_read_is_not_replayed(project, coarse, monkeypatch):
    """N13: the run reads a.py, a same-size edit lands in the same timestamp tick (its stat signature does
    not change), and the run goes on for 3 s. The next run must check the new content, not replay the old
    outcome ("All checks passed!" while --no-cache reports TL304)."""
    target = project / "a.py"
    target.write_text(CLEAN)
    tick = _this_tick()
    os.utime(target, ns=(tick, tick))
    original = recording.RecordingFileSystem.read_bytes

    def read_then_edit(self, path):
        data = original(self, path)
        if Path(path).name == "a.py" and data == CLEAN.encode():
            target.write_text(STALE)
            os.utime(target, ns=(tick, tick))
            _pause_the_run(monkeypatch)
        return data

    monkeypatch.setattr(recording.RecordingFileSystem, "read_bytes", read_then_edit)
    check("-q", ".")
    monkeypatch.setattr(recording.RecordingFileSystem, "read_bytes", original)
    assert _coarse(os.stat(target))[:2] == [len(CLEAN), tick]  # the signature did not change
    code, out, replayed = check("--output-format", "concise", ".")
    assert (code, replayed) == (1, False) and out.startswith("a.py:2:11: TL304 ")
    assert check("--output-format", "concise", ".") == (code, out, True)


def test_a_file_created_in_the_same_tick_after_its_folder_was_listed_is_not_missed(
    project, coarse, monkeypatch
):
    """N13, the listing's sibling: amp.py appears right after the run listed src/, and the folder's
    signature (coarse mtime, size) stays the same. The next run must see amp.py."""
    src = project / "src"
    src.mkdir()
    (src / "ok.py").write_text("x = 1\n")
    tick = _this_tick()
    os.utime(src, ns=(tick, tick))
    original = recording.RecordingFileSystem.scandir

    def list_then_add(self, path):
        entries = original(self, path)
        if Path(path).name == "src" and not (src / "amp.py").exists():
            (src / "amp.py").write_text(AMP)
            os.utime(src, ns=(tick, tick))
            _pause_the_run(monkeypatch)
        return entries

    monkeypatch.setattr(recording.RecordingFileSystem, "scandir", list_then_add)
    assert check("src") == (0, "All checks passed!\n", False)
    monkeypatch.setattr(recording.RecordingFileSystem, "scandir", original)
    code, out, replayed = check("--output-format", "concise", "src")
    assert (code, replayed) == (1, False) and out.startswith("src/amp.py:2:6: TL303 ")


def test_a_signature_proves_a_file_unchanged_only_once_it_is_a_tick_older_than_its_read(
    tmp_path, coarse, monkeypatch
):
    """N13: what a replay trusts without re-reading. A file modified well before it was read: its
    signature. One modified in the tick it was read: its content, and the re-read refreshes the record, so
    that once the file is older than that re-read by a tick, its signature is enough again."""
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text("x = 1\n")
    new.write_text("y = 2\n")
    long_ago = time.time_ns() - 60 * SECOND
    os.utime(old, ns=(long_ago, long_ago))
    modified = os.stat(new).st_mtime_ns
    files = recording.RecordingFileSystem()
    files.read_bytes(old)
    files.read_bytes(new)
    holds, refreshed = recording.RecordingFileSystem.still_holds(files.record)
    assert holds and refreshed is not None
    assert refreshed[f"content\0{old}"] == files.record[f"content\0{old}"]  # trusted: not re-read
    assert refreshed[f"content\0{new}"][2] >= files.record[f"content\0{new}"][2]  # re-read: a new time
    _pause_the_run(monkeypatch)
    holds, again = recording.RecordingFileSystem.still_holds(refreshed)  # re-read a tick after its mtime
    assert holds and again is not None and again[f"content\0{old}"] == files.record[f"content\0{old}"]
    assert recording.RecordingFileSystem.still_holds(again) == (True, None)
    new.write_text("y = 3\n")  # the same size, restored to the same tick: only the content tells
    os.utime(new, ns=(modified, modified))
    assert recording.RecordingFileSystem.still_holds(files.record) == (False, None)
    assert recording.RecordingFileSystem.still_holds(refreshed) == (False, None)


# -- N7: the result cache stays bounded ------------------------------------------------------------------------


def _results(project: Path) -> Path:
    return project / ".torchlint_cache" / "results"


def _entries(project: Path) -> list[str]:
    return sorted(path.name for path in _results(project).glob("*.json"))


def _age(path: Path, ns: int) -> None:
    then = time.time_ns() - ns
    os.utime(path, ns=(then, then))


def _run(*paths: str):
    return run(RunOptions(paths=[Path(path) for path in paths], jobs=1))


def test_editing_files_replaces_their_entries_instead_of_adding_new_ones(project):
    """N7: every content version of every file added an entry (300 files x 5 edits: 1,500). Now a file
    checked with the same settings keeps one entry, whatever its edits, and it answers for the latest."""
    for version in range(5):
        for name in ("a.py", "b.py", "c.py"):
            (project / name).write_text(f"x = {version}\n" + (AMP if version % 2 else ""))
        assert len(_run(".").diagnostics) == (3 if version % 2 else 0)
    assert len(_entries(project)) == 3
    warm = _run(".")
    assert (warm.from_cache, len(warm.diagnostics)) == (3, 0)
    (project / "a.py").write_text("x = 3\n" + AMP)  # back to an earlier version: checked again
    again = _run(".")
    assert (again.from_cache, [d.path for d in again.diagnostics]) == (2, ["a.py"])
    assert len(_entries(project)) == 3


def test_entries_idle_for_thirty_days_and_dead_writers_temp_files_are_pruned(project):
    """N7: after a run that wrote an entry, at most once a day, entries no run used for 30 days go (a
    deleted or renamed file, other settings), and so do temp files older than a day (a writer that died).
    Entries in use, and a temp file another run is writing now, stay."""
    (project / "a.py").write_text(AMP)
    _run(".")
    [kept] = _entries(project)
    results = _results(project)
    planted = {"gone.json": 31 * DAY, "idle.json": 29 * DAY, ".x.json.1.tmp": 2 * DAY, ".y.json.2.tmp": 0}
    for name, age in planted.items():
        (results / name).write_text("{}")
        _age(results / name, age)
    (project / "b.py").write_text("x = 1\n")
    _run(".")  # wrote b.py's entry, but the last prune was less than a day ago: nothing is pruned
    assert all((results / name).exists() for name in planted)
    _age(results / ".pruned", 2 * DAY)
    (project / "c.py").write_text("x = 1\n")
    _run(".")
    assert not (results / "gone.json").exists() and not (results / ".x.json.1.tmp").exists()
    assert (results / "idle.json").exists() and (results / ".y.json.2.tmp").exists()
    assert len(_entries(project)) == 4  # a.py's, b.py's, c.py's and idle.json
    _age(results / ".pruned", 2 * DAY)
    assert _run(".").from_cache == 3  # a run that wrote nothing prunes nothing
    assert (results / "idle.json").exists()


def test_past_the_cap_the_least_recently_used_entries_go_first_but_never_one_used_today(project, monkeypatch):
    """N7: above MAX_ENTRIES, the entries used longest ago are removed first; entries used within the last
    day are kept whatever the cap (a run over a tree larger than the cap keeps its own entries)."""
    monkeypatch.setattr(cache_folder_module, "MAX_ENTRIES", 3)
    results = _results(project)
    (project / "a.py").write_text("x = 1\n")
    _run(".")
    for days in (5, 4, 3, 2):
        (results / f"{days}-days.json").write_text("{}")
        _age(results / f"{days}-days.json", days * DAY)
    _age(results / ".pruned", 2 * DAY)
    (project / "b.py").write_text("x = 2\n")
    _run(".")
    assert sum(name.endswith("-days.json") for name in _entries(project)) == 1
    assert (results / "2-days.json").exists()
    for index in range(4):
        (results / f"today-{index}.json").write_text("{}")
    _age(results / ".pruned", 2 * DAY)
    (project / "c.py").write_text("x = 3\n")
    _run(".")
    assert len(_entries(project)) == 7 and not (results / "2-days.json").exists()


def test_a_hit_marks_an_entry_used_so_the_cap_and_the_age_limit_keep_it(project):
    """N7: LRU needs a last use; access times are unreliable (noatime), so a hit on an entry written or
    last marked more than a day ago sets its mtime to now."""
    (project / "a.py").write_text(AMP)
    _run(".")
    [entry] = _results(project).glob("*.json")
    _age(entry, 3 * DAY)
    assert _run(".").from_cache == 1
    assert time.time_ns() - entry.stat().st_mtime_ns < 60 * SECOND


# -- N14: a key inside what is being checked is never believed ------------------------------------------------


@pytest.fixture
def keys(tmp_path, monkeypatch):
    """Keys of this test only: XDG_CACHE_HOME and the temp folder under tmp_path, nothing remembered."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _new_process()
    yield tmp_path
    _new_process()


def _new_process() -> None:
    """What a new process knows of keys: nothing."""
    signing._key.cache_clear()
    signing._process_key.cache_clear()


@pytest.fixture
def workspace(keys, monkeypatch):
    """A CI workspace: a git checkout whose project is the working directory."""
    workspace = keys / "workspace"
    (workspace / ".git").mkdir(parents=True)
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (workspace / "train.py").write_text(AMP)
    monkeypatch.chdir(workspace)
    return workspace


def _fallback(keys: Path) -> Path:
    return keys / "tmp" / f"torchlint-{os.getuid()}" / "cache-key"


def _forge_every_entry(cache: Path, key: bytes) -> int:
    """Remove the findings from every entry of the cache and seal it with `key`, as a pull request that
    carries both the key and the cache could."""
    forged = 0
    for path in cache.rglob("*.json"):
        body = json.loads(path.read_text())
        body.pop("seal")
        if "outcome" in body:
            body["outcome"]["diagnostics"] = []
        if "diagnostics" in body:
            body["diagnostics"] = []
        payload = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        seal = hmac.new(key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        path.write_text(json.dumps({**body, "seal": seal}))
        forged += 1
    return forged


def test_a_key_inside_the_checked_project_is_neither_created_nor_used(workspace, keys, monkeypatch):
    """N14: with XDG_CACHE_HOME inside the checkout (CI caching it between jobs) the key goes to a folder of
    this user's own in the temp folder (mode 0700), never into the project; the cache still works."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace / ".cache"))
    assert check(".")[0] == 1
    assert check(".")[2]
    assert not (workspace / ".cache").exists()
    key = _fallback(keys)
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700 and stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_record_sealed_with_a_key_planted_in_the_checkout_is_not_believed(workspace, monkeypatch):
    """N14: a pull request carries `.cache/torchlint/cache-key` and a cache re-sealed with it, its findings
    removed. Replayed, it printed "All checks passed!" (exit 0) over a TL303."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace / ".cache"))
    planted = b"k" * 32
    first = check(".")
    assert first[0] == 1
    (workspace / ".cache" / "torchlint").mkdir(parents=True, exist_ok=True)
    (workspace / ".cache" / "torchlint" / "cache-key").write_bytes(planted)
    assert _forge_every_entry(workspace / ".torchlint_cache", planted) >= 2
    _new_process()
    assert check(".") == (*first[:2], False)


@pytest.mark.parametrize("place", ["above the project", "in the cache folder", "in a project of its own"])
def test_a_key_in_a_checkout_or_the_cache_is_refused(workspace, keys, monkeypatch, place):
    """N14's siblings: XDG_CACHE_HOME in the git checkout above a subproject, inside --cache-dir, or in
    any folder with a pyproject.toml or .git above it: the key goes to the temp folder instead."""
    sub = workspace / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[project]\nname = 'sub'\n")
    (sub / "train.py").write_text(AMP)
    args = ["sub"]
    if place == "above the project":
        xdg = workspace / ".cache"
    elif place == "in the cache folder":
        args = ["--cache-dir", str(keys / "shared"), "sub"]
        xdg = keys / "shared" / "xdg"
    else:
        other = keys / "other"
        (other / ".git").mkdir(parents=True)
        xdg = other / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert check(*args)[0] == 1 and check(*args)[2]
    assert not (xdg / "torchlint").exists() and _fallback(keys).is_file()


def test_a_key_outside_every_project_is_kept_where_xdg_cache_home_says(workspace, keys):
    assert check(".")[0] == 1 and check(".")[2]
    assert (keys / "xdg" / "torchlint" / "cache-key").is_file() and not _fallback(keys).exists()


def test_a_temp_folder_others_can_write_is_refused_and_nothing_is_replayed(workspace, keys, monkeypatch):
    """N14: where the key can only go to the temp folder, and this user's folder there is open to others
    (planted before), no stored key is believed: each run seals with a key of its own, so nothing is
    replayed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace / ".cache"))
    folder = _fallback(keys).parent
    folder.mkdir()
    folder.chmod(0o777)
    assert check(".")[0] == 1
    _new_process()
    code, out, replayed = check(".")
    assert (code, replayed) == (1, False) and not _fallback(keys).exists()
