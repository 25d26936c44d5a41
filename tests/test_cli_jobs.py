"""The default --jobs: chosen by the work a run has (bytes the LibCST analysis reads) and the idle CPUs, so
that it is never slower than one process where a second would only add its start-up and its own copy of
the project's facts (the measured figures are in docs/speed-and-cache.md)."""

from __future__ import annotations

import pytest

from torchlint.api import WORK_PER_PROCESS, RunOptions, _Worker, choose_jobs
from torchlint.linter import Linter
from torchlint.workspace.discovery import SettingsResolver, discover
from torchlint.workspace.fs import FileSystem


@pytest.mark.parametrize(
    "work, cpus, load, jobs",
    [
        (0, 8, 0.0, 1),
        (WORK_PER_PROCESS - 1, 8, 0.0, 1),  # a pre-commit run on a few files, DiT or minGPT: one process
        (2 * WORK_PER_PROCESS, 8, 0.0, 2),
        (20 * WORK_PER_PROCESS, 8, 0.0, 8),
        (20 * WORK_PER_PROCESS, 8, 6.5, 2),  # a busy machine: only the idle CPUs
        (20 * WORK_PER_PROCESS, 2, 4.2, 1),  # busier than it has CPUs: one process
        (20 * WORK_PER_PROCESS, 4, None, 4),  # no load average (Windows)
    ],
)
def test_default_jobs_follow_the_work_and_the_idle_cpus(work, cpus, load, jobs):
    assert choose_jobs(work, cpus, load) == jobs


def test_work_counts_whole_files_only_where_the_analysis_runs(project):
    (project / "loader.py").write_text("from torch.utils.data import DataLoader\n" + "x = 1\n" * 1000)
    (project / "library.py").write_text("def f():\n    return 1\n" * 500)
    fs = FileSystem()
    linter = Linter(fs=fs)
    options = RunOptions(paths=[project], cache=False)
    resolver = SettingsResolver(list(linter.rule_classes), {}, None, options.overrides, fs=fs)
    worker = _Worker(linter, options, fs)
    for target in discover(options.paths, resolver, False):
        assert worker.check(target, cached_only=True) is None
    work = {path.name: size for path, size in worker.work.items()}
    assert work["loader.py"] == len((project / "loader.py").read_bytes())
    assert work["library.py"] == len((project / "library.py").read_bytes()) // 50  # the syntax check only


def test_a_small_tree_runs_in_one_process_by_default_and_jobs_forces_more(project):
    from click.testing import CliRunner

    from torchlint.cli import main

    for index in range(20):  # more than the 16 files that used to start a process per CPU
        (project / f"train{index}.py").write_text("from torch.utils.data import DataLoader\n")
    default = CliRunner().invoke(main, ["--no-cache", "--show-phase2-count", "."])
    assert default.stderr.endswith(", 1 process\n")
    forced = CliRunner().invoke(main, ["--no-cache", "--show-phase2-count", "-j", "2", "."])
    assert forced.stderr.endswith(", 2 processes\n")
    assert forced.stdout == default.stdout


def test_the_load_is_what_runs_now_when_the_minute_average_still_counts_a_finished_run(monkeypatch, tmp_path):
    """The 1-minute average lags behind a run that just ended; the tasks runnable now (Linux's
    /proc/loadavg, this process excluded) say the CPUs are idle, and the smaller of the two is the load."""
    import builtins

    import torchlint.api as api

    monkeypatch.setattr(api.os, "getloadavg", lambda: (1.6, 1.2, 0.9))
    real_open = builtins.open

    def fake_proc(text):
        def opening(path, *args, **kwargs):
            if path == "/proc/loadavg":
                (tmp_path / "loadavg").write_text(text)
                return real_open(tmp_path / "loadavg", *args, **kwargs)
            return real_open(path, *args, **kwargs)

        return opening

    monkeypatch.setattr(builtins, "open", fake_proc("1.60 1.20 0.90 1/312 4242\n"))
    assert api._load() == 0.0  # only this process runs: both CPUs are idle
    monkeypatch.setattr(builtins, "open", fake_proc("1.60 1.20 0.90 6/312 4242\n"))
    assert api._load() == 1.6  # five others run now: the average, the smaller
    monkeypatch.setattr(builtins, "open", fake_proc("garbled\n"))
    assert api._load() == 1.6
