"""A project that answers from the file being checked, the project's layout and other files' import
statements, never from other files' code: the first look of the editor's two-pass check.

The Language Server answers a `didOpen` (and an edit) twice: first with the findings of the rules that need
nothing more of other files, within a fraction of a second, then with all of them once the cross-file
questions are answered. Which rules those are is not declared by them (a declaration would drift from the
code): the first look runs every rule against `OwnFileOnly`, which answers what the project answers from
the layout and the files' headers (which file a module name is, who imports this one, which files name a
word or derive a class of this one: their bytes and their import statements), and stops a rule that asks
about another file's code (its facts, or its export's scopes: what the full check spends seconds on). A
rule that finished asked only what the full check's project answers the same way, so its findings are the
full check's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchlint.index.project import Project


class NeedsOtherFiles(BaseException):
    """Raised where a check of one file asks about another file's code. A BaseException (as GeneratorExit
    is): it is control flow that no analysis's `except Exception` may turn into an answer, which would then
    differ from the full check's."""


class OwnFileOnly:
    """Stands in for the `Project` (the facts' `ProjectIndex`) in the first look. The questions in
    `_FROM_HEADERS` are the project's own answers; a class or function of another project file, and any
    other question, raises `NeedsOtherFiles`. Exports are not asked (`asks_exports`: their scopes are other
    files' code), as in a run over a whole tree: then every question is answered by building facts (here:
    stopped), with the same answers."""

    asks_exports = False

    def __init__(self, project: Project) -> None:
        self._project = project
        for name in _FROM_HEADERS:  # bound once: some are asked many times in a check
            setattr(self, name, getattr(project, name))

    def resolve_class(self, importer: Path, qualname: str) -> None:
        self._outside_the_project(importer, qualname)

    def resolve_function(self, importer: Path, qualname: str) -> None:
        self._outside_the_project(importer, qualname)

    def homes(self, importer: Path, qualname: str, kind: str) -> None:
        """Unknown, as the project answers where exports are not asked."""

    def _outside_the_project(self, importer: Path, qualname: str) -> None:
        """Nothing to resolve where `qualname`'s module is no file of the project (the project's answer,
        `torch.nn.Linear`); that file's facts otherwise."""
        module, _, name = qualname.rpartition(".")
        if module and name and not module.endswith("."):
            if self._project.module_file(importer, module) is not None:
                raise NeedsOtherFiles(qualname)

    def __getattr__(self, name: str) -> Any:
        raise NeedsOtherFiles(name)


# The project's questions answered from the layout, the files' bytes and their import statements.
_FROM_HEADERS = frozenset(
    {
        "module_file",
        "importers_of",
        "may_name",
        "named_anywhere",
        "mentions",
        "mentioned_anywhere",
        "may_derive",
        "scanned",
    }
)
