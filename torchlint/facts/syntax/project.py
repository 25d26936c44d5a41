"""What facts may ask about the rest of the project: the protocol the cross-file index implements.

Facts depend on this protocol, never on `torchlint.index` (an import contract enforces it), so the semantic
model can be built and tested for one module alone (`project=None`: every cross-file question is unknown).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import FunctionRecord
    from torchlint.facts.syntax.module import SourceModule


class ProjectIndex(Protocol):
    def module_file(self, importer: Path, dotted: str) -> Path | None:
        """The file a module name means when imported by `importer` (None: not in the project)."""
        ...

    def resolve_function(self, importer: Path, qualname: str) -> tuple[SourceModule, FunctionRecord] | None:
        """A module-level function of another project file, as `importer` names it."""
        ...

    def facts_for(self, path: Path, requester: Path | None = None) -> SourceModule | None:
        """Another file's module (None: unreadable or unparsable); `requester` depends on it from now on."""
        ...

    def importers_of(self, path: Path) -> list[Path]:
        """The project files that import `path` (the answer then depends on the project's file list)."""
        ...
