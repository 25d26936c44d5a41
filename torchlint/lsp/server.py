"""The pygls wiring: which notification does what, and how the server stays up whatever happens.

- checks run on one worker thread (`worker.Worker`), never on the event loop, so that a hover or a light
  bulb is answered while a big buffer is being checked; the loop only publishes what the worker returns;
- didOpen and didSave check at once; didChange waits `debounce` seconds (0.2 by default, `debounceMs` in
  initializationOptions) and checks only if no newer change came meanwhile, so typing costs one check per
  pause; a newer version (or a refresh) cancels the older one's schedule, whose check is then skipped if
  it has not started, or its result dropped if it has: a stale version's diagnostics are never published;
- a check is published twice when its file's questions reach other files' code: first the findings of the
  rules that read none (and the last check's findings of the others that the edit left in place), in a
  fraction of a second, then the full check's; once when it needs nothing else (`Checker.glance`);
- didSave of any file, a changed configuration (`workspace/didChangeConfiguration`) or watched files
  changing re-read the settings and re-check every open buffer (their cross-file facts may have changed);
- didClose clears the buffer's diagnostics;
- a notebook (`notebookDocument/*`, LSP 3.17, as ruff's server) is one buffer: its Python code cells joined
  (`join_cells`), checked as the file of the notebook's path, scheduled like a text buffer, its diagnostics
  published on each cell's own URI (`views.NotebookView`); a cell that left it (deleted, turned markdown)
  and every cell of a closed notebook get an empty publish;
- hover and code actions answer at once from a version already checked, else after its check on the
  worker; if the buffer changed meanwhile, they answer ContentModified, as LSP allows;
- a broken config, an exception inside the linter or any error pygls catches outside a request is logged
  with `window/logMessage` and publishes nothing new (no message box: the user cannot act on it); a `file:`
  URI that cannot be a path (`%00`) is logged and not checked; pygls answers unknown methods and malformed
  requests with an error and reads on;
- the lifecycle as LSP 3.17 says: a request before `initialize` gets ServerNotInitialized, one after
  `shutdown` (or a second `initialize`) InvalidRequest; `exit` ends the process with 0 after `shutdown`,
  1 without; when stdin closes (the client died) the server exits with 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Iterable
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from torchlint import __version__
from torchlint.docs import rule_doc
from torchlint.lsp.actions import FIX_ALL, NOTEBOOK_FIX_ALL, code_actions, fix_all_kind, offers_fix_all
from torchlint.lsp.checker import Checked, Checker
from torchlint.lsp.documents import Buffer, BufferFileSystem, code_cells, path_of_uri
from torchlint.lsp.views import view_of
from torchlint.lsp.worker import Worker
from torchlint.workspace.notebook import join_cells
from torchlint.workspace.settings import ConfigError

DEBOUNCE_SECONDS = 0.2
PYTHON_SUFFIXES = (".py", ".pyi")
# Jupyter notebooks' Python cells, synced as notebook documents (VS Code's notebook type for `.ipynb`).
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


class AnsweringProtocol(LanguageServerProtocol):
    """Every request gets an answer, as the client awaits one. pygls drops a request whose parameters do
    not fit its method (it logs and shows a message), and every request after `shutdown`; it answers one
    before `initialize` as if the server were ready. This protocol answers them with the errors LSP 3.17
    names, drops notifications before `initialize` (except `exit`), and keeps `exit`'s code: 0 after
    `shutdown`, 1 without (pygls computes it, but its stdio loop swallows the SystemExit that carries it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False
        self.shutdown_seen = False
        self.exit_code = 0  # stdin closing without `exit` (the client died) ends the server with 0

    def structure_message(self, data: dict) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:
                self._send_response(data["id"], None, error.to_response_error())
            raise

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method == types.EXIT:
            self.exit_code = 0 if self.shutdown_seen else 1
        elif self.shutdown_seen:
            return self._refuse(message, JsonRpcInvalidRequest("The server was shut down"))
        elif method == types.INITIALIZE:
            if self.initialize_seen:
                return self._refuse(message, JsonRpcInvalidRequest("The server is initialized already"))
            self.initialize_seen = True
        elif not self.initialize_seen:
            return self._refuse(message, JsonRpcServerNotInitialized())
        elif method == types.SHUTDOWN:
            self.shutdown_seen = True
        return super().handle_message(message)

    def _refuse(self, message: Any, error: JsonRpcException) -> None:
        """Answer a request with `error`; drop a notification or a response."""
        if getattr(message, "method", None) is not None and hasattr(message, "id"):
            self._send_response(message.id, None, error.to_response_error())


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=AnsweringProtocol,
        )
        self.fs = BufferFileSystem()
        self.checker = Checker(self.fs)
        self.buffers: dict[str, Buffer] = {}
        self.debounce = DEBOUNCE_SECONDS
        self.worker = Worker()  # runs every call of the checker but `known` and `allows_unsafe` (reads)
        self._pending: dict[str, asyncio.Task] = {}

    # -- buffers ----------------------------------------------------------------------------------------

    def track(self, uri: str, version: int | None, language: str | None = None) -> Buffer | None:
        """The buffer `uri` now, from pygls's copy of the text (it applies incremental changes); None for
        a document that is not Python, or whose `file:` URI cannot be a path (logged)."""
        try:
            path = path_of_uri(uri)
        except ValueError:
            self._not_a_path(uri)
            return None
        known = self.buffers.get(uri)
        if known is None and not (language == "python" or (path and path.suffix in PYTHON_SUFFIXES)):
            return None
        text = self.workspace.get_text_document(uri).source
        buffer = self.buffers[uri] = Buffer(uri, version, text, path)
        self.fs.open(buffer)
        return buffer

    def track_notebook(self, uri: str) -> Buffer | None:
        """The notebook `uri` now, from pygls's copies of it and of its cells' text: one buffer of its Python
        code cells joined; None for one pygls does not hold, or whose `file:` URI cannot be a path (logged).
        Not in the file-system overlay: the file at its path is the notebook's JSON. A change that left its
        code cells as they were (VS Code changes a cell's metadata each time it runs) keeps the buffer
        already held, so that nothing is checked again."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is None:
            return None
        try:
            path = path_of_uri(uri)
        except ValueError:
            self._not_a_path(uri)
            return None
        cells = tuple(code_cells(notebook, self.workspace.get_text_document))
        known = self.buffers.get(uri)
        if known is not None and known.cells == cells:
            return known
        buffer = self.buffers[uri] = Buffer(
            uri, notebook.version, join_cells([c.text for c in cells]), path, cells
        )
        return buffer

    def buffer_of(self, uri: str) -> Buffer | None:
        """The buffer a request's document is part of: its own, or the notebook's for one of its cells."""
        buffer = self.buffers.get(uri)
        if buffer is None:
            notebook = self.workspace.get_notebook_document(cell_uri=uri)
            buffer = self.buffers.get(notebook.uri) if notebook is not None else None
        return buffer

    def clear(self, uris: Iterable[str]) -> None:
        """Publish no diagnostics for these documents (closed, or cells no longer checked)."""
        for uri in dict.fromkeys(uris):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def forget(self, uri: str) -> None:
        buffer = self.buffers.pop(uri, None)
        self._cancel(uri)
        self.worker.submit(self.checker.drop, uri)
        if buffer is not None and buffer.path is not None and buffer.cells is None:
            self.fs.close(buffer.path)

    def _not_a_path(self, uri: str) -> None:
        self.log(
            types.MessageType.Warning, f"torchlint: {uri} is not a file path that can exist; not checked"
        )

    @property
    def resolves_edits(self) -> bool:
        """Whether the client asks `codeAction/resolve` for an action's edit."""
        capability = self.client_capabilities.text_document
        support = capability and capability.code_action and capability.code_action.resolve_support
        return bool(support and "edit" in support.properties)

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding or "utf-16"
        return str(getattr(encoding, "value", encoding))

    # -- checking and publishing -----------------------------------------------------------------------

    def schedule(self, buffer: Buffer, delay: float = 0.0) -> None:
        """Check `buffer` on the worker after `delay` seconds and publish its diagnostics, unless a newer
        version, a refresh or didClose cancels this first (then nothing is published for it)."""
        self._cancel(buffer.uri)
        task = asyncio.get_running_loop().create_task(self._check_and_publish(buffer, delay))
        self._pending[buffer.uri] = task
        task.add_done_callback(partial(self._finished, buffer.uri))

    def publish_later(self, buffer: Buffer) -> None:
        self.schedule(buffer, self.debounce)

    async def _check_and_publish(self, buffer: Buffer, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            publishes, complete = await self.worker.run(self._first_diagnostics, buffer, self.encoding)
            if not complete:
                self._publish(buffer, publishes)
                publishes = await self.worker.run(self._diagnostics, buffer, self.encoding)
        except ConfigError as error:
            self.log(types.MessageType.Error, f"torchlint: {error}")
            return
        except Exception:  # noqa: BLE001 - a bug in the linter must not take the editor's server down
            self.log(
                types.MessageType.Error, f"torchlint crashed on {buffer.display}:\n{traceback.format_exc()}"
            )
            return
        self._publish(buffer, publishes)

    def _publish(self, buffer: Buffer, publishes: list[types.PublishDiagnosticsParams]) -> None:
        if self.buffers.get(buffer.uri) is buffer:  # a newer version would have cancelled this, too
            for publish in publishes:
                self.text_document_publish_diagnostics(publish)

    def _first_diagnostics(
        self, buffer: Buffer, encoding: str
    ) -> tuple[list[types.PublishDiagnosticsParams], bool]:
        """On the worker: the first look (`Checker.glance`), converted; and whether it is the full check's
        answer (no second publish follows)."""
        glance = self.checker.glance(buffer)
        return view_of(buffer, encoding).publishes(glance.diagnostics), glance.complete

    def _diagnostics(self, buffer: Buffer, encoding: str) -> list[types.PublishDiagnosticsParams]:
        """On the worker: the check, and its conversion (thousands of findings take a while too): one
        publish for a text buffer, one per code cell for a notebook."""
        checked = self.checker.check(buffer)
        return view_of(buffer, encoding).publishes(checked.diagnostics)

    def _finished(self, uri: str, task: asyncio.Task) -> None:
        if self._pending.get(uri) is task:
            del self._pending[uri]

    def _cancel(self, uri: str) -> None:
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()

    def stop_checks(self) -> None:
        """`shutdown`: nothing more is checked or published."""
        for uri in list(self._pending):
            self._cancel(uri)

    def refresh(self) -> None:
        """Settings or other files changed: read everything again and re-check every open buffer. The
        worker forgets before it checks again (its jobs run in order); a check running meanwhile, with the
        old settings, has its schedule cancelled here, so its result is dropped."""
        self.worker.submit(self.checker.forget)
        for buffer in list(self.buffers.values()):
            self.schedule(buffer)

    async def checked(self, buffer: Buffer) -> Checked:
        """The buffer's diagnostics for a request: when this version was checked already, once its
        scheduled check has published (the worker keeps a check's result before its publish reaches this
        loop: an answer sent at once would overtake that publish; other documents' checks are not waited
        for); else from the worker (after the jobs queued before it)."""
        known = self.checker.known(buffer)
        if known is None:
            return await self.worker.run(self.checker.check, buffer)
        publishing = self._pending.get(buffer.uri)
        if publishing is not None:
            await asyncio.wait({publishing})
        return known

    def still_current(self, buffer: Buffer) -> None:
        """A request's answer waited for the worker; ContentModified if the buffer changed meanwhile (its
        positions and edits would be the older text's)."""
        if self.buffers.get(buffer.uri) is not buffer:
            raise JsonRpcContentModified()

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls shows an error it caught outside a request in a message box (`window/showMessage`); the
        user cannot act on it, so it goes to the log. A request's error is in its response already."""
        if source is FeatureRequestError:
            return
        trace = "".join(traceback.format_exception(error))
        self.log(types.MessageType.Error, f"torchlint: internal error: {error}\n{trace}")

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def configure(self, settings: Any) -> None:
        """initializationOptions or didChangeConfiguration settings: `{"unsafeFixes": true}`, also under
        a `"torchlint"` key (how VS Code and Neovim nest a server's settings)."""
        if not isinstance(settings, dict):
            return
        if isinstance(settings.get("torchlint"), dict):
            settings = settings["torchlint"]
        if isinstance(settings.get("unsafeFixes"), bool):
            self.checker.unsafe_fixes = settings["unsafeFixes"]
        if isinstance(settings.get("debounceMs"), (int, float)) and settings["debounceMs"] >= 0:
            self.debounce = settings["debounceMs"] / 1000


def build_server() -> TorchlintServer:
    server = TorchlintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchlintServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options)
        folders = params.workspace_folders or []
        root = folders[0].uri if folders else params.root_uri
        ls.checker.root = None
        with contextlib.suppress(ValueError):  # a root that cannot be a path: settings as without one
            ls.checker.root = path_of_uri(root) if root else None

    @server.feature(types.INITIALIZED)
    def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
        # The first check should not pay LibCST's and the model's imports; the worker pays them now.
        ls.worker.submit(ls.checker.warm_up)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TorchlintServer, params: None) -> None:
        ls.stop_checks()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
        document = params.text_document
        buffer = ls.track(document.uri, document.version, document.language_id)
        if buffer is not None:
            ls.schedule(buffer)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
        if params.text_document.uri in ls.buffers:
            buffer = ls.track(params.text_document.uri, params.text_document.version)
            if buffer is not None:
                ls.publish_later(buffer)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.refresh()  # a saved config, or a saved module other buffers import

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in ls.buffers:
            ls.forget(uri)
            ls.clear([uri])

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open_notebook(ls: TorchlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        buffer = ls.track_notebook(params.notebook_document.uri)
        if buffer is not None:
            ls.schedule(buffer)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change_notebook(ls: TorchlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        """A cell edited, added, removed, moved or turned markdown: the notebook is checked again after
        the pause (after a change of metadata only, not); a cell no longer among its code cells is cleared
        at once."""
        before = ls.buffers.get(params.notebook_document.uri)
        buffer = ls.track_notebook(params.notebook_document.uri) if before is not None else None
        if before is None or buffer is None or buffer is before:
            return
        ls.clear({cell.uri for cell in before.cells or ()} - {cell.uri for cell in buffer.cells or ()})
        ls.publish_later(buffer)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save_notebook(ls: TorchlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.refresh()

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close_notebook(ls: TorchlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        buffer = ls.buffers.get(params.notebook_document.uri)
        if buffer is not None:
            ls.forget(buffer.uri)
            ls.clear(
                [*(cell.uri for cell in buffer.cells or ()), *(c.uri for c in params.cell_text_documents)]
            )

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: TorchlintServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)
        ls.refresh()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TorchlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.refresh()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL],
            resolve_provider=True,
        ),
    )
    async def code_action(
        ls: TorchlintServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        buffer = ls.buffer_of(uri)
        if buffer is None:
            return None
        view = view_of(buffer, ls.encoding)
        start, end = view.offset(uri, params.range.start), view.offset(uri, params.range.end)
        if start is None or end is None:
            return None  # a notebook's markdown cell
        resolve = {"uri": buffer.uri, "version": buffer.version} if ls.resolves_edits else None
        try:
            checked = await ls.checked(buffer)
            fixed = None
            if resolve is None and offers_fix_all(
                checked.diagnostics, params.context.only, fix_all_kind(view)
            ):
                fixed = (await ls.worker.run(ls.checker.fix_all, buffer)).text
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: code actions failed:\n{traceback.format_exc()}")
            return None
        ls.still_current(buffer)
        allows_unsafe = ls.checker.allows_unsafe(checked)
        return code_actions(
            view, checked.diagnostics, (start, end), params.context.only, allows_unsafe, fixed, resolve
        )

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
        """The fix-all's edit, for the version it was offered on (a stale one gets none)."""
        data = action.data if isinstance(action.data, dict) else {}
        buffer = ls.buffers.get(data.get("uri", ""))
        if (
            action.kind not in (FIX_ALL, NOTEBOOK_FIX_ALL)
            or buffer is None
            or buffer.version != data.get("version")
        ):
            return action
        try:
            fixed = await ls.worker.run(ls.checker.fix_all, buffer)
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: fix-all failed:\n{traceback.format_exc()}")
            return action
        if ls.buffers.get(buffer.uri) is buffer:  # changed meanwhile: stale, no edit
            action.edit = view_of(buffer, ls.encoding).rewrite(fixed.text)
        return action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        buffer = ls.buffer_of(uri)
        if buffer is None:
            return None
        view = view_of(buffer, ls.encoding)
        offset = view.offset(uri, params.position)
        if offset is None:
            return None  # a notebook's markdown cell
        try:
            checked = await ls.checked(buffer)
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: hover failed:\n{traceback.format_exc()}")
            return None
        ls.still_current(buffer)
        under = [d for d in checked.diagnostics if d.start <= offset <= d.end]
        docs = [rule_doc(d.code) or f"{d.code} {d.name}" for d in under]
        if not under:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(dict.fromkeys(docs))
            ),
            range=view.range(under[0].start, under[0].end),
        )

    return server
