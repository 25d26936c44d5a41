"""Which files a run checks, and which settings govern each.

Like ruff: directories are walked recursively for `.py` and `.pyi` files; `exclude` patterns and
`.gitignore` files prune the walk; a file named explicitly is checked even if excluded, unless
`--force-exclude` (what pre-commit needs, since it names files). Settings come from the nearest configuration
above each file — in one folder `.torchlint.toml`, then `torchlint.toml`, then a `pyproject.toml` with a
`[tool.torchlint]` table, the first found wins, as ruff reads `.ruff.toml`, `ruff.toml` and
`pyproject.toml` — else from the user's own `torchlint.toml` (`user_config`), else the defaults; none with
`--isolated`; or from `--config` for all of them. Every file-system question (configs, .gitignore files, the
walk, which paths are the same file) is asked of the run's FileSystem (`torchlint.workspace.fs`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pathspec

from torchlint.workspace.declared_torch import declared_torch
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.roots import project_root
from torchlint.workspace.settings import (
    CliOverrides,
    ConfigError,
    Settings,
    check_config_file,
    has_tool_table,
    load_settings,
)

# A folder with one of these names is a file name gone wrong, reported (TL002) rather than walked.
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")

# The configuration files of one folder, in precedence order (ruff's: the dotted name first).
CONFIG_FILES = (".torchlint.toml", "torchlint.toml", "pyproject.toml")


def user_config(environ: dict[str, str] | None = None) -> Path | None:
    """The user's own configuration, used where no project configures torchlint (as ruff reads
    `~/.config/ruff/ruff.toml`): `$XDG_CONFIG_HOME/torchlint/torchlint.toml`, else
    `~/.config/torchlint/torchlint.toml` (on Windows `%APPDATA%\\torchlint\\torchlint.toml`). The path only;
    whether it exists is asked of the run's FileSystem."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or (environ.get("APPDATA") if os.name == "nt" else None)
    if not base:
        home = environ.get("HOME") or environ.get("USERPROFILE")
        if not home:
            return None
        base = os.path.join(home, ".config")
    return Path(base) / "torchlint" / "torchlint.toml"


class SettingsResolver:
    """Settings per directory, found once per directory and cached."""

    def __init__(
        self,
        known_codes: list[str],
        rule_options: dict[str, dict],
        config_file: Path | None = None,
        cli: CliOverrides | None = None,
        *,
        fs: FileSystem,
        isolated: bool = False,
    ) -> None:
        self.fs = fs  # the run's: configs are read, and roots found, through it
        self.known_codes = known_codes
        self.rule_options = rule_options
        self.cli = cli or CliOverrides()
        self._by_dir: dict[Path, Settings] = {}
        self._by_file: dict[Path, Settings] = {}
        self._fixed: Settings | None = None
        self.isolated = isolated  # `--isolated`: no configuration file is read, only the defaults
        self.roots: dict[Path, Path] = {}  # project_root's memo for this run
        self.user = None if isolated else user_config()  # read only where no project configures torchlint
        if config_file is not None and isolated:
            raise ConfigError(f"--config {config_file}: a config file cannot be used with --isolated")
        if config_file is not None:
            check_config_file(config_file, fs)
            self._fixed = self._load(config_file)

    def _load(self, path: Path) -> Settings:
        cached = self._by_file.get(path)
        if cached is None:
            settings = self._declared(load_settings(path, self.known_codes, self.rule_options, self.fs))
            cached = self._by_file[path] = self.cli.apply(settings, self.known_codes, self.rule_options)
        return cached

    def for_directory(self, directory: Path) -> Settings:
        if self._fixed is not None:
            return self._fixed
        found = self._by_dir.get(directory)  # as given (resolving costs a syscall per folder level)
        if found is not None:
            return found
        given, directory = directory, directory.resolve()
        found = self._by_dir.get(directory)
        if found is None:
            candidate = None if self.isolated else self._config_in(directory)
            if candidate is not None:
                found = self._load(candidate)
            elif directory.parent != directory:
                found = self.for_directory(directory.parent)
                if found.source in (None, self.user):  # defaults, anchored at the nearest project root
                    found = self._defaults(project_root(directory, self.fs, self.roots))
            else:
                found = self._defaults(project_root(directory, self.fs, self.roots))
            self._by_dir[directory] = found
        self._by_dir[given] = found
        return found

    def _config_in(self, directory: Path) -> Path | None:
        """The configuration file of this folder, by `CONFIG_FILES` precedence (a pyproject.toml counts
        only with a `[tool.torchlint]` table; a torchlint.toml counts whatever it holds, as ruff's)."""
        for name in CONFIG_FILES:
            candidate = directory / name
            if not self.fs.is_file(candidate):
                continue
            if name != "pyproject.toml" or has_tool_table(candidate, self.fs):
                return candidate
        return None

    def _defaults(self, root: Path) -> Settings:
        """Where no project configures torchlint: the user's own configuration (its settings, anchored at
        the project root like the defaults), else the defaults."""
        key = root / "<defaults>"
        if key not in self._by_file:
            settings = Settings(root=root)
            if self.user is not None and self.fs.is_file(self.user):
                found = load_settings(self.user, self.known_codes, self.rule_options, self.fs)
                settings = replace(found, root=root)
            settings = self._declared(settings)
            self._by_file[key] = self.cli.apply(settings, self.known_codes, self.rule_options)
        return self._by_file[key]

    def _declared(self, settings: Settings) -> Settings:
        """`torch-version` unset: the oldest torch the project's dependency files declare, if any."""
        if settings.torch_version is not None or settings.root is None:
            return settings
        declared = declared_torch(settings.root, self.fs)
        return replace(settings, torch_version=declared) if declared is not None else settings

    def for_file(self, path: Path) -> Settings:
        return self.for_directory(path.parent)


@dataclass(frozen=True)
class Target:
    """A file to check, as the user will see it named, with its settings."""

    path: Path
    display: str
    settings: Settings


def relative_to_root(path: Path, settings: Settings) -> str | None:
    """`path` relative to the config's folder (posix), or None outside it. String work: it runs per entry."""
    text = os.path.realpath(path) if not path.is_absolute() else os.path.normpath(path)
    root = str(settings.root)
    if text == root:
        return ""
    if not text.startswith(root.rstrip(os.sep) + os.sep):
        resolved = os.path.realpath(path)  # through symlinks, as a last resort
        if not resolved.startswith(root.rstrip(os.sep) + os.sep):
            return None
        text = resolved
    return text[len(root.rstrip(os.sep)) + 1 :].replace(os.sep, "/")


def _spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    return pathspec.PathSpec.from_lines("gitignore", patterns)


_spec_cache: dict[tuple[str, ...], pathspec.PathSpec] = {}


def is_excluded(path: Path, settings: Settings, is_dir: bool = False, below: Path | None = None) -> bool:
    """Exclude patterns use .gitignore syntax, relative to the config's folder; names match at any depth.
    With `below`, only the part of the path below that folder is matched."""
    patterns = settings.excludes
    spec = _spec_cache.get(patterns)
    if spec is None:
        spec = _spec_cache[patterns] = _spec(patterns)
    if below is not None:
        candidate = os.path.relpath(path.absolute(), below).replace(os.sep, "/")
    else:
        relative = relative_to_root(path, settings)
        candidate = relative if relative is not None else path.name
    if is_dir:
        candidate += "/"
    return spec.match_file(candidate)


def is_included(path: Path, settings: Settings) -> bool:
    """Whether a folder walk checks this file (`include`, `extend-include`): a pattern without `/` matches
    the file's name, one with `/` its path relative to the config's folder (.gitignore syntax)."""
    patterns = settings.includes
    split = _include_cache.get(patterns)
    if split is None:
        with_folders = tuple(p for p in patterns if "/" in p)
        names = tuple(p for p in patterns if "/" not in p)
        split = _include_cache[patterns] = (names, _spec(with_folders) if with_folders else None)
    names, spec = split
    if any(fnmatch.fnmatchcase(path.name, pattern) for pattern in names):
        return True
    return spec is not None and spec.match_file(relative_to_root(path, settings) or path.name)


# include patterns -> (those matched against the name, the spec of those with a folder): once per setting
_include_cache: dict[tuple[str, ...], tuple[tuple[str, ...], pathspec.PathSpec | None]] = {}


def matches_any(path: Path, settings: Settings, pattern: str) -> bool:
    relative = relative_to_root(path, settings) or path.name
    return _spec((pattern,)).match_file(relative)


def _gitignore_spec(lines: list[str]) -> pathspec.GitIgnoreSpec:
    """The spec of a .gitignore; like git, a line it cannot read as a pattern is skipped."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # noqa: BLE001 - pathspec raises several kinds for a bad pattern
        kept = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except Exception:  # noqa: BLE001
                continue
            kept.append(line)
        return pathspec.GitIgnoreSpec.from_lines(kept)


class GitIgnore:
    """The .gitignore files from the repository root down, each applying to its own folder."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._chains: dict[Path, list[tuple[str, pathspec.GitIgnoreSpec]]] = {}
        self._roots: dict[Path, Path | None] = {}

    def _spec_for(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            spec = None
            ignore_file = directory / ".gitignore"
            if self.fs.is_file(ignore_file):
                try:
                    lines = self.fs.read_text(ignore_file, errors="replace").splitlines()
                    spec = _gitignore_spec(lines)
                except OSError:
                    spec = None
            self._specs[directory] = spec
        return self._specs[directory]

    def _chain(self, directory: Path) -> list[tuple[str, pathspec.GitIgnoreSpec]]:
        """The .gitignore specs that apply in `directory`, from the repository root down (cached)."""
        chain = self._chains.get(directory)
        if chain is None:
            root = _repository_root(directory, self._roots, self.fs)
            if root is None:
                chain = []
            else:
                chain = [] if directory == root else list(self._chain(directory.parent))
                spec = self._spec_for(directory)
                if spec is not None:
                    chain.append((str(directory).rstrip(os.sep), spec))
            self._chains[directory] = chain
        return chain

    def ignored(self, path: Path, is_dir: bool) -> bool:
        path = path.absolute()
        text = str(path)
        verdict = False
        for folder, spec in self._chain(path.parent):
            relative = text[len(folder) + 1 :].replace(os.sep, "/") + ("/" if is_dir else "")
            result = spec.check_file(relative)
            if result.include is not None:
                verdict = result.include
        return verdict


def _repository_root(directory: Path, memo: dict[Path, Path | None], fs: FileSystem) -> Path | None:
    """Memoised per run (not per process): a long-lived process (the LSP) must see a new .git."""
    if directory not in memo:
        if fs.exists(directory / ".git"):
            memo[directory] = directory
        elif directory.parent == directory:
            memo[directory] = None
        else:
            memo[directory] = _repository_root(directory.parent, memo, fs)
    return memo[directory]


@dataclass
class Notes:
    """What discovery tells the user besides the files: skipped symlinks (warnings), named
    paths it cannot check (errors: the run then never reports success)."""

    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def discover(
    paths: list[Path], resolver: SettingsResolver, force_exclude: bool, notes: Notes | None = None
) -> list[Target]:
    """Every file to check, each once, sorted as the output will be; asked of the resolver's FileSystem.

    A missing path named on the command line is a target like the others: reading it fails, which is a
    TL002 finding for that path, and the other paths are still checked (ruff's E902).
    A symlink met in a folder walk is followed only while it stays inside the folder walked: one that
    leads out (to `~/.git-credentials`, to another project's file) is not the project's, would be printed
    in findings and rewritten by `--fix`, and is skipped, with a warning. A path named on the command line
    is always followed."""
    fs = resolver.fs
    notes = notes if notes is not None else Notes()
    gitignore = GitIgnore(fs)
    seen: set[object] = set()
    targets: list[Target] = []
    for path in paths:
        for file, display in _expand(path, resolver, gitignore, force_exclude, notes):
            real = _identity(file, fs)
            if real in seen:
                continue
            seen.add(real)
            targets.append(Target(file, display, resolver.for_file(file)))
    targets.sort(key=lambda t: t.display)
    return targets


def _identity(file: Path, fs: FileSystem) -> object:
    """The same file reached twice (through a symlink, or named twice) has one identity: its inode."""
    identity = fs.identity(file)
    if identity is None:  # missing, dangling or a symlink loop: reported (TL002) when it is read
        try:
            return file.resolve()
        except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
            return os.path.abspath(file)
    return identity


def _expand(
    path: Path,
    resolver: SettingsResolver,
    gitignore: GitIgnore,
    force_exclude: bool,
    notes: Notes,
) -> Iterator[tuple[Path, str]]:
    if not resolver.fs.is_dir(path) or path.name.endswith(PYTHON_SUFFIXES):  # a folder x.py: TL002
        if force_exclude and force_excluded(path, resolver.for_file(path), gitignore):
            return
        yield path, display_name(path)
        return
    visited: set[tuple[int, int]] = set()
    settings = resolver.for_directory(path.absolute())
    dropped = is_excluded(path, settings, True) or (
        settings.respect_gitignore and gitignore.ignored(path, True)
    )
    if dropped and force_exclude:
        return
    # A folder named on the command line is checked even when its own name is excluded (`build/`) or
    # git-ignored, as ruff does: below it, only what lies below it is matched.
    inside = _Inside(path.resolve(), notes.warnings, notes.errors, path.absolute() if dropped else None)
    yield from _walk(path, resolver, gitignore, visited, force_exclude, inside)


@dataclass
class _Inside:
    """The real path of the folder a walk started from, and where what it skips is noted."""

    top: Path
    notes: list[str]
    errors: list[str]
    named_excluded: Path | None = None  # the named folder, when its own name is excluded or git-ignored

    def drops(
        self, child: Path, settings: Settings, is_dir: bool, gitignore: GitIgnore, fs: FileSystem
    ) -> bool:
        """Whether the walk leaves `child` out: excluded, git-ignored, or a virtual environment (a folder
        with a `pyvenv.cfg`, whatever its name: `env/`, `.direnv/python-3.11/`)."""
        if self.named_excluded is not None:
            if is_excluded(child, settings, is_dir, below=self.named_excluded):
                return True
        elif is_excluded(child, settings, is_dir) or (
            settings.respect_gitignore and gitignore.ignored(child, is_dir)
        ):
            return True
        return is_dir and fs.is_file(child / "pyvenv.cfg")

    def keeps(self, link: Path) -> bool:
        try:
            real = link.resolve()
        except (RuntimeError, OSError):  # a loop: reported (TL002) when it is read
            return True
        if real == self.top or self.top in real.parents:
            return True
        self.notes.append(
            f"{display_name(link)}: not checked: a symlink to {real}, outside the folder checked "
            "(name it on the command line to check it)"
        )
        return False


def force_excluded(path: Path, settings: Settings, gitignore: GitIgnore) -> bool:
    """What `--force-exclude` drops of a file named explicitly (or piped in as `--stdin-filename path`):
    one its settings exclude, or git ignores."""
    return is_excluded(path, settings) or (settings.respect_gitignore and gitignore.ignored(path, False))


def _walk(
    directory: Path,
    resolver: SettingsResolver,
    gitignore: GitIgnore,
    visited: set[tuple[int, int]],
    force_exclude: bool,
    inside: _Inside,
) -> Iterator[tuple[Path, str]]:
    directory = directory.absolute()
    fs = resolver.fs
    key = fs.identity(directory)
    if key is None:
        return
    if key in visited:  # a symlink loop, or the same folder reached twice
        return
    visited.add(key)
    settings = resolver.for_directory(directory)
    try:
        entries = fs.scandir(directory)
    except OSError as error:  # unreadable: what it holds was not checked, and the run must say so
        inside.errors.append(f"{display_name(directory)}: cannot read folder: {error.strerror or error}")
        return
    for entry in entries:
        child = Path(entry.path)
        try:
            is_dir = fs.entry_kind(entry) == "dir"
        except OSError:
            continue
        if inside.drops(child, settings, is_dir, gitignore, fs):
            continue
        checked = is_included(child, settings)
        if not (checked or is_dir):
            continue
        if fs.entry_kind(entry, follow_symlinks=False) == "link" and not inside.keeps(child):
            continue
        if checked and (not is_dir or entry.name.endswith(PYTHON_SUFFIXES)):  # a folder x.py: TL002
            yield child, display_name(child)
        else:
            yield from _walk(child, resolver, gitignore, visited, force_exclude, inside)


def display_name(path: Path) -> str:
    """Paths relative to the working directory when below it, as the user typed them otherwise."""
    text, prefix = os.path.abspath(path), os.path.join(os.getcwd(), "")
    if text.startswith(prefix):  # string work, as in relative_to_root: it runs per file
        return text[len(prefix) :].replace(os.sep, "/")
    return path.as_posix()
