"""One buffer through the linter, the way `torchlint check` would see its file.

Settings come from the workspace's `[tool.torchlint]` (the nearest table above the buffer's path, as on the
command line), read once and kept until the client or a saved config says they changed. Cross-file facts
come from the project of the buffer's path through the `BufferFileSystem`, so other open buffers count with
their unsaved text. Each check gets a fresh `Linter` (a linter's projects memoise other files' facts for
one run; here every check is a run, since any buffer may have changed in between), but one parser
(`parsing.StatementParser`), which parses again only the statements an edit changed, and one cache of the
other files' modules and syntax records by their text (`parsing.OtherFiles`). A document's result
is kept per version, so code actions and hover never re-check an unchanged buffer.

A buffer whose text is its file's on disk is answered from the project's result cache (`.torchlint_cache`,
the one `torchlint check` and the pre-commit hook fill), when every file its findings depend on is
unchanged (read through the buffers: an unsaved edit of another file counts) — opening a file in a project
that was checked before shows its findings at once, not after its analysis — and what the server checks
itself is stored there for the next session and the next `torchlint check`. Keyed as the command line keys
it, by the path relative to the server's working folder; `TORCHLINT_NO_CACHE` and `TORCHLINT_CACHE_DIR`
are honoured as there.

A buffer is looked at before it is checked (`glance`): the rules that need no other file's code give their
findings at once (`Linter.check_own_file`), the others' come with the check; both are published, the first
with the last check's findings of the other rules moved with the edit (`convert.carried`).

Those caches are shared by every check and are not thread-safe: the server calls every method here on its
one worker thread (`worker.Worker`), in order, except `known` and `allows_unsafe`, which only read (a hover
is answered from the result kept while another buffer is being checked).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from torchlint.cache.results import ResultCache, file_list_digest
from torchlint.diagnostics import Diagnostic
from torchlint.linter import FixResult, Linter
from torchlint.lsp.convert import carried
from torchlint.lsp.documents import Buffer, BufferFileSystem, encoded
from torchlint.lsp.parsing import OtherFiles, StatementParser
from torchlint.rules.base import registered_rules
from torchlint.workspace.discovery import SettingsResolver, display_name
from torchlint.workspace.fs import FileSystem
from torchlint.workspace.settings import Settings
from torchlint.workspace.source import SourceError, SourceFile

_OFF = ("", "0", "false", "f", "no", "n", "off")  # click's false words, as `--no-cache`'s variable reads them
_Slot = tuple[ResultCache, str, str]  # the project's result cache, the file's key, its name as displayed


_WARM_UP = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in DataLoader(dataset, batch_size=8):
        with torch.autocast("cuda"):
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


@dataclass(frozen=True)
class Glance:
    """The first look at a buffer (`Checker.glance`): what can be shown before the full check ends."""

    diagnostics: list[Diagnostic]
    complete: bool  # these are the full check's diagnostics: no second publish follows


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
        self.other_files = OtherFiles()  # the project's other files: unchanged ones are not parsed again
        self._resolver: SettingsResolver | None = None
        self._checked: dict[str, Checked] = {}
        self._shown: dict[str, Checked] = {}  # the last full check of each buffer, kept through `forget`
        self._missed: tuple | None = None  # the version the result cache did not hold (`_cached`)
        # The rules each buffer's last first look left for the full check, and the buffer's statements then.
        self._later: dict[str, tuple[frozenset[str], object]] = {}
        self._last_later: frozenset[str] = frozenset()  # any buffer's: the order of a buffer's first look
        self._fixed: dict[str, tuple[tuple, FixResult]] = {}
        self._caches: dict[Path, ResultCache] = {}
        self._full: Linter | None = None  # the full checks' linter, kept from one check to the next
        self.from_cache = 0  # checks the result cache answered (for tests and the latency benchmark)

    def warm_up(self) -> None:
        """What the first check would pay once: LibCST's import and first parse, and the imports that the
        facts and rules make when first asked, paid on a small training script (no file is read)."""
        self._linter().check_text("warm_up.py", _WARM_UP, Settings(select=("ALL",)), in_project=False)

    def forget(self) -> None:
        """Settings or other files changed: read the settings again, and re-check every buffer."""
        self._resolver = None
        self._missed = None
        self._full = None
        self._checked.clear()
        self._fixed.clear()
        self._later.clear()

    def drop(self, uri: str) -> None:
        self._checked.pop(uri, None)
        self._later.pop(uri, None)
        self._shown.pop(uri, None)
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
        linter = self._full_linter(buffer)
        slot = self._slot(buffer, settings, linter)
        cached = self._cached(buffer, settings, slot, linter)
        if cached is not None:
            return cached
        diagnostics = linter.check_text(
            buffer.display, buffer.text, settings, in_project=buffer.path is not None
        )
        if slot is not None:
            self._store(buffer, slot, linter, diagnostics)
        return self._keep(buffer, Checked(buffer.version, buffer.text, diagnostics, settings.unsafe_fixes))

    def glance(self, buffer: Buffer) -> Glance:
        """What to show at once while `check` works: the findings of the rules that read no other file's
        code (`Linter.check_own_file`), and the last full check's findings of the other rules where the edit
        since left them in place (they move with the text around them; one the edit touched waits for
        the check). Complete, and kept as the version's result, when no rule needed another file (or this
        version's result is known, or in the result cache). After an edit that left the buffer's statements
        as they were, the rules its last first look left are left again without running (most of their
        work on the buffer, which the full check does anew, came before they were stopped)."""
        known = self.known(buffer)
        if known is not None:
            return Glance(known.diagnostics, complete=True)
        settings = self.settings_for(buffer)
        linter = self._linter()
        slot = self._slot(buffer, settings, linter)
        cached = self._cached(buffer, settings, slot, linter)
        if cached is not None:
            return Glance(cached.diagnostics, complete=True)
        statements = linter.statements_of(buffer.text, encoded(buffer.text))
        later, before_statements = self._later.get(buffer.uri, (frozenset(), None))
        found, deferred = linter.check_own_file(
            buffer.display,
            buffer.text,
            settings,
            in_project=buffer.path is not None,
            later=later or self._last_later,
            skip_later=bool(later) and statements is not None and statements == before_statements,
        )
        if deferred:
            self._later[buffer.uri] = (deferred, statements)
            self._last_later = deferred
        else:
            self._later.pop(buffer.uri, None)
        if not deferred:  # the full check's answer; what it asked of other files' headers is recorded
            if slot is not None:
                self._store(buffer, slot, linter, found)
            self._keep(buffer, Checked(buffer.version, buffer.text, found, settings.unsafe_fixes))
            return Glance(found, complete=True)
        before = self._shown.get(buffer.uri)
        if before is not None:
            kept = [d for d in before.diagnostics if d.code in deferred]
            found = sorted(
                [*found, *carried(kept, before.text, buffer.text)], key=lambda d: (d.start, d.code)
            )
        return Glance(found, complete=False)

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

    def _keep(self, buffer: Buffer, checked: Checked) -> Checked:
        self._checked[buffer.uri] = checked
        self._shown[buffer.uri] = checked
        return checked

    def _cached(
        self, buffer: Buffer, settings: Settings, slot: _Slot | None, linter: Linter
    ) -> Checked | None:
        """This version's result from the result cache (kept as known), when the buffer is its file's
        text and every file its findings depend on is unchanged. A miss is remembered for the version:
        `glance` and then `check` ask for the same one."""
        if slot is None or self._missed == (buffer.uri, buffer.version, buffer.text):
            return None
        diagnostics = self._stored(buffer, slot, linter)
        if diagnostics is None:
            self._missed = (buffer.uri, buffer.version, buffer.text)
            return None
        return self._keep(buffer, Checked(buffer.version, buffer.text, diagnostics, settings.unsafe_fixes))

    def _stored(self, buffer: Buffer, slot: _Slot, linter: Linter) -> list[Diagnostic] | None:
        """The result cache's findings for the buffer (which holds its file's text on disk)."""
        cache, key, _ = slot
        path = buffer.path
        assert path is not None
        found = cache.load(key, lambda: file_list_digest(linter.project_for(path).python_files()))
        if found is None:
            return None
        self.from_cache += 1
        return [dataclasses.replace(d, path=buffer.display) for d in found]

    def _store(self, buffer: Buffer, slot: _Slot, linter: Linter, found: list[Diagnostic]) -> None:
        cache, key, display = slot
        assert buffer.path is not None
        shown = [dataclasses.replace(d, path=display) for d in found]  # as the command line names the file
        cache.store_checked(key, shown, linter.project_for(buffer.path), buffer.path)

    def _slot(self, buffer: Buffer, settings: Settings, linter: Linter) -> _Slot | None:
        """The cache, key and displayed name of the buffer's file, when the buffer holds the file's text and
        caching is on; None otherwise (a notebook, an unsaved or changed buffer, a file outside a folder)."""
        if buffer.path is None or buffer.cells is not None:
            return None
        if os.environ.get("TORCHLINT_NO_CACHE", "").strip().lower() not in _OFF:
            return None
        try:
            source = SourceFile.read(buffer.path, FileSystem())  # the disk's bytes, not the buffer's
        except SourceError:
            return None
        if source.text != buffer.text:
            return None
        root = linter.root_of(buffer.path.parent.resolve())
        if root not in self._caches:
            cache_dir = os.environ.get("TORCHLINT_CACHE_DIR")
            self._caches[root] = ResultCache(root, self.fs, Path(cache_dir) if cache_dir else None)
        display = display_name(buffer.path)
        enabled = [rule.code for rule in linter.rules_for(settings, display)]
        return self._caches[root], self._caches[root].key_for(display, source.raw, settings, enabled), display

    def _full_linter(self, buffer: Buffer) -> Linter:
        """The linter of the last full check, its projects carried over to this one where the files changed
        since only inside their statements (`Linter.carry_over`): the other files' facts and answers that
        read no changed file's code (nor an export the change altered) are kept, so a keystroke in yolov5's
        `train.py` or `models/common.py` is not a new analysis of the modules around it. A new one where
        anything else changed."""
        kept = self._full
        if kept is None or buffer.path is None or not kept.carry_over(buffer.path):
            kept = self._full = self._linter()
        return kept

    def _linter(self) -> Linter:
        return Linter(
            rule_classes=self.rule_classes,
            fs=self.fs,
            parse=self.parse,
            parse_other=self.other_files.parse,
            collect_other=self.other_files.records,
        )
