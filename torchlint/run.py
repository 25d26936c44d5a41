"""A whole run over paths: discover, check (and fix) every file, collect what the reporters need.

Failures are per file: an unreadable file becomes a TL002 finding, a crash in a rule or a refused fix an
error naming the file; the other files are still checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchlint.config import ConfigError, enabled_codes
from torchlint.diagnostics import Diagnostic, LineIndex
from torchlint.files import MissingPath, SettingsResolver, discover
from torchlint.linter import InternalError, Linter, UnsupportedSyntax, io_error
from torchlint.source import SourceError, SourceFile


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
    fixed: int = 0
    diffs: list[tuple[str, str, str]] = field(default_factory=list)  # (path, before, after)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_checked: int = 0


def run(options: RunOptions) -> Outcome:
    outcome = Outcome()
    linter = Linter()
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
                text, fixed, diagnostics = linter.fix_text(target.display, source.text, settings, unsafe)
                if text != source.text:
                    outcome.fixed += fixed
                    if options.diff:
                        outcome.diffs.append((target.display, source.text, text))
                    else:
                        _write(source, text)
            else:
                text = source.text
                diagnostics = linter.check_text(target.display, text, settings)
        except UnsupportedSyntax as error:
            outcome.warnings.append(str(error))
            continue
        except InternalError as error:
            outcome.errors.append(f"internal error: {error}")
            continue
        except OSError as error:
            outcome.errors.append(f"{target.display}: cannot write: {error.strerror or error}")
            continue
        if diagnostics:
            outcome.diagnostics.extend(diagnostics)
            outcome.sources[target.display] = LineIndex(text)
    outcome.diagnostics.sort(key=Diagnostic.sort_key)
    return outcome


def _write(source: SourceFile, text: str) -> None:
    current = source.path.read_bytes()
    if current != source.raw:
        raise OSError(f"{source.path} changed on disk while it was being fixed; not written")
    source.write(text)
