"""Code actions: what the light bulb offers on a torchlint diagnostic, and the editor's fix-all.

- a quick fix per diagnostic that has one: a safe fix, or an unsafe one titled "(unsafe)" when the user
  allowed unsafe fixes (client setting `unsafeFixes`, or `unsafe-fixes = true` in `[tool.torchlint]`);
  display-only fixes are never applied. Its edits are the fix's own standalone edits (what the JSON output
  carries), including the import it needs;
- `source.fixAll.torchlint`: every safe fix, to a fixpoint, by the same `Linter.fix_text` as `--fix`,
  sent as the one minimal edit between the old and the new text;
- "Disable TLxxx for this line": writes or extends the line's `# noqa: ...` comment.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from torchlint.diagnostics import Applicability, Diagnostic, Edit
from torchlint.lsp.convert import PositionMap, changed_span, text_edit, to_lsp
from torchlint.noqa import noqa_edit

FIX_ALL = "source.fixAll.torchlint"
FIX_ALL_TITLE = "torchlint: Fix all safe fixes"


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether an action of `kind` answers a request for `only` (a kind covers its sub-kinds)."""
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def offers_fix_all(diagnostics: list[Diagnostic], only: Sequence[str] | None) -> bool:
    """Whether the actions include the fix-all: something in the document has a safe fix, and it is wanted."""
    safe = any(d.fix is not None and d.fix.applicability is Applicability.SAFE for d in diagnostics)
    return safe and wanted(FIX_ALL, only)


def code_actions(
    uri: str,
    positions: PositionMap,
    diagnostics: list[Diagnostic],
    span: tuple[int, int],
    only: Sequence[str] | None,
    unsafe: bool,
    fixed_text: str | None,
    resolve: dict | None = None,
) -> list[types.CodeAction]:
    """The actions for the diagnostics that touch `span` (offsets), then the fix-all when
    `offers_fix_all`. The caller runs the fix-all (`fixed_text`) only then, and not at all with `resolve`
    (the client resolves actions): then the fix-all carries `resolve` as its data and gets its edit from
    `codeAction/resolve`, so that a light bulb on every cursor move does not run every fix."""
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix, only):
        start, end = span
        for diagnostic in diagnostics:
            if diagnostic.start <= end and start <= diagnostic.end:
                actions.extend(_quick_fixes(uri, positions, diagnostic, unsafe))
    if offers_fix_all(diagnostics, only):
        if resolve is not None:
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL, data=resolve))
        elif fixed_text is not None:
            edit = fix_all_edit(uri, positions, fixed_text)
            if edit is not None:
                actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL, edit=edit))
    return actions


def fix_all_edit(uri: str, positions: PositionMap, fixed: str) -> types.WorkspaceEdit | None:
    """The fix-all as one minimal edit (None when the fixes change nothing)."""
    edit = changed_span(positions.text, fixed)
    return _workspace_edit(uri, positions, [edit]) if edit is not None else None


def _quick_fixes(
    uri: str, positions: PositionMap, diagnostic: Diagnostic, unsafe: bool
) -> list[types.CodeAction]:
    found = []
    fix = diagnostic.fix
    if fix is not None and fix.applicability.allowed(unsafe):
        marked = " (unsafe)" if fix.applicability is Applicability.UNSAFE else ""
        found.append(
            types.CodeAction(
                title=f"{diagnostic.code}: {fix.title}{marked}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[to_lsp(diagnostic, positions)],
                is_preferred=fix.applicability is Applicability.SAFE,
                edit=_workspace_edit(uri, positions, fix.standalone_edits(positions.text)),
            )
        )
    noqa = noqa_edit(positions.text, diagnostic.location.line, diagnostic.code)
    if noqa is not None:
        found.append(
            types.CodeAction(
                title=f"Disable {diagnostic.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[to_lsp(diagnostic, positions)],
                edit=_workspace_edit(uri, positions, [noqa]),
            )
        )
    return found


def _workspace_edit(uri: str, positions: PositionMap, edits: list[Edit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={uri: [text_edit(edit, positions) for edit in edits]})
