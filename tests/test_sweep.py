"""The sweep: `--fix --unsafe-fixes` over a copy of the installed torch package's own Python sources.

Real code at scale (about 2,300 files, 1.2 million lines, every construct Python has) is where a fixer meets
what no unit test thought of. The properties: no internal error, every changed file still compiles, and a
second run changes nothing. The test prints how many files were checked and changed.

Cost, measured on the 2-core development machine: the first run over all 2,285 files takes 2.2-2.7 minutes
in 2 processes (the per-rule prefilter skips LibCST for most of them; in one process the test took 4.6
minutes instead of 3.7). The second run goes over the files the first one changed: that a fixed file's text
is a fixed point is the property here. That another file's findings do not move with a fix (a cross-file
answer read from the fixed file) is the fixer's tests' concern, on the multi-file fixtures
(`test_fixer.py::test_a_second_fix_of_the_fixtures_changes_nothing`): re-running the ~100 files that
mention a fixable API, as this test did, took 1.5 of its 3.7 minutes, on files no fix had touched (3.0 now).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from pathlib import Path

import pytest

from torchlint.api import RunOptions, available_cpus, run
from torchlint.fix.write import TEMP_SUFFIX
from torchlint.linter import _compiles
from torchlint.workspace.source import SourceFile


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

    checked_again, fixed_again, errors, warnings = _fix_all(changed)
    assert (errors, warnings, fixed_again, checked_again) == ([], [], 0, len(changed))
    assert {path: path.read_bytes() for path in every} == after
    assert not [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX)]

    with capsys.disabled():
        print(
            f"\nsweep: {checked} torch files checked, {len(changed)} changed ({fixed} fixes); "
            f"second run over them: no change; {time.monotonic() - started:.0f} s"
        )
