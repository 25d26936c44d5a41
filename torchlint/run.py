"""A whole run over paths: discover, check (and fix) every file, collect what the reporters need.

Failures are per file: an unreadable file becomes a TL002 finding; a crash in a rule, a refused fix or a
refused write an error naming the file (exit 2), which is then left as it was; the other files are still
checked and fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchlint.config import ConfigError, enabled_codes
from torchlint.diagnostics import Applicability, Diagnostic, LineIndex
from torchlint.files import MissingPath, SettingsResolver, Target, discover
from torchlint.linter import InternalError, Linter, io_error
from torchlint.source import SourceError, SourceFile
from torchlint.writing import WriteRefused


@dataclass
class RunOptions:
    paths: list[Path]
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    cli_settings: dict = field(default_factory=dict)
    config_file: Path | None = None
    force_exclude: bool = False


@dataclass
class Outcome:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, LineIndex] = field(default_factory=dict)
    fixed: int = 0  # fixes applied (written, or shown with --diff)
    diffs: list[tuple[str, str, str]] = field(default_factory=list)  # (path, before, after)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_checked: int = 0
    files_fixed: list[str] = field(default_factory=list)  # written (or, with --diff, that would be)
    files_failed: list[str] = field(default_factory=list)  # left as they were because of an error
    files_unwritten: list[str] = field(default_factory=list)  # of those: fixed, but refused on writing
    fixable: int = 0  # remaining findings whose fix `--fix` would apply (with each file's settings)
    hidden_fixes: int = 0  # remaining findings whose fix needs `--unsafe-fixes`


def run(options: RunOptions, linter: Linter | None = None) -> Outcome:
    outcome = Outcome()
    linter = linter or Linter()
    codes = list(linter.rule_classes)
    options_by_rule = {code: rule.options for code, rule in linter.rule_classes.items()}
    try:
        from torchlint.config import validate_selectors

        for key in ("select", "extend_select", "ignore"):
            validate_selectors(options.cli_settings.get(key) or [], codes, f"--{key.replace('_', '-')}")
        resolver = SettingsResolver(codes, options_by_rule, options.config_file, options.cli_settings)
        targets = discover(options.paths, resolver, options.force_exclude)
    except ConfigError as error:
        outcome.errors.append(str(error))
        return outcome
    except MissingPath as missing:
        outcome.errors.append(f"{missing}: no such file or directory")
        return outcome

    for target in targets:
        outcome.files_checked += 1
        settings = target.settings
        try:
            source = SourceFile.read(target.path)
        except SourceError as error:
            if "TL002" in enabled_codes(settings, ["TL002"]):
                diagnostic = io_error(target.display, f"{target.display}: {error}")
                LineIndex("").locate(diagnostic)
                outcome.diagnostics.append(diagnostic)
            continue
        unsafe = options.unsafe_fixes or settings.unsafe_fixes
        try:
            if options.fix or options.diff:
                text, diagnostics = _fix_one(linter, target, source, options, unsafe, outcome)
            else:
                text = source.text
                diagnostics = linter.check_text(target.display, text, settings)
        except InternalError as error:
            outcome.errors.append(f"internal error: {error}")
            outcome.files_failed.append(target.display)
            continue
        except Exception as error:  # noqa: BLE001 - one file failing must not stop the others
            outcome.errors.append(f"internal error: {target.display}: {error!r}")
            outcome.files_failed.append(target.display)
            continue
        for diagnostic in diagnostics:
            if diagnostic.fix is None or diagnostic.fix.applicability is Applicability.DISPLAY_ONLY:
                continue
            if diagnostic.fix.applicability.allowed(unsafe):
                outcome.fixable += 1
            else:
                outcome.hidden_fixes += 1
        if diagnostics:
            outcome.diagnostics.extend(diagnostics)
            outcome.sources[target.display] = LineIndex(text)
    outcome.diagnostics.sort(key=Diagnostic.sort_key)
    return outcome


def _fix_one(
    linter: Linter,
    target: Target,
    source: SourceFile,
    options: RunOptions,
    unsafe: bool,
    outcome: Outcome,
) -> tuple[str, list[Diagnostic]]:
    """Fix one file (write it, or record its diff); the text and the findings to report for it.

    A refused result (InternalError from the fixer) or a refused write leaves the file as it was: it is
    reported as an error and its findings are those of the original text.
    """
    try:
        result = linter.fix_text(target.display, source.text, target.settings, unsafe)
    except InternalError as error:
        outcome.errors.append(f"internal error: {error}")
        outcome.files_failed.append(target.display)
        return source.text, linter.check_text(target.display, source.text, target.settings)
    outcome.warnings.extend(result.warnings)
    if result.text == source.text:
        return result.text, result.diagnostics
    if options.diff:
        outcome.diffs.append((target.display, source.text, result.text))
    else:
        try:
            source.write(result.text)
        except WriteRefused as refused:
            outcome.errors.append(f"{target.display}: not written: {refused}")
            outcome.files_failed.append(target.display)
            outcome.files_unwritten.append(target.display)
            return source.text, result.initial
    outcome.fixed += result.fixed
    outcome.files_fixed.append(target.display)
    return result.text, result.diagnostics
