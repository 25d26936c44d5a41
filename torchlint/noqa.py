"""Suppression comments, as ruff reads them.

- `# noqa` on the first line of a finding suppresses every finding there; `# noqa: TL303, TL304` only those.
- `# torchlint: noqa` on a line of its own suppresses the whole file; `# torchlint: noqa: TL3` only the codes
  or prefixes listed.

Only real comments count (a `# noqa` inside a string does not); the tokenizer decides, and it only runs for
files that have findings and mention noqa at all.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from dataclasses import dataclass

from torchlint.diagnostics import Diagnostic, Severity
from torchlint.fix.model import Applicability, Edit, Fix
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


@functools.lru_cache(maxsize=4)
def _comments(text: str) -> tuple[tuple[int, str, bool], ...]:
    """(line, comment, whether the comment is alone on its line). Kept for the last few texts: the editor's
    first look and full check read the same buffer's (Python's tokenizer takes 13 ms on yolov5's
    `train.py`), and so do the unused-noqa check and the suppressions."""
    return tuple(_read_comments(text))


def _read_comments(text: str) -> list[tuple[int, str, bool]]:
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
    return _Lines(text).noqa_edit(line, [code])


def add_noqa(text: str, codes_by_line: dict[int, set[str]], reason: str = "") -> tuple[str, int]:
    """`--add-noqa[=REASON]`: `text` with each line of `codes_by_line` suppressing its codes (merged into the
    line's `# noqa: ...`, or a new one at its end), and how many lines were changed. Lines that cannot carry
    a comment (see `noqa_edit`) are left alone. The reason follows the codes, as ruff writes it
    (`# noqa: TL303 REASON`), wherever nothing follows them yet: a comment's own text is never changed."""
    lines = _Lines(text)
    edits = [lines.noqa_edit(line, sorted(codes), reason) for line, codes in sorted(codes_by_line.items())]
    kept = sorted((e for e in edits if e is not None), key=lambda e: e.start, reverse=True)
    for edit in kept:
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text, len(kept)


class _Lines:
    """One text's lines, comments and multi-line tokens, tokenized once for any number of edits."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.index = LineIndex(text)
        self.comments: dict[int, list[str]] = {}
        for number, comment, _ in _comments(text):
            self.comments.setdefault(number, []).append(comment)
        self.continued = _lines_ending_inside_a_token(text)

    def noqa_edit(self, line: int, codes: list[str], reason: str = "") -> Edit | None:
        lines = self.index
        if not 1 <= line <= len(lines.line_starts):
            return None
        source_line = lines.line_text(line)
        end = lines.line_starts[line - 1] + len(source_line)
        if source_line.endswith("\\") or line in self.continued:
            return None
        for comment in self.comments.get(line, ()):
            match = _LINE.search(comment)
            if match is None:
                continue
            present = _codes(match)
            missing = [c for c in codes if present is not ALL and not any(c.startswith(p) for p in present)]
            if not missing:
                return None
            at = lines.line_starts[line - 1] + source_line.rfind(comment) + match.end()
            said = comment[match.end() :].strip()  # the directive's own reason, or another comment: kept
            return Edit(at, at, "".join(f", {c}" for c in missing) + _reason("" if said else reason))
        return Edit(end, end, f"  # noqa: {', '.join(codes)}{_reason(reason)}")


def _reason(reason: str) -> str:
    """What follows the codes of a directive `--add-noqa=REASON` writes."""
    return f" {reason}" if reason else ""


def _lines_ending_inside_a_token(text: str) -> set[int]:
    """The lines a token (a triple-quoted or f-string) runs past the end of."""
    found: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.end[0] > token.start[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                found.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


# -- noqa hygiene (TL003) ------------------------------------------------------------------------------------

_TORCHLINT_CODE = re.compile(r"TL[0-9]+$")
_A_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_MAY_NAME_TORCHLINT = re.compile(r"noqa\s*:[^\n]*TL[0-9]", re.IGNORECASE)
HYGIENE_CODE, HYGIENE_NAME = "TL003", "unused-noqa"


def may_name_torchlint(text: str) -> bool:
    """The cheap test before tokenizing: could a `# noqa: ...` in `text` name a torchlint code?"""
    return _MAY_NAME_TORCHLINT.search(text) is not None


@dataclass(frozen=True)
class Directive:
    """A line's `# noqa: CODES`: where it starts and ends in the text, and each code with its offsets."""

    line: int
    start: int  # the `#`
    end: int  # after the last code
    codes: tuple[tuple[str, int, int], ...]  # (CODE upper-cased, start, end)
    starts_comment: bool  # the directive begins its comment (not one after another comment on the line)
    rest: str  # the comment's text after the directive


def directives(text: str) -> list[Directive]:
    """Every line-level `# noqa: CODES` (a bare `# noqa` has no codes to check: it is every tool's)."""
    lines = LineIndex(text)
    found = []
    for number, comment, _ in _comments(text):
        if _FILE.match(comment):
            continue
        match = _LINE.search(comment)
        if match is None or match.group("codes") is None:
            continue
        line_text = lines.line_text(number) if number <= len(lines.line_starts) else ""
        base = lines.line_starts[number - 1] + line_text.rfind(comment)
        codes = tuple(
            (code.group().upper(), base + code.start(), base + code.end())
            for code in _A_CODE.finditer(comment, match.start("codes"), match.end("codes"))
        )
        found.append(
            Directive(
                number,
                base + match.start(),
                base + match.end(),
                codes,
                match.start() == 0,
                comment[match.end() :],
            )
        )
    return found


def unused_noqa(
    path: str, text: str, fired: list[tuple[str, int]], enabled: set[str], known: list[str]
) -> list[Diagnostic]:
    """TL003 for each `# noqa: CODES` with torchlint codes that suppress nothing on their line: unused (no
    such finding there), non-enabled (the rule is off for this file) or unknown (no rule has the code). Codes
    of other tools (`E501`, `F401`) are theirs to judge and are never reported nor removed; nor is a bare
    `# noqa`, nor `TL003` itself. `fired`: (code, line) of every finding before suppression. The fix (safe)
    removes the reported codes, and the directive with them when nothing else is left in it."""
    fired_on: dict[int, set[str]] = {}
    for code, line in fired:
        fired_on.setdefault(line, set()).add(code)
    found = []
    for directive in directives(text):
        here = fired_on.get(directive.line, set())
        kinds: dict[str, list[str]] = {"unused": [], "non-enabled": [], "unknown": []}
        reported = []
        for code, start, end in directive.codes:
            if not _TORCHLINT_CODE.match(code) or code == HYGIENE_CODE:
                continue
            if any(c.startswith(code) for c in here):
                continue
            if not any(c.startswith(code) for c in known):
                kind = "unknown"
            elif not any(c.startswith(code) for c in enabled):
                kind = "non-enabled"
            else:
                kind = "unused"
            kinds[kind].append(code)
            reported.append((code, start, end))
        if not reported:
            continue
        detail = "; ".join(
            f"{kind}: {', '.join(f'`{code}`' for code in codes)}" for kind, codes in kinds.items() if codes
        )
        fix = Fix(_fix_title(reported), Applicability.SAFE, (_removal(text, directive, reported),))
        found.append(
            Diagnostic(
                HYGIENE_CODE,
                HYGIENE_NAME,
                f"Unused `noqa` directive ({detail})",
                Severity.WARNING,
                path,
                directive.start,
                directive.end,
                fix,
            )
        )
    return found


def _fix_title(reported: list[tuple[str, int, int]]) -> str:
    codes = ", ".join(f"`{code}`" for code, _, _ in reported)
    return f"Remove unused {codes} from the `noqa` directive"


def _removal(text: str, directive: Directive, reported: list[tuple[str, int, int]]) -> Edit:
    """The one edit that drops `reported` from `directive`: its other codes stay, in their order; with
    none left the directive goes (and the space before it), the comment's other text stays."""
    dropped = {start for _, start, _ in reported}
    kept = [code for code, start, _ in directive.codes if start not in dropped]
    first, last = directive.codes[0][1], directive.codes[-1][2]
    if kept:
        return Edit(first, last, ", ".join(kept))
    if directive.starts_comment and directive.rest.strip():
        return Edit(directive.start, directive.end, "#")  # `# noqa: TL304 - why` -> `# - why`
    start, end = directive.start, directive.end
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    if directive.starts_comment:
        end += len(directive.rest)  # only blanks follow
    return Edit(start, end, "")
