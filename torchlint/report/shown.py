"""Text from the project shown on a terminal or in a CI log: file names and source lines are data, never
commands.

A file name or a source line can hold anything: bytes that are not UTF-8 (kept by Python as surrogates,
which a strict stream refuses to write), a carriage return or a newline that starts a new line of output,
ANSI escapes that move the cursor and erase lines, and on a line of its own `::error ...::`, which GitHub
Actions runs as a workflow command. Shown text escapes control characters and undecodable bytes as `\\xNN`,
and a line of output never starts with `::` (a path gets `./` in front).
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """`text` with control characters and undecodable bytes escaped (tabs kept)."""
    return _UNSAFE.sub(_escape, text)


def shown_path(path: str) -> str:
    """A file name as the first thing on a line of output."""
    path = shown(path)
    return f"./{path}" if path.startswith(":") else path


def info_label(severity) -> str:
    """` (info)` after the code of a trade-off (`Severity.INFO`, TL401): it is advice to weigh, and it
    never fails a run unless asked (`exit-non-zero-on-info`); "" for the others."""
    return " (info)" if severity.value == "info" else ""
