"""Applying fixes to a source text: pure, so the CLI, `--diff`, the LSP and the verifier share it.

`apply` takes the fixes in order of position and keeps each one whose own edits do not overlap those already
kept; the rest are returned as skipped (a later pass, after re-checking, may apply them). Shared edits
(`Edit.key`) are applied once; an edit with a quorum only when enough of the kept fixes carry it, and edits
that remove imports are merged per statement, so that two names leaving one `from ... import` line do not
collide.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from torchlint.diagnostics import Edit, Fix
from torchlint.imports import remove_bound_names


@dataclass(frozen=True)
class Applied:
    text: str
    applied: tuple[int, ...]  # indices into the given fixes
    skipped: tuple[int, ...]


def apply(text: str, fixes: list[Fix]) -> Applied:
    order = sorted(range(len(fixes)), key=lambda i: _first_offset(fixes[i]))
    kept_edits: list[Edit] = []
    applied: list[int] = []
    skipped: list[int] = []
    shared: dict[str, list[Edit]] = defaultdict(list)
    for index in order:
        own = [e for e in fixes[index].edits if e.key is None]
        if any(_overlaps(e, k) for e in own for k in kept_edits):
            skipped.append(index)
            continue
        kept_edits.extend(own)
        applied.append(index)
        for edit in fixes[index].edits:
            if edit.key is not None:
                shared[edit.key].append(edit)

    drops: dict[tuple[int, int], set[str]] = defaultdict(set)
    for key, carried in shared.items():
        edit = carried[0]
        if len(carried) < edit.quorum:
            continue
        if key.startswith("drop:"):
            drops[(edit.start, edit.end)].add(key.split(":", 2)[2])
        elif not any(_overlaps(edit, k) for k in kept_edits):
            kept_edits.append(edit)
    for (start, end), names in drops.items():
        edit = Edit(start, end, remove_bound_names(text[start:end], names))
        if not any(_overlaps(edit, k) for k in kept_edits):
            kept_edits.append(edit)

    result = text
    # Right to left so offsets stay valid; an insertion before a replacement at the same offset.
    for edit in sorted(kept_edits, key=lambda e: (e.start, e.end), reverse=True):
        result = result[: edit.start] + edit.content + result[edit.end :]
    return Applied(result, tuple(sorted(applied)), tuple(sorted(skipped)))


def _first_offset(fix: Fix) -> int:
    return min((e.start for e in fix.edits if e.key is None), default=0)


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end or b.start == b.end:  # an insertion collides only strictly inside the other
        point, other = (a, b) if a.start == a.end else (b, a)
        if point.start == point.end and other.start == other.end:
            return point.start == other.start and point.content != other.content
        return other.start < point.start < other.end
    return a.start < b.end and b.start < a.end
