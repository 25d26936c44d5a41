"""The patched versions of a script's project, computed in memory with torchlint's own fixer.

The files considered are the script and the project modules it imports, directly or through each other
(`project_files`): a fix in a file the run never imports would measure nothing. Each file's
findings come from `Linter.fix_text` (with the project's cross-file facts); a fix is applied only when the
selection and `--unsafe-fixes` allow it (each file's settings, as for `torchlint --fix`).

- `all`: every allowed fix, with the fixer's fixpoint (`Linter.fix_text`), per file;
- `--each`: one variant per finding with an allowed fix (that fix alone, `fix.apply.apply`), plus `all`.

Nothing is written: a variant is {absolute path: patched text}, served to the run by the bootstrap.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint.diagnostics import Diagnostic, fix_applies
from torchlint.fix.apply import apply
from torchlint.fix.model import Applicability
from torchlint.linter import MAX_FIX_PASSES, InternalError, Linter, _compiles
from torchlint.workspace.discovery import SettingsResolver, Target, discover
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.roots import project_root
from torchlint.workspace.settings import CliOverrides, ConfigError
from torchlint.workspace.source import SourceError, SourceFile


class PatchError(Exception):
    """The fixes could not be computed (bad configuration, unknown code, a crashing rule)."""


@dataclass(frozen=True)
class AppliedFix:
    code: str
    name: str
    title: str
    applicability: str  # "safe" / "unsafe"
    path: str  # absolute
    line: int
    column: int

    def label(self, cwd: Path) -> str:
        return f"{self.code} {shown(self.path, cwd)}:{self.line}"

    def to_json(self, cwd: Path) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "title": self.title,
            "applicability": self.applicability,
            "filename": shown(self.path, cwd),
            "location": {"row": self.line, "column": self.column},
        }


@dataclass
class Variant:
    """One version of the project to run: `original` (no patch), one fix, all of them, or (`--tune`) the
    original with one loader's options changed."""

    name: str  # "original", "all", or the fix's label
    kind: str  # "original" | "each" | "all"
    fixes: list[AppliedFix] = field(default_factory=list)
    patched: dict[str, str] = field(default_factory=dict)  # absolute path -> text
    originals: dict[str, str] = field(default_factory=dict)  # absolute path -> the text before (diffs)
    # `--tune`: the DataLoader options set at run time for the loader built at a line,
    # {"filename", "line", "options": {"num_workers": 4}} (the files are not patched)
    loader_override: dict[str, Any] | None = None

    @property
    def unsafe(self) -> bool:
        return any(fix.applicability == "unsafe" for fix in self.fixes)

    @property
    def codes(self) -> list[str]:
        return [fix.code for fix in self.fixes]

    @property
    def applicabilities(self) -> list[str]:
        return [fix.applicability for fix in self.fixes]


@dataclass
class Plan:
    variants: list[Variant]  # original first
    findings: list[tuple[Diagnostic, str]]  # every static finding, with its absolute path
    warnings: list[str] = field(default_factory=list)


def shown(path: str, cwd: Path | None = None) -> str:
    """An absolute path as the report shows it: relative to the working folder when below it."""
    cwd = Path.cwd() if cwd is None else cwd
    try:
        return Path(path).relative_to(cwd).as_posix()
    except ValueError:
        return path


def _applied(diagnostic: Diagnostic, path: str) -> AppliedFix:
    assert diagnostic.fix is not None
    return AppliedFix(
        diagnostic.code,
        diagnostic.name,
        diagnostic.fix.title,
        diagnostic.fix.applicability.value,
        path,
        diagnostic.location.line,
        diagnostic.location.column,
    )


def project_files(script: Path, fs: FileSystem | None = None, pythonpath: str | None = None) -> set[Path]:
    """The script and the project modules it imports, directly or through each other.

    Absolute imports resolve from the folders the run will search, in its order (`import_roots`): the
    script's folder (its `sys.path[0]`), then `PYTHONPATH`, then the project's root (for a package beside
    the script's folder that is installed in editable mode or put on `sys.path` by the script itself:
    `projects/adder/adder.py` importing `mingpt`); relative ones from the importing module's package. What
    resolves nowhere among them (torch, installed packages) is not the project's and is never patched, and
    neither is what resolves outside the project's folder (`project_folder`): a library reached through
    `PYTHONPATH` is not the user's to patch, nor to lint (one such run linted 394 library files first).
    Asked of `fs` (the run's FileSystem)."""
    fs = fs or FileSystem()
    roots = import_roots(script, fs, pythonpath)
    project = project_folder(script, fs)
    found: set[Path] = set()
    pending = [script]
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found.add(path)
        try:
            tree = ast.parse(fs.read_bytes(path), str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            names: list[tuple[list[Path], list[str]]] = []
            if isinstance(node, ast.Import):
                names = [(roots, alias.name.split(".")) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                bases = roots
                if node.level:
                    base = path.parent
                    for _ in range(node.level - 1):
                        base = base.parent
                    bases = [base]
                parts = node.module.split(".") if node.module else []
                names = [(bases, parts)] + [(bases, [*parts, alias.name]) for alias in node.names]
            for bases, parts in names:
                for candidate in _first_module_files(bases, parts, fs):
                    if candidate not in found and Path(os.path.realpath(candidate)).is_relative_to(project):
                        pending.append(candidate)
    return found


def project_folder(script: Path, fs: FileSystem | None = None) -> Path:
    """The folder whose files verify may patch and `--keep` may write: the script's project root, or its
    own folder when it lies outside that (a script verified from elsewhere)."""
    script = Path(os.path.realpath(script))
    root = project_root(script.parent, fs or FileSystem())
    return root if script.is_relative_to(root) else script.parent


def import_roots(script: Path, fs: FileSystem, pythonpath: str | None = None) -> list[Path]:
    """The project folders an absolute import of the run may be found in, in the order it searches them."""
    roots = [script.parent]
    entries = os.environ.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    for entry in entries.split(os.pathsep):
        folder = Path(entry or ".").resolve()
        if entry and fs.is_dir(folder) and folder not in roots and not _installed(folder):
            roots.append(folder)
    project = project_root(script.parent, fs)
    if script.is_relative_to(project) and project not in roots:
        roots.append(project)
    return roots


def _installed(folder: Path) -> bool:
    """A folder of installed packages (a venv's site-packages), never the project's to patch."""
    return any(part in ("site-packages", "dist-packages") for part in folder.parts)


def _first_module_files(bases: list[Path], parts: list[str], fs: FileSystem) -> list[Path]:
    """The files of the first of `bases` where `parts` resolves, as the import system's first hit."""
    for base in bases:
        files = _module_files(base, parts, fs)
        if files:
            return files
    return []


def _module_files(base: Path, parts: list[str], fs: FileSystem) -> list[Path]:
    """The files importing `parts` from `base` runs: each package's `__init__.py` on the way, the module."""
    files = []
    folder = base
    for index, part in enumerate(parts):
        if not part:
            continue
        module = folder / f"{part}.py"
        package = folder / part / "__init__.py"
        if fs.is_file(package):
            files.append(package.resolve())
        elif fs.is_file(module) and index == len(parts) - 1:
            files.append(module.resolve())
            break
        elif not fs.is_dir(folder / part):
            break
        folder = folder / part
    return files


def _applied_by_passes(
    linter: Linter, target: Target, text: str, first: list[Diagnostic], unsafe: bool, path: str
) -> list[AppliedFix]:
    """The fixes the fixer's passes applied, pass by pass as `Linter.fix_text` applies them (overlapping
    fixes wait for a later pass; some only apply once another has, such as TL203's `persistent_workers`
    after TL201's workers), each located in the text of its pass."""
    found: list[AppliedFix] = []
    diagnostics = first
    for _ in range(MAX_FIX_PASSES):
        applied = apply(text, [d.fix for d in diagnostics if d.fix is not None])
        if applied.text == text:
            break
        found.extend(_applied(diagnostics[i], path) for i in applied.applied)
        text = applied.text
        diagnostics = [
            d
            for d in linter.check_text(target.display, text, target.settings)
            if fix_applies(d, unsafe, target.settings)
        ]
        if not diagnostics:
            break
    return found


def plan(
    script: Path,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    unsafe_fixes: bool = False,
    each: bool = False,
    config_file: Path | None = None,
    *,
    every_single: bool = False,
) -> Plan:
    """The variants to run for `script`: the original, then (with `each`) one per fix, then all fixes.

    A single fix alone is left out when it is the only one (`all` measures it), unless `every_single`
    (`verify --keep` decides on the fixes measured alone)."""
    linter = Linter()
    codes = list(linter.rule_classes)
    options_by_rule = {code: rule.options for code, rule in linter.rule_classes.items()}
    overrides = CliOverrides(tuple(select), (), tuple(ignore), unsafe_fixes)
    script = script.resolve()
    try:
        overrides.validate(codes)
        resolver = SettingsResolver(codes, options_by_rule, config_file, overrides, fs=linter.fs)
        targets = discover(sorted(project_files(script, linter.fs)), resolver, force_exclude=False)
    except ConfigError as error:
        raise PatchError(str(error)) from error

    result = Plan([Variant("original", "original")], [])
    everything = Variant("all", "all")
    singles: list[Variant] = []
    for target in targets:
        path = str(target.path.resolve())
        try:
            text = SourceFile.read(target.path, linter.fs).text
        except SourceError:
            continue
        unsafe = unsafe_fixes or target.settings.unsafe_fixes
        try:
            fixed = linter.fix_text(target.display, text, target.settings, unsafe)
        except InternalError as error:
            result.warnings.append(f"{target.display}: not patched: {error}")
            continue
        result.warnings.extend(fixed.warnings)
        result.findings.extend((diagnostic, path) for diagnostic in fixed.initial)
        allowed = [
            d
            for d in fixed.initial
            if d.fix is not None and d.fix.applicability is not Applicability.DISPLAY_ONLY
            if fix_applies(d, unsafe, target.settings)
        ]
        if not allowed or fixed.text == text:
            continue
        everything.patched[path] = fixed.text
        everything.originals[path] = text
        everything.fixes.extend(_applied_by_passes(linter, target, text, allowed, unsafe, path))
        if not each:
            continue
        for diagnostic in allowed:
            assert diagnostic.fix is not None
            alone = apply(text, [diagnostic.fix]).text
            if alone == text or not _compiles(alone, target.display):
                result.warnings.append(
                    f"{target.display}:{diagnostic.location.line}: {diagnostic.code}'s fix alone "
                    "does not apply cleanly; it is measured only with the others"
                )
                continue
            singles.append(Variant("", "each", [_applied(diagnostic, path)], {path: alone}, {path: text}))
    for single in singles:
        single.name = single.fixes[0].label(Path.cwd())
    if len(singles) > 1 or (singles and (every_single or not everything.patched)):
        result.variants.extend(singles)
    if everything.patched:
        result.variants.append(everything)
    return result
