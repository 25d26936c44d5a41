"""Suppression comments, as ruff reads them.

- `# noqa` on the first line of a finding suppresses every finding there; `# noqa: TL303, TL304` only those.
- `# torchlint: noqa` on a line of its own suppresses the whole file; `# torchlint: noqa: TL3` only the codes
  or prefixes listed.

Only real comments count (a `# noqa` inside a string does not); the tokenizer decides, and it only runs for
files that have findings and mention noqa at all.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from torchlint.fix.model import Edit
from torchlint.positions import LineIndex, split_lines

_CODES = r"[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*"
_LINE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE = re.compile(rf"^#\s*torchlint:\s*noqa(?::\s*(?P<codes>{_CODES}))?\s*$", re.IGNORECASE)
ALL = None  # a suppression without codes


def _codes(match: re.Match[str]) -> frozenset[str] | None:
    codes = match.group("codes")
    return frozenset(re.split(r"[\s,]+", codes.strip().upper())) if codes else ALL


@dataclass
class Suppressions:
    file_codes: frozenset[str] | None | bool  # False: none; None: everything; a set: these codes/prefixes
    line_codes: dict[int, frozenset[str] | None]

    def suppresses(self, code: str, line: int) -> bool:
        if self.file_codes is None or (
            self.file_codes and any(code.startswith(c) for c in self.file_codes)  # type: ignore[union-attr]
        ):
            return True
        if line not in self.line_codes:
            return False
        codes = self.line_codes[line]
        return codes is ALL or any(code.startswith(c) for c in codes)


NONE = Suppressions(False, {})


def read_suppressions(text: str) -> Suppressions:
    if "noqa" not in text and "NOQA" not in text.upper():
        return NONE
    file_codes: frozenset[str] | None | bool = False
    line_codes: dict[int, frozenset[str] | None] = {}
    for line, comment, own_line in _comments(text):
        whole_file = _FILE.match(comment) if own_line else None
        if whole_file:
            codes = _codes(whole_file)
            if codes is ALL or file_codes is None:
                file_codes = None
            else:
                file_codes = (file_codes or frozenset()) | codes  # type: ignore[operator]
            continue
        match = _LINE.search(comment)
        if match:
            codes = _codes(match)
            previous = line_codes.get(line, frozenset())
            line_codes[line] = ALL if codes is ALL or previous is ALL else previous | codes
    return Suppressions(file_codes, line_codes)


def _comments(text: str) -> list[tuple[int, str, bool]]:
    """(line, comment, whether the comment is alone on its line)."""
    try:
        # Universal newlines: a lone "\r" ends a line, as it does for Python and for LibCST's positions.
        tokens = tokenize.generate_tokens(io.StringIO(text, newline=None).readline)
        return [
            (tok.start[0], tok.string, not tok.line[: tok.start[1]].strip())
            for tok in tokens
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # An unfinished file: fall back to comment-looking text, line by line.
        found = []
        for number, line in enumerate(split_lines(text), start=1):
            index = line.find("#")
            if index != -1:
                found.append((number, line[index:], not line[:index].strip()))
        return found


def noqa_edit(text: str, line: int, code: str) -> Edit | None:
    """The edit that makes `line` (1-based) suppress `code`, for the editor's "disable for this line".

    A `# noqa: CODES` comment on the line gets `, CODE` after its codes; a line without one gets
    `  # noqa: CODE` at its end (after any other comment, where the reader above still finds it). None when
    the line suppresses `code` already, or when no comment can go at its end: the line continues with a
    backslash, or its end is inside a string that spans lines.
    """
    lines = LineIndex(text)
    if not 1 <= line <= len(lines.line_starts):
        return None
    source_line = lines.line_text(line)
    end = lines.line_starts[line - 1] + len(source_line)
    if source_line.endswith("\\") or _ends_inside_a_token(text, line):
        return None
    for number, comment, _ in _comments(text):
        if number != line:
            continue
        match = _LINE.search(comment)
        if match is None:
            continue
        codes = _codes(match)
        if codes is ALL or any(code.startswith(c) for c in codes):
            return None
        at = lines.line_starts[line - 1] + source_line.rfind(comment) + match.end()
        return Edit(at, at, f", {code}")
    return Edit(end, end, f"  # noqa: {code}")


def _ends_inside_a_token(text: str, line: int) -> bool:
    """Whether a token (a triple-quoted or f-string) runs past the end of `line`."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.start[0] > line:
                return False
            if token.start[0] <= line < token.end[0]:
                return True
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return False
