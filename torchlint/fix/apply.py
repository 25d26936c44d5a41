"""Applying fixes to a source text: pure, so the CLI, `--diff`, the LSP and the verifier share it.

`apply` takes the fixes in order of position and keeps each one whose edits do not overlap those already
kept; the rest are returned as skipped (a later pass, after re-checking, may apply them). Shared edits
(`Edit.key`) are applied once; an edit with a quorum only when enough of the kept fixes carry it, and edits
that remove imports are merged per statement, so that two names leaving one `from ... import` line do not
collide.

A fix is kept whole or not at all: the shared edits it needs (the `import torch` its rewrite relies on) are
checked for overlaps with it, so a fix is never counted as applied while the import it needs was dropped.
Only the quorum edits (removing an import once every use was rewritten) are optional: leaving an import that
is no longer used never breaks the code.

Nothing here reads or writes files; `unified_diff` renders what `--diff` prints.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass

from torchlint.diagnostics import Edit, Fix
from torchlint.fix.imports import remove_bound_names


@dataclass(frozen=True)
class Applied:
    text: str
    applied: tuple[int, ...]  # indices into the given fixes
    skipped: tuple[int, ...]


def apply(text: str, fixes: list[Fix]) -> Applied:
    order = sorted(range(len(fixes)), key=lambda i: _first_offset(fixes[i]))
    kept_edits: list[Edit] = []  # the kept fixes' own edits
    kept_needed: dict[str, Edit] = {}  # shared edits the kept fixes need (imports to add), once per key
    applied: list[int] = []
    skipped: list[int] = []
    optional: dict[str, list[Edit]] = defaultdict(list)  # quorum edits, by key, one per kept fix
    for index in order:
        edits = fixes[index].edits
        own = [e for e in edits if e.key is None]
        needed = {e.key: e for e in edits if _is_needed(e) and e.key not in kept_needed}
        taken = [*kept_edits, *kept_needed.values()]
        if (
            any(_overlaps(a, b) for i, a in enumerate(own) for b in own[i + 1 :])
            or any(_overlaps(e, k) for e in own for k in taken)
            or any(_overlaps(e, k) for e in needed.values() for k in (*taken, *own))
        ):
            skipped.append(index)
            continue
        kept_edits.extend(own)
        kept_needed.update(needed)  # type: ignore[arg-type]
        applied.append(index)
        for edit in edits:
            if edit.key is not None and not _is_needed(edit):
                optional[edit.key].append(edit)
    kept_edits.extend(kept_needed.values())

    drops: dict[tuple[int, int], set[str]] = defaultdict(set)
    for key, carried in optional.items():
        edit = carried[0]
        if len(carried) < edit.quorum:
            continue
        if key.startswith("drop:"):
            drops[(edit.start, edit.end)].add(key.split(":", 2)[2])
        elif not any(_overlaps(edit, k) for k in kept_edits):
            kept_edits.append(edit)
    for (start, end), names in sorted(drops.items()):
        edit = Edit(start, end, remove_bound_names(text[start:end], names))
        if not any(_overlaps(edit, k) for k in kept_edits):
            kept_edits.append(edit)

    return Applied(_render(text, kept_edits), tuple(sorted(applied)), tuple(sorted(skipped)))


def _is_needed(edit: Edit) -> bool:
    """A shared edit its fix cannot do without (adding an import), as opposed to an optional clean-up."""
    return edit.key is not None and edit.quorum <= 1 and not edit.key.startswith("drop:")


def _render(text: str, edits: list[Edit]) -> str:
    """The text with non-overlapping edits applied, in one pass.

    At one offset, insertions come before a replacement that starts there, and shared insertions (import
    lines) in the order of their keys, so that the output does not depend on the order of the fixes.
    """
    pieces: list[str] = []
    position = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end != e.start, e.end, e.key or "")):
        pieces.append(text[position : edit.start])
        pieces.append(edit.content)
        position = edit.end
    pieces.append(text[position:])
    return "".join(pieces)


def _first_offset(fix: Fix) -> int:
    return min((e.start for e in fix.edits if e.key is None), default=0)


def _overlaps(a: Edit, b: Edit) -> bool:
    """Whether two edits cannot both be applied: they share text, or both insert at one point.

    Two insertions at one point conflict (their order would be a guess) unless both are shared insertions
    (whole import lines, ordered by key). An insertion conflicts with a replacement only strictly inside it.
    """
    if a.start == a.end and b.start == b.end:
        if a.start != b.start:
            return False
        if a.key is not None and b.key is not None:
            return a.key == b.key and a.content != b.content
        return True
    if a.start == a.end or b.start == b.end:
        point, other = (a, b) if a.start == a.end else (b, a)
        return other.start < point.start < other.end
    return a.start < b.end and b.start < a.end


def unified_diff(path: str, before: str, after: str) -> str:
    """What `--diff` prints for one file: a unified diff, marking a last line without a newline like git."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), path, path
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
