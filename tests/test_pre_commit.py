"""The hooks in .pre-commit-hooks.yaml, run by the real `pre-commit try-repo` in a temporary git repository.

try-repo clones the hook repository at its HEAD commit, so the test copies this working tree (tracked files
and untracked ones git does not ignore) into a repository of its own and commits it there: what is tested
is the code as it is now, uncommitted changes included. pre-commit builds the hook's environment with pip,
which finds packages through the machine's pip configuration (this environment's index and wheel folders),
so nothing here needs the network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
FIXED = 'import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'
FINDING = """\
train.py:3:6: TL303 [*] `torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`
  |
3 | with torch.cuda.amp.autocast():
  |      ^^^^^^^^^^^^^^^^^^^^^^^ TL303
  |
  = help: Replace with `torch.amp.autocast`
  |
2 |
  - with torch.cuda.amp.autocast():
3 + with torch.amp.autocast("cuda"):
4 |     pass
  |

Found 1 finding.
[*] 1 fixable with the `--fix` option.
"""
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_IDENTITY},
    ).stdout


def _hook_repository(target: Path) -> Path:
    """This working tree as it is, committed in a repository of its own."""
    listed = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a file deleted but not yet staged is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "the working tree under test")
    return target


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    return _hook_repository(tmp_path_factory.mktemp("hooks"))


@pytest.fixture
def staged(tmp_path):
    """A repository with a staged training script with a finding, an excluded generated file with the same
    finding, and a clean file."""
    work = tmp_path / "work"
    (work / "generated").mkdir(parents=True)
    (work / "pyproject.toml").write_text(
        "[project]\nname = 'demo'\n[tool.torchlint]\nextend-exclude = ['generated/']\n"
    )
    (work / "train.py").write_text(DEPRECATED)
    (work / "generated" / "gen.py").write_text(DEPRECATED)
    (work / "clean.py").write_text(FIXED)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    return work


def try_repo(hooks: Path, work: Path, hook: str, *files: str) -> subprocess.CompletedProcess:
    selection = ["--files", *files] if files else ["--all-files"]
    env = {**os.environ, **GIT_IDENTITY, "PRE_COMMIT_HOME": str(work.parent / "pre-commit-home")}
    env.pop("PRE_COMMIT", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), hook, *selection, "--color", "never"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_the_check_hook_fails_with_the_findings_and_skips_excluded_files(hooks, staged):
    result = try_repo(hooks, staged, "torchlint")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^torchlint\.+Failed$", result.stdout, re.MULTILINE)
    assert "- hook id: torchlint\n- exit code: 1\n\n" + FINDING in result.stdout
    assert "generated/gen.py" not in result.stdout  # --force-exclude drops what the config excludes
    assert (staged / "train.py").read_text() == DEPRECATED


@pytest.mark.slow
def test_the_fix_hook_rewrites_the_file_and_then_the_check_passes(hooks, staged):
    fixing = try_repo(hooks, staged, "torchlint-fix", "train.py", "clean.py")
    assert fixing.returncode == 1, fixing.stdout + fixing.stderr
    assert "- hook id: torchlint-fix\n- files were modified by this hook\n" in fixing.stdout
    assert "Found 1 finding (1 fixed, 0 remaining).\n" in fixing.stdout
    assert (staged / "train.py").read_text() == FIXED
    assert (staged / "clean.py").read_text() == FIXED
    assert (staged / "generated" / "gen.py").read_text() == DEPRECATED  # not named, not touched

    checking = try_repo(hooks, staged, "torchlint", "train.py", "clean.py")
    assert checking.returncode == 0, checking.stdout + checking.stderr
    assert re.search(r"^torchlint\.+Passed$", checking.stdout, re.MULTILINE)


@pytest.mark.slow
def test_the_fix_hook_rewrites_a_staged_notebook_s_cell(hooks, tmp_path):
    """Issue 32: the hooks' `types_or` names `jupyter`, so pre-commit passes notebooks to torchlint."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": DEPRECATED}
    document = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (work / "explore.ipynb").write_text(json.dumps(document, indent=1) + "\n")
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    fixing = try_repo(hooks, work, "torchlint-fix")
    assert fixing.returncode == 1, fixing.stdout + fixing.stderr
    assert "Found 1 finding (1 fixed, 0 remaining).\n" in fixing.stdout
    assert json.loads((work / "explore.ipynb").read_text())["cells"][0]["source"] == FIXED
