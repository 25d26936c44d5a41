"""A parallel `--fix` stops when it is told to (reliability M1, M2): Ctrl-C stops the run within moments,
and workers whose parent died stop writing. Every file is left either as it was or wholly fixed.

End to end, in real processes: the signal and the process tree are what is tested.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import default_signals

pytestmark = pytest.mark.slow

ORIGINAL = "import torch\nfrom torch.cuda.amp import autocast, GradScaler\nscaler = GradScaler()\nwith autocast():\n    pass\n"
FIXED = 'import torch\nscaler = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda"):\n    pass\n'
FILES = 400


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    for index in range(FILES):
        (tmp_path / f"train_{index:03}.py").write_text(ORIGINAL)
    return tmp_path


def start_fix(tree: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "torchlint", "--no-cache", "--fix", "-j", "2", "-q", "."]
    return subprocess.Popen(
        command,
        cwd=tree,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_signals,
    )


def contents(tree: Path) -> list[str]:
    return [path.read_text() for path in sorted(tree.glob("train_*.py"))]


def wait_for_first_fix(tree: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while FIXED not in contents(tree):
        assert process.poll() is None, "the run ended before any file was fixed"
        assert time.monotonic() < deadline
        time.sleep(0.05)


def assert_each_file_whole(tree: Path) -> int:
    found = contents(tree)
    assert set(found) <= {ORIGINAL, FIXED}
    return found.count(FIXED)


def session_alive(session: int) -> list[int]:
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    alive.append(int(entry.name))
            except OSError:
                continue
    return alive


@pytest.mark.parametrize("to_group", [True, False], ids=["process group", "parent alone"])
def test_ctrl_c_stops_a_parallel_fix_at_once(tree, to_group):
    process = start_fix(tree)
    wait_for_first_fix(tree, process)
    if to_group:
        os.killpg(process.pid, signal.SIGINT)  # what a terminal sends
    else:
        os.kill(process.pid, signal.SIGINT)  # what a supervisor may send
    process.communicate(timeout=60)
    assert process.returncode != 0
    fixed = assert_each_file_whole(tree)
    assert 0 < fixed < FILES  # the queued files were not fixed after the interrupt
    assert session_alive(process.pid) == []


def test_workers_stop_writing_when_their_parent_is_killed(tree):
    process = start_fix(tree)
    wait_for_first_fix(tree, process)
    os.kill(process.pid, signal.SIGKILL)  # the OOM killer, a CI step timeout: the parent alone
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while session_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_alive(process.pid) == []  # no orphaned worker is left
    fixed = assert_each_file_whole(tree)
    assert fixed < FILES
