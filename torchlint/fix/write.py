"""Writing a fixed source back: only when it is safe, and never half.

`write_source(source, text)` writes `text` to the file `source` was read from, or raises `WriteRefused` and
leaves the file exactly as it was. It:

- re-encodes the way the file came (PEP 263 coding cookie, UTF-8 BOM); line endings are whatever the text
  holds, and the text was decoded without newline translation, so CRLF stays CRLF. It refuses when the
  original would not re-encode to its own bytes, since then bytes outside the fixes would change;
- writes through a symlink to the file it points at (the link stays a link);
- refuses a read-only file by its mode bits (as root, writing would succeed, and CI runs as root), and a file
  whose content changed on disk since it was read (an editor saved it meanwhile);
- replaces the file atomically (a temp file in the same folder, mode, owner and extended attributes copied,
  then a rename), except a file with several hard links, which is rewritten in place so that every link
  sees the change;
- leaves no temp file behind, whatever happens: SIGINT/SIGTERM/SIGHUP arriving while it writes are held back
  until the file is either fully written or untouched, then delivered; any exception removes the temp file.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.workspace.source import SourceFile

TEMP_SUFFIX = ".torchlint-tmp"
_HELD_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class WriteRefused(Exception):
    """The fixed text was not written and the file is as it was; the message says why."""


def write_source(source: SourceFile, text: str) -> None:
    from torchlint.workspace.source import SourceError

    if source.encode(source.text) != source.raw:
        raise WriteRefused(f"re-encoding as {source.encoding} would change bytes that no fix touched")
    try:
        data = source.encode(text)
    except UnicodeEncodeError as error:
        raise WriteRefused(
            f"the fixed text cannot be encoded as {source.encoding} ({error.reason})"
        ) from None
    except SourceError as error:
        raise WriteRefused(str(error)) from None
    target = Path(os.path.realpath(source.path))  # through symlinks, the file itself
    try:
        info = os.stat(target)
    except OSError as error:
        raise WriteRefused(f"cannot stat: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise WriteRefused("not a regular file")
    if not info.st_mode & stat.S_IWUSR:
        raise WriteRefused("the file is read-only (no write permission bit)")
    if not os.access(target, os.W_OK):
        raise WriteRefused("no permission to write the file")
    with signals_held():
        try:
            current = target.read_bytes()
        except OSError as error:
            raise WriteRefused(f"cannot read it back: {error.strerror or error}") from None
        if current != source.raw:
            raise WriteRefused("the file changed on disk since it was read")
        try:
            if info.st_nlink > 1:
                _rewrite_in_place(target, data, source.raw)
            else:
                _replace(target, data, info, source.raw)
        except OSError as error:
            raise WriteRefused(f"cannot write: {error.strerror or error}") from None


def _replace(target: Path, data: bytes, info: os.stat_result, original: bytes) -> None:
    """A temp file next to the target, with its mode and owner, renamed over it.

    Where the OS can swap two names atomically (Linux's RENAME_EXCHANGE), the temp file is swapped with
    the target and the file it displaced is compared with what the fix was computed from: an editor's save
    that landed after the read-back is then put back, and the fix refused, instead of being lost."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if hasattr(os, "chown") and (info.st_uid, info.st_gid) != _owner(temp):
            with contextlib.suppress(OSError):  # only root may give a file away; then it stays ours
                os.chown(temp, info.st_uid, info.st_gid)
        os.chmod(temp, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
        _copy_extended_attributes(target, temp)
        if _exchange(temp, target):
            if Path(temp).read_bytes() != original:
                _exchange(temp, target)  # theirs back in place; ours, now at `temp`, goes below
                raise WriteRefused("the file changed on disk since it was read")
            os.unlink(temp)
        else:
            os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_folder(target.parent)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: str | Path, second: str | Path) -> bool:
    """Swap two paths atomically (renameat2 with RENAME_EXCHANGE); False where the OS or the file system
    cannot, and then nothing was changed."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    import ctypes

    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(error, os.strerror(error))


@functools.cache
def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except OSError:
        return None


def _copy_extended_attributes(source: Path, destination: str) -> None:
    """Extended attributes (tags, ACLs, SELinux labels) go with the file; best effort, where the platform
    and the permissions allow (an attribute that cannot be copied does not stop the fix)."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(destination, name, os.getxattr(source, name))


def _rewrite_in_place(target: Path, data: bytes, original: bytes) -> None:
    """Overwrite and truncate the one inode all the hard links share; put the original back on failure.

    The space the new text needs is reserved first, so a full disk refuses the write before a byte of the
    file changes; the writes are unbuffered, so that putting the original back does not first flush the
    failed write again (the original fits: its blocks are the file's own)."""
    fd = os.open(target, os.O_RDWR)
    try:
        _reserve(fd, len(data))
        try:
            _write_all(fd, data + _padding(len(original) - len(data)))
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                _write_all(fd, original)
                os.ftruncate(fd, len(original))
                os.fsync(fd)
            raise
    finally:
        os.close(fd)


def _padding(length: int) -> bytes:
    """What covers the old text's tail when the new one is shorter, until the truncate cuts it off: a
    comment, so that a process killed between the write and the truncate leaves valid Python (the new text
    and a blank comment line), never the new text followed by the end of the old one."""
    if length <= 0:
        return b""
    if length == 1:
        return b"\n"
    return b"\n#" + b" " * (length - 2)


def _reserve(fd: int, size: int) -> None:
    """Allocate `size` bytes of the file's storage up front (ENOSPC then, with the file untouched); a file
    system that cannot preallocate is written without it."""
    if not hasattr(os, "posix_fallocate") or size == 0:
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    written = 0
    while written < len(view):
        written += os.pwrite(fd, view[written:], written)


def _owner(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_uid, info.st_gid


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; best effort (not every platform can open a folder)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for the duration, then deliver those that arrived, once each.

    Signal handlers can only be set from the main thread; elsewhere this does nothing (the callers clean up
    on any exception anyway).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, object] = {}
    for number in _HELD_SIGNALS:
        try:
            previous[number] = signal.signal(number, lambda signum, frame: arrived.append(signum))
        except (ValueError, OSError):
            continue
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)
