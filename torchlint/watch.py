"""`torchlint check --watch`: check, then check again whenever a checked file or a configuration changes,
as ruff's `--watch` does, until Ctrl-C.

Polling, not OS notifications (no dependency, the same on every platform): every `interval` seconds the
run's files are discovered again (so new and deleted files count) and each one's modification time and
size compared with the last look, through the workspace's FileSystem. A check's own writes (`--fix`) are
seen as a change once, and the next check finds nothing more to fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from torchlint.api import discovered
from torchlint.outcome import RunOptions
from torchlint.workspace.fs import FileSystem


def snapshot(options: RunOptions, fs: FileSystem) -> dict[Path, tuple[int, int] | None]:
    """What the next look compares: each file a run would check, and the configuration files it reads."""
    targets, _ = discovered(options)
    watched = {target.path for target in targets}
    watched |= {target.settings.source for target in targets if target.settings.source is not None}
    if options.config_file is not None:
        watched.add(options.config_file)
    return {path: fs.stamp(path) for path in sorted(watched)}


def watch(
    options: RunOptions,
    check: Callable[[], None],
    say: Callable[[str], None],
    clear: Callable[[], None],
    interval: float = 0.5,
) -> None:
    """Check, then check again after each change; returns only by KeyboardInterrupt (Ctrl-C)."""
    fs = FileSystem()
    say(f"[{_now()}] Starting torchlint in watch mode...")
    last = snapshot(options, fs)
    check()
    say(f"[{_now()}] Watching for file changes.")
    while True:
        time.sleep(interval)
        seen = snapshot(options, fs)
        if seen == last:
            continue
        clear()
        say(f"[{_now()}] File change detected...")
        last = seen
        check()
        last = snapshot(options, fs)  # a --fix wrote files: not a change of the user's
        say(f"[{_now()}] Watching for file changes.")


def _now() -> str:
    return datetime.now().strftime("%H:%M:%S")
