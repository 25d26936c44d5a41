"""`torchlint verify` told to stop (reliability report, turn 3, N8): SIGTERM (a CI step's timeout, `timeout`),
SIGHUP (a closed terminal) and SIGINT (Ctrl-C) end the run under way, its whole process group included,
remove the scratch folder and exit with 128 + the signal's number. The run lives in a process group of its
own, so no signal sent to verify reaches it: before, verify died at once and the run went on, orphaned.

End to end, in real processes: the signal and the process tree are what is tested. The scripts import
nothing (the run's entry imports torch itself, a second or two) and never step an optimizer, so they run
until they are stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import default_signals, terminal_signals

from torchlint.verify import runner
from torchlint.verify.stopping import StopFlag, stop_on_signals

pytestmark = pytest.mark.slow

FOREVER = """
    import os, sys, time
    with open(sys.argv[1] + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(0.1)
"""

# Ignores SIGTERM (as a process stuck in C code would) and has a child in its process group (a DataLoader
# worker, a torchrun rank): only SIGKILL to the whole group ends both.
STUBBORN = """
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        while True:
            time.sleep(0.1)
    with open(sys.argv[1] + ".tmp", "w") as handle:
        handle.write(f"{os.getpid()} {child}")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(0.1)
"""


@pytest.fixture(autouse=True)
def _needs_torch():
    pytest.importorskip("torch")  # the run's entry seeds torch's RNG


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Verify:
    """`python -m torchlint verify SCRIPT -- PIDFILE` in a session of its own, its scratch folder in a
    temporary directory of the test's; whatever it leaves behind is killed when the test ends."""

    def __init__(self, tmp_path: Path, source: str, ignore: tuple[int, ...] = ()) -> None:
        (tmp_path / "forever.py").write_text(textwrap.dedent(source))
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir()
        self.pidfile = tmp_path / "pids"
        env = {**os.environ, "TMPDIR": str(self.scratch)}
        command = [sys.executable, "-m", "torchlint", "verify", "forever.py", "--timeout", "120"]

        def ignored() -> None:  # as `nohup` leaves SIGHUP
            default_signals()
            for number in ignore:
                signal.signal(number, signal.SIG_IGN)

        self.process = subprocess.Popen(
            [*command, "--", str(self.pidfile)],
            cwd=tmp_path,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=ignored,
        )
        self.pids: list[int] = []

    def wait_for_the_run(self) -> list[int]:
        deadline = time.monotonic() + 120
        while not self.pidfile.exists():
            if self.process.poll() is not None:
                pytest.fail(f"verify ended before the run started: {self.process.communicate()}")
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        self.pids = [int(word) for word in self.pidfile.read_text().split()]
        assert all(alive(pid) for pid in self.pids)
        return self.pids

    def scratch_folders(self) -> list[str]:
        """verify's own (the run's torch may leave its caches there too)."""
        return [path.name for path in self.scratch.iterdir() if path.name.startswith("torchlint-verify-")]

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        _, stderr = self.process.communicate(timeout=timeout)
        return self.process.returncode, stderr

    def clean_up(self) -> None:
        for pid in self.pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def start(tmp_path):
    started: list[Verify] = []

    def start(source: str = FOREVER, ignore: tuple[int, ...] = ()) -> Verify:
        started.append(Verify(tmp_path, source, ignore))
        return started[-1]

    yield start
    for verify in started:
        verify.clean_up()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_verify_kills_its_run_removes_its_scratch_folder_and_exits_128_plus_the_signal(
    start, signum
):
    """N8: `kill -TERM` (or Ctrl-C sent to verify alone) ends the run, leaves no scratch folder, and exits
    143 (130), the shell's status for the signal."""
    verify = start()
    pids = verify.wait_for_the_run()
    os.kill(verify.process.pid, signum)
    code, stderr = verify.finish()
    assert code == 128 + signum, stderr
    name = signal.Signals(signum).name
    assert f"error: stopped by {name}: run 'original' was ended and its processes killed" in stderr
    assert gone_within(pids, 5)
    assert verify.scratch_folders() == []


def test_on_sighup_a_run_that_ignores_sigterm_is_killed_with_its_children(start):
    """N8 with a closed terminal, and a run as fixtures/verify_hang's (SIGTERM ignored, a child process in
    its group): after the grace, SIGKILL to the whole group; exit 129."""
    verify = start(STUBBORN)
    pids = verify.wait_for_the_run()
    assert len(pids) == 2
    os.kill(verify.process.pid, signal.SIGHUP)
    code, stderr = verify.finish()
    assert code == 128 + signal.SIGHUP, stderr
    assert "error: stopped by SIGHUP: run 'original' was ended" in stderr
    assert gone_within(pids, 5)
    assert verify.scratch_folders() == []


def test_a_signal_the_caller_ignores_stays_ignored(start):
    """`nohup torchlint verify ...`: SIGHUP ignored when verify starts does not stop it; SIGTERM still does."""
    verify = start(ignore=(signal.SIGHUP,))
    pids = verify.wait_for_the_run()
    os.kill(verify.process.pid, signal.SIGHUP)
    time.sleep(0.5)  # five polls of the runner
    assert verify.process.poll() is None and all(alive(pid) for pid in pids)
    os.kill(verify.process.pid, signal.SIGTERM)
    code, stderr = verify.finish()
    assert code == 128 + signal.SIGTERM, stderr
    assert gone_within(pids, 5)


# -- in-process: the handlers and the runner's ending of a run ----------------------------------------------


def test_the_handlers_only_set_a_flag_and_are_restored_afterwards():
    """While the runs go a signal sets the flag (an exception raised anywhere could leave a run behind);
    a second one asks to hurry; afterwards the previous handlers are back."""
    with terminal_signals():
        before = {
            number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        }
        with stop_on_signals() as stop:
            assert not stop.requested
            signal.raise_signal(signal.SIGTERM)
            assert (stop.signum, stop.hurry) == (signal.SIGTERM, False)
            signal.raise_signal(signal.SIGHUP)
            assert (stop.signum, stop.hurry) == (signal.SIGTERM, True)
        assert {number: signal.getsignal(number) for number in before} == before


def test_off_the_main_thread_no_handler_is_set():
    """Python sets signal handlers from the main thread only: elsewhere verify leaves them alone."""
    import threading

    seen = []

    def body() -> None:
        with stop_on_signals() as stop:
            seen.append((stop.requested, signal.getsignal(signal.SIGTERM)))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [(False, signal.getsignal(signal.SIGTERM))]


def test_a_second_signal_skips_the_grace_and_kills_the_group_at_once():
    """A run that ignores SIGTERM gets TERM_GRACE seconds, unless a second signal comes: then SIGKILL."""
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(60)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        process.stdout.readline()  # SIGTERM is ignored from here on
        stop = StopFlag()
        stop(signal.SIGTERM, None)
        stop(signal.SIGTERM, None)
        started = time.monotonic()
        runner._end_run(process, process.pid, stop)
        assert time.monotonic() - started < runner.TERM_GRACE / 2
        assert process.returncode == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
