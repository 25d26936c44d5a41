"""`torchlint check --watch`: one report, then another after each change of a checked file or a config,
until Ctrl-C (exit 130), as ruff's `--watch`. An end-to-end test: a real process, a real edit."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
from support import default_signals

from torchlint.cli import main

DEPRECATED = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def _lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)
    into.put(None)


def _until(lines: queue.Queue, text: str, seen: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        assert line is not None, "".join(seen)
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"no {text!r} within {timeout} s:\n" + "".join(seen))


def test_watch_checks_again_after_an_edit_and_ends_on_ctrl_c(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text("import torch\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "check", "--watch", "--output-format", "concise", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        _until(lines, "Watching for file changes.", seen)
        assert any("All checks passed!" in line for line in seen)
        time.sleep(0.05)
        (tmp_path / "train.py").write_text(DEPRECATED)
        os.utime(
            tmp_path / "train.py", (time.time() + 5, time.time() + 5)
        )  # a later stamp, whatever the clock
        _until(lines, "File change detected...", seen)
        _until(lines, "Watching for file changes.", seen)
        assert any(line.startswith("train.py:2:10: TL304 ") for line in seen), "".join(seen)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        if process.poll() is None:
            process.kill()


def test_watch_with_standard_input_is_a_usage_error():
    result = CliRunner().invoke(main, ["check", "--watch", "-"], input="import torch\n")
    assert result.exit_code == 2
    assert "--watch cannot be combined with standard input" in result.output
