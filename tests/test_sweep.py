"""The sweep: `--fix --unsafe-fixes` over a copy of the installed torch package's own Python sources.

Real code at scale (about 2,300 files, 1.2 million lines, every construct Python has) is where a fixer meets
what no unit test thought of. The properties: no internal error, every changed file still compiles, and a
second run changes nothing. The test prints how many files were checked and changed.

Cost, measured on the 2-core development machine (other jobs running): the first run over all 2,285 files
takes ~2 minutes in 2 processes (the per-rule prefilter skips LibCST for most of them); a second run over all
of them as well brought the test to 4.2 minutes, over the ~3 minutes a test may take. So the second run goes
over a deterministic subset: the files the first run changed and every file that mentions an API the rules
know (`torch.cuda.amp`, `autocast`, `GradScaler`, `DataLoader`; about a hundred). The others had no fix the
first time, have the same text and settings the second time, and can only differ through a changed file's
facts (cross-file), which is why every file that mentions those APIs is re-run too. Total: ~2.5 minutes.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from torchlint.api import RunOptions, available_cpus, run
from torchlint.fix.write import TEMP_SUFFIX
from torchlint.linter import _compiles
from torchlint.workspace.source import SourceFile

TRIGGERS = re.compile(rb"cuda\.amp|cpu\.amp|GradScaler|autocast|DataLoader")


def _torch_sources() -> Path | None:
    spec = importlib.util.find_spec("torch")  # found, not imported: importing torch takes seconds
    return Path(spec.origin).parent if spec and spec.origin else None


def _only_python(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if not n.endswith(".py") and not os.path.isdir(os.path.join(folder, n))]


def _fix_all(paths: list[Path]) -> tuple[int, int, list[str], list[str]]:
    """`torchlint --fix --unsafe-fixes PATHS`, in as many processes as there are CPUs (forced: the default
    would choose by the load average, and this test's time should not depend on it)."""
    outcome = run(RunOptions(paths=paths, fix=True, unsafe_fixes=True, jobs=available_cpus()))
    return outcome.files_checked, outcome.fixed, outcome.errors, outcome.warnings


@pytest.mark.slow
def test_fix_sweep_over_torchs_own_sources(tmp_path, capsys):
    source = _torch_sources()
    if source is None:
        pytest.skip("torch is not installed")
    started = time.monotonic()
    root = tmp_path / "sweep"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'sweep'\n")  # the project root of the copy
    shutil.copytree(source, root / "torch", ignore=_only_python)
    every = sorted((root / "torch").rglob("*.py"))
    before = {path: path.read_bytes() for path in every}

    checked, fixed, errors, warnings = _fix_all(every)
    assert (errors, warnings) == ([], [])
    assert checked == len(every)
    changed = [path for path in every if path.read_bytes() != before[path]]
    assert fixed >= len(changed) > 0  # torch still uses its own deprecated torch.cuda.amp here and there
    broken = [str(p) for p in changed if not _compiles(SourceFile.read(p).text, str(p))]
    assert broken == []
    after = {path: path.read_bytes() for path in every}

    again = sorted({*changed, *(path for path in every if TRIGGERS.search(before[path]))})
    checked_again, fixed_again, errors, warnings = _fix_all(again)
    assert (errors, warnings, fixed_again, checked_again) == ([], [], 0, len(again))
    assert {path: path.read_bytes() for path in every} == after
    assert not [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX)]

    with capsys.disabled():
        print(
            f"\nsweep: {checked} torch files checked, {len(changed)} changed ({fixed} fixes); "
            f"second run over {len(again)}: no change; {time.monotonic() - started:.0f} s"
        )
