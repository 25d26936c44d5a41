"""One measured run of the script: a subprocess in its own process group, watched until it ends.

The run is `python bootstrap/entry.py SPEC` (or `python -m torch.distributed.run --nproc-per-node N
bootstrap/entry.py SPEC`), in a process group of its own within the caller's session, with the user's
working directory, `bootstrap/site` first on PYTHONPATH (its `sitecustomize` serves the patched sources in
every process of the run), `PYTHONHASHSEED=0`, and the same thread settings for every run. The script's
output goes to a log file per run (its tail is shown when a run fails). The spec, the progress file and
the result files live in a scratch folder of the verifier's.

A run that outlives its timeout gets SIGTERM (the entry then writes what it measured), then SIGKILL; so
does a run under way when `verify` is told to stop (`stopping`: SIGINT, SIGTERM, SIGHUP), at once on a
second signal, and then `Stopped` is raised. After every run, whatever is left in its process group
(DataLoader workers, torchrun's ranks) is killed, and the runner waits until `/proc` shows none of them.

This module never imports torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint.verify.stopping import StopFlag, Stopped

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"
ENTRY = BOOTSTRAP / "entry.py"
SITE = BOOTSTRAP / "site"
SPEC_ENV = "TORCHLINT_VERIFY_SPEC"
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
POLL = 0.1

Progress = Callable[[int, int, float], None]  # (steps done, steps asked, seconds elapsed)


@dataclass
class RunConfig:
    script: Path
    args: list[str]
    cwd: Path
    steps: int
    warmup: int
    threads: int | None
    device: str  # auto | cuda | cpu
    timeout: float
    seed: int = 0
    profile_steps: int = 3
    torchrun: int | None = None
    python: str = sys.executable


@dataclass
class RunResult:
    label: str
    index: int  # its place among the runs
    status: str  # stopped | finished | exited | crashed | timeout | killed | no-result
    raw: dict[str, Any] | None
    returncode: int | None
    wall: float
    log: Path
    trace: Path | None = None
    stray_killed: int = 0
    leftover: list[int] = field(default_factory=list)  # pids still alive after the run (should be empty)
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    progress_steps: int = 0  # the last step count the run reported while it went

    @property
    def steps(self) -> int:
        return len(self.raw["steps"]) if self.raw else self.progress_steps

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def process_group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, read from /proc."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap_group(pgid: int, deadline: float = 5.0) -> tuple[int, list[int]]:
    """Kill what is left of the group; (how many were killed, those still alive after `deadline`)."""
    members = process_group_members(pgid)
    if not members:
        return 0, []
    killed = len(members)
    _kill_group(pgid, signal.SIGKILL)
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        members = process_group_members(pgid)
        if not members:
            return killed, []
        time.sleep(0.05)
    return killed, members


def _end_run(process: subprocess.Popen, pgid: int, stop: StopFlag | None) -> None:
    """SIGTERM to the run's process group (the entry writes what it measured, the script's own handlers
    run), then SIGKILL once the main process outlives TERM_GRACE, or at once when a second stop signal
    comes (whoever sent it will not wait)."""
    _kill_group(pgid, signal.SIGTERM)
    end = time.monotonic() + TERM_GRACE
    while time.monotonic() < end and not (stop is not None and stop.hurry):
        try:
            process.wait(timeout=POLL)
            return
        except subprocess.TimeoutExpired:
            pass
    _kill_group(pgid, signal.SIGKILL)
    process.wait()


def _own_process_group() -> dict[str, Any]:
    """A process group of the run's own (killed as one), in the caller's session: a new session would also
    be a new scheduling group (Linux's autogroup), sharing the CPUs with every other session as one."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


def run_once(
    config: RunConfig,
    patched: dict[str, str],
    workdir: Path,
    label: str,
    index: int,
    trace: Path | None = None,
    progress: Progress | None = None,
    stop: StopFlag | None = None,
    loader_override: dict[str, Any] | None = None,
) -> RunResult:
    """Run the script once (patched with `patched`; `--tune` sets a DataLoader's options: `loader_override`),
    watching it until it ends or times out; `Stopped` (the run ended and its process group killed) when
    `stop` is set while it goes."""
    tag = f"run{index}"
    spec_path = workdir / f"{tag}.spec.json"
    result_path = workdir / f"{tag}.result.json"
    progress_path = workdir / f"{tag}.progress"
    log_path = workdir / f"{tag}.log"
    spec = {
        "script": str(config.script),
        "args": list(config.args),
        "steps": config.steps,
        "warmup": config.warmup,
        "threads": config.threads,
        "device": config.device,
        "seed": config.seed,
        "profile_steps": config.profile_steps,
        "patched": patched,
        "loader_override": loader_override,
        "result_path": str(result_path),
        "progress_path": str(progress_path),
        "trace_path": str(trace) if trace else None,
    }
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    for stale in (progress_path, Path(f"{result_path}.rank0")):
        stale.unlink(missing_ok=True)
    env = dict(os.environ)
    env[SPEC_ENV] = str(spec_path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), env.get("PYTHONPATH", "")) if p)
    env["PYTHONHASHSEED"] = str(config.seed)
    env["PYTHONUNBUFFERED"] = "1"
    if config.threads:
        env["OMP_NUM_THREADS"] = str(config.threads)
    if config.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    if config.torchrun:
        command = [config.python, "-m", "torch.distributed.run", "--standalone"]
        command += [f"--nproc-per-node={config.torchrun}", str(ENTRY), str(spec_path)]
        env.setdefault("MASTER_ADDR", "127.0.0.1")
    else:
        command = [config.python, str(ENTRY), str(spec_path)]
    if stop is not None and stop.signum is not None:  # told to stop before this run began
        raise Stopped(stop.signum)
    load = os.getloadavg()
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=config.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            **_own_process_group(),
        )
    pgid = process.pid
    timed_out = stopped = False
    try:
        while True:
            try:
                process.wait(timeout=POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            if stop is not None and stop.requested:
                stopped = True
                _end_run(process, pgid, stop)
                break
            elapsed = time.monotonic() - started
            if progress is not None:
                progress(*_read_progress(progress_path, config), elapsed)
            if elapsed > config.timeout:
                timed_out = True
                _end_run(process, pgid, stop)
                break
    except BaseException:  # an error in the verifier (a progress callback's, Ctrl-C unhandled): no leftovers
        _kill_group(pgid, signal.SIGKILL)
        process.wait()
        _reap_group(pgid)
        raise
    wall = time.monotonic() - started
    stray, leftover = _reap_group(pgid)
    if stop is not None and stop.signum is not None and stopped:
        raise Stopped(stop.signum, label)
    raw = _read_result(result_path)
    if progress is not None and raw is not None:
        progress(len(raw.get("steps", [])), config.warmup + config.steps, wall)
    if raw is None:
        status = "timeout" if timed_out else "no-result"
    else:
        status = "timeout" if timed_out else str(raw.get("status", "finished"))
    exists = trace is not None and trace.is_file()
    progressed = _read_progress(progress_path, config)[0]
    return RunResult(
        label,
        index,
        status,
        raw,
        process.returncode,
        wall,
        log_path,
        trace if exists else None,
        stray,
        leftover,
        load,
        progressed,
    )


def _read_progress(path: Path, config: RunConfig) -> tuple[int, int]:
    total = config.warmup + config.steps
    try:
        text = path.read_text(encoding="ascii", errors="replace").split()
        return int(text[0]), total
    except (OSError, ValueError, IndexError):
        return 0, total


def _read_result(path: Path) -> dict[str, Any] | None:
    """Rank 0's result (the only rank under a plain run)."""
    try:
        return json.loads(Path(f"{path}.rank0").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
