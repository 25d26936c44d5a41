"""What a user installs: the linter never imports torch, and the wheel carries the rule docs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest
from support import FIXTURES, REPO

NO_TORCH = (
    "import sys; sys.modules['torch'] = None; sys.argv = ['torchlint', *sys.argv[1:]];"
    "from torchlint.cli import main; main()"
)


def test_the_linter_runs_with_torch_unimportable():
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, "--output-format", "concise", str(FIXTURES)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 1, result.stderr
    assert "TL303" in result.stdout and "Error" not in result.stderr


def test_python_dash_m_works():
    result = subprocess.run([sys.executable, "-m", "torchlint", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("torchlint ")


@pytest.mark.slow
def test_the_wheel_ships_the_rule_docs(tmp_path):
    pytest.importorskip("hatchling")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("torchlint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "torchlint/_docs/TL303.md" in names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = "import torchlint, sys; print(torchlint.__file__); sys.argv = ['torchlint', 'rule', 'TL303']; from torchlint.cli import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert result.returncode == 0, result.stderr
    installed_from, _, doc = result.stdout.partition("\n")
    assert installed_from.startswith(str(target))
    assert doc.startswith("# TL303 deprecated-amp-autocast")
