"""The command line, shaped like ruff's: `torchlint [check] [PATHS]`, `torchlint rules`, `torchlint rule`.

Only argument parsing and orchestration live here; everything else is a library call. Exit codes: 0 no
findings, 1 findings (or, with --diff, changes), 2 usage, configuration or internal errors, which --exit-zero
never masks.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn, TextIO

import click

from torchlint import __version__

OUTPUT_FORMATS = (
    "full",
    "concise",
    "grouped",
    "json",
    "json-lines",
    "github",
    "gitlab",
    "junit",
    "pylint",
    "azure",
    "sarif",
)
COLOR_CHOICES = ("auto", "always", "never")


class DefaultToCheck(click.Group):
    """`torchlint --fix .` means `torchlint check --fix .`: what is not a subcommand goes to check, except
    a word that is no path and looks like a mistyped subcommand (`torchlint rlues`), which is an error with a
    suggestion, as ruff's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            _refuse_a_mistyped_subcommand(args[0], [n for n, c in self.commands.items() if not c.hidden])
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _refuse_a_mistyped_subcommand(word: str, commands: list[str]) -> None:
    import difflib
    import os

    if os.path.lexists(word) or "/" in word or "." in word or word == "-":
        return
    close = difflib.get_close_matches(word, commands, n=1, cutoff=0.6)
    if close:
        click.echo(
            f"error: unrecognized subcommand '{word}'\n\n  tip: a similar subcommand exists: '{close[0]}'\n\n"
            f"To check a path of that name that does not exist yet, use `torchlint check {word}`.",
            err=True,
        )
        sys.exit(2)


class CheckCommand(click.Command):
    """Click's "did you mean" for a mistyped option, without the hidden options among the suggestions; and
    options whose value is optional (`OptionalValue`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, _with_empty_values(args, self.params))
        except click.NoSuchOption as error:
            hidden = {
                name for p in self.params if getattr(p, "hidden", False) for name in p.opts + p.secondary_opts
            }
            shown = [name for name in error.possibilities or () if name not in hidden]
            raise click.NoSuchOption(error.option_name, possibilities=shown, ctx=ctx) from None


class OptionalValue(click.Option):
    """An option with an optional value attached by `=` only, as ruff's `--add-noqa[=REASON]` (clap's
    `require_equals`): `--add-noqa .` adds noqa to `.`, it does not take `.` as its reason. Given alone, its
    value is "" (`CheckCommand` writes `--add-noqa` as `--add-noqa=`); not given, None."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        return None if record is None else (f"{self.opts[0]}[={self.metavar}]", record[1])


def _with_empty_values(args: list[str], params: list[click.Parameter]) -> list[str]:
    """`args` with each `OptionalValue` given alone written `--name=` (up to `--`: paths follow it)."""
    names = {name for param in params if isinstance(param, OptionalValue) for name in param.opts}
    if "--" in args:
        end = args.index("--")
        return _with_empty_values(args[:end], params) + args[end:]
    return [f"{arg}=" if arg in names else arg for arg in args]


def _noqa_reason(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """ruff's check: the reason goes on the line of each finding, so it must be one line."""
    if value is not None and ("\n" in value or "\r" in value):
        raise click.BadParameter("the reason cannot contain newline characters")
    return value


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="torchlint", message="%(prog)s %(version)s")
def main() -> None:
    """torchlint: find and fix what makes PyTorch training slower than it needs to be."""


def _split_codes(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    return [code.strip().upper() for value in values for code in value.split(",") if code.strip()]


def _split_patterns(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    return [pattern.strip() for value in values for pattern in value.split(",") if pattern.strip()]


def _per_file_ignores(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, tuple[str, ...]]]:
    """`PATTERN:CODES` (ruff's form), CODES separated by commas."""
    entries = []
    for value in values:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern or not codes.strip():
            raise click.BadParameter(f"expected PATTERN:CODES (e.g. 'tests/**:TL3'), got {value!r}")
        entries.append((pattern, tuple(c.strip().upper() for c in codes.split(",") if c.strip())))
    return entries


def _torch_version(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    from torchlint.workspace.settings import parse_torch_version

    if value is None:
        return None
    version = parse_torch_version(value)
    if version is None:
        raise click.BadParameter(f'expected a version like "2.1", got {value!r}')
    return version


@main.command(cls=CheckCommand)
@click.argument("paths", nargs=-1, type=click.Path(readable=False, path_type=Path))  # unreadable: TL002
@click.option("--fix/--no-fix", default=False, help="Apply safe fixes (and unsafe ones with --unsafe-fixes).")
@click.option(
    "--unsafe-fixes/--no-unsafe-fixes",
    default=None,
    help="Also apply (or count as fixable) fixes that may change behaviour or numerics; --no-unsafe-fixes "
    "turns off the config's `unsafe-fixes = true`.",
)
@click.option(
    "--fix-only/--no-fix-only", default=False, help="Apply fixes; report nothing that remains (exit 0)."
)
@click.option(
    "--show-fixes/--no-show-fixes", default=False, help="With --fix, list what was fixed, per file."
)
@click.option(
    "--exit-non-zero-on-info",
    is_flag=True,
    default=None,
    help="Let trade-offs (info findings, TL401) set exit status 1 too (setting: exit-non-zero-on-info).",
)
@click.option(
    "--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied, even if none remain."
)
@click.option(
    "--add-noqa",
    "noqa_reason",
    cls=OptionalValue,
    metavar="REASON",
    callback=_noqa_reason,
    help="Write `# noqa: CODES` on the line of every finding, with REASON after the codes if given.",
)
@click.option("--ignore-noqa", is_flag=True, help="Ignore `# noqa` comments: report what they suppress.")
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
@click.option(
    "--extend-ignore", multiple=True, callback=_split_codes, help="Like --ignore (added to the config's)."
)
@click.option(
    "--fixable", multiple=True, callback=_split_codes, help="Rule codes or prefixes whose fixes may apply."
)
@click.option(
    "--extend-fixable", multiple=True, callback=_split_codes, help="Like --fixable (added to the config's)."
)
@click.option(
    "--unfixable",
    multiple=True,
    callback=_split_codes,
    help="Rule codes or prefixes whose fixes never apply.",
)
@click.option(
    "--per-file-ignores",
    multiple=True,
    callback=_per_file_ignores,
    metavar="PATTERN:CODES",
    help="Codes to disable in matching files (replaces the config's per-file-ignores).",
)
@click.option(
    "--extend-per-file-ignores",
    multiple=True,
    callback=_per_file_ignores,
    metavar="PATTERN:CODES",
    help="Like --per-file-ignores, added to the config's.",
)
@click.option(
    "--exclude",
    multiple=True,
    callback=_split_patterns,
    help="Patterns folder walks skip (replaces the config's).",
)
@click.option(
    "--extend-exclude", multiple=True, callback=_split_patterns, help="Patterns to skip, added to exclude."
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore", default=None, help="Skip the files .gitignore files ignore."
)
@click.option(
    "--torch-version",
    callback=_torch_version,
    metavar="VERSION",
    help="The oldest torch the project supports (overrides the config's torch-version).",
)
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS),
    default="full",
    show_default=True,
    envvar="TORCHLINT_OUTPUT_FORMAT",
    show_envvar=True,
)
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False, readable=False, path_type=Path),
    help="Write the report to this file (its folders are created) instead of standard output.",
)
@click.option(
    "--color",
    type=click.Choice(COLOR_CHOICES),
    default="auto",
    show_default=True,
    help="Colour the text formats (auto: on a terminal, unless NO_COLOR is set).",
)
@click.option(
    "--stdin-filename",
    type=click.Path(readable=False, path_type=Path),
    help="Check standard input as this file (its settings and project); `-` alone reads it too.",
)
@click.option("-e", "--exit-zero", is_flag=True, help="Exit 0 even when there are findings (not on errors).")
@click.option(
    "--config",
    "config_options",
    multiple=True,
    metavar="FILE | KEY=VALUE",
    help="Use this file's settings for every file, or override one setting: "
    "`--config 'torch-version = \"2.1\"'`.",
)
@click.option(
    "--isolated", is_flag=True, help="Read no configuration file (the defaults and the command line)."
)
@click.option(
    "--force-exclude/--no-force-exclude",
    default=False,
    help="Apply excludes to files named on the command line too.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option(
    "-s",
    "--silent",
    is_flag=True,
    help="Print nothing (the exit code still tells; errors still go to stderr).",
)
@click.option(
    "--statistics", is_flag=True, help="Print the number of findings per rule instead of the findings."
)
@click.option(
    "--jobs", "-j", type=click.IntRange(min=1), help="Processes to use (default: by the amount of source)."
)
@click.option(
    "--no-cache",
    is_flag=True,
    envvar="TORCHLINT_NO_CACHE",
    show_envvar=True,
    help="Neither read nor write the cache.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="TORCHLINT_CACHE_DIR",
    show_envvar=True,
    help="The cache's folder (default: .torchlint_cache/ in each project root).",
)
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Check again whenever a checked file or a config changes (Ctrl-C ends).",
)
@click.option("--show-files", is_flag=True, help="List the files a run would check, and check nothing.")
@click.option(
    "--show-settings", is_flag=True, help="Print the settings of the first file to check, and check nothing."
)
@click.option("--no-prefilter", is_flag=True, hidden=True, help="Parse every file (to test the prefilter).")
@click.option("--show-phase2-count", is_flag=True, hidden=True, help="Print how many files were parsed.")
def check(
    paths: tuple[Path, ...],
    fix: bool,
    unsafe_fixes: bool | None,
    fix_only: bool,
    show_fixes: bool,
    exit_non_zero_on_info: bool | None,
    exit_non_zero_on_fix: bool,
    noqa_reason: str | None,
    ignore_noqa: bool,
    diff: bool,
    select: list[str],
    extend_select: list[str],
    ignore: list[str],
    extend_ignore: list[str],
    fixable: list[str],
    extend_fixable: list[str],
    unfixable: list[str],
    per_file_ignores: list[tuple[str, tuple[str, ...]]],
    extend_per_file_ignores: list[tuple[str, tuple[str, ...]]],
    exclude: list[str],
    extend_exclude: list[str],
    respect_gitignore: bool | None,
    torch_version: tuple[int, int] | None,
    output_format: str,
    output_file: Path | None,
    color: str,
    stdin_filename: Path | None,
    exit_zero: bool,
    config_options: tuple[str, ...],
    isolated: bool,
    force_exclude: bool,
    quiet: bool,
    silent: bool,
    statistics: bool,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    watch: bool,
    show_files: bool,
    show_settings: bool,
    no_prefilter: bool,
    show_phase2_count: bool,
) -> None:
    """Check PATHS (default: the current folder) for slow training code; `-` reads standard input."""
    from torchlint.api import RunOptions, replay, run
    from torchlint.workspace.settings import CliOverrides, ConfigError

    stdin = stdin_filename is not None or paths == (Path("-"),)
    add_noqa = noqa_reason is not None
    if watch and (stdin or add_noqa or show_files or show_settings):
        _usage_error(
            "--watch cannot be combined with standard input, --add-noqa, --show-files or --show-settings"
        )
    if add_noqa and (fix or fix_only or diff or stdin):
        _usage_error("--add-noqa cannot be combined with --fix, --fix-only, --diff or standard input")
    fix = fix or fix_only
    if fix or diff or add_noqa:
        gc.enable()  # a fix's passes leave superseded trees in reference cycles: freed between files
    if stdin_filename is not None:
        for ignored in (path for path in paths if path != Path("-")):
            click.echo(f"warning: ignoring {ignored} in favour of standard input", err=True)
    try:
        config_file, inline = _config_options(config_options)
    except ConfigError as error:
        _usage_error(str(error))
    overrides = CliOverrides(
        select=tuple(select),
        extend_select=tuple(extend_select),
        ignore=tuple(ignore) + tuple(extend_ignore),
        unsafe_fixes=unsafe_fixes,
        per_file_ignores=tuple(per_file_ignores) if per_file_ignores else None,
        extend_per_file_ignores=tuple(extend_per_file_ignores),
        exclude=tuple(exclude) if exclude else None,
        extend_exclude=tuple(extend_exclude),
        respect_gitignore=respect_gitignore,
        torch_version=torch_version,
        exit_non_zero_on_info=exit_non_zero_on_info,
        ignore_noqa=ignore_noqa,
        fixable=tuple(fixable),
        extend_fixable=tuple(extend_fixable),
        unfixable=tuple(unfixable),
        config=inline,
    )
    options = RunOptions(
        paths=[] if stdin else list(paths) or [Path(".")],
        fix=fix,
        unsafe_fixes=bool(unsafe_fixes),
        diff=diff,
        overrides=overrides,
        config_file=config_file,
        isolated=isolated,
        force_exclude=force_exclude,
        jobs=jobs,
        cache=not no_cache,
        cache_dir=cache_dir,
        prefilter=not no_prefilter,
        add_noqa=add_noqa,
        noqa_reason=noqa_reason or "",
    )
    if (show_files or show_settings) and not stdin:
        _show_discovery(options, show_files, show_settings)
    if watch:
        _watch(options, output_format, output_file, color, quiet, silent, statistics, fix_only, show_fixes)
    if stdin:
        from torchlint.stdin import run_stdin

        piped = run_stdin(options, sys.stdin.buffer.read(), stdin_filename)
        outcome = piped.outcome
        if fix:  # the fixed text is the output; the report goes to stderr (or --output-file)
            sys.stdout.buffer.write(piped.output)
            sys.stdout.flush()
        if piped.excluded and not silent:
            click.echo(f"warning: {stdin_filename} is excluded (--force-exclude): not checked", err=True)
    else:
        outcome = replay(options)  # light: the linter is imported only by `run`
        if outcome is None:
            outcome = run(options)
        if not outcome.files_checked and not outcome.errors and not silent:
            click.echo("warning: No Python files found under the given path(s)", err=True)
    if show_phase2_count:
        click.echo(
            f"phase 2: {outcome.parsed} of {outcome.files_checked} files parsed, "
            f"{outcome.from_cache} from cache{' (replayed)' if outcome.replayed else ''}, "
            f"{_plural(outcome.processes, 'process', 'processes')}",
            err=True,
        )
    if silent:
        _errors(outcome)
    elif add_noqa:
        _errors(outcome)
        if outcome.noqa_added:
            click.echo(f"Added {_plural(outcome.noqa_added, 'noqa directive')}.", err=True)
    else:
        default = sys.stderr if stdin and fix else sys.stdout
        with _report_stream(output_file, default) as out:
            from torchlint.report.style import Style, wants_color

            style = Style(wants_color(color, out))
            report = _Report(outcome, options, output_format, quiet, style, out)
            if fix_only:
                report.fix_only(show_fixes)
            elif statistics and not (fix or diff):
                report.statistics()
            else:
                report.findings(show_fixes)
    sys.exit(_exit_code(outcome, options, exit_zero, fix_only, exit_non_zero_on_fix))


def _watch(
    options, output_format, output_file, color, quiet, silent, statistics, fix_only, show_fixes
) -> NoReturn:
    """`--watch`: a report per check, the screen cleared before each on a terminal; Ctrl-C ends with
    status 130 (128 + SIGINT), as a stopped command does."""
    from torchlint.api import run
    from torchlint.watch import watch

    def check() -> None:
        outcome = run(options)
        if silent:
            _errors(outcome)
            return
        with _report_stream(output_file, sys.stdout) as out:
            from torchlint.report.style import Style, wants_color

            report = _Report(outcome, options, output_format, quiet, Style(wants_color(color, out)), out)
            if fix_only:
                report.fix_only(show_fixes)
            elif statistics and not (options.fix or options.diff):
                report.statistics()
            else:
                report.findings(show_fixes)

    def clear() -> None:
        if sys.stdout.isatty():
            click.clear()

    try:
        watch(options, check, lambda line: click.echo(line, err=True), clear)
    except KeyboardInterrupt:
        sys.exit(130)
    raise AssertionError("watch returns only by Ctrl-C")


def _show_discovery(options, show_files: bool, show_settings: bool) -> NoReturn:
    """ruff's --show-files / --show-settings: what a run would check and with which settings; exit 2 when
    discovery hit an error (the listing is then incomplete), else 0."""
    from dataclasses import fields

    from torchlint.api import discovered
    from torchlint.linter import Linter
    from torchlint.report.shown import shown

    linter = Linter(prefilter=options.prefilter)
    targets, outcome = discovered(options, linter)
    for message in outcome.warnings:
        click.echo(f"warning: {shown(message)}", err=True)
    for message in outcome.errors:
        click.echo(f"error: {shown(message)}", err=True)
    if show_files:
        for target in sorted(targets, key=lambda t: str(t.path.absolute())):
            click.echo(shown(str(target.path.absolute())))
    if show_settings and targets:
        target = targets[0]
        settings = target.settings
        click.echo(f"Resolved settings for: {shown(str(target.path.absolute()))}")
        click.echo(f"Settings path: {shown(str(settings.source)) if settings.source else '(defaults)'}")
        for item in fields(settings):
            if item.name not in ("root", "source"):
                click.echo(f"{item.name.replace('_', '-')} = {getattr(settings, item.name)!r}")
        enabled = [rule.code for rule in linter.rules_for(settings, target.display)]
        click.echo(f"enabled rules = {', '.join(enabled) or '(none)'}")
    elif show_settings:
        click.echo("warning: no file to show the settings of", err=True)
    sys.exit(2 if outcome.errors else 0)


def _usage_error(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _config_options(values: tuple[str, ...]) -> tuple[Path | None, tuple[tuple[str, object], ...]]:
    """ruff's `--config`: a file (at most one), or `KEY = VALUE` overrides (TOML), told apart as ruff does:
    an existing file is a file, anything with a `=` is an override, anything else a file (maybe missing)."""
    import os

    from torchlint.workspace.settings import ConfigError, parse_inline

    files, inline = [], []
    for value in values:
        if "=" in value and not os.path.isfile(value):
            inline.append(parse_inline(value))
        else:
            files.append(Path(value))
    if len(files) > 1:
        raise ConfigError(f"--config: only one config file can be given, got {', '.join(map(str, files))}")
    return (files[0] if files else None), tuple(inline)


def _exit_code(outcome, options, exit_zero: bool, fix_only: bool, exit_non_zero_on_fix: bool) -> int:
    if outcome.errors:
        return 2
    if exit_non_zero_on_fix and outcome.fixed and not exit_zero:
        return 1
    if exit_zero or options.add_noqa:
        return 0
    if options.diff:
        return 1 if outcome.diffs else 0
    if fix_only:
        return 0
    return 1 if outcome.blocking else 0  # a trade-off (info) only with `exit-non-zero-on-info`


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


def _errors(outcome) -> None:
    from torchlint.report.shown import shown

    for message in outcome.errors:
        click.echo(f"error: {shown(message)}", err=True)


class _Report:
    """What a check run prints: the findings (or the statistics, or the fixes), then ruff's summary."""

    def __init__(self, outcome, options, output_format: str, quiet: bool, style, out: TextIO) -> None:
        self.outcome, self.options, self.format = outcome, options, output_format
        self.quiet, self.style, self.out = quiet, style, out

    def _messages(self) -> None:
        from torchlint.report.shown import shown

        for message in self.outcome.warnings:
            click.echo(f"warning: {shown(message)}", err=True)
        _errors(self.outcome)

    def _diff(self) -> None:
        from torchlint.fix.apply import unified_diff

        for path, before, after in self.outcome.diffs:
            self.out.write(unified_diff(path, before, after))
        self.out.flush()
        if not self.quiet:
            click.echo(_diff_summary(self.outcome), err=True)

    def findings(self, show_fixes: bool) -> None:
        from torchlint.report import MACHINE_FORMATS, REPORTERS, STYLED_FORMATS

        self._messages()
        if self.options.diff:
            return self._diff()
        reporter = REPORTERS[self.format]
        if self.format in ("full", "grouped"):  # `[*]` (and full's diff): what `--fix` would apply, per file
            reporter(
                self.outcome.diagnostics,
                self.outcome.sources,
                self.out,
                style=self.style,
                applies=self.outcome.fix_applies,
            )
        elif self.format in STYLED_FORMATS:
            reporter(self.outcome.diagnostics, self.outcome.sources, self.out, style=self.style)
        else:
            reporter(self.outcome.diagnostics, self.outcome.sources, self.out)
        if self.quiet or self.format in MACHINE_FORMATS:
            return
        if show_fixes and self.options.fix and self.outcome.fixed:
            self.out.write(_fixes_listing(self.outcome, self.style))
        summary = _summary(self.outcome, self.options)
        if summary:
            click.echo(summary, file=self.out)

    def fix_only(self, show_fixes: bool) -> None:
        """`--fix-only`: what was fixed, never what remains (ruff's `Fixed N errors.`)."""
        self._messages()
        if self.options.diff:
            return self._diff()
        if self.quiet or self.format in ("json", "json-lines", "sarif", "gitlab", "junit"):
            return  # nothing to say in a machine format: no finding is reported
        if show_fixes and self.outcome.fixed:
            self.out.write(_fixes_listing(self.outcome, self.style))
        if self.outcome.fixed:
            hidden = self.outcome.hidden_fixes
            extra = (
                f" ({_plural(hidden, 'additional fix', 'additional fixes')} available with `--unsafe-fixes`)"
            )
            self.out.write(f"Fixed {_plural(self.outcome.fixed, 'finding')}{extra if hidden else ''}.\n")

    def statistics(self) -> None:
        """`--statistics`: one row per rule, then the summary (a JSON array alone with `json`)."""
        from torchlint.report.statistics import write_statistics, write_statistics_json

        self._messages()
        if self.format == "json":
            return write_statistics_json(self.outcome.diagnostics, self.out)
        write_statistics(self.outcome.diagnostics, self.out)
        summary = _summary(self.outcome, self.options)
        if summary and not self.quiet:
            click.echo(summary, file=self.out)


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
    if outcome.trade_off_fixes:
        codes = sorted(outcome.trade_off_fixes)
        count = sum(outcome.trade_off_fixes.values())
        verb = "is" if count == 1 else "are"
        lines.append(
            f"{_plural(count, 'trade-off fix', 'trade-off fixes')} ({', '.join(codes)}) {verb} applied only "
            f"with the rule selected by its code: `--select {','.join(codes)}`."
        )
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


def _fixes_listing(outcome, style) -> str:
    """`--show-fixes`: ruff's enumeration of what was fixed, per file and rule."""
    from torchlint.rules.base import registered_rules

    rules = registered_rules()
    lines = ["", f"Fixed {_plural(outcome.fixed, 'finding')}:"]
    for path in sorted(outcome.fixed_codes):
        lines.append(f"- {style.path(path)}:")
        for code, count in sorted(outcome.fixed_codes[path].items()):
            name = rules[code].name if code in rules else code
            lines.append(f"    {count} × {style.code(code)} ({name})")
    return "\n".join(lines) + "\n\n"


@main.command("rules")
def list_rules() -> None:
    """Print every rule: code, name, family, and whether it has a fix."""
    from torchlint.rules.base import registered_rules

    rows = [(c, r.name, r.family(), r.fix_availability.value) for c, r in registered_rules().items()]
    widths = [max(len(row[i]) for row in [("code", "name", "family", "fix"), *rows]) for i in range(4)]
    for row in [("code", "name", "family", "fix"), *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


TEXT_OR_JSON = click.Choice(("text", "json"))
_FIX_SENTENCES = {
    "always": "Fix is always available.",
    "sometimes": "Fix is sometimes available.",
    "none": "Fix is not available.",
}


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "every", is_flag=True, help="Print every rule's documentation.")
@click.option("--output-format", type=TEXT_OR_JSON, default="text", show_default=True)
def show_rule(code: str | None, every: bool, output_format: str) -> None:
    """Print the documentation of one rule (by code or name), or of every rule with --all."""
    import json

    from torchlint.docs import rule_doc, rule_summary, rule_url
    from torchlint.rules.base import registered_rules

    rules = registered_rules()
    if every == (code is not None):
        _usage_error("`torchlint rule` takes a CODE or --all")
    if every:
        wanted = list(rules)
    else:
        assert code is not None
        by_name = {rule.name: rule_code for rule_code, rule in rules.items()}
        single = by_name.get(code, code.upper())
        if single not in rules or rule_doc(single) is None:
            click.echo(f"error: unknown rule {code!r} (see `torchlint rules`)", err=True)
            sys.exit(2)
        wanted = [single]
    if output_format == "text":
        click.echo("\n\n".join((rule_doc(c) or "").rstrip("\n") for c in wanted))
        return
    entries = []
    for rule_code in wanted:
        rule, summary = rules[rule_code], rule_summary(rule_code)
        entries.append(
            {
                "name": rule.name,
                "code": rule_code,
                "linter": rule.family(),
                "summary": summary.short if summary else "",
                "message_formats": list(rule.messages.values()),
                "fix": _FIX_SENTENCES[rule.fix_availability.value],
                "fix_availability": rule.fix_availability.value.capitalize(),
                "explanation": rule_doc(rule_code),
                "severity": rule.severity.value,
                "url": rule_url(rule_code),
            }
        )
    click.echo(json.dumps(entries if every else entries[0], indent=2, ensure_ascii=False))


@main.command("linter")
@click.option("--output-format", type=TEXT_OR_JSON, default="text", show_default=True)
def list_linters(output_format: str) -> None:
    """Print the rule families: their prefixes, names and rules (ruff's `linter`)."""
    import json

    from torchlint.rules.base import registered_rules
    from torchlint.workspace.settings import FAMILIES

    rules = registered_rules()
    families = [
        {"prefix": f"TL{digit}", "name": name, "rules": [c for c in rules if c[2] == digit]}
        for digit, name in FAMILIES.items()
    ]
    if output_format == "json":
        click.echo(json.dumps(families, indent=2))
        return
    for family in families:
        shipped = ", ".join(family["rules"]) if family["rules"] else "no rules yet"
        click.echo(f"{family['prefix']} {family['name']} ({shipped})")


@main.command("config")
@click.argument("key", required=False)
@click.option("--schema", is_flag=True, help="Print the settings' JSON schema (torchlint.schema.json).")
def show_config(key: str | None, schema: bool) -> None:
    """List the `[tool.torchlint]` settings, or print one's meaning, default and type (ruff's `config`)."""
    from torchlint.workspace.settings import KEY_DOCS, describe_key

    if schema:
        import json

        from torchlint.rules.base import registered_rules
        from torchlint.workspace.schema import settings_schema

        options = {code: rule.options for code, rule in registered_rules().items()}
        click.echo(json.dumps(settings_schema(options), indent=2))
        return
    if key is None:
        for name in KEY_DOCS:
            click.echo(name)
        return
    described = describe_key(key)
    if described is None:
        _usage_error(f"unknown setting {key!r} (known: {', '.join(KEY_DOCS)})")
    default, kind, meaning = described
    click.echo(f"{meaning}\n\nDefault value: {default}\nType: {kind}")


@main.command("clean")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="TORCHLINT_CACHE_DIR",
    help="Also clear this cache folder (one torchlint made: it holds torchlint's CACHEDIR.TAG).",
)
def clean(cache_dir: Path | None) -> None:
    """Remove torchlint's caches in the current folder and below (and --cache-dir), as `ruff clean` does."""
    import os
    import shutil

    from torchlint.cache.folder import CACHE_FOLDER, is_torchlint_cache

    found = []
    for folder, subfolders, _ in os.walk("."):
        if CACHE_FOLDER in subfolders:
            found.append(Path(folder, CACHE_FOLDER))
        subfolders[:] = [d for d in subfolders if d not in (CACHE_FOLDER, ".git")]
    if cache_dir is not None and is_torchlint_cache(cache_dir):
        found.append(cache_dir)
    for cache in found:
        if cache.is_symlink():  # never remove what a link points at
            continue
        click.echo(f"Removing cache at: {os.path.normpath(cache)}", err=True)
        shutil.rmtree(cache, ignore_errors=True)


@main.command("version")
@click.option("--output-format", type=TEXT_OR_JSON, default="text", show_default=True)
def version(output_format: str) -> None:
    """Print torchlint's version (also `torchlint --version`)."""
    import json

    if output_format == "json":
        click.echo(json.dumps({"version": __version__}, indent=2))
    else:
        click.echo(f"torchlint {__version__}")


@main.command("lsp")
def lsp() -> None:
    """Run the Language Server over stdio (for editors; also `torchlint server`)."""
    try:
        import pygls  # noqa: F401 - the server's one dependency beyond the linter's

        from torchlint.lsp import serve
    except ImportError as error:
        click.echo(f"error: `torchlint lsp` needs pygls: pip install 'torchlint[lsp]' ({error})", err=True)
        sys.exit(2)
    serve()  # with the cyclic collector still off: the server's worker runs its passes (torchlint.lsp.worker)


main.add_command(lsp, "server")  # ruff's name for the same command


def entry() -> None:
    """The console script and `python -m torchlint`: one command per process. Its checks keep what they
    build until the process ends (the project's facts, which later files ask about), so the cyclic
    collector is off for the whole command, not only during each file's check: turning it back on between
    files started a pass over everything the last check allocated, to free almost nothing (0.2 s of a
    one-file check of yolov5's models/common.py), and at exit the interpreter's last pass walked all of
    it again; `gc.freeze()` at the end keeps it out of that pass. A run that fixes turns it back on (each
    pass of a fix leaves the trees it replaced in reference cycles: 241 MB -> 506 MB at its peak for the
    fixtures copied 30 times, without it); the Language Server, which lives for hours and drops each check's
    facts, runs the passes itself when the editor pauses (torchlint.lsp.worker); the in-process API never
    comes through here."""
    gc.disable()
    try:
        main()
    finally:
        gc.freeze()


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
    "--keep",
    is_flag=True,
    help="Measure each fix, then write those that paid (faster, or less memory for checkpointing, with "
    "agreeing losses), measured together.",
)
@click.option(
    "--tune",
    type=click.Choice(("workers",)),
    help="Search the training DataLoader's num_workers (then prefetch_factor) by measuring the script as it "
    "is with each; with --keep, write the winner.",
)
@click.option(
    "--tune-budget",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds of runs --tune may start (the first round always runs).",
)
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
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, readable=False, path_type=Path),
    help="Write the JSON report.",
)
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, readable=False, path_type=Path),
    help="Write the report as one self-contained HTML page (charts, findings, diff).",
)
@click.option(
    "--trace-dir", type=click.Path(file_okay=False, path_type=Path), help="Chrome traces, one per run."
)
@click.option(
    "--torchrun", type=click.IntRange(min=1), help="Run under torch.distributed.run with N processes."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(readable=False, path_type=Path),  # what it is, and why unreadable: the settings say
    help="Use this file's settings.",
)
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
    keep: bool,
    tune: str | None,
    tune_budget: float,
    repeat: int,
    threads: int | None,
    timeout: float,
    json_file: Path | None,
    html_file: Path | None,
    trace_dir: Path | None,
    torchrun: int | None,
    config_file: Path | None,
    keep_logs: bool,
) -> None:
    """Run SCRIPT before and after its fixes and report what changed: `torchlint verify train.py -- ARGS`.

    Exit status: 0 verified (no fix made training worse or changed its losses; checkpointing may cost
    time when it saves step memory), 1 a fix made training slower beyond noise, changed the losses or
    broke the script, 2 usage errors and an original run that
    crashed, exited with an error, never stepped an optimizer or timed out; 128 + N when stopped by
    signal N (SIGINT, SIGTERM, SIGHUP: the run under way is killed, the scratch folder removed). With
    --keep, a kept set that cannot be written (a file changed on disk meanwhile) is an error: exit 2.
    """
    import json

    from torchlint.api import verify as run_verify
    from torchlint.verify.report import ProgressDisplay, to_json, write_table
    from torchlint.verify.stopping import Stopped
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
        keep=keep,
        tune=tune,
        tune_budget=tune_budget,
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
    except Stopped as stopped:
        with contextlib.suppress(OSError):  # after SIGHUP, the terminal may be gone
            end_line = "\n" if display.live else ""  # the progress line is left unfinished
            click.echo(f"{end_line}error: {stopped}", err=True)
            if stopped.workdir is not None:
                click.echo(f"logs and raw results: {stopped.workdir}", err=True)
        sys.exit(stopped.exit_code)
    if json_file is not None:  # first: the table may go to a pipe that closes early
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    if html_file is not None:
        from torchlint.verify.html import render_html

        html_file.parent.mkdir(parents=True, exist_ok=True)
        html_file.write_text(render_html(to_json(report)), encoding="utf-8")
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

    from torchlint.linter import Linter
    from torchlint.rules.debug import describe
    from torchlint.workspace.source import SourceError, SourceFile

    try:
        source = SourceFile.read(file)
        module = cst.parse_module(source.text)
    except (SourceError, cst.ParserSyntaxError) as error:
        click.echo(f"error: {file}: {error}", err=True)
        sys.exit(2)
    facts = Linter().facts_of(file.as_posix(), source.text, module, file)
    click.echo(describe(facts), nl=False)


@debug.command("exports")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", help="How to print the export."
)
def debug_exports(file: Path, output_format: str) -> None:
    """Print FILE's export: what other files' questions read of it without building its facts."""
    import json

    from torchlint.facts.torch.exports import describe_export
    from torchlint.linter import Linter

    export = Linter().project_for(file.resolve()).export_of(file)
    if export is None:
        click.echo(
            f"error: {file}: CPython does not parse it (or it declares an encoding): no export", err=True
        )
        sys.exit(2)
    if output_format == "json":
        click.echo(json.dumps(dict(zip(export._fields, export.to_json(), strict=True)), indent=2))
    else:
        click.echo(describe_export(export), nl=False)
