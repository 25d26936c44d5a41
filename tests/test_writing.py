"""Writing fixed files: bytes kept outside the fixes, atomic, refusals reported, nothing half-written.

CI runs as root, where the OS lets every write through: read-only files must be refused by their mode bits,
and these tests hold whoever runs them to that.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.fix import write as writing
from torchlint.fix.write import TEMP_SUFFIX, WriteRefused, write_source
from torchlint.linter import Linter
from torchlint.workspace.source import SourceFile

BEFORE = b"import torch\n\ns = torch.cuda.amp.GradScaler()\n"
AFTER = b'import torch\n\ns = torch.amp.GradScaler("cuda")\n'
FINDING = 'train.py:3:5: TL304 `torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'


def invoke(*args: str):
    return CliRunner().invoke(main, ["--output-format", "concise", *args], catch_exceptions=False)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(TEMP_SUFFIX))


def fix_file(path: Path) -> None:
    result = invoke("--fix", str(path))
    assert result.exit_code == 0, result.output
    assert result.output == "Found 1 finding (1 fixed, 0 remaining).\n"


# -- bytes: encodings, BOM, line endings, tabs ------------------------------------------------------------


@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(BEFORE.replace(b"\n", b"\r\n"), AFTER.replace(b"\n", b"\r\n"), id="crlf"),
        pytest.param(b"\xef\xbb\xbf" + BEFORE, b"\xef\xbb\xbf" + AFTER, id="bom"),
        pytest.param(
            b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BEFORE + b"t = 1  # \xe9t\xe9\n",
            b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + AFTER + b"t = 1  # \xe9t\xe9\n",
            id="latin-1-cookie",
        ),
        pytest.param(
            b"import torch\nif True:\n\ts = torch.cuda.amp.GradScaler()\t# tab\n",
            b'import torch\nif True:\n\ts = torch.amp.GradScaler("cuda")\t# tab\n',
            id="tabs",
        ),
        pytest.param(
            b"from torch.cuda.amp import GradScaler\r\n\r\ns = GradScaler()\r\n",
            b'import torch\r\n\r\ns = torch.amp.GradScaler("cuda")\r\n',
            id="crlf-added-import",
        ),
        pytest.param(BEFORE.rstrip(b"\n"), AFTER.rstrip(b"\n"), id="no-final-newline"),
    ],
)
def test_bytes_outside_the_fix_are_kept(project, before, after):
    (project / "train.py").write_bytes(before)
    fix_file(project / "train.py")
    assert (project / "train.py").read_bytes() == after
    assert leftovers(project) == []


def test_mode_is_kept_and_the_file_is_replaced_atomically(project):
    path = project / "train.py"
    path.write_bytes(BEFORE)
    path.chmod(0o751)
    inode = path.stat().st_ino
    fix_file(path)
    assert path.read_bytes() == AFTER
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.stat().st_ino != inode  # a new file renamed over the old one, never a half-written old one
    assert leftovers(project) == []


# -- links ------------------------------------------------------------------------------------------------


def test_through_a_symlink_the_target_is_written_and_the_link_stays(project):
    (project / "real").mkdir()
    target = project / "real" / "train.py"
    target.write_bytes(BEFORE)
    link = project / "train.py"
    link.symlink_to(target)
    fix_file(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == AFTER
    assert leftovers(project) == []


def test_a_file_with_several_hard_links_is_rewritten_in_place(project):
    path = project / "train.py"
    path.write_bytes(BEFORE)
    other = project / "other_name.txt"
    os.link(path, other)
    inode = path.stat().st_ino
    fix_file(path)
    assert path.read_bytes() == other.read_bytes() == AFTER
    assert path.stat().st_ino == other.stat().st_ino == inode
    assert path.stat().st_nlink == 2
    assert leftovers(project) == []


# -- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o444, 0o464, 0o555])
def test_a_read_only_file_is_refused_by_its_mode_bits_and_the_others_are_fixed(project, mode):
    (project / "ok.py").write_bytes(BEFORE)
    path = project / "train.py"
    path.write_bytes(BEFORE)
    path.chmod(mode)
    result = invoke("--fix")
    assert result.exit_code == 2
    assert path.read_bytes() == BEFORE and stat.S_IMODE(path.stat().st_mode) == mode
    assert (project / "ok.py").read_bytes() == AFTER
    assert result.stderr == "error: train.py: not written: the file is read-only (no write permission bit)\n"
    assert result.stdout == (
        f"{FINDING}\n"
        "Found 2 findings (1 fixed, 1 remaining).\n"
        "[*] 1 fixable with the `--fix` option.\n"
        "1 file could not be fixed (see the errors above).\n"
    )
    assert leftovers(project) == []


def test_a_file_changed_on_disk_since_it_was_read_is_not_written(project, monkeypatch):
    path = project / "train.py"
    path.write_bytes(BEFORE)
    saved_meanwhile = BEFORE + b"x = 1\n"
    fix_text = Linter.fix_text

    def fix_while_an_editor_saves(self, *args, **kwargs):
        result = fix_text(self, *args, **kwargs)
        path.write_bytes(saved_meanwhile)
        return result

    monkeypatch.setattr(Linter, "fix_text", fix_while_an_editor_saves)
    result = invoke("--fix")
    assert result.exit_code == 2
    assert result.stderr == "error: train.py: not written: the file changed on disk since it was read\n"
    assert path.read_bytes() == saved_meanwhile
    assert leftovers(project) == []


def test_a_fixed_text_the_encoding_cannot_hold_is_refused(tmp_path):
    path = tmp_path / "train.py"
    raw = b"# coding: latin-1\nx = 1\n"
    path.write_bytes(raw)
    source = SourceFile.read(path)
    with pytest.raises(WriteRefused) as refused:
        write_source(source, "# coding: latin-1\nx = '\u20ac'\n")
    assert str(refused.value) == "the fixed text cannot be encoded as iso-8859-1 (ordinal not in range(256))"
    assert path.read_bytes() == raw


def test_a_source_that_would_not_re_encode_to_its_own_bytes_is_refused(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"x = 1\n")
    source = SourceFile(path, "x = 2\n", "utf-8", False, b"x = 1\n")  # text and bytes disagree
    with pytest.raises(WriteRefused, match="would change bytes that no fix touched"):
        write_source(source, "x = 3\n")
    assert path.read_bytes() == b"x = 1\n"


# -- interruptions: no temp file, never a half-written file ----------------------------------------------


def test_an_exception_before_the_rename_leaves_the_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    source = SourceFile.read(path)

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(writing.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_source(source, AFTER.decode())
    assert path.read_bytes() == BEFORE
    assert leftovers(tmp_path) == []


def test_a_disk_error_while_writing_is_a_refusal_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    source = SourceFile.read(path)

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing.os, "fsync", disk_full)
    with pytest.raises(WriteRefused, match="^cannot write: No space left on device$"):
        write_source(source, AFTER.decode())
    assert path.read_bytes() == BEFORE
    assert leftovers(tmp_path) == []


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler, whatever this process inherited: a shell starts background jobs with
    SIGINT ignored, and then Python leaves it ignored (so would torchlint, rightly)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_writing_is_delivered_once_the_file_is_whole(tmp_path, monkeypatch, ctrl_c_raises):
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    source = SourceFile.read(path)
    fsync = os.fsync

    def fsync_then_ctrl_c(fd):
        fsync(fd)
        signal.raise_signal(signal.SIGINT)  # to this thread: os.kill may pick another one

    monkeypatch.setattr(writing.os, "fsync", fsync_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_source(source, AFTER.decode())
    assert path.read_bytes() == AFTER
    assert leftovers(tmp_path) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupted_in_place_rewrite_puts_the_original_back(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    os.link(path, tmp_path / "link.py")
    source = SourceFile.read(path)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(writing.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_source(source, AFTER.decode() + "# longer than before\n")
    assert path.read_bytes() == (tmp_path / "link.py").read_bytes() == BEFORE


def test_a_process_terminated_while_writing_leaves_a_whole_file_and_no_temp_file(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from torchlint.fix import write as writing
        from torchlint.workspace.source import SourceFile

        fsync = os.fsync
        def fsync_then_terminated(fd):
            fsync(fd)
            signal.raise_signal(signal.SIGTERM)  # arrives between writing the temp file and the rename
        writing.os.fsync = fsync_then_terminated
        source = SourceFile.read(Path({str(path)!r}))
        writing.write_source(source, {AFTER.decode()!r})
        print("not reached: SIGTERM is delivered once the write is done")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert done.stdout == ""
    assert path.read_bytes() == AFTER
    assert leftovers(tmp_path) == []


def _linked(tmp_path: Path) -> tuple[Path, SourceFile]:
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    os.link(path, tmp_path / "link.py")
    return path, SourceFile.read(path)


def test_a_full_disk_refuses_an_in_place_rewrite_before_the_file_changes(tmp_path, monkeypatch):
    path, source = _linked(tmp_path)

    def disk_full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing.os, "posix_fallocate", disk_full, raising=False)
    with pytest.raises(WriteRefused, match="No space left on device"):
        write_source(source, AFTER.decode() + "# longer than before\n")
    assert path.read_bytes() == (tmp_path / "link.py").read_bytes() == BEFORE


def test_a_write_failing_halfway_in_place_puts_the_original_back(tmp_path, monkeypatch):
    """The report's data-loss case: the disk fills after part of the new text went in."""
    path, source = _linked(tmp_path)
    pwrite = os.pwrite
    calls = []

    def half_then_full(fd, data, offset):
        calls.append(offset)
        if len(calls) == 1:
            return pwrite(fd, bytes(data[:10]), offset)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return pwrite(fd, data, offset)

    monkeypatch.setattr(writing.os, "pwrite", half_then_full)
    monkeypatch.setattr(writing.os, "posix_fallocate", lambda fd, offset, length: None, raising=False)
    with pytest.raises(WriteRefused, match="No space left on device"):
        write_source(source, AFTER.decode() + "# longer than before\n")
    assert path.read_bytes() == (tmp_path / "link.py").read_bytes() == BEFORE


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="no extended attributes on this platform")
def test_extended_attributes_survive_the_atomic_replace(tmp_path):
    """Reliability L8: a tag or an ACL on the file was lost with the old inode."""
    path = tmp_path / "train.py"
    path.write_bytes(BEFORE)
    try:
        os.setxattr(path, "user.note", b"keep")
    except OSError:
        pytest.skip("this file system does not take user extended attributes")
    write_source(SourceFile.read(path), AFTER.decode())
    assert path.read_bytes() == AFTER
    assert os.getxattr(path, "user.note") == b"keep"
