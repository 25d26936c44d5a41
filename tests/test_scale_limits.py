"""Limits of scale never turn into a pass or a crash: a file too big to analyse is a finding and the others
are still checked (N9), a memory limit too small for a file is a finding, not an abort of the process (N10),
a project of any size is indexed whole (N16), and no index walks the whole machine or a home folder (N6).
The cases are the reliability report's (turn 3)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import settings

from torchlint.linter import Linter
from torchlint.workspace.fs import FileSystem

CLI = [sys.executable, "-m", "torchlint", "--no-cache"]
DEPRECATED = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"  # TL304: the LibCST analysis runs


def code_shaped(size: int) -> str:
    """Valid Python of about `size` characters, with one finding, the shape that costs most to analyse."""
    parts, length, i = [DEPRECATED], len(DEPRECATED), 0
    while length < size:
        part = f"\ndef f{i}(x, y):\n    z = x.foo(y, k={i}) + bar(x)[1]\n    return z * 2\n"
        parts.append(part)
        length += len(part)
        i += 1
    return "".join(parts)


def findings(output: str) -> list[tuple[str, str, str]]:
    return sorted((d["filename"], d["code"], d["message"]) for d in json.loads(output))


def test_a_file_too_big_to_analyse_is_a_finding_and_the_other_files_are_checked(tmp_path):
    """N9: 2.1 MB of source took 2.2 GB to analyse, 55 MB more than 21 GB; now no parser sees it."""
    (tmp_path / "weights.py").write_text(code_shaped(2_200_000))
    (tmp_path / "train.py").write_text(DEPRECATED)
    done = subprocess.run(
        [*CLI, "--output-format", "json", "weights.py", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    (small, code, _), (big, big_code, message) = findings(done.stdout)
    assert (small, code, big, big_code) == ("train.py", "TL304", "weights.py", "TL002")
    assert message.startswith("weights.py: not analysed: 2.1 MiB of source could need 2.5 GiB of memory")
    assert "exclude it" in message


def test_a_big_file_no_rule_could_fire_on_costs_only_the_syntax_check(tmp_path):
    """A data table of 2 MB: no rule could fire, so CPython's parse alone runs, within the budget."""
    table = "TABLE = [\n" + "".join(f"    {i},\n" for i in range(300_000)) + "]\n"
    assert len(table) > 2_000_000
    diagnostics = Linter().check_text("table.py", table, settings(select=("ALL",)), in_project=False)
    assert diagnostics == []


def _limit_address_space(megabytes: int):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 1024**2, megabytes * 1024**2))

    return limit


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc for the mapped size")
def test_under_an_address_space_limit_a_file_that_would_not_fit_is_a_finding_not_an_abort(tmp_path):
    """N10: under `ulimit -v`, LibCST's native parser aborted the process (SIGABRT, exit 134, no file
    named); 450 KB of source needs about 500 MB, which a 400 MB limit does not leave."""
    (tmp_path / "model.py").write_text(code_shaped(450_000))
    done = subprocess.run(
        [*CLI, "--output-format", "json", "model.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_address_space(400),
    )
    assert done.returncode == 1, done.stderr[-2000:]
    [(file, code, message)] = findings(done.stdout)
    assert (file, code) == ("model.py", "TL002")
    assert "address-space limit (ulimit -v) leaves" in message


class NoWalkOf(FileSystem):
    """A file system whose listing of `forbidden` folders fails the test at once (the walk itself would
    read the whole machine)."""

    def __init__(self, *forbidden: Path) -> None:
        super().__init__()
        self.forbidden = {str(folder) for folder in forbidden}

    def scandir(self, path):
        assert str(path) not in self.forbidden, f"the index walked {path}"
        return super().scandir(path)


LOADER_FACTORY = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader


    def make(dataset):
        return DataLoader(dataset, batch_size=4)
    """
)  # whose callers the index looks for in every project file


def test_a_buffer_directly_under_the_root_folder_is_checked_on_its_own():
    """N6: `--stdin-filename /train.py` (a container's COPY, an editor's file:///train.py) took `/` as the
    project and read .py files from /proc, /sys and other users' folders."""
    linter = Linter(fs=NoWalkOf(Path("/")))
    assert linter.check_text("/train.py", LOADER_FACTORY, settings(), in_project=True) == []


def test_a_file_directly_in_the_home_folder_is_checked_on_its_own(tmp_path, monkeypatch):
    """N6: a dotfiles `~/.git` makes the home folder a project root; the index must not walk it."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / "train.py").write_text(LOADER_FACTORY)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: home))
    linter = Linter(fs=NoWalkOf(home))
    assert linter.check_text(str(home / "train.py"), LOADER_FACTORY, settings()) == []


def test_a_project_in_a_folder_of_the_home_folder_is_indexed_with_its_folder(tmp_path, monkeypatch):
    """With `~/.git`, `~/job/train.py` is indexed with `~/job`: its neighbours still give cross-file facts."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    job = write_project(home / "job", fillers=0, pyproject=False)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: home))
    linter = Linter(fs=NoWalkOf(home))
    engine = job / "engine.py"
    found = linter.check_text(str(engine), engine.read_text(), settings(select=("TL301",)))
    assert [(d.code, d.location.line) for d in found] == [("TL301", 7)]


ENGINE = textwrap.dedent(
    """\
    import torch


    def train_one_epoch(model, loader, optimizer, device):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
)
MAIN = textwrap.dedent(
    """\
    import torch
    from engine import train_one_epoch

    device = torch.device("cuda")
    model = torch.nn.Linear(64, 64).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, [], optimizer, device)
    """
)  # the only evidence that engine.py trains on the GPU: the index must reach zz/main.py


def write_project(root: Path, fillers: int, pyproject: bool = True) -> Path:
    """engine.py's step function, called on the GPU from zz/main.py (listed last), and `fillers`
    one-line modules in a/ (listed first)."""
    root.mkdir(parents=True, exist_ok=True)
    if pyproject:
        (root / "pyproject.toml").write_text("[project]\nname = 'big'\n")
    (root / "engine.py").write_text(ENGINE)
    (root / "zz").mkdir()
    (root / "zz" / "main.py").write_text(MAIN)
    for i in range(fillers):
        folder = root / "a" / f"p{i // 500:03}"
        if i % 500 == 0:
            folder.mkdir(parents=True)
        (folder / f"m{i}.py").write_text(f"import os\nVALUE = {i}\n")
    return root


MEASURE = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
    "sys.stdout.write(done.stdout); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)"
)  # the peak resident memory of the run and its workers, apart from every other child of the test process


def run_measured(*args: str, cwd: Path) -> tuple[int, list, int]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *CLI, "--output-format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak_kib = int(done.stderr.strip().splitlines()[-1])
    return done.returncode, findings(done.stdout), peak_kib


@pytest.mark.slow
def test_a_project_of_20000_files_gives_the_same_findings_with_one_or_two_jobs_and_in_the_editor(tmp_path):
    """N16: the index stopped at 5,000 files, silently: past it engine.py's TL301 vanished and the run said
    "All checks passed!". Every file is indexed now, with -j 1, -j 2 and the Language Server alike, and
    the whole run stays under 300 MB (measured: about 90 MB)."""
    root = write_project(tmp_path / "big", fillers=20_000)
    expected = [("engine.py", "TL301")]
    for jobs in ("1", "2"):
        returncode, found, peak_kib = run_measured("-j", jobs, ".", cwd=root)
        assert returncode == 1
        assert [(file, code) for file, code, _ in found] == expected
        assert peak_kib < 300 * 1024, f"-j {jobs}: {peak_kib} KiB"
    returncode, found, _ = run_measured("engine.py", cwd=root)
    assert [(file, code) for file, code, _ in found] == expected
    assert editor_codes(root, root / "engine.py") == ["TL301"]


def editor_codes(root: Path, path: Path) -> list[str]:
    """The codes the Language Server publishes for `path` opened in `root`, through a real client."""
    import asyncio

    from lsp_client import SERVER, initialize, open_document
    from pytest_lsp import ClientServerConfig

    async def session() -> list[str]:
        client = await ClientServerConfig(server_command=SERVER).start()
        try:
            await initialize(client, root)
            return [d.code for d in await open_document(client, path)]
        finally:
            await client.shutdown_session()
            await client.stop()

    return asyncio.run(session())
