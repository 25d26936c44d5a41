"""`verify` stops cleanly when it is told to: SIGTERM (a CI step's timeout, `timeout 600 torchlint verify`,
`kill`), SIGHUP (a closed terminal) and SIGINT (Ctrl-C) end the run under way and leave nothing behind.

Each run lives in a process group of its own, so that its timeout can kill the whole tree; the same
isolation means that a signal sent to `verify` (or to its process group) never reaches the run. Without
handlers, `verify` died at once and the run trained on, orphaned, with the scratch folder left behind.

While the runs go, these signals only set a flag: a handler that raised could interrupt `verify` anywhere,
even between starting a run and taking note of its process group, and leave that run behind. The runner
reads the flag at every poll and ends the run as a timeout does (SIGTERM to its process group, SIGKILL
after a grace, or at once when a second signal comes), the verifier removes its scratch folder and
raises `Stopped`, and the command exits with the shell's status for the signal, 128 + its number.

Handlers are set from the main thread only (Python allows no other; there the signals keep whatever the
caller set), a signal the caller ignores stays ignored (`nohup torchlint verify ...` survives its
terminal), and the previous handlers are restored when the runs are over.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Stopped(BaseException):
    """`verify` was stopped by a signal: its run's process group was killed. A BaseException, as
    KeyboardInterrupt is: no `except Exception` on the way out may take it for a failure to report."""

    def __init__(self, signum: int, label: str | None = None) -> None:
        super().__init__(signum, label)
        self.signum = signum
        self.label = label  # the run that was under way, if any
        self.workdir: str | None = None  # the scratch folder, when --keep-logs kept it

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.label is None:
            return f"stopped by {name}"
        return f"stopped by {name}: run {self.label!r} was ended and its processes killed"


class StopFlag:
    """Set by the signal handler: the first signal asks to stop, another one to hurry (no grace)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.hurry = False

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __call__(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
        else:
            self.hurry = True


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopFlag]:
    """SIGINT, SIGTERM and SIGHUP set the flag for the duration (from the main thread only), then their
    previous handlers are back."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous: dict[int, object] = {}
    for number in STOP_SIGNALS:
        current = signal.getsignal(number)
        if current is signal.SIG_IGN:
            continue
        try:
            signal.signal(number, flag)
        except (ValueError, OSError):
            continue
        previous[number] = current
    try:
        yield flag
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
