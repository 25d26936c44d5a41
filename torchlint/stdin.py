"""A run over one text piped in: `torchlint check --stdin-filename PATH -` (or plain `-`), as ruff does it.

Editors' generic linters and some pre-commit set-ups pipe a buffer in and read the findings (or, with
`--fix`, the fixed text) back. The text is checked as the file PATH would be: PATH's settings (its nearest
`[tool.torchlint]`, per-file-ignores, excludes with `--force-exclude`) and PATH's project for cross-file
facts, whether or not a file is there yet. Without a name, the text is `-`, with the settings of the
working directory and no project. The bytes are decoded as a file's would be (PEP 263, BOM), and a fixed
text is encoded back the same way; on any error the text comes back unchanged, so a pipe never loses it.

The caller (the CLI) reads standard input and writes the text back; this module never touches either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torchlint.diagnostics import LineIndex
from torchlint.linter import InternalError, Linter, io_error
from torchlint.outcome import Outcome, RunOptions
from torchlint.workspace.discovery import GitIgnore, SettingsResolver, display_name, force_excluded
from torchlint.workspace.settings import ConfigError, Settings, enabled_codes
from torchlint.workspace.source import SourceError, SourceFile

STDIN_NAME = "-"  # the name findings carry when no --stdin-filename is given (ruff's)


@dataclass
class StdinRun:
    outcome: Outcome
    output: bytes  # with --fix: the text to write to standard output (the input when nothing changed)
    excluded: bool = False  # --force-exclude and PATH is excluded: nothing was checked


def run_stdin(options: RunOptions, raw: bytes, filename: Path | None) -> StdinRun:
    linter = Linter(prefilter=options.prefilter)
    outcome = Outcome()
    codes = list(linter.rule_classes)
    options_by_rule = {code: rule.options for code, rule in linter.rule_classes.items()}
    try:
        options.overrides.validate(codes)
        resolver = SettingsResolver(
            codes,
            options_by_rule,
            options.config_file,
            options.overrides,
            fs=linter.fs,
            isolated=options.isolated,
        )
        if filename is None:
            settings = resolver.for_directory(Path.cwd())
        else:
            settings = resolver.for_file(filename.absolute())
    except ConfigError as error:
        outcome.errors.append(str(error))
        return StdinRun(outcome, raw)
    if (
        filename is not None
        and options.force_exclude
        and force_excluded(filename.absolute(), settings, GitIgnore(linter.fs))
    ):
        return StdinRun(outcome, raw, excluded=True)
    display = STDIN_NAME if filename is None else display_name(filename)
    outcome.files_checked = 1
    try:
        source = SourceFile.decode(filename or Path(STDIN_NAME), raw)
    except SourceError as error:
        if "TL002" in enabled_codes(settings, ["TL002"]):
            diagnostic = LineIndex("").locate(io_error(display, f"{display}: {error}"))
            outcome.add_findings(display, "", [diagnostic], False, settings)
        return StdinRun(outcome, raw)
    try:
        output = _check(linter, options, settings, display, source, filename is not None, outcome)
    except InternalError as error:
        outcome.errors.append(f"internal error: {error}")
        outcome.files_failed.append(display)
        return StdinRun(outcome, raw)
    outcome.parsed = linter.parsed
    return StdinRun(outcome, output)


def _check(
    linter: Linter,
    options: RunOptions,
    settings: Settings,
    display: str,
    source: SourceFile,
    in_project: bool,
    outcome: Outcome,
) -> bytes:
    """Check (or fix) the text into `outcome`; the bytes to give back."""
    unsafe = options.unsafe_fixes or settings.unsafe_fixes
    if not (options.fix or options.diff):
        diagnostics = linter.check_text(display, source.text, settings, in_project=in_project)
        outcome.add_findings(display, source.text, diagnostics, unsafe, settings, source.cells)
        return source.raw
    result = linter.fix_text(display, source.text, settings, unsafe, in_project=in_project)
    outcome.warnings.extend(result.warnings)
    try:
        output = source.encode(result.text)
    except (UnicodeEncodeError, SourceError) as error:
        reason = (
            f"the fixed text cannot be encoded as {source.encoding} ({error.reason})"
            if isinstance(error, UnicodeEncodeError)
            else str(error)
        )
        outcome.errors.append(f"{display}: not fixed: {reason}")
        outcome.files_failed.append(display)
        outcome.add_findings(display, source.text, result.initial, unsafe, settings, source.cells)
        return source.raw
    if result.text != source.text:
        outcome.fixed = result.fixed
        outcome.fixed_codes[display] = dict(result.fixed_codes)
        outcome.files_fixed.append(display)
        if options.diff:
            outcome.diffs.extend(source.diffs(display, result.text))
    outcome.add_findings(display, result.text, result.diagnostics, unsafe, settings, source.cells)
    return output
