"""What a fix is: ruff's model, with the imports a fix needs or frees stated as intents.

A `Fix` is a titled set of text `Edit`s over the decoded source plus its `Applicability` (how much trust
applying it needs; it belongs to each fix, not to the rule, because one rule may be safe in one case and
unsafe in another). The imports are intents, as in LibCST's AddImports/RemoveImports: `AddImport` says "this
fix needs `import os`", `DropImportIfUnused` says "this fix removes a use of that imported name". The fixer
(`fix/apply.py`) resolves them after choosing which fixes to apply: a needed import is added once however many
fixes need it, and an import goes only when every one of its uses was rewritten in the same run.

Offsets are indices into the decoded text (a Python `str`), never bytes, so that every consumer (the fixer,
`--diff`, the JSON reporter, and the coming LSP and verifier) shares one coordinate system.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Applicability(enum.Enum):
    """How much trust applying a fix needs (ruff's three classes)."""

    SAFE = "safe"  # cannot change what the program computes; applied by --fix
    UNSAFE = "unsafe"  # may change numerics or behaviour; needs --unsafe-fixes
    DISPLAY_ONLY = "display-only"  # a suggestion; shown, never applied

    def allowed(self, unsafe_fixes: bool) -> bool:
        return self is Applicability.SAFE or (unsafe_fixes and self is Applicability.UNSAFE)


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` with `content`."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class AddImport:
    """The fix needs `line` (`import os` and a newline) at offset `at`, the end of the file's import block.

    Several fixes needing the same module share it: it is added once."""

    module: str
    at: int
    line: str

    def edit(self) -> Edit:
        return Edit(self.at, self.at, self.line)


@dataclass(frozen=True)
class DropImportIfUnused:
    """The fix rewrites one of the `uses` uses of `name`, bound by the import statement whose whole lines are
    `text[start:end]`: when fixes applied together rewrite all of them, the name leaves the import."""

    start: int
    end: int
    name: str
    uses: int


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: Applicability
    edits: tuple[Edit, ...]
    imports: tuple[AddImport, ...] = ()
    drops: tuple[DropImportIfUnused, ...] = ()

    def standalone_edits(self, text: str) -> list[Edit]:
        """The edits of this fix applied alone, in order: its own, the imports it needs, and an import
        removal only where this fix rewrites the last use (what JSON consumers apply)."""
        from torchlint.fix.imports import remove_bound_names

        edits = [*self.edits, *(needed.edit() for needed in self.imports)]
        for drop in self.drops:
            if drop.uses == 1:
                edits.append(
                    Edit(drop.start, drop.end, remove_bound_names(text[drop.start : drop.end], {drop.name}))
                )
        return sorted(edits, key=lambda e: (e.start, e.end))
