"""The command line, shaped like ruff's: `torchlint [check] [PATHS]`, `torchlint rules`, `torchlint rule`.

Only argument parsing and orchestration live here; everything else is a library call. Exit codes: 0 no
findings, 1 findings (or, with --diff, changes), 2 usage, configuration or internal errors, which --exit-zero
never masks.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import click

from torchlint import __version__

OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "github", "gitlab", "junit", "pylint", "sarif")


class DefaultToCheck(click.Group):
    """`torchlint --fix .` means `torchlint check --fix .`: what is not a subcommand goes to check."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="torchlint", message="%(prog)s %(version)s")
def main() -> None:
    """torchlint: find and fix what makes PyTorch training slower than it needs to be."""


def _split_codes(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    return [code.strip().upper() for value in values for code in value.split(",") if code.strip()]


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--fix/--no-fix", default=False, help="Apply safe fixes (and unsafe ones with --unsafe-fixes).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour or numerics.")
@click.option("--diff", is_flag=True, help="Print the diff --fix would apply; write nothing (exit 1 if any).")
@click.option(
    "--select",
    multiple=True,
    callback=_split_codes,
    help="Rule codes or prefixes to enable (replaces the config's).",
)
@click.option(
    "--extend-select",
    multiple=True,
    callback=_split_codes,
    help="Rule codes or prefixes to enable in addition.",
)
@click.option("--ignore", multiple=True, callback=_split_codes, help="Rule codes or prefixes to disable.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default="full", show_default=True)
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file (its folders are created) instead of standard output.",
)
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path),
    help="Check standard input as this file (its settings and project); `-` alone reads it too.",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (not on errors).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Use this file's settings for every file.",
)
@click.option("--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option(
    "--statistics", is_flag=True, help="Print the number of findings per rule instead of the findings."
)
@click.option(
    "--jobs", "-j", type=click.IntRange(min=1), help="Processes to use (default: the CPUs available)."
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write .torchlint_cache/.")
@click.option("--no-prefilter", is_flag=True, hidden=True, help="Parse every file (to test the prefilter).")
@click.option("--show-phase2-count", is_flag=True, hidden=True, help="Print how many files were parsed.")
def check(
    paths: tuple[Path, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    select: list[str],
    extend_select: list[str],
    ignore: list[str],
    output_format: str,
    output_file: Path | None,
    stdin_filename: Path | None,
    exit_zero: bool,
    config_file: Path | None,
    force_exclude: bool,
    quiet: bool,
    statistics: bool,
    jobs: int | None,
    no_cache: bool,
    no_prefilter: bool,
    show_phase2_count: bool,
) -> None:
    """Check PATHS (default: the current folder) for slow training code; `-` reads standard input."""
    from torchlint.api import RunOptions, replay, run
    from torchlint.workspace.settings import CliOverrides

    stdin = stdin_filename is not None or paths == (Path("-"),)
    if stdin_filename is not None:
        for ignored in (path for path in paths if path != Path("-")):
            click.echo(f"warning: ignoring {ignored} in favour of standard input", err=True)
    options = RunOptions(
        paths=[] if stdin else list(paths) or [Path(".")],
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        diff=diff,
        overrides=CliOverrides(tuple(select), tuple(extend_select), tuple(ignore), unsafe_fixes),
        config_file=config_file,
        force_exclude=force_exclude,
        jobs=jobs,
        cache=not no_cache,
        prefilter=not no_prefilter,
    )
    if stdin:
        from torchlint.stdin import run_stdin

        piped = run_stdin(options, sys.stdin.buffer.read(), stdin_filename)
        outcome = piped.outcome
        if fix:  # the fixed text is the output; the report goes to stderr (or --output-file)
            sys.stdout.buffer.write(piped.output)
            sys.stdout.flush()
        if piped.excluded:
            click.echo(f"warning: {stdin_filename} is excluded (--force-exclude): not checked", err=True)
    else:
        outcome = replay(options)  # light: the linter is imported only by `run`
        if outcome is None:
            outcome = run(options)
        if not outcome.files_checked and not outcome.errors:
            click.echo("warning: No Python files found under the given path(s)", err=True)
    if show_phase2_count:
        click.echo(
            f"phase 2: {outcome.parsed} of {outcome.files_checked} files parsed, "
            f"{outcome.from_cache} from cache{' (replayed)' if outcome.replayed else ''}",
            err=True,
        )
    default = sys.stderr if stdin and fix else sys.stdout
    with _report_stream(output_file, default) as out:
        if statistics and not (fix or diff):
            from torchlint.report.statistics import write_statistics, write_statistics_json

            for message in outcome.errors:
                click.echo(f"error: {message}", err=True)
            write = write_statistics_json if output_format == "json" else write_statistics
            write(outcome.diagnostics, out)
        else:
            _report(outcome, options, output_format, quiet, out)
    if outcome.errors:
        sys.exit(2)
    if exit_zero:
        sys.exit(0)
    if diff:
        sys.exit(1 if outcome.diffs else 0)
    sys.exit(1 if outcome.diagnostics else 0)


@contextlib.contextmanager
def _report_stream(output_file: Path | None, default: TextIO) -> Iterator[TextIO]:
    """Where the report goes: `--output-file` (its folders created; written after the run, never part of
    what a check reads), else `default`."""
    if output_file is None:
        yield default
        default.flush()
        return
    try:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        stream = open(output_file, "w", encoding="utf-8", newline="")
    except OSError as error:
        click.echo(f"error: --output-file: {output_file}: {error.strerror or error}", err=True)
        sys.exit(2)
    with stream:
        yield stream


def _report(outcome, options, output_format: str, quiet: bool, out: TextIO) -> None:
    from torchlint.report import MACHINE_FORMATS, REPORTERS
    from torchlint.report.shown import shown

    for message in outcome.warnings:
        click.echo(f"warning: {shown(message)}", err=True)
    for message in outcome.errors:
        click.echo(f"error: {shown(message)}", err=True)
    if options.diff:
        from torchlint.fix.apply import unified_diff

        for path, before, after in outcome.diffs:
            out.write(unified_diff(path, before, after))
        out.flush()
        if not quiet:
            click.echo(_diff_summary(outcome), err=True)
        return
    REPORTERS[output_format](outcome.diagnostics, outcome.sources, out)
    if quiet or output_format in MACHINE_FORMATS:
        return
    summary = _summary(outcome, options)
    if summary:
        click.echo(summary, file=out)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _summary(outcome, options) -> str:
    """ruff's summary: what was found, what was fixed, what `--fix` / `--unsafe-fixes` would still do."""
    remaining = len(outcome.diagnostics)
    lines = []
    if options.fix and outcome.fixed:
        total = remaining + outcome.fixed
        lines.append(f"Found {_plural(total, 'finding')} ({outcome.fixed} fixed, {remaining} remaining).")
    elif remaining:
        lines.append(f"Found {_plural(remaining, 'finding')}.")
    elif not outcome.files_failed and not outcome.errors and outcome.files_checked:  # never after an error
        lines.append("All checks passed!")
    applicable, hidden = outcome.fixable, outcome.hidden_fixes
    hint = f"{_plural(hidden, 'hidden fix', 'hidden fixes')} can be enabled with the `--unsafe-fixes` option"
    if applicable and hidden:
        lines.append(f"[*] {applicable} fixable with the `--fix` option ({hint}).")
    elif applicable:
        lines.append(f"[*] {applicable} fixable with the `--fix` option.")
    elif hidden:
        lines.append(f"No fixes available ({hint}).")
    if outcome.files_failed:
        verb = "fixed" if options.fix else "checked"
        lines.append(
            f"{_plural(len(outcome.files_failed), 'file')} could not be {verb} (see the errors above)."
        )
    return "\n".join(lines)


def _diff_summary(outcome) -> str:
    hidden = outcome.hidden_fixes
    extra = (
        f" ({_plural(hidden, 'additional fix', 'additional fixes')} available with `--unsafe-fixes`)"
        if hidden
        else ""
    )
    if outcome.fixed:
        return f"Would fix {_plural(outcome.fixed, 'finding')}{extra}."
    return f"No findings would be fixed{extra}."


@main.command("rules")
def list_rules() -> None:
    """Print every rule: code, name, family, and whether it has a fix."""
    from torchlint.rules.base import registered_rules

    rows = [(c, r.name, r.family(), r.fix_availability.value) for c, r in registered_rules().items()]
    widths = [max(len(row[i]) for row in [("code", "name", "family", "fix"), *rows]) for i in range(4)]
    for row in [("code", "name", "family", "fix"), *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@main.command("rule")
@click.argument("code")
def show_rule(code: str) -> None:
    """Print the documentation of one rule (by code or name)."""
    from torchlint.docs import rule_doc
    from torchlint.rules.base import registered_rules

    rules = registered_rules()
    wanted = code.upper()
    for rule_code, rule in rules.items():
        if code == rule.name:
            wanted = rule_code
    text = rule_doc(wanted) if wanted in rules else None
    if text is None:
        click.echo(f"error: unknown rule {code!r} (see `torchlint rules`)", err=True)
        sys.exit(2)
    click.echo(text.rstrip("\n"))


@main.command("lsp")
def lsp() -> None:
    """Run the Language Server over stdio (for editors; also `torchlint server`)."""
    try:
        import pygls  # noqa: F401 - the server's one dependency beyond the linter's

        from torchlint.lsp import serve
    except ImportError as error:
        click.echo(f"error: `torchlint lsp` needs pygls: pip install 'torchlint[lsp]' ({error})", err=True)
        sys.exit(2)
    serve()


main.add_command(lsp, "server")  # ruff's name for the same command


# -- torchlint verify: measure what the fixes change (torchlint/verify; the parent never imports torch) --


@main.command("verify")
@click.argument("script", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--steps", type=click.IntRange(min=1), default=20, show_default=True, help="Timed optimizer steps."
)
@click.option(
    "--warmup", type=click.IntRange(min=0), default=5, show_default=True, help="Untimed steps before them."
)
@click.option("--device", type=click.Choice(("auto", "cuda", "cpu")), default="auto", show_default=True)
@click.option(
    "--select", multiple=True, callback=_split_codes, help="Only the fixes of these codes or prefixes."
)
@click.option(
    "--ignore", multiple=True, callback=_split_codes, help="Not the fixes of these codes or prefixes."
)
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour or numerics.")
@click.option("--each", is_flag=True, help="One patched run per fix, plus one with all of them.")
@click.option(
    "--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="Runs per variant (A B A B)."
)
@click.option(
    "--threads", type=click.IntRange(min=1), help="Intra-op threads in every run [default: CPUs/2]."
)
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=300, show_default=True, help="Seconds per run."
)
@click.option(
    "--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report."
)
@click.option(
    "--trace-dir", type=click.Path(file_okay=False, path_type=Path), help="Chrome traces, one per run."
)
@click.option(
    "--torchrun", type=click.IntRange(min=1), help="Run under torch.distributed.run with N processes."
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="Use this file's settings.")
@click.option("--keep-logs", is_flag=True, help="Keep the runs' logs and results (printed at the end).")
def verify(
    script: Path,
    script_args: tuple[str, ...],
    steps: int,
    warmup: int,
    device: str,
    select: list[str],
    ignore: list[str],
    unsafe_fixes: bool,
    each: bool,
    repeat: int,
    threads: int | None,
    timeout: float,
    json_file: Path | None,
    trace_dir: Path | None,
    torchrun: int | None,
    config_file: Path | None,
    keep_logs: bool,
) -> None:
    """Run SCRIPT before and after its fixes and report what changed: `torchlint verify train.py -- ARGS`.

    Exit status: 0 verified (no fix made training slower or changed its losses), 1 a fix made training
    slower beyond noise, changed the losses or broke the script, 2 usage errors and an original run that
    crashed, exited with an error, never stepped an optimizer or timed out.
    """
    import json

    from torchlint.api import verify as run_verify
    from torchlint.verify.report import ProgressDisplay, to_json, write_table
    from torchlint.verify.verifier import UsageError, VerifyOptions

    options = VerifyOptions(
        script=script,
        args=list(script_args),
        steps=steps,
        warmup=warmup,
        device=device,
        select=tuple(select),
        ignore=tuple(ignore),
        unsafe_fixes=unsafe_fixes,
        each=each,
        timeout=timeout,
        trace_dir=trace_dir,
        torchrun=torchrun,
        repeat=repeat,
        threads=threads,
        config_file=config_file,
        keep_logs=keep_logs,
    )
    display = ProgressDisplay()
    try:
        report = run_verify(options, display.start, display.end)
    except UsageError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    if json_file is not None:  # first: the table may go to a pipe that closes early
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    for message in report.errors:
        click.echo(f"error: {message}", err=True)
    write_table(report, sys.stdout)
    if report.workdir is not None:
        click.echo(f"logs and raw results: {report.workdir}", err=True)
    sys.exit(report.exit_code)


@main.group()
def debug() -> None:
    """Inspect what torchlint understands of a file."""


@debug.command("facts")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def debug_facts(file: Path) -> None:
    """Print the semantic model of FILE: device, training loops, loaders and their options."""
    import libcst as cst

    from torchlint.facts.debug import describe
    from torchlint.linter import Linter
    from torchlint.workspace.source import SourceError, SourceFile

    try:
        source = SourceFile.read(file)
        module = cst.parse_module(source.text)
    except (SourceError, cst.ParserSyntaxError) as error:
        click.echo(f"error: {file}: {error}", err=True)
        sys.exit(2)
    facts = Linter().facts_of(file.as_posix(), source.text, module, file)
    click.echo(describe(facts), nl=False)
