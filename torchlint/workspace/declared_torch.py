"""The oldest torch a project declares, read from its dependency files, for the `torch-version` setting
when the configuration leaves it unset.

A fix that writes `fused=True` or `torch.set_float32_matmul_precision` breaks a project pinned to torch 1.10,
and a finding about an API its torch lacks is noise. Projects say which torch they run in the files that
install it: `requirements*.txt` (also under `requirements/`), conda's `environment.yml`, `pyproject.toml`
(`[project]` dependencies and extras, Poetry's table) and `setup.py` / `setup.cfg`, at the project root. A
declaration that holds the project back (a pin or an upper bound) gives the oldest torch the project
supports, the lowest version it allows: `torch==1.10.2` and `torch>=1.10.1,<1.13` give 1.10, conda's
`pytorch=1.7.0=py3.7_cuda...` 1.7, Poetry's `^1.5` 1.5, `torch<1.13` alone 1.12. A lower bound alone
(`torch>=1.8`) is not one: such projects run on the current torch, and their users see its deprecations. A
`torch` without a version says nothing, and so do `torchvision` and friends. A project whose dependency
files give torch no version at all may still require one in its README (`readme_torch`).

This is what the project declares, not configuration: `--isolated` reads it too, and an explicit
`torch-version` (configuration or `--torch-version`) always wins.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.workspace.readme_torch import readme_torch

if TYPE_CHECKING:
    from torchlint.workspace.fs import FileSystem

DECLARING_FILES = (
    "requirements.txt",
    "environment.yml",
    "environment.yaml",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
)
# `torch==1.10.2`, `- pytorch=1.7.0=py3.7_cuda10`, `"torch>=1.9,<2"`, `torch = "^1.10"`,
# `torch = ">=1.10.1, <1.13"`
REQUIREMENT = re.compile(
    r"""(?:^|["'\s\[,])(?:py)?torch(?:\[[^\]]*\])?\s*(?:=\s*["'])?"""
    r"""(?P<spec>(?:===|==|>=|~=|<=|!=|\^|~|=|<|>)?\s*\d[\w.*]*(?:\s*,\s*(?:===|==|>=|~=|<=|!=|<|>)\s*\d[\w.*]*)*)""",
    re.IGNORECASE | re.MULTILINE,
)
CLAUSE = re.compile(r"(?P<op>===|==|>=|~=|<=|!=|\^|~|=|<|>)?\s*(?P<major>\d+)(?:\.(?P<minor>\d+|\*))?")


def declared_torch(root: Path, fs: FileSystem) -> tuple[int, int] | None:
    """The oldest torch the project at `root` declares (major, minor); None when it declares no version.
    The README is read only when no dependency file gives torch a version, not even a lower bound."""
    found = []
    versioned = False
    for path in _declaring_files(root, fs):
        try:
            text = fs.read_text(path, errors="replace")
        except OSError:
            continue
        for match in REQUIREMENT.finditer(text):
            versioned = True
            version = lowest_allowed(match["spec"])
            if version is not None:
                found.append(version)
    if found:
        return min(found)
    return None if versioned else readme_torch(root, fs)


def lowest_allowed(spec: str) -> tuple[int, int] | None:
    """The lowest (major, minor) a version specifier that bounds torch from above allows (its pin or lower
    bound, else one below its upper bound); None for a lower bound alone, or no bound."""
    lower, upper, capped = [], [], False
    for clause in spec.split(","):
        match = CLAUSE.match(clause.strip())
        if match is None:
            continue
        minor = match["minor"]
        version = (int(match["major"]), int(minor) if minor and minor != "*" else 0)
        op = match["op"] or "=="
        capped = capped or op in ("===", "==", "=", "~=", "^", "~", "<", "<=")
        if op in ("===", "==", "=", ">=", "~=", "^", "~", ">"):
            lower.append(version)
        elif op == "<":
            upper.append((version[0], version[1] - 1) if version[1] > 0 else (version[0] - 1, 99))
        elif op == "<=":
            upper.append(version)
    if not capped:
        return None
    return min(lower) if lower else min(upper)


def _declaring_files(root: Path, fs: FileSystem) -> list[Path]:
    paths = [root / name for name in DECLARING_FILES]
    for folder in (root, root / "requirements"):
        if not fs.is_dir(folder):
            continue
        try:
            entries = fs.scandir(folder)
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name.endswith(".txt") and (folder != root or name.startswith("requirements")):
                paths.append(folder / name)
    return [path for path in dict.fromkeys(paths) if fs.is_file(path)]
