"""Applying fixes to a source text: pure, so that every caller shares it (the CLI's --fix and --diff today,
the Language Server and the verifier as they land).

`apply` takes the fixes in order of position and keeps each one whose edits do not overlap those already
kept; the rest are returned as skipped (a later pass, after re-checking, may apply them). Then the import
intents of the kept fixes are resolved: each needed module (`AddImport`) is added once, and an imported
name whose every use a kept fix rewrote (`DropImportIfUnused`) leaves its statement; names leaving one
`from ... import` line are removed together, so that they do not collide.

A fix is kept whole or not at all: the imports it needs are checked for overlaps with it and with the kept
edits, so a fix is never counted as applied while the import it needs was dropped. Only the removals are
optional: leaving an import that is no longer used never breaks the code.

Nothing here reads or writes files; `unified_diff` renders what `--diff` prints.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from dataclasses import dataclass

from torchlint.fix.imports import remove_bound_names
from torchlint.fix.model import DropImportIfUnused, Edit, Fix


@dataclass(frozen=True)
class Applied:
    text: str
    applied: tuple[int, ...]  # indices into the given fixes
    skipped: tuple[int, ...]


@dataclass(frozen=True)
class _Placed:
    """An edit about to be applied; `module` set for an added import line (shared, ordered by module)."""

    edit: Edit
    module: str | None = None


def apply(text: str, fixes: list[Fix]) -> Applied:
    order = sorted(range(len(fixes)), key=lambda i: _first_offset(fixes[i]))
    kept: list[_Placed] = []  # the kept fixes' own edits
    imports: dict[tuple[str, int], _Placed] = {}  # the imports the kept fixes need, once per module and place
    applied: list[int] = []
    skipped: list[int] = []
    drops: dict[tuple[int, int, str], list[DropImportIfUnused]] = defaultdict(list)
    for index in order:
        fix = fixes[index]
        own = [_Placed(edit) for edit in fix.edits]
        needed = {(i.module, i.at): _Placed(i.edit(), i.module) for i in fix.imports}
        needed = {place: edit for place, edit in needed.items() if place not in imports}
        taken = [*kept, *imports.values()]
        if (
            any(_overlaps(a, b) for i, a in enumerate(own) for b in own[i + 1 :])
            or any(_overlaps(e, k) for e in own for k in taken)
            or any(_overlaps(e, k) for e in needed.values() for k in (*taken, *own))
        ):
            skipped.append(index)
            continue
        kept.extend(own)
        imports.update(needed)
        applied.append(index)
        for drop in fix.drops:
            drops[(drop.start, drop.end, drop.name)].append(drop)
    kept.extend(imports.values())

    leaving: dict[tuple[int, int], set[str]] = defaultdict(set)
    for (start, end, name), carried in drops.items():
        if len(carried) >= carried[0].uses:
            leaving[(start, end)].add(name)
    for (start, end), names in sorted(leaving.items()):
        removal = _Placed(Edit(start, end, remove_bound_names(text[start:end], names)))
        if not any(_overlaps(removal, k) for k in kept):
            kept.append(removal)

    return Applied(_render(text, kept), tuple(sorted(applied)), tuple(sorted(skipped)))


def _render(text: str, edits: list[_Placed]) -> str:
    """The text with non-overlapping edits applied, in one pass.

    At one offset, insertions come before a replacement that starts there, and shared insertions (import
    lines) in the order of their keys, so that the output does not depend on the order of the fixes.
    """
    pieces: list[str] = []
    position = 0
    ordered = sorted(
        edits, key=lambda p: (p.edit.start, p.edit.end != p.edit.start, p.edit.end, p.module or "")
    )
    for edit in (placed.edit for placed in ordered):
        pieces.append(text[position : edit.start])
        pieces.append(edit.content)
        position = edit.end
    pieces.append(text[position:])
    return "".join(pieces)


def _first_offset(fix: Fix) -> int:
    return min((e.start for e in fix.edits), default=0)


def _overlaps(first: _Placed, second: _Placed) -> bool:
    """Whether two edits cannot both be applied: they share text, or both insert at one point.

    Two insertions at one point conflict (their order would be a guess) unless both are shared insertions
    (whole import lines, ordered by key). An insertion conflicts with a replacement only strictly inside it.
    """
    a, b = first.edit, second.edit
    if a.start == a.end and b.start == b.end:
        if a.start != b.start:
            return False
        if first.module is not None and second.module is not None:
            return first.module == second.module and a.content != b.content
        return True
    if a.start == a.end or b.start == b.end:
        point, other = (a, b) if a.start == a.end else (b, a)
        return other.start < point.start < other.end
    return a.start < b.end and b.start < a.end


def unified_diff(path: str, before: str, after: str) -> str:
    """What `--diff` prints for one file: a unified diff, marking a last line without a newline like git."""
    lines = difflib.unified_diff(_physical_lines(before), _physical_lines(after), path, path)
    out = []
    for line in lines:
        if line.endswith(("\n", "\r")):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _physical_lines(text: str) -> list[str]:
    """Lines as `patch` and `git apply` count them: `str.splitlines` also breaks at a form feed, U+2028
    and other separators, which would make the diff disagree with the file."""
    return _LINE.findall(text)
