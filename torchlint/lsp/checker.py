"""One buffer through the linter, the way `torchlint check` would see its file.

Settings come from the workspace's `[tool.torchlint]` (the nearest table above the buffer's path, as on the
command line), read once and kept until the client or a saved config says they changed. Cross-file facts
come from the project of the buffer's path through the `BufferFileSystem`, so other open buffers count with
their unsaved text. Each check gets a fresh `Linter` (a linter's projects memoise other files' facts for
one run; here every check is a run, since any buffer may have changed in between), but one parser
(`parsing.StatementParser`), which parses again only the statements an edit changed, and one cache of the
other files' modules by their text (`parsing.text_cache`). A document's result
is kept per version, so code actions and hover never re-check an unchanged buffer.

Those caches are shared by every check and are not thread-safe: the server calls every method here on its
one worker thread (`worker.Worker`), in order, except `known` and `allows_unsafe`, which only read (a hover
is answered from the result kept while another buffer is being checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torchlint.diagnostics import Diagnostic
from torchlint.linter import FixResult, Linter
from torchlint.lsp.documents import Buffer, BufferFileSystem
from torchlint.lsp.parsing import StatementParser, text_cache
from torchlint.rules.base import registered_rules
from torchlint.workspace.discovery import SettingsResolver
from torchlint.workspace.settings import Settings


@dataclass(frozen=True)
class Checked:
    """The diagnostics of one version of a buffer, and whether its config allows unsafe fixes."""

    version: int | None
    text: str
    diagnostics: list[Diagnostic]
    unsafe_fixes: bool = False


class Checker:
    def __init__(self, fs: BufferFileSystem, root: Path | None = None) -> None:
        self.fs = fs
        self.root = root  # the workspace folder: where settings of a buffer without a path come from
        self.unsafe_fixes = False  # the client's setting (initializationOptions or configuration)
        self.rule_classes = registered_rules()
        self.parse = StatementParser()  # shared by every check: unchanged statements are not parsed again
        self.parse_other = text_cache()  # the project's other files: unchanged ones are not parsed again
        self._resolver: SettingsResolver | None = None
        self._checked: dict[str, Checked] = {}
        self._fixed: dict[str, tuple[tuple, FixResult]] = {}

    def forget(self) -> None:
        """Settings or other files changed: read the settings again, and re-check every buffer."""
        self._resolver = None
        self._checked.clear()
        self._fixed.clear()

    def drop(self, uri: str) -> None:
        self._checked.pop(uri, None)
        self._fixed.pop(uri, None)

    def settings_for(self, buffer: Buffer) -> Settings:
        """The buffer's settings (ConfigError for a broken config, as the command line would say)."""
        if self._resolver is None:
            codes = list(self.rule_classes)
            options = {code: rule.options for code, rule in self.rule_classes.items()}
            self._resolver = SettingsResolver(codes, options, fs=self.fs)
        if buffer.path is not None:
            return self._resolver.for_file(buffer.path)
        if self.root is not None:
            return self._resolver.for_directory(self.root)
        return Settings()

    def allows_unsafe(self, checked: Checked) -> bool:
        """Whether quick fixes may be unsafe: the client's setting, or the checked buffer's config."""
        return self.unsafe_fixes or checked.unsafe_fixes

    def known(self, buffer: Buffer) -> Checked | None:
        """This version's result if it was checked already (one read of the cache: safe off the worker)."""
        known = self._checked.get(buffer.uri)
        if known is not None and known.version == buffer.version and known.text == buffer.text:
            return known
        return None

    def check(self, buffer: Buffer) -> Checked:
        """The buffer's diagnostics, from the cache when this version was checked already."""
        known = self.known(buffer)
        if known is not None:
            return known
        settings = self.settings_for(buffer)
        diagnostics = self._linter().check_text(
            buffer.display, buffer.text, settings, in_project=buffer.path is not None
        )
        checked = Checked(buffer.version, buffer.text, diagnostics, settings.unsafe_fixes)
        self._checked[buffer.uri] = checked
        return checked

    def fix_all(self, buffer: Buffer) -> FixResult:
        """Every safe fix applied, to a fixpoint, as `torchlint --fix` would (InternalError if one broke);
        kept for the buffer's version, as its diagnostics are."""
        key = (buffer.uri, buffer.version, buffer.text)
        known = self._fixed.get(buffer.uri)
        if known is not None and known[0] == key:
            return known[1]
        result = self._linter().fix_text(
            buffer.display,
            buffer.text,
            self.settings_for(buffer),
            False,
            in_project=buffer.path is not None,
        )
        self._fixed[buffer.uri] = (key, result)
        return result

    def _linter(self) -> Linter:
        return Linter(
            rule_classes=self.rule_classes, fs=self.fs, parse=self.parse, parse_other=self.parse_other
        )
