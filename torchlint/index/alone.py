"""A project that lets a check read only its own file: the first look of the editor's two-pass check.

The Language Server answers a `didOpen` (and an edit) twice: first with the findings of the rules that need
no other file, within a fraction of a second, then with all of them once the cross-file questions are
answered. Which rules need no other file is not declared by them (a declaration would drift from the
code): the first look runs every rule against `OwnFileOnly`, and a rule whose check asks anything of the
project that another file's content answers (its facts, its exports, who imports this one) is stopped there
and left for the full check. A rule that finished never asked, so its findings are the ones the full check
gives: the same text, settings and parse, and nothing else read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class NeedsOtherFiles(BaseException):
    """Raised where a check of one file asks the project about other files. A BaseException (as
    GeneratorExit is): it is control flow that no analysis's `except Exception` may turn into an answer,
    which would then differ from the full check's."""


class OwnFileOnly:
    """Stands in for the `Project` (the facts' `ProjectIndex`) while one file is checked on its own.

    It answers what the project's layout answers, no file's content: which file a module name is
    (`module_file`, the real project's), so that a name imported from outside the project (`torch.nn`,
    `numpy`) resolves to nothing here as it does in the full check. Every other question raises
    `NeedsOtherFiles`. Exports are not asked (`asks_exports`): they are other files' content, and where they
    are not asked every question is answered by building facts, with the same answers."""

    asks_exports = False

    def __init__(self, module_file: Callable[[Path, str], Path | None]) -> None:
        self.module_file = module_file

    def resolve_class(self, importer: Path, qualname: str) -> None:
        self._outside_the_project(importer, qualname)

    def resolve_function(self, importer: Path, qualname: str) -> None:
        self._outside_the_project(importer, qualname)

    def homes(self, importer: Path, qualname: str, kind: str) -> None:
        """Unknown, as the project answers where exports are not asked."""

    def _outside_the_project(self, importer: Path, qualname: str) -> None:
        """Nothing to resolve where `qualname`'s module is no file of the project (the project's answer);
        another file's facts otherwise."""
        module, _, name = qualname.rpartition(".")
        if module and name and not module.endswith(".") and self.module_file(importer, module) is not None:
            raise NeedsOtherFiles(qualname)

    def __getattr__(self, name: str) -> NoReturn:
        raise NeedsOtherFiles(name)
