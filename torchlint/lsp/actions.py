"""Code actions: what the light bulb offers on a torchlint diagnostic, and the editor's fix-all.

- a quick fix per diagnostic that has one: a safe fix, or an unsafe one titled "(unsafe)" when the user
  allowed unsafe fixes (client setting `unsafeFixes`, or `unsafe-fixes = true` in `[tool.torchlint]`);
  display-only fixes are never applied. Its edits are the fix's own standalone edits (what the JSON output
  carries), including the import it needs;
- `source.fixAll.torchlint`: every safe fix, to a fixpoint, by the same `Linter.fix_text` as `--fix`,
  sent as the one minimal edit between the old and the new text;
- "Disable TLxxx for this line": writes or extends the line's `# noqa: ...` comment.

In a notebook's cell the same, computed on the joined cells and sent as edits of the cells they change
(`views.NotebookView`); the fix-all there is `notebook.source.fixAll.torchlint`, for the whole notebook.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from torchlint.diagnostics import Applicability, Diagnostic
from torchlint.lsp.views import View
from torchlint.noqa import noqa_edit

FIX_ALL = "source.fixAll.torchlint"
# A notebook's fix-all (ruff's `notebook.source.fixAll.ruff`): what VS Code's `notebook.codeActionsOnSave`
# asks once per notebook. `source.fixAll` is asked of every cell in turn, and one edit of all the cells
# applied once per cell would repeat the fixes, so a cell is never offered it.
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.torchlint"
FIX_ALL_TITLE = "torchlint: Fix all safe fixes"


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether an action of `kind` answers a request for `only` (a kind covers its sub-kinds)."""
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def fix_all_kind(view: View) -> str:
    return NOTEBOOK_FIX_ALL if view.is_notebook else FIX_ALL


def offers_fix_all(diagnostics: list[Diagnostic], only: Sequence[str] | None, kind: str = FIX_ALL) -> bool:
    """Whether the actions include the fix-all of `kind`: something in the document has a safe fix, and
    it is wanted."""
    safe = any(d.fix is not None and d.fix.applicability is Applicability.SAFE for d in diagnostics)
    return safe and wanted(kind, only)


def code_actions(
    view: View,
    diagnostics: list[Diagnostic],
    span: tuple[int, int],
    only: Sequence[str] | None,
    unsafe: bool,
    fixed_text: str | None,
    resolve: dict | None = None,
) -> list[types.CodeAction]:
    """The actions for the diagnostics that touch `span` (offsets of the checked text), then the fix-all
    when `offers_fix_all`. The caller runs the fix-all (`fixed_text`) only then, and not at all with
    `resolve` (the client resolves actions): then the fix-all carries `resolve` as its data and gets its
    edit from `codeAction/resolve`, so that a light bulb on every cursor move does not run every fix."""
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix, only):
        start, end = span
        for diagnostic in diagnostics:
            if diagnostic.start <= end and start <= diagnostic.end:
                actions.extend(_quick_fixes(view, diagnostic, unsafe))
    kind = fix_all_kind(view)
    if offers_fix_all(diagnostics, only, kind):
        if resolve is not None:
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=kind, data=resolve))
        elif fixed_text is not None:
            edit = view.rewrite(fixed_text)
            if edit is not None:
                actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=kind, edit=edit))
    return actions


def _quick_fixes(view: View, diagnostic: Diagnostic, unsafe: bool) -> list[types.CodeAction]:
    found = []
    fix = diagnostic.fix
    edit = None
    if fix is not None and fix.applicability.allowed(unsafe):
        edit = view.edit(fix.standalone_edits(view.text))
    if fix is not None and edit is not None:
        marked = " (unsafe)" if fix.applicability is Applicability.UNSAFE else ""
        found.append(
            types.CodeAction(
                title=f"{diagnostic.code}: {fix.title}{marked}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[view.diagnostic(diagnostic)],
                is_preferred=fix.applicability is Applicability.SAFE,
                edit=edit,
            )
        )
    noqa = noqa_edit(view.text, diagnostic.location.line, diagnostic.code)
    edit = view.edit([noqa]) if noqa is not None else None
    if edit is not None:
        found.append(
            types.CodeAction(
                title=f"Disable {diagnostic.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[view.diagnostic(diagnostic)],
                edit=edit,
            )
        )
    return found
