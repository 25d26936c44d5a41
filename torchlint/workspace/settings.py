"""`[tool.torchlint]` in pyproject.toml -> `Settings`, validated strictly.

A typo in a config key silently doing nothing is worse than an error: unknown keys, wrong types and unknown
rule codes stop the run (exit 2) with the file, the key and what was expected.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torchlint.workspace.fs import CACHE_FOLDER, FileSystem

# The rule families: the hundred of a code (TL2xx is data loading). A family prefix (`TL4`) is a valid
# selector before any of its rules ship; `torchlint rules` and the docs name families from here.
FAMILIES = {
    "0": "torchlint",  # its own: files it could not read, its noqa comments
    "1": "compile",
    "2": "data loading",
    "3": "mixed precision",
    "4": "checkpointing",
    "5": "tuning guide",
    "6": "distributed",
}

# What folder walks check, as ruff's `include`: Python sources, stubs and Jupyter notebooks.
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")

DEFAULT_EXCLUDES = (
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    ".ipynb_checkpoints",  # Jupyter's autosaved copies of notebooks (ruff excludes them too)
    CACHE_FOLDER,
)
DEVICES = ("auto", "cuda", "cpu")
_CODE = re.compile(r"^(ALL|TL(\d{1,3})?)$")


class ConfigError(Exception):
    """A configuration problem; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class CliOverrides:
    """The command-line options that change settings, applied over each file's `[tool.torchlint]` (or over
    the defaults, with `--isolated`): first the `--config KEY=VALUE` overrides (`config`, already parsed by
    `parse_inline`), then the flags. `--select`, `--exclude`, `--per-file-ignores` replace; `--extend-select`,
    `--ignore` (and `--extend-ignore`), `--extend-exclude`, `--extend-per-file-ignores` add; the others set
    (None: not given)."""

    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    extend_per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool | None = None
    torch_version: tuple[int, int] | None = None
    exit_non_zero_on_info: bool | None = None
    ignore_noqa: bool = False
    fixable: tuple[str, ...] = ()
    extend_fixable: tuple[str, ...] = ()
    unfixable: tuple[str, ...] = ()
    config: tuple[tuple[str, Any], ...] = ()  # `--config KEY=VALUE`, in the order given

    def validate(self, known: list[str]) -> None:
        """ConfigError naming the option for a selector that is not a rule code or prefix."""
        for option, selectors in (
            ("--select", self.select),
            ("--extend-select", self.extend_select),
            ("--ignore", self.ignore),
            ("--fixable", self.fixable),
            ("--extend-fixable", self.extend_fixable),
            ("--unfixable", self.unfixable),
        ):
            validate_selectors(selectors, known, option)
        for option, entries in (
            ("--per-file-ignores", self.per_file_ignores or ()),
            ("--extend-per-file-ignores", self.extend_per_file_ignores),
        ):
            for pattern, codes in entries:
                validate_selectors(codes, known, f"{option}: {pattern!r}")
                _validate_patterns((pattern,), option)
        for option, patterns in (
            ("--exclude", self.exclude or ()),
            ("--extend-exclude", self.extend_exclude),
        ):
            _validate_patterns(patterns, option)

    def apply(self, settings: Settings, known: list[str], rule_options: dict[str, dict]) -> Settings:
        """These overrides over `settings` (a file's, or the defaults)."""
        changes: dict[str, Any] = {}
        if self.config:
            changes.update(
                _changes_from_table(dict(self.config), lambda k: f"--config {k}", known, rule_options)
            )
            settings = replace(settings, **changes)
            changes = {}
        if self.select:
            changes["select"] = self.select
        if self.extend_select:
            changes["extend_select"] = settings.extend_select + self.extend_select
        if self.ignore:
            changes["ignore"] = settings.ignore + self.ignore
        if self.unsafe_fixes is not None:
            changes["unsafe_fixes"] = self.unsafe_fixes
        if self.per_file_ignores is not None:
            changes["per_file_ignores"] = self.per_file_ignores
        if self.extend_per_file_ignores:
            base = changes.get("per_file_ignores", settings.per_file_ignores)
            changes["per_file_ignores"] = base + self.extend_per_file_ignores
        if self.exclude is not None:
            changes["exclude"] = self.exclude
        if self.extend_exclude:
            changes["extend_exclude"] = settings.extend_exclude + self.extend_exclude
        if self.respect_gitignore is not None:
            changes["respect_gitignore"] = self.respect_gitignore
        if self.torch_version is not None:
            changes["torch_version"] = self.torch_version
        if self.exit_non_zero_on_info is not None:
            changes["exit_non_zero_on_info"] = self.exit_non_zero_on_info
        if self.ignore_noqa:
            changes["ignore_noqa"] = True
        if self.fixable:
            changes["fixable"] = self.fixable
        if self.extend_fixable:
            changes["extend_fixable"] = settings.extend_fixable + self.extend_fixable
        if self.unfixable:
            changes["unfixable"] = settings.unfixable + self.unfixable
        return replace(settings, **changes) if changes else settings


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("ALL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    extend_include: tuple[str, ...] = ()
    respect_gitignore: bool = True
    device: str = "auto"
    torch_version: tuple[int, int] | None = None
    unsafe_fixes: bool = False
    exit_non_zero_on_info: bool = False
    ignore_noqa: bool = False  # `--ignore-noqa` only (as ruff): report what noqa comments suppress
    fixable: tuple[str, ...] = ("ALL",)
    extend_fixable: tuple[str, ...] = ()
    unfixable: tuple[str, ...] = ()
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    # The folder relative patterns are anchored at (the config file's folder), and the file itself.
    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None

    @property
    def excludes(self) -> tuple[str, ...]:
        return self.exclude + self.extend_exclude

    @property
    def includes(self) -> tuple[str, ...]:
        return self.include + self.extend_include

    def may_fix(self, code: str) -> bool:
        """Whether `--fix` may apply this rule's fixes (`fixable`, `extend-fixable`, `unfixable`): ruff's
        resolution, as for `select`: the most specific selector wins, and on a tie `unfixable`."""
        allowed = _best(self.fixable + self.extend_fixable, code)
        return allowed >= 0 and allowed > _best(self.unfixable, code)

    @property
    def explicit_codes(self) -> frozenset[str]:
        """Rules selected by their full code (`--select TL401`, `extend-select = ["TL401"]`), not through a
        prefix or ALL: only these apply the fixes of trade-offs (`diagnostics.fix_applies`)."""
        return frozenset(code for code in self.select + self.extend_select if len(code) == 5)


def selector_matches(selector: str, code: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def enabled_codes(settings: Settings, codes: list[str], ignored: tuple[str, ...] = ()) -> set[str]:
    """ruff's resolution: the most specific selector wins; on a tie, ignore wins."""
    selectors = settings.select + settings.extend_select
    ignores = settings.ignore + ignored
    enabled = set()
    for code in codes:
        best_select = max((_specificity(s) for s in selectors if selector_matches(s, code)), default=-1)
        best_ignore = max((_specificity(s) for s in ignores if selector_matches(s, code)), default=-1)
        if best_select >= 0 and best_select > best_ignore:
            enabled.add(code)
    return enabled


def _best(selectors: tuple[str, ...], code: str) -> int:
    return max((_specificity(s) for s in selectors if selector_matches(s, code)), default=-1)


def _specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def validate_selectors(selectors: tuple[str, ...] | list[str], known: list[str], where: str) -> None:
    for selector in selectors:
        if not isinstance(selector, str) or not _CODE.match(selector):
            raise ConfigError(
                f"{where}: {selector!r} is not a rule code or prefix (expected e.g. TL303, TL3, ALL)"
            )
        if selector == "ALL" or len(selector) < 5 and selector[2:3] in FAMILIES and selector[2:3] != "0":
            continue  # families exist even before all their rules do
        if not any(code.startswith(selector) for code in known):
            raise ConfigError(f"{where}: unknown rule code {selector!r}")


# -- reading pyproject.toml -------------------------------------------------------------------------------

_KEYS: dict[str, str] = {
    "select": "list of rule codes",
    "extend-select": "list of rule codes",
    "ignore": "list of rule codes",
    "per-file-ignores": "table of glob = list of rule codes",
    "exclude": "list of glob patterns",
    "extend-exclude": "list of glob patterns",
    "include": "list of glob patterns",
    "extend-include": "list of glob patterns",
    "respect-gitignore": "true or false",
    "device": "one of " + ", ".join(repr(d) for d in DEVICES),
    "torch-version": 'a version string like "2.1"',
    "unsafe-fixes": "true or false",
    "exit-non-zero-on-info": "true or false",
    "fixable": "list of rule codes",
    "extend-fixable": "list of rule codes",
    "unfixable": "list of rule codes",
    "rule-options": "table of rule code = table of options",
    "extend": "a path to another configuration file",
}


# What `torchlint config [KEY]` prints: each key's default and meaning (README's Configuration table).
KEY_DOCS: dict[str, tuple[str, str]] = {
    "select": ('["ALL"]', "Rule codes or prefixes to enable (`--select` replaces it)."),
    "extend-select": ("[]", "Rule codes or prefixes to enable in addition to `select`."),
    "ignore": ("[]", "Rule codes or prefixes to disable (`--ignore` and `--extend-ignore` add to it)."),
    "per-file-ignores": (
        "{}",
        "Codes to disable in the files a glob matches (.gitignore syntax, relative to the config's folder).",
    ),
    "exclude": (
        "[" + ", ".join(f'"{e}"' for e in DEFAULT_EXCLUDES) + "]",
        "Paths that folder walks skip (.gitignore syntax, relative to the config's folder); "
        "replaces the defaults.",
    ),
    "extend-exclude": ("[]", "More excludes, added to `exclude`."),
    "include": (
        "[" + ", ".join(f'"{e}"' for e in DEFAULT_INCLUDE) + "]",
        "The files folder walks check: a pattern without `/` matches the file's name, one with `/` its path "
        "relative to the config's folder; replaces the defaults (a file named on the command line is "
        "always checked).",
    ),
    "extend-include": ("[]", "More includes, added to `include`."),
    "respect-gitignore": ("true", "Skip the files that `.gitignore` files ignore."),
    "device": (
        '"auto"',
        "What to assume when the code does not say which device it trains on: `cpu` silences the rules that "
        "only matter on a GPU (TL101, TL201, TL202, TL301); `cuda` treats an unknown device as CUDA.",
    ),
    "torch-version": (
        "the torch the project's dependency files pin",
        'The oldest torch the project supports ("MAJOR.MINOR"); '
        "rules whose replacement API is newer stay silent. Unset, a pin or upper bound of torch in "
        "requirements*.txt, environment.yml, pyproject.toml or setup.py at the project root gives it.",
    ),
    "unsafe-fixes": ("false", "Let `--fix` apply unsafe fixes, as if `--unsafe-fixes` were given."),
    "fixable": ('["ALL"]', "Rule codes or prefixes whose fixes `--fix` may apply (`--fixable` replaces it)."),
    "extend-fixable": ("[]", "Rule codes or prefixes added to `fixable`."),
    "unfixable": ("[]", "Rule codes or prefixes whose fixes `--fix` never applies (shown, not applied)."),
    "exit-non-zero-on-info": (
        "false",
        "Let the trade-offs (`info` findings, TL401) set exit status 1 and fail a pre-commit hook, as the "
        "other findings do.",
    ),
    "rule-options": (
        "{}",
        "Options for one rule, `[tool.torchlint.rule-options.TLxxx]`, as the rule's doc lists them.",
    ),
    "extend": (
        "none",
        "Another configuration file this one builds on (relative to this file's folder; `~` and `$VARS` "
        "expand): its settings first, then this file's keys replace them, except `extend-select`, "
        "`extend-exclude`, `extend-include` and `per-file-ignores`, which add to them.",
    ),
}


def describe_key(key: str) -> tuple[str, str, str] | None:
    """(default, type, meaning) of a `[tool.torchlint]` key, for `torchlint config KEY`; None if unknown."""
    if key not in KEY_DOCS:
        return None
    default, meaning = KEY_DOCS[key]
    return default, _KEYS[key], meaning


def has_tool_table(pyproject: Path, fs: FileSystem) -> bool:
    """Cheap test used while walking up from a file: does this pyproject.toml configure torchlint?

    Any file that names torchlint is parsed: TOML can spell the table `[tool."torchlint"]` or as dotted keys
    under `[tool]`. A file that exists but cannot be read is an error, not a file without configuration."""
    try:
        text = _config_text(pyproject, fs)
    except (FileNotFoundError, IsADirectoryError):
        return False
    return "torchlint" in text and _tool_table(_parse(pyproject, text)) is not None


def check_config_file(config_file: Path, fs: FileSystem) -> None:
    """ConfigError saying what `--config FILE` is when it is no file to read: missing, a folder, or a
    FIFO or device (not opened: reading a FIFO would wait for a writer)."""
    kind = fs.kind(config_file)
    if kind is None:
        raise ConfigError(f"{config_file}: config file does not exist")
    if kind == "dir":
        raise ConfigError(f"{config_file}: a folder, not a config file")
    if kind != "file":
        raise ConfigError(f"{config_file}: not a regular file")


def load_settings(
    config_file: Path, known_codes: list[str], rule_options: dict[str, dict], fs: FileSystem
) -> Settings:
    """Settings from a pyproject.toml (its [tool.torchlint] table) or a torchlint.toml-style file, read
    through `fs` (the run's FileSystem)."""
    try:
        text = _config_text(config_file, fs)
    except OSError as error:
        raise ConfigError(f"{config_file}: cannot read: {error.strerror or error}") from None
    table = _table_of(config_file, text, known_codes, rule_options, fs, ())
    return _settings_from_table(table, config_file, known_codes, rule_options)


# Keys whose values an extending file adds to those of the file it extends (the others replace them).
_ADDED_BY_EXTEND = ("extend-select", "extend-exclude", "extend-include", "extend-fixable")


def _table_of(
    config_file: Path,
    text: str,
    known_codes: list[str],
    rule_options: dict[str, dict],
    fs: FileSystem,
    chain: tuple[Path, ...],
) -> dict[str, Any]:
    """The file's settings table, merged over the one it `extend`s (which is read and validated first,
    so that an error in it names it)."""
    document = _parse(config_file, text)
    table = _tool_table(document)
    if table is None:
        table = {} if config_file.name == "pyproject.toml" else document
    if "extend" not in table:
        return table
    prefix = "tool.torchlint." if config_file.name == "pyproject.toml" else ""
    where = f"{config_file}: {prefix}extend"
    value = table["extend"]
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected {_KEYS['extend']}, got {value!r}")
    base = Path(os.path.expandvars(os.path.expanduser(value)))
    base = base if base.is_absolute() else config_file.parent / base
    if base.resolve() in chain or base.resolve() == config_file.resolve():
        raise ConfigError(f"{where}: {value!r} extends itself (a cycle)")
    try:
        base_text = _config_text(base, fs)
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"{where}: {value!r}: no such configuration file ({base})") from None
    inherited = _table_of(base, base_text, known_codes, rule_options, fs, (*chain, config_file.resolve()))
    _settings_from_table(inherited, base, known_codes, rule_options)  # validated where it is written
    merged = {key: value for key, value in inherited.items() if key != "extend"}
    for key, own in table.items():
        if key == "extend":
            continue
        if key in _ADDED_BY_EXTEND and isinstance(own, list) and isinstance(merged.get(key), list):
            merged[key] = [*merged[key], *own]
        elif key == "per-file-ignores" and isinstance(own, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **own}
        else:
            merged[key] = own
    return merged


def _config_text(path: Path, fs: FileSystem) -> str:
    """The config's text; a file that is not UTF-8 (which TOML requires) is a ConfigError naming it, for a
    pyproject.toml met on the way up and for `--config FILE` alike. A missing file or a folder raises as
    usual (a pyproject.toml that is neither is no configuration); other read errors are a ConfigError."""
    try:
        return fs.read_text(path)
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text, which TOML requires ({error.reason} at byte {error.start})"
        ) from None


def _validate_patterns(patterns: tuple[str, ...], where: str) -> None:
    """ConfigError naming the option for a pattern that .gitignore syntax rejects (`"\\"`)."""
    import pathspec  # only when a config is read: a replayed run reads none

    for pattern in patterns:
        try:
            pathspec.PathSpec.from_lines("gitignore", [pattern])
        except Exception as error:  # noqa: BLE001 - pathspec raises several kinds for a bad pattern
            raise ConfigError(f"{where}: invalid pattern {pattern!r}: {error}") from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    # Imported here: Settings and CliOverrides are also used by a replayed run, which reads no config.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None


def _tool_table(document: dict[str, Any]) -> dict[str, Any] | None:
    tool = document.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("torchlint"), dict):
        return tool["torchlint"]
    return None


def _settings_from_table(
    table: dict[str, Any], path: Path, known: list[str], rule_options: dict[str, dict]
) -> Settings:
    prefix = "tool.torchlint" if path.name == "pyproject.toml" else ""

    def where(key: str) -> str:
        return f"{path}: {prefix + '.' if prefix else ''}{key}"

    changes = _changes_from_table(table, where, known, rule_options)
    return Settings(root=path.parent.resolve(), source=path, **changes)


def parse_inline(text: str) -> tuple[str, Any]:
    """`--config KEY=VALUE` (the value in TOML: `--config 'select = ["TL3"]'`) -> (key, value); the value is
    validated when it is applied, as a config file's would be."""
    document = _parse(Path("--config"), text)
    if len(document) != 1:
        raise ConfigError(f"--config: expected one KEY = VALUE (a TOML key and value), got {text!r}")
    ((key, value),) = document.items()
    if key not in _KEYS:
        raise ConfigError(f"--config {key}: unknown key (known: {', '.join(sorted(_KEYS))})")
    return key, value


def _changes_from_table(
    table: dict[str, Any], where: Callable[[str], str], known: list[str], rule_options: dict[str, dict]
) -> dict[str, Any]:
    """The Settings fields a table sets, validated; `where(key)` names a key in an error."""

    def expect(key: str, ok: bool) -> None:
        if not ok:
            raise ConfigError(f"{where(key)}: expected {_KEYS[key]}, got {table[key]!r}")

    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"{where(key)}: unknown key (known: {', '.join(sorted(_KEYS))})")

    def string_list(key: str) -> tuple[str, ...] | None:
        if key not in table:
            return None
        value = table[key]
        expect(key, isinstance(value, list) and all(isinstance(v, str) for v in value))
        return tuple(value)

    changes: dict[str, Any] = {}
    for key in ("select", "extend-select", "ignore", "fixable", "extend-fixable", "unfixable"):
        codes = string_list(key)
        if codes is not None:
            codes = tuple(code.upper() for code in codes)
            validate_selectors(codes, known, where(key))
            changes[key.replace("-", "_")] = codes
    for key in ("exclude", "extend-exclude", "include", "extend-include"):
        patterns = string_list(key)
        if patterns is not None:
            _validate_patterns(patterns, where(key))
            changes[key.replace("-", "_")] = patterns
    if "per-file-ignores" in table:
        value = table["per-file-ignores"]
        expect("per-file-ignores", isinstance(value, dict))
        entries = []
        for pattern, codes in value.items():
            if not (isinstance(codes, list) and all(isinstance(c, str) for c in codes)):
                raise ConfigError(f"{where('per-file-ignores')}.{pattern!r}: expected a list of rule codes")
            codes = [code.upper() for code in codes]
            validate_selectors(codes, known, f"{where('per-file-ignores')}.{pattern!r}")
            _validate_patterns((pattern,), f"{where('per-file-ignores')}.{pattern!r}")
            entries.append((pattern, tuple(codes)))
        changes["per_file_ignores"] = tuple(entries)
    for key in ("respect-gitignore", "unsafe-fixes", "exit-non-zero-on-info"):
        if key in table:
            expect(key, isinstance(table[key], bool))
            changes[key.replace("-", "_")] = table[key]
    if "device" in table:
        expect("device", table["device"] in DEVICES)
        changes["device"] = table["device"]
    if "torch-version" in table:
        version = parse_torch_version(table["torch-version"])
        expect("torch-version", version is not None)
        changes["torch_version"] = version
    if "rule-options" in table:
        changes["rule_options"] = _rule_options(table["rule-options"], where("rule-options"), rule_options)
    return changes


def parse_torch_version(value: Any) -> tuple[int, int] | None:
    """`"2.1"` or `"2.1.3"` -> (2, 1); None for anything else."""
    match = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", value) if isinstance(value, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _rule_options(value: Any, where: str, declared: dict[str, dict]) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected {_KEYS['rule-options']}, got {value!r}")
    result: dict[str, dict[str, Any]] = {}
    for code, options in value.items():
        if code not in declared:
            raise ConfigError(f"{where}.{code}: unknown rule code")
        if not isinstance(options, dict):
            raise ConfigError(f"{where}.{code}: expected a table of options, got {options!r}")
        for name, option_value in options.items():
            if name not in declared[code]:
                known = ", ".join(sorted(declared[code])) or "none"
                raise ConfigError(f"{where}.{code}.{name}: unknown option (options of {code}: {known})")
            expected_type, _ = declared[code][name]
            if not isinstance(option_value, expected_type) or (
                expected_type is int and isinstance(option_value, bool)
            ):
                raise ConfigError(
                    f"{where}.{code}.{name}: expected {expected_type.__name__}, got {option_value!r}"
                )
        result[code] = dict(options)
    return result
