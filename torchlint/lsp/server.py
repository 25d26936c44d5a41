"""The pygls wiring: which notification does what, and how the server stays up whatever happens.

- didOpen and didSave check at once; didChange waits `debounce` seconds (0.2 by default, `debounceMs` in
  initializationOptions) and checks only if no newer change came meanwhile, so typing costs one check per
  pause, and a stale version's diagnostics are never published;
- didSave of any file, a changed configuration (`workspace/didChangeConfiguration`) or watched files
  changing re-read the settings and re-check every open buffer (their cross-file facts may have changed);
- didClose clears the buffer's diagnostics;
- a broken config, or an exception inside the linter, is logged with `window/logMessage` and publishes
  nothing new; pygls answers unknown methods and malformed requests with an error and reads on; when stdin
  closes (the client died) the server exits.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from torchlint import __version__
from torchlint.docs import rule_doc
from torchlint.lsp.actions import FIX_ALL, code_actions, fix_all_edit
from torchlint.lsp.checker import Checker
from torchlint.lsp.convert import PositionMap, to_lsp
from torchlint.lsp.documents import Buffer, BufferFileSystem, path_of_uri
from torchlint.workspace.settings import ConfigError

DEBOUNCE_SECONDS = 0.2
PYTHON_SUFFIXES = (".py", ".pyi")


class AnsweringProtocol(LanguageServerProtocol):
    """pygls drops a request whose parameters do not fit its method (it logs and shows a message), so the
    client would wait for the answer forever: answer it with the JSON-RPC error instead."""

    def structure_message(self, data: dict) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:
                self._send_response(data["id"], None, error.to_response_error())
            raise


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=AnsweringProtocol,
        )
        self.fs = BufferFileSystem()
        self.checker = Checker(self.fs)
        self.buffers: dict[str, Buffer] = {}
        self.debounce = DEBOUNCE_SECONDS
        self._pending: dict[str, asyncio.Task] = {}

    # -- buffers ----------------------------------------------------------------------------------------

    def track(self, uri: str, version: int | None, language: str | None = None) -> Buffer | None:
        """The buffer `uri` now, from pygls's copy of the text (it applies incremental changes); None for
        a document that is not Python."""
        path = path_of_uri(uri)
        known = self.buffers.get(uri)
        if known is None and not (language == "python" or (path and path.suffix in PYTHON_SUFFIXES)):
            return None
        text = self.workspace.get_text_document(uri).source
        buffer = self.buffers[uri] = Buffer(uri, version, text, path)
        self.fs.open(buffer)
        return buffer

    def forget(self, uri: str) -> None:
        buffer = self.buffers.pop(uri, None)
        self._cancel(uri)
        self.checker.drop(uri)
        if buffer is not None and buffer.path is not None:
            self.fs.close(buffer.path)

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

    # -- publishing -------------------------------------------------------------------------------------

    def publish(self, buffer: Buffer) -> None:
        try:
            checked = self.checker.check(buffer)
        except ConfigError as error:
            self.log(types.MessageType.Error, f"torchlint: {error}")
            return
        except Exception:  # noqa: BLE001 - a bug in the linter must not take the editor's server down
            self.log(
                types.MessageType.Error, f"torchlint crashed on {buffer.display}:\n{traceback.format_exc()}"
            )
            return
        positions = PositionMap(buffer.text, self.encoding)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=buffer.uri,
                version=buffer.version,
                diagnostics=[to_lsp(diagnostic, positions) for diagnostic in checked.diagnostics],
            )
        )

    def publish_later(self, buffer: Buffer) -> None:
        self._cancel(buffer.uri)
        self._pending[buffer.uri] = asyncio.get_running_loop().create_task(self._after_pause(buffer))

    async def _after_pause(self, buffer: Buffer) -> None:
        await asyncio.sleep(self.debounce)
        self._pending.pop(buffer.uri, None)
        if self.buffers.get(buffer.uri) is buffer:  # a newer version would have replaced it
            self.publish(buffer)

    def _cancel(self, uri: str) -> None:
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()

    def refresh(self) -> None:
        """Settings or other files changed: read everything again and re-check every open buffer."""
        self.checker.forget()
        for buffer in list(self.buffers.values()):
            self._cancel(buffer.uri)
            self.publish(buffer)

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
        ls.checker.root = path_of_uri(root) if root else None

    @server.feature(types.INITIALIZED)
    def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
        import torchlint.facts  # noqa: F401 - the first check should not pay LibCST's and the model's imports

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
        document = params.text_document
        buffer = ls.track(document.uri, document.version, document.language_id)
        if buffer is not None:
            ls.publish(buffer)

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
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

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
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True
        ),
    )
    def code_action(ls: TorchlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None:
            return None
        try:
            checked = ls.checker.check(buffer)
            positions = PositionMap(buffer.text, ls.encoding)
            span = (positions.offset(params.range.start), positions.offset(params.range.end))
            return code_actions(
                buffer.uri,
                positions,
                checked.diagnostics,
                span,
                params.context.only,
                ls.checker.allows_unsafe(buffer),
                lambda: ls.checker.fix_all(buffer).text,
                {"uri": buffer.uri, "version": buffer.version} if ls.resolves_edits else None,
            )
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: code actions failed:\n{traceback.format_exc()}")
            return None

    @server.feature(types.CODE_ACTION_RESOLVE)
    def resolve_code_action(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
        """The fix-all's edit, for the version it was offered on (a stale one gets none)."""
        data = action.data if isinstance(action.data, dict) else {}
        buffer = ls.buffers.get(data.get("uri", ""))
        if action.kind != FIX_ALL or buffer is None or buffer.version != data.get("version"):
            return action
        try:
            positions = PositionMap(buffer.text, ls.encoding)
            action.edit = fix_all_edit(buffer.uri, positions, ls.checker.fix_all(buffer).text)
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: fix-all failed:\n{traceback.format_exc()}")
        return action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: TorchlintServer, params: types.HoverParams) -> types.Hover | None:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None:
            return None
        try:
            checked = ls.checker.check(buffer)
        except Exception:  # noqa: BLE001
            ls.log(types.MessageType.Error, f"torchlint: hover failed:\n{traceback.format_exc()}")
            return None
        positions = PositionMap(buffer.text, ls.encoding)
        offset = positions.offset(params.position)
        under = [d for d in checked.diagnostics if d.start <= offset <= d.end]
        docs = [rule_doc(d.code) or f"{d.code} {d.name}" for d in under]
        if not under:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(dict.fromkeys(docs))
            ),
            range=positions.range(under[0].start, under[0].end),
        )

    return server
