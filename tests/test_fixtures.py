"""The bundled fixtures carry their expectations inline; torchlint's findings must be exactly those.

`# expect: TL303, TL304` on a line where findings belong, `# expect-none: TL3` on deliberate negatives.
Expectations for codes no registered rule owns yet are skipped, so fixtures can be written ahead of rules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import FIXTURES, REPO

from torchlint.api import RunOptions, run
from torchlint.rules.base import registered_rules
from torchlint.workspace.notebook import Notebook
from torchlint.workspace.settings import CliOverrides

_EXPECT = re.compile(r"#.*?\bexpect: *(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")
_EXPECT_NONE = re.compile(r"#.*?\bexpect-none: *(?P<codes>TL\d{0,3}(?:\s*,\s*TL\d{0,3})*)")
RULES = set(registered_rules())
SCRIPTS = [  # (script, whether it uses the deprecated AMP API) — every runnable fixture
    ("synthetic_regression.py", True),
    ("validation_graphs.py", False),
    ("image_classifier/train.py", True),
    ("two_module/train.py", True),
    ("custom_autograd.py", True),
    ("loader_bound/train.py", False),
    ("iterable_pipeline/train.py", False),
    ("hf_style/train.py", False),
    ("mnist_style/main.py", False),
    ("invalid_options.py", False),
    ("amp_fp16/train.py", False),
    ("amp_fp16/scaled.py", False),
]


def _numbered_lines(path: Path) -> list[tuple[str, str]]:
    """(row as findings show it, line): `12` in a module, `cell 3:2` in a notebook."""
    if path.suffix != ".ipynb":
        return [(str(n), line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    notebook = Notebook.parse(path.read_text(encoding="utf-8"))
    return [
        (f"cell {cell.number}:{n}", line)
        for cell in notebook.cells
        for n, line in enumerate(cell.text.splitlines(), 1)
    ]


def expectations() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    expected, forbidden = set(), set()
    for path in sorted([*FIXTURES.rglob("*.py"), *FIXTURES.rglob("*.ipynb")]):
        name = path.relative_to(FIXTURES).as_posix()
        for number, line in _numbered_lines(path):
            for match in _EXPECT.finditer(line):
                for code in re.split(r"\s*,\s*", match["codes"]):
                    if code in RULES:
                        expected.add((name, number, code))
            for match in _EXPECT_NONE.finditer(line):
                for prefix in re.split(r"\s*,\s*", match["codes"]):
                    forbidden.add((name, number, prefix))
    return expected, forbidden


def findings_in(root: Path) -> set[tuple[str, str, str]]:
    outcome = run(RunOptions(paths=[root]))
    assert outcome.errors == []
    return {
        (Path(d.path).resolve().relative_to(root.resolve()).as_posix(), d.location.row(), d.code)
        for d in outcome.diagnostics
    }


def test_findings_are_exactly_the_inline_expectations():
    expected, forbidden = expectations()
    assert expected, "the fixtures should expect something"
    found = findings_in(FIXTURES)
    assert sorted(found - expected) == [], "unexpected findings"
    assert sorted(expected - found) == [], "missing findings"
    clashes = [
        (f, line, code)
        for f, line, code in found
        for g, l2, p in forbidden
        if (f, line) == (g, l2) and code.startswith(p)
    ]
    assert clashes == []


def _start_script(root: Path, script: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONWARNINGS": "ignore,default::FutureWarning", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(
        [sys.executable, str(root / script)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(process: subprocess.Popen) -> tuple[int, str]:
    """(the return code, the standard error) of a started script, killed after two minutes."""
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    return process.returncode, stderr


def _run_script(root: Path, script: str) -> tuple[int, str]:
    return _finished(_start_script(root, script))


@pytest.mark.slow
@pytest.mark.parametrize("script, deprecated_amp", SCRIPTS)
def test_fixture_runs_before_and_after_fixing(tmp_path, script, deprecated_amp):
    pytest.importorskip("torch")
    # The original runs while the copy is fixed and run: most of each run is importing torch, on one core.
    running = _start_script(FIXTURES, script)
    try:
        copy = tmp_path / "fixtures"
        shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("__pycache__"))
        project = (copy / script).parent if "/" in script else copy / script  # with its sibling modules
        # TL101's compile is left out: each compiled fixture would spend half a minute in Inductor here, and
        # test_rules_compile.py runs a compiled fixture (and checks that it really compiled).
        no_compile = CliOverrides(ignore=("TL101",))
        outcome = run(RunOptions(paths=[project], fix=True, unsafe_fixes=True, overrides=no_compile))
        assert outcome.errors == []
        fixed, fixed_stderr = _run_script(copy, script)
        original, original_stderr = _finished(running)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert original == 0, original_stderr[-2000:]
    assert ("is deprecated" in original_stderr) == deprecated_amp
    assert fixed == 0, fixed_stderr[-2000:]
    assert "is deprecated" not in fixed_stderr


def test_fixtures_live_in_the_repo():
    assert FIXTURES == REPO / "fixtures"
    assert all((FIXTURES / s).is_file() for s, _ in SCRIPTS)
