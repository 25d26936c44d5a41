"""What a run is asked to do, and what it found: shared by the run itself, its replay and the reporters."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchlint.diagnostics import Applicability, Diagnostic, LineIndex, Severity, fix_applies
from torchlint.positions import lines_of
from torchlint.workspace.settings import CliOverrides, Settings


@dataclass
class RunOptions:
    paths: list[Path]
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    overrides: CliOverrides = CliOverrides()  # --select, --ignore, --exclude, --config KEY=VALUE, ...
    config_file: Path | None = None
    isolated: bool = False  # read no configuration file
    force_exclude: bool = False
    jobs: int | None = None  # None: chosen by the amount of source (torchlint.api.choose_jobs)
    cache: bool = True
    cache_dir: Path | None = None  # None: `.torchlint_cache/` in each project root
    prefilter: bool = True
    add_noqa: bool = False  # suppress every finding with a noqa directive on its line instead of reporting it
    noqa_reason: str = ""  # `--add-noqa=REASON`: written after the codes of each new directive


@dataclass
class Outcome:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, LineIndex] = field(default_factory=dict)
    fixed: int = 0  # fixes applied (written, or shown with --diff)
    fixed_codes: dict[str, dict[str, int]] = field(default_factory=dict)  # per file: rule code -> fixes
    noqa_added: int = 0  # `--add-noqa`: suppressions written
    diffs: list[tuple[str, str, str]] = field(default_factory=list)  # (path, before, after)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_checked: int = 0
    files_fixed: list[str] = field(default_factory=list)  # written (or, with --diff, that would be)
    files_failed: list[str] = field(default_factory=list)  # left as they were because of an error
    files_unwritten: list[str] = field(default_factory=list)  # of those: fixed, but refused on writing
    fixable: int = 0  # remaining findings whose fix `--fix` would apply (with each file's settings)
    applicable: set[tuple[str, int, int, str]] = field(default_factory=set)  # those findings' fix_key
    hidden_fixes: int = 0  # remaining findings whose fix needs `--unsafe-fixes`
    blocking: int = 0  # remaining findings that set exit status 1 (not trade-offs, unless asked)
    trade_off_fixes: dict[str, int] = field(default_factory=dict)  # code -> fixes `--select CODE` would allow
    parsed: int = 0  # files that went through LibCST (phase 2)
    from_cache: int = 0  # files whose results came from the cache
    processes: int = 1  # the processes the files were checked in (the chosen --jobs)
    replayed: bool = False  # the whole outcome came from a recorded identical run (torchlint.cache.replay)
    observed: dict = field(default_factory=dict)  # a worker's file-system record (torchlint.cache.fs)
    exports: dict = field(default_factory=dict)  # a worker's new exports, by project root (Linter.handover)

    def add_findings(
        self,
        display: str,
        text: str,
        diagnostics: list[Diagnostic],
        unsafe: bool,
        settings: Settings | None = None,
        cells: tuple[int, ...] | None = None,
    ) -> None:
        """One file's remaining findings, with its text (for the reporters), its fix counts (what `--fix`
        would apply with the file's settings; a trade-off's fix only where its rule is selected by code)
        and how many set exit status 1 (a trade-off only with `exit-non-zero-on-info`). A notebook's
        (`cells`: its code cells' numbers) are located per cell, as it is shown."""
        explicit = settings.explicit_codes if settings is not None else frozenset()
        info_fails = settings is not None and settings.exit_non_zero_on_info
        fixing = [settings is None or settings.may_fix(d.code) for d in diagnostics]
        for diagnostic, may_fix in zip(diagnostics, fixing, strict=True):
            if diagnostic.severity is not Severity.INFO or info_fails:
                self.blocking += 1
            if diagnostic.fix is None or diagnostic.fix.applicability is Applicability.DISPLAY_ONLY:
                continue
            if not may_fix:
                continue  # `unfixable`: not counted anywhere, as ruff does
            if fix_applies(diagnostic, unsafe, settings):
                self.fixable += 1
                self.applicable.add(fix_key(diagnostic))
            elif diagnostic.severity is not Severity.INFO or diagnostic.code in explicit:
                self.hidden_fixes += 1  # `--unsafe-fixes` would apply it
            else:
                self.trade_off_fixes[diagnostic.code] = self.trade_off_fixes.get(diagnostic.code, 0) + 1
        if diagnostics:
            lines = lines_of(text, cells)
            if cells is not None:
                diagnostics = [lines.locate(d) for d in diagnostics]
            self.diagnostics.extend(diagnostics)
            self.sources[display] = lines

    def fix_applies(self, diagnostic: Diagnostic) -> bool:
        """Whether `--fix` would apply this remaining finding's fix, as counted above (the `full` format's
        `[*]` and fix diff): the reporters cannot know a file's settings."""
        return fix_key(diagnostic) in self.applicable

    def merge(self, other: Outcome) -> None:
        for name in (
            "diagnostics",
            "diffs",
            "errors",
            "warnings",
            "files_fixed",
            "files_failed",
            "files_unwritten",
        ):
            getattr(self, name).extend(getattr(other, name))
        for name in (
            "fixed",
            "noqa_added",
            "files_checked",
            "fixable",
            "hidden_fixes",
            "blocking",
            "parsed",
            "from_cache",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.sources.update(other.sources)
        self.applicable |= other.applicable
        self.fixed_codes.update(other.fixed_codes)
        for code, count in other.trade_off_fixes.items():
            self.trade_off_fixes[code] = self.trade_off_fixes.get(code, 0) + count
        self.observed.update(other.observed)


def fix_key(diagnostic: Diagnostic) -> tuple[str, int, int, str]:
    """A finding's identity within a run (its file, span and code), kept when outcomes merge and replay."""
    return (diagnostic.path, diagnostic.start, diagnostic.end, diagnostic.code)
