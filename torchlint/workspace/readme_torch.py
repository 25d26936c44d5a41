"""The torch a project's README requires, for projects whose dependency files name no torch version.

Many research repositories install through their README, not a requirements file: "Requirements: PyTorch
0.4 or 0.5", "- [PyTorch](http://pytorch.org) install = 1.4.0", "6. Install [PyTorch 1.0]", `conda install
pytorch=1.7 -c pytorch`. Their code runs on that torch, where `fused=True`, `persistent_workers=` or
`torch.compile` do not exist: advice that needs a newer torch is noise there, and its fix a `TypeError`.

A README is prose, so only what reads as a requirement counts:
- a line that names PyTorch and a version, with nothing between them but `version`, `install`, `=`, `==`,
  `:` or `v` (`PyTorch 1.4`, `torch==1.4.0`, `pytorch=1.7`, `PyTorch version: 1.4`);
- which is a list item under a heading about requirements, installation or set-up, or says itself that
  it requires or installs (`Python 3 and PyTorch 0.4 are required`); in a fenced code block, only an
  install command counts (`pip install torch==1.4.0`, `conda install pytorch=1.7`);
- and is not a lower bound (`PyTorch >= 1.8`, `PyTorch 1.8+`, `1.8 or later`), nor a report of what it
  was tried on (`tested with`, `developed with`): such projects run on the current torch.
Within one line the lowest version counts (`PyTorch 0.4 or 0.5` gives 0.4); across lines the highest, since a
README that also tells how to run an old release (`for the PyTorch 0.1.12 version, check out ...`) requires
the newer one for its current code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.workspace.fs import FileSystem

README_FILES = ("README.md", "README.rst", "README.txt", "README", "readme.md", "Readme.md")

_LINK = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])?")  # `[text](url)`, `[text][ref]`, `[text]`
_LINK_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s")  # `[pytorch 1.0]: https://...`
_EMPHASIS = re.compile(r"[*_`]{1,3}(?=\S)|(?<=\S)[*_`]{1,3}")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_INSTALL_COMMAND = re.compile(r"\b(?:pip3?|conda|mamba|uv\s+pip)\s+install\b")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(?P<atx>.*)|(?P<setext>[=\-~^]{3,})\s*)$")
_ABOUT_SETUP = re.compile(r"requirement|prerequisite|dependenc|install|set ?up|environment", re.IGNORECASE)
_SAYS_REQUIRED = re.compile(r"\b(?:requir\w*|install\w*|needs?)\b", re.IGNORECASE)
_NOT_REQUIRED = re.compile(
    r"\b(?:tested|developed|verified|works?|worked|optional\w*|if\s+you\s+have)\b", re.IGNORECASE
)
_VERSION = r"(?P<major>\d+)\.(?P<minor>\d+)(?:\.\d+)?"
_NAMED = re.compile(
    r"(?<![\w-])(?:py)?torch(?![\w-])\s*(?:version\s*)?(?:install\s*)?(?:[:=]=?\s*|v\s*)?" + _VERSION,
    re.IGNORECASE,
)
_OTHER_VERSION = re.compile(r"^\s*(?:,\s*|/\s*|or\s+|and\s+)v?" + _VERSION, re.IGNORECASE)
_LOWER_BOUND_AFTER = re.compile(
    r"^(?:\.\d+)*\s*(?:\+(?![\w.])|\.x\b|or\s+(?:later|above|higher|newer|greater)|and\s+(?:later|above|newer))",
    re.IGNORECASE,
)
_LOWER_BOUND_BEFORE = re.compile(r"(?:>|≥|at\s+least|minimum|or\s+newer)\s*$", re.IGNORECASE)


def readme_torch(root: Path, fs: FileSystem) -> tuple[int, int] | None:
    """The torch (major, minor) the README at `root` requires; None when it states no requirement."""
    for name in README_FILES:
        path = root / name
        if not fs.is_file(path):
            continue
        try:
            text = fs.read_text(path, errors="replace")
        except OSError:
            continue
        return required_torch(text)
    return None


def required_torch(text: str) -> tuple[int, int] | None:
    """The torch a README's text requires (see the module's docstring)."""
    found = []
    setup_section = in_code = False
    lines = text.splitlines()
    for number, raw in enumerate(lines):
        if _FENCE.match(raw) and raw.count("```") != 2:  # ```python setup.py install``` opens nothing
            in_code = not in_code
            continue
        if in_code:  # code: only an install command (a comment there is no requirement)
            version = _lowest_pinned(raw) if _INSTALL_COMMAND.search(raw) else None
            found += [version] if version is not None else []
            continue
        heading = _heading(raw, lines[number - 1] if number else "")
        if heading is not None:
            setup_section = bool(_ABOUT_SETUP.search(heading))
            continue
        if _LINK_DEFINITION.match(raw):
            continue
        line = _EMPHASIS.sub("", _LINK.sub(r"\1", raw))
        if _NOT_REQUIRED.search(line):
            continue
        if not (_SAYS_REQUIRED.search(line) or (setup_section and _LIST_ITEM.match(line))):
            continue
        version = _lowest_pinned(line)
        if version is not None:
            found.append(version)
    return max(found) if found else None


def _heading(line: str, previous: str) -> str | None:
    """The title a line gives when it is a heading: `## Requirements`, or the text above `====`."""
    match = _HEADING.match(line)
    if match is None:
        return None
    if match["atx"] is not None:
        return match["atx"]
    return previous if previous.strip() else None


def _lowest_pinned(line: str) -> tuple[int, int] | None:
    """The lowest version the line pins torch to (`PyTorch 0.4 or 0.5`: 0.4); None for a lower bound."""
    versions = []
    for match in _NAMED.finditer(line):
        if _LOWER_BOUND_BEFORE.search(line[: match.start()]):
            continue
        rest = line[match.end() :]
        if _LOWER_BOUND_AFTER.match(rest):
            continue
        versions.append((int(match["major"]), int(match["minor"])))
        other = _OTHER_VERSION.match(rest)
        if other is not None and not _LOWER_BOUND_AFTER.match(rest[other.end() :]):
            versions.append((int(other["major"]), int(other["minor"])))
    return min(versions) if versions else None
